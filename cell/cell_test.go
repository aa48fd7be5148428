package cell

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"slices"
	"testing"
)

func TestCompareOrder(t *testing.T) {
	// Each cell sorts strictly before the next, by the rule its name gives.
	ordered := []struct {
		name string
		c    Cell
	}{
		{"first on row a", FirstOnRow([]byte("a"))},
		{"family f1 sorts first", Cell{Row: []byte("a"), Family: []byte("f1"), Qualifier: []byte("q"), Timestamp: 5, Type: Put}},
		{"newer timestamp first", Cell{Row: []byte("a"), Family: []byte("f2"), Qualifier: []byte("q"), Timestamp: 9, Type: Put}},
		{"delete family before put at same ts", Cell{Row: []byte("a"), Family: []byte("f2"), Qualifier: []byte("q"), Timestamp: 5, Type: DeleteFamily}},
		{"delete column", Cell{Row: []byte("a"), Family: []byte("f2"), Qualifier: []byte("q"), Timestamp: 5, Type: DeleteColumn}},
		{"delete family version", Cell{Row: []byte("a"), Family: []byte("f2"), Qualifier: []byte("q"), Timestamp: 5, Type: DeleteFamilyVersion}},
		{"delete", Cell{Row: []byte("a"), Family: []byte("f2"), Qualifier: []byte("q"), Timestamp: 5, Type: Delete}},
		{"put", Cell{Row: []byte("a"), Family: []byte("f2"), Qualifier: []byte("q"), Timestamp: 5, Type: Put}},
		{"longer qualifier after its prefix", Cell{Row: []byte("a"), Family: []byte("f2"), Qualifier: []byte("q0"), Timestamp: 5, Type: Put}},
		{"qualifier bytes are unsigned", Cell{Row: []byte("a"), Family: []byte("f2"), Qualifier: []byte{0xff}, Timestamp: 5, Type: Put}},
		{"last on row sorts after the row", Cell{Row: []byte("a"), Type: Minimum}},
		{"longer row after its prefix", Cell{Row: []byte("a\x00"), Family: []byte("f"), Timestamp: 1, Type: Put}},
		{"row bytes are unsigned", Cell{Row: []byte{0x80}, Family: []byte("f"), Timestamp: 1, Type: Put}},
	}
	for i := 0; i+1 < len(ordered); i++ {
		a, b := ordered[i], ordered[i+1]
		if got := Compare(&a.c, &b.c); got >= 0 {
			t.Errorf("Compare(%s, %s) = %d, want < 0", a.name, b.name, got)
		}
		if got := Compare(&b.c, &a.c); got <= 0 {
			t.Errorf("Compare(%s, %s) = %d, want > 0", b.name, a.name, got)
		}
	}
	// Shuffling and sorting restores the order, and key bytes agree.
	cells := make([]Cell, len(ordered))
	for i := range ordered {
		cells[i] = ordered[i].c
	}
	shuffled := slices.Clone(cells)
	rand.New(rand.NewSource(1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	slices.SortFunc(shuffled, func(a, b Cell) int { return Compare(&a, &b) })
	for i := range cells {
		if Compare(&cells[i], &shuffled[i]) != 0 {
			t.Fatalf("sort mismatch at %d: %s vs %s", i, cells[i].String(), shuffled[i].String())
		}
		ka, kb := AppendKey(nil, &cells[i]), AppendKey(nil, &shuffled[i])
		if !bytes.Equal(ka, kb) {
			t.Fatalf("key mismatch at %d", i)
		}
	}
}

func TestCompareWithSeqID(t *testing.T) {
	a := Cell{Row: []byte("r"), Family: []byte("f"), Timestamp: 1, Type: Put, SeqID: 10}
	b := a
	b.SeqID = 3
	if Compare(&a, &b) != 0 {
		t.Fatal("Compare must ignore sequence ids")
	}
	if CompareWithSeqID(&a, &b) >= 0 {
		t.Fatal("higher sequence id must sort first")
	}
}

func TestKeyRoundTrip(t *testing.T) {
	cases := []Cell{
		{Row: []byte("row"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: 1617828990, Type: Put},
		{Row: []byte{}, Family: []byte{}, Qualifier: []byte{}, Timestamp: LatestTimestamp, Type: Maximum},
		{Row: bytes.Repeat([]byte{0xfe}, 32767), Family: bytes.Repeat([]byte("f"), 127), Qualifier: []byte{0, 1}, Timestamp: -1, Type: DeleteFamily},
	}
	for _, c := range cases {
		key := AppendKey(nil, &c)
		if len(key) != KeyLen(&c) {
			t.Fatalf("KeyLen = %d, encoded %d", KeyLen(&c), len(key))
		}
		var got Cell
		if err := ParseKey(key, &got); err != nil {
			t.Fatal(err)
		}
		if Compare(&got, &c) != 0 || !bytes.Equal(got.Row, c.Row) || !bytes.Equal(got.Qualifier, c.Qualifier) {
			t.Fatalf("round trip: got %s want %s", got.String(), c.String())
		}
	}
}

func TestSize(t *testing.T) {
	base := Cell{Row: []byte("row"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: 7, Type: Put, Value: []byte("v1")}
	tagged := base
	tagged.Tags = []byte{0, 2, 1, 'x'} // one tag: u16 length 2, type 1, value "x"
	emptyTags := base
	emptyTags.Tags = []byte{}
	for _, tc := range []struct {
		name string
		c    Cell
		want int64
	}{
		// 4 + 4 lengths, key 2+3+1+2+1+8+1 = 18, value 2.
		{"no tags", base, 28},
		// HBase writes no tags length when the tags are empty.
		{"empty tags count as none", emptyTags, 28},
		// u16 tags length and 4 bytes of tags.
		{"tags add their length and a u16", tagged, 34},
		// The smallest KeyValue: the 12-byte key of nothing, no value.
		{"empty cell", Cell{}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Size(&tc.c); got != tc.want {
				t.Errorf("Size = %d, want %d", got, tc.want)
			}
			// The same length as the KeyValue laid out byte by byte.
			kv := binary.BigEndian.AppendUint32(nil, uint32(KeyLen(&tc.c)))
			kv = binary.BigEndian.AppendUint32(kv, uint32(len(tc.c.Value)))
			kv = AppendKey(kv, &tc.c)
			kv = append(kv, tc.c.Value...)
			if len(tc.c.Tags) > 0 {
				kv = binary.BigEndian.AppendUint16(kv, uint16(len(tc.c.Tags)))
				kv = append(kv, tc.c.Tags...)
			}
			if int64(len(kv)) != tc.want {
				t.Errorf("the serialized KeyValue is %d bytes, want %d", len(kv), tc.want)
			}
		})
	}
}

func TestParseKeyRejectsMalformed(t *testing.T) {
	for name, key := range map[string][]byte{
		"empty":              nil,
		"too short":          make([]byte, 11),
		"row overruns":       {0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4},
		"family overruns":    {0, 0, 50, 0, 0, 0, 0, 0, 0, 0, 0, 4},
		"row eats timestamp": {0, 2, 'a', 'b', 0, 0, 0, 0, 0, 0, 0, 0},
	} {
		var c Cell
		if err := ParseKey(key, &c); err == nil {
			t.Errorf("%s: ParseKey accepted %x", name, key)
		}
	}
}

func TestDump(t *testing.T) {
	c := Cell{Row: []byte("00"), Family: []byte("cf"), Qualifier: []byte("a"), Timestamp: 1617828990, Type: DeleteColumn, Value: []byte{0xAB}}
	got := string(AppendDump(nil, &c))
	want := "3030\tcf\t61\t1617828990\tDeleteColumn\tab\n"
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestClone(t *testing.T) {
	buf := []byte("rowfamqualval")
	c := Cell{Row: buf[0:3], Family: buf[3:6], Qualifier: buf[6:10], Value: buf[10:13], Type: Put}
	d := c.Clone()
	copy(buf, "XXXXXXXXXXXXX")
	if string(d.Row) != "row" || string(d.Family) != "fam" || string(d.Qualifier) != "qual" || string(d.Value) != "val" {
		t.Fatalf("clone shares memory: %s", d.String())
	}
	d.Row = append(d.Row, 'x')
	if string(d.Family) != "fam" {
		t.Fatal("appending to a cloned slice overwrote its neighbour")
	}
}

func FuzzParseKey(f *testing.F) {
	c := Cell{Row: []byte("r"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 7, Type: Put}
	f.Add(AppendKey(nil, &c))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, key []byte) {
		var got Cell
		if err := ParseKey(key, &got); err != nil {
			return
		}
		if again := AppendKey(nil, &got); !bytes.Equal(again, key) {
			t.Fatalf("re-encoding differs: %x vs %x", again, key)
		}
		_ = CompareKeys(key, key)
	})
}

func TestSameName(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"", "", true}, {"f", "f", true}, {"cf", "cf", true}, {"f", "g", false}, {"f", "ff", false}, {"", "f", false}, {"ab", "ba", false}} {
		if got := SameName([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("SameName(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
