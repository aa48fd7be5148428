package transform

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

func testCell(row, qual string, ts int64) cell.Cell {
	return cell.Cell{Row: []byte(row), Family: []byte("e"), Qualifier: []byte(qual), Timestamp: ts, Type: cell.Put, Value: []byte("v")}
}

func be64(v int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return string(b[:])
}

// wideSpec is the wide -> bucketed preset of configs/demo.yaml, in Go.
func wideSpec() Spec {
	return Spec{
		Source: LayoutSpec{
			Row:       []ComponentSpec{{Type: "string", Field: "user"}},
			Qualifier: []ComponentSpec{{Type: "int", Field: "ts", Width: 8}},
		},
		Target: LayoutSpec{
			Row: []ComponentSpec{
				{Type: "fixed", Field: "user", Width: 6},
				{Type: "time_bucket", Field: "day", Of: []string{"ts"}, Unit: "day"},
			},
			Qualifier: []ComponentSpec{{Type: "offset", Of: []string{"ts"}, Bucket: "day"}},
		},
		Entity:   []string{"user"},
		Families: map[string]string{"e": "d"},
	}
}

func TestWideToBucketed(t *testing.T) {
	p, err := Compile(wideSpec())
	if err != nil {
		t.Fatal(err)
	}
	if o, n := p.Describe(); o != "user:string(to the end)  /  ts:int(8)" || n != "user:fixed(6) | day:time_bucket(ts, day)  /  ts:offset(in day)" {
		t.Errorf("Describe = %q, %q", o, n)
	}
	r := p.New()
	ts := int64(1767268800123) // 2026-01-01T12:00:00.123Z
	src := testCell("u00042", be64(ts), 99)
	var got []cell.Cell
	if err := r.Map(src, func(c cell.Cell) { got = append(got, c.Clone()) }); err != nil || len(got) != 1 {
		t.Fatalf("emitted %d cells, error %v", len(got), err)
	}
	out := got[0]
	wantRow := "u00042" + be64(1767225600000)
	if string(out.Row) != wantRow {
		t.Errorf("row = %q, want %q", out.Row, wantRow)
	}
	if q := binary.BigEndian.Uint32(out.Qualifier); q != 43200123 || len(out.Qualifier) != 4 {
		t.Errorf("qualifier = %x, want 43200123 ms into the day", out.Qualifier)
	}
	if string(out.Family) != "d" || out.Timestamp != 99 || string(out.Value) != "v" || out.Type != cell.Put {
		t.Errorf("family/timestamp/value/type not carried: %s", out.String())
	}
	se, err := r.SourceEntity(nil, &src)
	if err != nil {
		t.Fatal(err)
	}
	te, err := r.TargetEntity(nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(se, te) {
		t.Fatalf("entity from old key %x != from new key %x", se, te)
	}
	if s := p.FormatEntity(te); s != "user=u00042" {
		t.Errorf("FormatEntity = %q", s)
	}
	if f := string(r.AppendFields(nil)); !strings.Contains(f, "ts=2026-01-01T12:00:00.123Z") || !strings.Contains(f, "day=2026-01-01T00:00:00.000Z") {
		t.Errorf("fields of the new key = %q", f)
	}
}

func TestRejects(t *testing.T) {
	p, err := Compile(wideSpec())
	if err != nil {
		t.Fatal(err)
	}
	r := p.New()
	var rejected []string
	emit := func(c cell.Cell) { t.Errorf("emitted %s for a bad cell", c.String()) }
	df := testCell("u00042", "", 1)
	df.Type = cell.DeleteFamily
	for _, c := range []cell.Cell{
		testCell("u00042", "short", 1),                    // qualifier not 8 bytes
		testCell("user-too-long", be64(1767268800123), 1), // does not fit fixed 6
		testCell("u00042", be64(-1), 1),                   // negative time
		df,
	} {
		err := r.Map(c, emit)
		if !errors.Is(err, ErrBadKey) {
			t.Errorf("Map(%s) = %v, want an ErrBadKey", c.String(), err)
			continue
		}
		rejected = append(rejected, err.Error())
	}
	if len(rejected) != 4 {
		t.Fatalf("rejected %d, want 4", len(rejected))
	}
	for i, want := range []string{"old qualifier", "longer than 6 bytes", "out of range", "a family delete marker"} {
		if !strings.Contains(rejected[i], want) {
			t.Errorf("reject %d = %q, want it to mention %q", i, rejected[i], want)
		}
	}
}

// TestRowKeyLimit: a new row over HBase's 32767-byte limit is refused
// per cell as a bad key (so bad_keys decides: reject or fail), never
// emitted, and a row of exactly the limit passes.
func TestRowKeyLimit(t *testing.T) {
	p, err := Compile(Spec{
		Source: LayoutSpec{Row: []ComponentSpec{{Field: "k", Type: "string"}}},
		Target: LayoutSpec{Row: []ComponentSpec{{Type: "literal", Bytes: []byte("pre:")}, {Field: "k", Type: "string"}}},
		Entity: []string{"k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := p.New()
	var emitted []int
	emit := func(c cell.Cell) { emitted = append(emitted, len(c.Row)) }
	if err := r.Map(testCell(strings.Repeat("x", MaxRowKeyLength-4), "q", 1), emit); err != nil {
		t.Fatalf("a row of exactly %d bytes: %v", MaxRowKeyLength, err)
	}
	err = r.Map(testCell(strings.Repeat("x", MaxRowKeyLength-3), "q", 1), emit)
	if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), "32768 bytes, above HBase's row key limit of 32767") {
		t.Fatalf("err = %v, want ErrBadKey naming the length", err)
	}
	if len(emitted) != 1 || emitted[0] != MaxRowKeyLength {
		t.Fatalf("emitted rows of %v bytes, want only [%d]", emitted, MaxRowKeyLength)
	}
	// plan warns when the fixed parts leave little room.
	p2, err := Compile(Spec{
		Source: LayoutSpec{Row: []ComponentSpec{{Field: "k", Type: "string", Sep: 0, HasSep: true}, {Field: "k2", Type: "string"}}},
		Target: LayoutSpec{Row: []ComponentSpec{{Field: "k", Type: "fixed", Width: 20000}, {Field: "k2", Type: "string"}}},
		Entity: []string{"k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := p2.NewPlanner(PlanOptions{}).Report(true)
	found := false
	for _, w := range rep.Warnings {
		found = found || w.Code == "row-key-limit" && strings.Contains(w.Message, "take 20000 bytes, leaving 12767")
	}
	if !found {
		t.Fatalf("no row-key-limit warning in %+v", rep.Warnings)
	}
}

func TestSaltChecksOldKeys(t *testing.T) {
	spec := Spec{
		Source: LayoutSpec{Row: []ComponentSpec{{Type: "salt", Field: "s", Of: []string{"k"}, Buckets: 8}, {Type: "string", Field: "k"}}},
		Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "k"}}},
		Entity: []string{"k"},
	}
	p, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	r := p.New()
	// FNV-1a 32 of "abc" is 0x1a47e90b; mod 8 = 3.
	good := testCell("\x03abc", "", 1)
	if _, err := r.Apply(&good); err != nil {
		t.Fatalf("correct salt refused: %v", err)
	}
	bad := testCell("\x04abc", "", 1)
	if _, err := r.Apply(&bad); err == nil || !strings.Contains(err.Error(), "hash to 3") {
		t.Fatalf("wrong salt: %v", err)
	}
}

func TestRowBuffer(t *testing.T) {
	var rows [][]string
	b := &RowBuffer{MaxBytes: 30, Fn: func(row []cell.Cell, emit func(cell.Cell)) error {
		var names []string
		for _, c := range row {
			names = append(names, string(c.Qualifier))
			emit(c)
		}
		rows = append(rows, names)
		return nil
	}}
	n := 0
	emit := func(cell.Cell) { n++ }
	for _, c := range []cell.Cell{testCell("a", "1", 1), testCell("a", "2", 1), testCell("b", "3", 1)} {
		if err := b.Map(c, emit); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(emit); err != nil {
		t.Fatal(err)
	}
	if n != 3 || len(rows) != 2 || strings.Join(rows[0], ",") != "1,2" || strings.Join(rows[1], ",") != "3" {
		t.Fatalf("rows %v, %d emitted", rows, n)
	}
	big := testCell("c", strings.Repeat("q", 40), 1)
	if err := b.Map(big, emit); !errors.Is(err, ErrRowTooLarge) {
		t.Fatalf("oversized row: %v", err)
	}
}

func TestFamilyDeletes(t *testing.T) {
	df := testCell("dev1|x", "", 7)
	df.Type = cell.DeleteFamily
	for _, tc := range []struct {
		name  string
		row   []ComponentSpec
		carry bool
	}{
		{"salted: one old row is one new row", []ComponentSpec{{Type: "salt", Of: []string{"dev"}, Buckets: 4}, {Type: "string", Field: "dev", Sep: '|', HasSep: true}, {Type: "string", Field: "rest"}}, true},
		{"reordered", []ComponentSpec{{Type: "string", Field: "rest", Sep: 0, HasSep: true}, {Type: "string", Field: "dev"}}, true},
		{"merged rows", []ComponentSpec{{Type: "string", Field: "dev"}}, false},
		{"bucketed", []ComponentSpec{{Type: "string", Field: "dev", Sep: 0, HasSep: true}, {Type: "time_bucket", Of: []string{"$ts"}, Unit: "day"}, {Type: "string", Field: "rest"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(Spec{
				Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "dev", Sep: '|', HasSep: true}, {Type: "string", Field: "rest"}}},
				Target: LayoutSpec{Row: tc.row},
				Entity: []string{"dev"},
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.New().Apply(&df)
			if tc.carry != (err == nil) {
				t.Fatalf("carry=%v but Apply = %v, %v", tc.carry, out.String(), err)
			}
			if err == nil && out.Type != cell.DeleteFamily {
				t.Fatalf("type changed: %s", out.String())
			}
		})
	}
}

func TestAppendReject(t *testing.T) {
	c := testCell("u1", "\x00q", 5)
	got := string(AppendReject(nil, &c, errors.New("bad\tkey\nhere")))
	want := "7531\te\t0071\t5\tPut\t76\tbad key here\n"
	if got != want {
		t.Fatalf("reject line %q, want %q", got, want)
	}
}

// TestProgramShared maps cells from several goroutines, each with its own
// Rekey from one Program (run with -race: the Program must stay read-only).
func TestProgramShared(t *testing.T) {
	p, err := Compile(wideSpec())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func(g int) {
			r := p.New()
			var err error
			for i := 0; i < 2000 && err == nil; i++ {
				src := testCell(fmt.Sprintf("u%05d", g), be64(1767225600000+int64(i)*60_000), 1)
				var out cell.Cell
				if err = r.Map(src, func(c cell.Cell) { out = c }); err == nil {
					var ent []byte
					if ent, err = r.TargetEntity(nil, &out); err == nil && p.FormatEntity(ent) != fmt.Sprintf("user=u%05d", g) {
						err = fmt.Errorf("goroutine %d read back %s", g, p.FormatEntity(ent))
					}
				}
			}
			done <- err
		}(g)
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestEntityKeyIgnoresTheEncoding: an entity number re-encoded from int in
// the old key to uint (or sortable_int) in the new one is the same entity
// on both sides: its key follows the field, not the component that read
// it. (It followed the component: the old side's key of id 7 had the sign
// bit flipped and the new side's did not, so verify matched no entity.)
func TestEntityKeyIgnoresTheEncoding(t *testing.T) {
	for _, newType := range []string{"uint", "sortable_int", "int"} {
		t.Run(newType, func(t *testing.T) {
			p, err := Compile(Spec{
				Source: LayoutSpec{Row: []ComponentSpec{{Type: "int", Field: "id", Width: 8}, {Type: "string", Field: "item"}}},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: newType, Field: "id", Width: 8}, {Type: "string", Field: "item"}}},
				Entity: []string{"id"},
			})
			if err != nil {
				t.Fatal(err)
			}
			r := p.New()
			for _, id := range []int64{0, 7, 1 << 40} {
				src := testCell(be64(id)+"x", "q", 1)
				var out cell.Cell
				if err := r.Map(src, func(c cell.Cell) { out = c.Clone() }); err != nil {
					t.Fatal(err)
				}
				se, err := r.SourceEntity(nil, &src)
				if err != nil {
					t.Fatal(err)
				}
				te, err := r.TargetEntity(nil, &out)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(se, te) {
					t.Errorf("id %d: entity from the old key %x, from the new key %x", id, se, te)
				}
				if last := r.LastEntity(nil); !bytes.Equal(last, te) {
					t.Errorf("id %d: LastEntity %x after TargetEntity %x", id, last, te)
				}
				if s := p.FormatEntity(te); s != fmt.Sprintf("id=%d", id) {
					t.Errorf("id %d: FormatEntity = %q", id, s)
				}
			}
		})
	}
}

// TestEntityOfOldRow: the runner counts a row's cells under one entity
// only when the entity fields come from the old row alone; an entity read
// from the qualifier (a tall row: one row, many entities) must not be.
func TestEntityOfOldRow(t *testing.T) {
	tall := Spec{
		Source: LayoutSpec{
			Row:       []ComponentSpec{{Type: "string", Field: "day"}},
			Qualifier: []ComponentSpec{{Type: "string", Field: "user"}},
		},
		Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "string", Field: "day"}}},
		Entity: []string{"user"},
	}
	both := tall
	both.Entity = []string{"day", "user"}
	rowOnly := tall
	rowOnly.Entity = []string{"day"}
	for _, tc := range []struct {
		name string
		spec Spec
		want bool
	}{
		{"wide to bucketed, entity in the row", wideSpec(), true},
		{"entity in the qualifier", tall, false},
		{"entity in row and qualifier", both, false},
		{"entity in the row of a tall layout", rowOnly, true},
	} {
		p, err := Compile(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := p.EntityOfOldRow(); got != tc.want {
			t.Errorf("%s: EntityOfOldRow = %v, want %v", tc.name, got, tc.want)
		}
		if got := p.New().EntityOfOldRow(); got != tc.want {
			t.Errorf("%s: Rekey.EntityOfOldRow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRekeyStateAcrossCells: a Rekey keeps state from cell to cell (the
// last time bucket floored, the last ISO text). Mapping a sequence with
// one Rekey must give, cell for cell, what a fresh Rekey gives: the rows
// cross hour and day buckets, come back after another row, and share a
// prefix with the row before.
func TestRekeyStateAcrossCells(t *testing.T) {
	salted := Spec{
		Source: LayoutSpec{
			Row:       []ComponentSpec{{Type: "string", Field: "user"}},
			Qualifier: []ComponentSpec{{Type: "int", Field: "ts", Width: 8}},
		},
		Target: LayoutSpec{
			Row: []ComponentSpec{
				{Type: "salt", Field: "s", Of: []string{"user"}, Buckets: 16, Width: 1},
				{Type: "literal", Bytes: []byte("/")},
				{Type: "string", Field: "user", Sep: 0, HasSep: true},
				{Type: "time_bucket", Field: "hour", Of: []string{"ts"}, Unit: "hour", Format: "iso"},
			},
			Qualifier: []ComponentSpec{{Type: "offset", Of: []string{"ts"}, Bucket: "hour"}},
		},
		Entity: []string{"user"},
	}
	tall := Spec{
		Source: LayoutSpec{
			Row:       []ComponentSpec{{Type: "string", Field: "user"}},
			Qualifier: []ComponentSpec{{Type: "int", Field: "ts", Width: 8}},
		},
		Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "int", Field: "ts", Width: 8}}},
		Entity: []string{"user"},
	}
	const day, hour = int64(86400000), int64(3600000)
	var cells []cell.Cell
	for _, row := range []string{"u00001", "u00001", "u00010", "u00001", "u00002"} {
		for _, ts := range []int64{day - 2, day - 1, day, day + hour - 1, day + hour, 3*day + 5} {
			cells = append(cells, testCell(row, be64(ts), ts))
		}
	}
	for _, tc := range []struct {
		name string
		spec Spec
	}{{"wide to bucketed", wideSpec()}, {"salted, hourly", salted}, {"tall", tall}} {
		p, err := Compile(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		shared := p.New()
		for i, src := range cells {
			got, err := shared.Apply(&src)
			if err != nil {
				t.Fatalf("%s: cell %d: %v", tc.name, i, err)
			}
			want, err := p.New().Apply(&src)
			if err != nil {
				t.Fatalf("%s: cell %d, fresh: %v", tc.name, i, err)
			}
			if !bytes.Equal(got.Row, want.Row) || !bytes.Equal(got.Qualifier, want.Qualifier) {
				t.Fatalf("%s: cell %d (%s ts %d): new key %x/%x, a fresh Rekey gives %x/%x", tc.name, i, src.Row, src.Timestamp, got.Row, got.Qualifier, want.Row, want.Qualifier)
			}
		}
	}
}

// TestMapInPlace: MapInPlace gives the cell Map emits, and on a bad key
// returns Map's error and leaves the cell as it was.
func TestMapInPlace(t *testing.T) {
	p, err := Compile(wideSpec())
	if err != nil {
		t.Fatal(err)
	}
	viaMap, inPlace := p.New(), p.New()
	bad := 0
	cells := []cell.Cell{
		testCell("u00001", be64(1767225600000), 1),
		testCell("u00001", be64(1767225660000), 2),
		testCell("u00002", be64(1767229200000), 3),
		testCell("u00002", "short", 4), // a qualifier too short: a bad key
	}
	for i, src := range cells {
		var want cell.Cell
		werr := viaMap.Map(src, func(c cell.Cell) { want = c.Clone() })
		got := src
		gerr := inPlace.MapInPlace(&got)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Fatalf("cell %d: Map error %v, MapInPlace error %v", i, werr, gerr)
		}
		if werr != nil {
			if !errors.Is(gerr, ErrBadKey) {
				t.Fatalf("cell %d: %v, want ErrBadKey", i, gerr)
			}
			if cell.Compare(&got, &src) != 0 {
				t.Fatalf("cell %d: a failed MapInPlace changed the cell to %s", i, &got)
			}
			bad++
			continue
		}
		if cell.Compare(&got, &want) != 0 || !bytes.Equal(got.Value, want.Value) {
			t.Fatalf("cell %d: MapInPlace gave %s, Map %s", i, &got, &want)
		}
	}
	if bad != 1 {
		t.Fatalf("%d bad keys, want the 1 made", bad)
	}
}

// TestRowReuse: cells of one old row keep the row's parse and the part of
// the new row made from it (Program.dstRowKeep), and give what a fresh
// Rekey gives. The old row's strings are escaped (so its values live in
// the arena, beside the qualifier's), the row's buffer is scribbled over
// and replaced between cells (so values must not point into it), and new
// keys are read back (Unmap) and bad keys met between cells of one row.
func TestRowReuse(t *testing.T) {
	spec := Spec{
		Source: LayoutSpec{
			Row: []ComponentSpec{
				{Type: "string", Field: "a", Sep: '/', HasSep: true, Escape: true},
				{Type: "uint", Field: "n", Width: 2},
				{Type: "string", Field: "b"},
			},
			Qualifier: []ComponentSpec{
				{Type: "string", Field: "q", Sep: '/', HasSep: true, Escape: true},
				{Type: "int", Field: "ts", Width: 8},
			},
		},
		Target: LayoutSpec{
			Row: []ComponentSpec{
				{Type: "salt", Field: "s", Of: []string{"a", "b"}, Buckets: 16, Width: 1},
				{Type: "literal", Bytes: []byte("|")},
				{Type: "string", Field: "b", Sep: 0, HasSep: true, Escape: true},
				{Type: "string", Field: "a", Sep: 0, HasSep: true, Escape: true},
				{Type: "uint", Field: "n", Width: 2},
				{Type: "time_bucket", Field: "hour", Of: []string{"ts"}, Unit: "hour", Format: "iso"},
			},
			Qualifier: []ComponentSpec{
				{Type: "string", Field: "q", Sep: 0, HasSep: true, Escape: true},
				{Type: "offset", Of: []string{"ts"}, Bucket: "hour"},
			},
		},
		Entity: []string{"a", "b"},
	}
	p, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.dstRowKeep != 5 {
		t.Fatalf("dstRowKeep %d, want 5 (all but the hour)", p.dstRowKeep)
	}
	if ok, why := p.Invertible(); !ok {
		t.Fatalf("not invertible: %s", why)
	}
	row := func(a string, n uint16, b string) string {
		return strings.ReplaceAll(a, "/", "/\xff") + "/\x00" + string([]byte{byte(n >> 8), byte(n)}) + b
	}
	qual := func(q string, ts int64) string { return strings.ReplaceAll(q, "/", "/\xff") + "/\x00" + be64(ts) }
	const hour = int64(3600000)
	rowA, rowB := row("x/y/z", 7, "tail/b"), row("x/y", 7, "tail/b")
	type step struct {
		row, qual string
		unmap     bool // read the last new cell back first
	}
	steps := []step{
		{rowA, qual("q/1", hour-1), false},
		{rowA, qual("q/1/2", hour), false},
		{rowA, qual("q", hour+5), true},
		{rowA, "no separator", false}, // a bad qualifier in the row
		{rowA, qual("", 2*hour), false},
		{rowB, qual("q/3", 2*hour), false},
		{rowB, qual("q/3", 3*hour), true},
		{"x/y/\x00", qual("q", 1), false}, // a bad row: too short for n
		{"x/y/\x00", qual("q", 2), false},
		{rowB, qual("q/4", 3*hour+1), false},
		{rowA, qual("q/5", 4*hour), false},
	}
	shared := p.New()
	var last cell.Cell
	bad := 0
	for i, s := range steps {
		if s.unmap {
			if _, err := shared.Unmap(&last); err != nil {
				t.Fatalf("step %d: Unmap: %v", i, err)
			}
		}
		// A buffer of its own per cell; the last one is scribbled over.
		src := testCell(s.row, s.qual, int64(i))
		got, gerr := shared.Apply(&src)
		if gerr == nil {
			last = got.Clone()
		}
		copy(src.Row, bytes.Repeat([]byte{0xee}, len(src.Row)))
		src2 := testCell(s.row, s.qual, int64(i))
		want, werr := p.New().Apply(&src2)
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("step %d: error %v, a fresh Rekey's %v", i, gerr, werr)
		}
		if gerr != nil {
			bad++
			continue
		}
		if !bytes.Equal(last.Row, want.Row) || !bytes.Equal(last.Qualifier, want.Qualifier) {
			t.Fatalf("step %d: new key %q/%q, a fresh Rekey gives %q/%q", i, last.Row, last.Qualifier, want.Row, want.Qualifier)
		}
		ent := shared.LastEntity(nil)
		wantEnt, err := p.New().SourceEntity(nil, &src2)
		if err != nil || !bytes.Equal(ent, wantEnt) {
			t.Fatalf("step %d: entity %q, a fresh Rekey's %q (%v)", i, ent, wantEnt, err)
		}
	}
	if bad != 3 {
		t.Fatalf("%d bad keys, want the 3 made", bad)
	}
}
