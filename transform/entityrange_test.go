package transform

import (
	"bytes"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// saltSpec is the salt preset of configs/salt.yaml: device | reversed ts ->
// salt(device) | device | reversed ts.
func saltSpec() Spec {
	return Spec{
		Source: LayoutSpec{Row: []ComponentSpec{
			{Type: "string", Field: "device", Sep: '|', HasSep: true},
			{Type: "reversed_ts", Field: "ts"},
		}},
		Target: LayoutSpec{Row: []ComponentSpec{
			{Type: "salt", Field: "bucket", Of: []string{"device"}, Buckets: 16},
			{Type: "string", Field: "device", Sep: '|', HasSep: true},
			{Type: "reversed_ts", Field: "ts"},
		}},
		Entity: []string{"device"},
	}
}

// bucketOf is the salt as doc.go specifies it, written out here: FNV-1a 32
// of the device's bytes, mod the bucket count.
func bucketOf(device string, buckets uint32) byte {
	h := fnv.New32a()
	h.Write([]byte(device))
	return byte(h.Sum32() % buckets)
}

func TestEntityRanges(t *testing.T) {
	wide, err := Compile(wideSpec())
	if err != nil {
		t.Fatal(err)
	}
	salt, err := Compile(saltSpec())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		p          *Program
		entity     string
		old, new   KeyRange
		oldIn, out []string // old rows inside and outside the old range
	}{{
		name:   "wide: the old row is the entity, new rows share its fixed-width prefix",
		p:      wide,
		entity: "user=u00042",
		old:    KeyRange{Start: []byte("u00042"), Stop: []byte("u00042\x00")},
		new:    KeyRange{Start: []byte("u00042"), Stop: []byte("u00043")},
		oldIn:  []string{"u00042"},
		out:    []string{"u000421", "u00041", "u00043"},
	}, {
		name:   "salt: the salt is computed from the entity, one bucket",
		p:      salt,
		entity: "device=dev-7",
		old:    KeyRange{Start: []byte("dev-7|"), Stop: []byte("dev-7}")},
		new: KeyRange{
			Start: append([]byte{bucketOf("dev-7", 16)}, "dev-7|"...),
			Stop:  append([]byte{bucketOf("dev-7", 16)}, "dev-7}"...),
		},
		oldIn: []string{"dev-7|" + be64(1), "dev-7|" + be64(1<<62)},
		out:   []string{"dev-70|" + be64(1), "dev-6|" + be64(1)},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := tc.p.ParseEntity(tc.entity)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.p.FormatEntity(key); got != tc.entity {
				t.Fatalf("FormatEntity(ParseEntity(%q)) = %q", tc.entity, got)
			}
			old, err := tc.p.SourceRange(key)
			if err != nil {
				t.Fatal(err)
			}
			nw, err := tc.p.TargetRange(key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(old.Start, tc.old.Start) || !bytes.Equal(old.Stop, tc.old.Stop) {
				t.Errorf("old range %s, want %s", old, tc.old)
			}
			if !bytes.Equal(nw.Start, tc.new.Start) || !bytes.Equal(nw.Stop, tc.new.Stop) {
				t.Errorf("new range %s, want %s", nw, tc.new)
			}
			for _, r := range tc.oldIn {
				if !inRange(old, []byte(r)) {
					t.Errorf("old row %q outside %s", r, old)
				}
			}
			for _, r := range tc.out {
				if inRange(old, []byte(r)) {
					t.Errorf("old row %q of another entity inside %s", r, old)
				}
			}
		})
	}
}

func inRange(k KeyRange, row []byte) bool {
	return bytes.Compare(row, k.Start) >= 0 && (len(k.Stop) == 0 || bytes.Compare(row, k.Stop) < 0)
}

// Every old cell, and the new cell it maps to, lies in its entity's range,
// and in no other entity's: checked over random keys of several layouts,
// including escaped strings holding the separator, signed numbers and
// two-field entities.
func TestEntityRangesHoldEveryCell(t *testing.T) {
	specs := map[string]Spec{
		"wide": wideSpec(),
		"salt": saltSpec(),
		"escaped string and signed number, salted by both": {
			Source: LayoutSpec{Row: []ComponentSpec{
				{Type: "string", Field: "org", Sep: '/', HasSep: true, Escape: true},
				{Type: "sortable_int", Field: "acct", Width: 4},
				{Type: "uint", Field: "item", Width: 2},
			}},
			Target: LayoutSpec{Row: []ComponentSpec{
				{Type: "literal", Bytes: []byte("v2:")},
				{Type: "salt", Of: []string{"org", "acct"}, Buckets: 7},
				{Type: "sortable_int", Field: "acct", Width: 8},
				{Type: "string", Field: "org", Sep: '/', HasSep: true, Escape: true},
				{Type: "uint", Field: "item", Width: 2},
			}},
			Entity: []string{"org", "acct"},
		},
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			p, err := Compile(spec)
			if err != nil {
				t.Fatal(err)
			}
			r := p.New()
			rng := rand.New(rand.NewPCG(1, 2))
			type kc struct {
				ent      []byte
				old, new []byte
			}
			var cells []kc
			for i := 0; i < 400; i++ {
				var c cell.Cell
				switch name {
				case "wide":
					c = testCell("u"+string(rune('0'+rng.IntN(3)))+"00"+string(rune('0'+rng.IntN(10)))+"x"[:rng.IntN(2)], be64(rng.Int64N(1<<41)), 1)
					if len(c.Row) != 5 && len(c.Row) != 6 {
						continue
					}
				case "salt":
					dev := "d" + string(rune('a'+rng.IntN(3))) + "x"[:rng.IntN(2)]
					c = testCell(dev+"|"+be64(rng.Int64N(1<<60)), "q", 1)
				default:
					org := []string{"a", "a/b", "a/", "ab", "a\x00"}[rng.IntN(5)]
					var esc []byte
					for _, b := range []byte(org) {
						esc = append(esc, b)
						if b == '/' {
							esc = append(esc, 0xFF)
						}
					}
					esc = append(esc, '/', 0x00)
					acct := uint32(rng.IntN(5)) + (1<<31 - 2) // around zero, sortable
					row := append(esc, byte(acct>>24), byte(acct>>16), byte(acct>>8), byte(acct), byte(rng.IntN(256)), byte(rng.IntN(256)))
					c = testCell(string(row), "q", 1)
				}
				ent, err := r.SourceEntity(nil, &c)
				if err != nil {
					t.Fatalf("%q: %v", c.Row, err)
				}
				out, err := r.Apply(&c)
				if err != nil {
					t.Fatal(err)
				}
				cells = append(cells, kc{ent, append([]byte(nil), c.Row...), append([]byte(nil), out.Row...)})
			}
			for _, a := range cells {
				old, err := p.SourceRange(a.ent)
				if err != nil {
					t.Fatal(err)
				}
				nw, err := p.TargetRange(a.ent)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range cells {
					same := bytes.Equal(a.ent, b.ent)
					if inRange(old, b.old) != same {
						t.Fatalf("old row %q in range %s of %s: %v, same entity %v", b.old, old, p.FormatEntity(a.ent), !same, same)
					}
					if inRange(nw, b.new) != same {
						t.Fatalf("new row %q in range %s of %s: %v, same entity %v", b.new, nw, p.FormatEntity(a.ent), !same, same)
					}
				}
			}
		})
	}
}

func TestEntityRangeRefusesScatteredEntities(t *testing.T) {
	for name, target := range map[string][]ComponentSpec{
		"salt of a non-entity field": {
			{Type: "salt", Of: []string{"ts"}, Buckets: 4},
			{Type: "string", Field: "device", Sep: '|', HasSep: true},
			{Type: "reversed_ts", Field: "ts"},
		},
		"entity after the time": {
			{Type: "reversed_ts", Field: "ts"},
			{Type: "string", Field: "device"},
		},
	} {
		spec := saltSpec()
		spec.Target.Row = target
		p, err := Compile(spec)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		key, err := p.ParseEntity("device=d1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.TargetRange(key); !errors.Is(err, ErrNoEntityRange) {
			t.Errorf("%s: TargetRange error %v, want ErrNoEntityRange", name, err)
		}
		if _, err := p.SourceRange(key); err != nil {
			t.Errorf("%s: SourceRange: %v", name, err)
		}
	}
}

func TestParseEntity(t *testing.T) {
	spec := specs2()
	p, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	// A comma inside a value is written \x2C.
	comma, err := p.ParseEntity("org=a\\x2Cb,acct=1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a,b\x00\x01" + be64(1^-1<<63); string(comma) != want {
		t.Errorf("org=a\\x2Cb: key %q, want %q", comma, want)
	}
	for _, s := range []string{"org=a-b,acct=-3", "org=\\x00z,acct=9223372036854775807"} {
		k, err := p.ParseEntity(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := p.FormatEntity(k); got != s {
			t.Errorf("FormatEntity(ParseEntity(%q)) = %q", s, got)
		}
		h, err := p.ParseEntity("hex:" + hexOf(k))
		if err != nil || !bytes.Equal(h, k) {
			t.Errorf("hex form of %q: %x, %v", s, h, err)
		}
	}
	for _, bad := range []string{"org=a", "acct=1,org=a", "org=a,acct=x", "org=\\x4,acct=1", "hex:zz", "hex:00"} {
		if _, err := p.ParseEntity(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func specs2() Spec {
	return Spec{
		Source: LayoutSpec{Row: []ComponentSpec{
			{Type: "string", Field: "org", Sep: '/', HasSep: true, Escape: true},
			{Type: "sortable_int", Field: "acct", Width: 8},
		}},
		Target: LayoutSpec{Row: []ComponentSpec{
			{Type: "sortable_int", Field: "acct", Width: 8},
			{Type: "string", Field: "org", Sep: '/', HasSep: true, Escape: true},
		}},
		Entity: []string{"org", "acct"},
	}
}

func hexOf(b []byte) string {
	const d = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, d[c>>4], d[c&15])
	}
	return string(out)
}

// FuzzEntityKey: no entity key, however malformed, panics the range or
// name functions; a key they accept gives ranges that are not empty.
func FuzzEntityKey(f *testing.F) {
	p, err := Compile(specs2())
	if err != nil {
		f.Fatal(err)
	}
	k, _ := p.ParseEntity("org=a/b,acct=-3")
	f.Add(k)
	f.Add([]byte{0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, key []byte) {
		_ = p.FormatEntity(key)
		for _, fn := range []func([]byte) (KeyRange, error){p.SourceRange, p.TargetRange} {
			r, err := fn(key)
			if err != nil {
				continue
			}
			if len(r.Stop) > 0 && bytes.Compare(r.Start, r.Stop) >= 0 {
				t.Fatalf("empty range %s for key %x", r, key)
			}
		}
	})
}
