package transform

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// numberBound is the largest value (exclusive) a number component of the
// old key encodes, so a timestamp drawn for it fits.
func numberBound(c *component) uint64 {
	switch c.typ {
	case Decimal:
		if c.width > 0 && c.width < 20 {
			return pow10[c.width]
		}
	case Uint:
		if c.width < 8 {
			return 1 << (8 * uint(c.width))
		}
	case Int, SortableInt:
		if c.width < 8 {
			return 1 << (8*uint(c.width) - 1)
		}
	}
	return math.MaxInt64
}

// randomOldCell draws an old cell that fits p's source layout: each field
// a random value of its component's type (timestamps, and fields the new
// key buckets or reverses, between 1970 and 9999), time buckets of the old
// key the bucket of their offset's timestamp, salts computed, an opaque
// qualifier random bytes, the family one the job renames or one it does
// not.
func randomOldCell(rng *rand.Rand, p *Program) (cell.Cell, error) {
	rec := &record{vals: make([]Value, len(p.fields)+p.inv.slots)}
	layouts := []*Layout{p.srcRow, p.srcQual}
	for _, l := range layouts {
		if l == nil {
			continue
		}
		for i := range l.comps {
			c := &l.comps[i]
			f := c.field
			if c.typ == Offset {
				f = c.of[0]
			}
			if f < 0 || c.typ == TimeBucket || c.typ == Salt && len(c.of) > 0 {
				continue
			}
			switch {
			case c.typ == Salt:
				rec.vals[f] = Value{N: rng.Uint64N(uint64(c.buckets))}
			case p.fields[f].time || c.typ == Offset:
				rec.vals[f] = Value{N: rng.Uint64N(min(uint64(isoMax), numberBound(c))), Signed: true}
			default:
				rec.vals[f] = randomValue(rng, c)
			}
			rec.vals[f].Set = true
		}
	}
	for _, l := range layouts {
		if l == nil {
			continue
		}
		for i := range l.comps {
			if c := &l.comps[i]; c.typ == TimeBucket && c.field >= 0 {
				ts := int64(rec.vals[p.inv.bucketTS[c.field]].N)
				rec.vals[c.field] = Value{N: uint64(ts - ts%c.span), Signed: true, Set: true}
			}
		}
	}
	row, err := buildSource(p.srcRow, rec)
	if err != nil {
		return cell.Cell{}, err
	}
	qual := []byte{'q', byte(rng.IntN(256))}
	if p.srcQual != nil {
		if qual, err = buildSource(p.srcQual, rec); err != nil {
			return cell.Cell{}, err
		}
	}
	fams := [][]byte{[]byte("z")}
	for _, f := range p.families {
		fams = append(fams, f[0])
	}
	return cell.Cell{
		Row: row, Family: fams[rng.IntN(len(fams))], Qualifier: qual,
		Timestamp: rng.Int64N(isoMax), Type: cell.Put, Value: fmt.Appendf(nil, "v%d", rng.Int()),
	}, nil
}

// buildSource builds an old key from rec in the documented byte forms,
// with the inverse codec's writer (the forward code has no builder for
// old keys: it only reads them). Time buckets and salts without fields
// are the values drawn.
func buildSource(l *Layout, rec *record) ([]byte, error) {
	k := newBackCodec()
	var key []byte
	for i := range l.comps {
		var err error
		if key, err = k.put(key, &l.comps[i], rec); err != nil {
			return nil, err
		}
	}
	return key, nil
}

// checkRoundTrip maps random old cells of p forward and back again with
// Unmap: each must give back the old cell it came from, byte for byte, and
// its entity. Cells the old layout or the new one cannot encode are drawn
// again; at least min of 2000 must make the round trip.
func checkRoundTrip(t *testing.T, p *Program, seed uint64, least int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	fwd, back := p.New(), p.New()
	done := 0
	for n := 0; n < 2000; n++ {
		old, err := randomOldCell(rng, p)
		if err != nil {
			continue
		}
		nw, err := fwd.Apply(&old)
		if errors.Is(err, ErrBadKey) {
			continue // the new layout refuses it; a run rejects it
		}
		if err != nil {
			t.Fatal(err)
		}
		nw = nw.Clone()
		got, err := back.Unmap(&nw)
		if err != nil {
			t.Fatalf("old %s, new %s: %v", old.String(), nw.String(), err)
		}
		if !bytes.Equal(got.Row, old.Row) || !bytes.Equal(got.Family, old.Family) || !bytes.Equal(got.Qualifier, old.Qualifier) ||
			got.Timestamp != old.Timestamp || got.Type != old.Type || !bytes.Equal(got.Value, old.Value) {
			t.Fatalf("old %s mapped to %s, which unmaps to %s", old.String(), nw.String(), got.String())
		}
		want, _ := fwd.SourceEntity(nil, &old)
		if ent := back.LastEntity(nil); !bytes.Equal(ent, want) {
			t.Fatalf("old %s: entity %x after Unmap, %x from the old key", old.String(), ent, want)
		}
		done++
	}
	if done < least {
		t.Fatalf("only %d of 2000 random cells made the round trip, want %d", done, least)
	}
}

// TestUnmapGivesBackTheOldCell: for random fields of every component type,
// the new key built under the target layout, parsed back and rebuilt under
// the source layout, is the original key.
func TestUnmapGivesBackTheOldCell(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  Spec
		least int
	}{
		{"wide to bucketed", wideSpec(), 1500},
		{"salt", saltSpec(), 1900},
		{"every number and string type, reordered, salted, bucketed in seconds", Spec{
			Source: LayoutSpec{Row: sortingLayout},
			Target: LayoutSpec{
				Row: []ComponentSpec{
					{Type: "salt", Field: "sb", Of: []string{"u", "a"}, Buckets: 300},
					{Type: "string", Field: "u", Sep: 0, HasSep: true, Escape: true},
					{Type: "time_bucket", Field: "tb", Of: []string{"r"}, Unit: "seconds", Seconds: 7},
					{Type: "offset", Of: []string{"r"}, Bucket: "tb", Width: 8},
					{Type: "uint", Field: "a", Width: 2},
				},
				Qualifier: []ComponentSpec{
					{Type: "int", Field: "b", Width: 4},
					{Type: "fixed", Field: "s", Width: 3},
					{Type: "decimal", Field: "d", Width: 3},
					{Type: "literal", Bytes: []byte("::")},
					{Type: "sortable_int", Field: "e", Width: 8},
					{Type: "string", Field: "t", Sep: 0x01, HasSep: true, Escape: true},
					{Type: "string", Field: "$qualifier"},
				},
			},
			Entity:   []string{"u"},
			Families: map[string]string{"e": "g"},
		}, 1900},
		{"loose encodings, an ISO hour of $ts, the old qualifier parsed", Spec{
			Source: LayoutSpec{Row: looseLayout, Qualifier: []ComponentSpec{{Type: "reversed_ts", Field: "w"}}},
			Target: LayoutSpec{
				Row: []ComponentSpec{
					{Type: "salt", Of: []string{"s"}, Buckets: 16},
					{Type: "string", Field: "s", Sep: '|', HasSep: true},
					{Type: "time_bucket", Field: "h", Of: []string{"$ts"}, Unit: "hour", Format: "iso"},
					{Type: "time_bucket", Field: "wd", Of: []string{"w"}, Unit: "day", Format: "iso"},
					{Type: "offset", Of: []string{"w"}, Bucket: "wd"},
					{Type: "decimal", Field: "b", Width: 20},
				},
				Qualifier: []ComponentSpec{
					{Type: "sortable_int", Field: "a", Width: 2},
					{Type: "fixed", Field: "f", Width: 4, Pad: ' '},
					{Type: "uint", Field: "c", Width: 1},
					{Type: "uint", Field: "d", Width: 8},
					{Type: "string", Field: "t", Sep: '|', HasSep: true, Escape: true},
				},
			},
			Entity: []string{"s"},
		}, 1900},
		{"the old row and qualifier kept whole", Spec{
			Source: LayoutSpec{Row: []ComponentSpec{
				{Type: "salt", Field: "old", Of: []string{"k"}, Buckets: 8},
				{Type: "string", Field: "k", Sep: '/', HasSep: true},
				{Type: "time_bucket", Field: "day", Unit: "day"},
				{Type: "offset", Of: []string{"ts"}, Bucket: "day"},
			}},
			Target: LayoutSpec{
				Row:       []ComponentSpec{{Type: "salt", Of: []string{"k"}, Buckets: 4}, {Type: "string", Field: "$row"}},
				Qualifier: []ComponentSpec{{Type: "string", Field: "k", Sep: 0, HasSep: true, Escape: true}, {Type: "string", Field: "$qualifier"}},
			},
			Entity: []string{"k"},
		}, 1900},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if ok, why := p.Invertible(); !ok {
				t.Fatalf("not invertible: %s", why)
			}
			checkRoundTrip(t, p, 1, tc.least)
		})
	}
}

// TestUnmapChecksWhatTheKeyDerives: a new key that parses but that no old
// cell maps to is ErrMappedWrong (the old cell its key points at still
// given); one that does not parse is ErrBadKey; a key whose fields build
// another old cell is given back as that cell, for the caller to compare.
func TestUnmapChecksWhatTheKeyDerives(t *testing.T) {
	const ts = int64(1767268800123) // 2026-01-01T12:00:00.123Z
	const day = int64(86_400_000)
	dayStart := ts - ts%day
	u32 := func(v int64) string { return string([]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}) }
	wide := wideSpec()
	iso := wideSpec()
	iso.Target.Row[1].Format, iso.Target.Row[1].Unit = "iso", "hour"
	twice := Spec{
		Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}},
		Target: LayoutSpec{Row: []ComponentSpec{{Type: "fixed", Field: "user", Width: 3}, {Type: "string", Field: "user"}}},
		Entity: []string{"user"},
	}
	tsInKey := Spec{
		Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}},
		Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "reversed_ts", Field: "$ts"}}},
		Entity: []string{"user"},
	}
	bucketOfTS := Spec{
		Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: '|', HasSep: true}, {Type: "decimal", Field: "order"}}},
		Target: LayoutSpec{
			Row:       []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "time_bucket", Field: "day", Of: []string{"$ts"}, Unit: "day"}},
			Qualifier: []ComponentSpec{{Type: "uint", Field: "order", Width: 8}, {Type: "string", Field: "$qualifier"}},
		},
		Entity: []string{"user"},
	}
	for _, tc := range []struct {
		name    string
		spec    Spec
		new     cell.Cell
		want    error  // nil: unmaps
		msg     string // in the error
		oldRow  string // the old cell given back
		oldQual string
	}{
		{"demo: the right cell", wide, cellIn("d", "u00042"+be64(dayStart), u32(ts-dayStart), ts), nil, "", "u00042", be64(ts)},
		{"demo: a bucket one day early gives another old cell", wide, cellIn("d", "u00042"+be64(dayStart-day), u32(ts-dayStart), ts), nil, "", "u00042", be64(ts - day)},
		{"demo: offset truncated to two bytes", wide, cellIn("d", "u00042"+be64(dayStart), u32(ts - dayStart)[2:], ts), ErrBadKey, "need 4 bytes", "", ""},
		{"demo: offset past the bucket", wide, cellIn("d", "u00042"+be64(dayStart), u32(day), ts), ErrBadKey, "not below the bucket length", "", ""},
		{"demo: a family no old family becomes", wide, cellIn("e", "u00042"+be64(dayStart), u32(ts-dayStart), ts), ErrMappedWrong, "family e is renamed to d", "u00042", be64(ts)},
		{"hour text that is no hour", iso, cellIn("d", "u00042"+"2026-01-01T25", u32(123), ts), ErrBadKey, "is not a date", "", ""},
		{"salt of the wrong bytes", saltSpec(), cellIn("e", string([]byte{bucketOf("dev-7|", 16)})+"dev-7|"+be64(math.MaxInt64-ts), "q", ts), ErrMappedWrong, "hash to", "dev-7|" + be64(math.MaxInt64-ts), "q"},
		{"a field held twice with two values", twice, cellIn("e", "abcabd", "q", 1), ErrMappedWrong, `reads user = "abd"`, "abd", "q"},
		{"the key's timestamp is not the cell's", tsInKey, cellIn("e", "u1\x00"+be64(math.MaxInt64-ts), "q", ts+1), ErrMappedWrong, "reads $ts", "u1", "q"},
		{"a day bucket that does not hold the cell's timestamp", bucketOfTS, cellIn("e", "c1\x00"+be64(dayStart+day), be64(42)+"amount", ts), ErrMappedWrong, "is not in it", "c1|42", "amount"},
		{"tall to wide: the right cell", bucketOfTS, cellIn("e", "c1\x00"+be64(dayStart), be64(42)+"amount", ts), nil, "", "c1|42", "amount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.New().Unmap(&tc.new)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Unmap = %s, %v; want %v", got.String(), err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if string(got.Row) != tc.oldRow || string(got.Qualifier) != tc.oldQual {
				t.Errorf("old cell %s, want row %q qualifier %q", got.String(), tc.oldRow, tc.oldQual)
			}
		})
	}
}

// The hour preset written in UTC+1 by mistake: the hour text parses, but
// gives back an old timestamp an hour late, so the comparison with the old
// cell fails; package time agrees with the layout on the text of the right
// one.
func TestUnmapTimeZone(t *testing.T) {
	spec := wideSpec()
	spec.Target.Row[1] = ComponentSpec{Type: "time_bucket", Field: "hour", Of: []string{"ts"}, Unit: "hour", Format: "iso"}
	spec.Target.Qualifier[0].Bucket = "hour"
	p, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	const ts = int64(1767268800123) // 2026-01-01T12:00:00.123Z
	off := string([]byte{0, 0, 0, 123})
	r := p.New()
	for text, want := range map[string]int64{"2026-01-01T12": ts, "2026-01-01T13": ts + 3_600_000} {
		nw := cellIn("d", "u00042"+text, off, ts)
		got, err := r.Unmap(&nw)
		if err != nil || string(got.Qualifier) != be64(want) {
			t.Errorf("%s: old cell %s, %v; want qualifier %d", text, got.String(), err, want)
		}
	}
}

func cellIn(fam, row, qual string, ts int64) cell.Cell {
	return cell.Cell{Row: []byte(row), Family: []byte(fam), Qualifier: []byte(qual), Timestamp: ts, Type: cell.Put, Value: []byte("v")}
}

// TestInvertible: the new key keeps every old field, or the reason names
// what it loses; Unmap then refuses with ErrNoInverse.
func TestInvertible(t *testing.T) {
	userTS := LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}, Qualifier: []ComponentSpec{{Type: "int", Field: "ts", Width: 8}}}
	for _, tc := range []struct {
		name string
		spec Spec
		why  string
	}{
		{"demo", wideSpec(), ""},
		{"a field not used", Spec{Source: userTS, Entity: []string{"user"},
			Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}, Qualifier: []ComponentSpec{{Type: "literal", Bytes: []byte("x")}}}},
			"the new key drops field ts"},
		{"a field kept only as its day", Spec{Source: userTS, Entity: []string{"user"},
			Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "time_bucket", Field: "d", Of: []string{"ts"}, Unit: "day"}}, Qualifier: []ComponentSpec{{Type: "literal", Bytes: []byte("x")}}}},
			"the new key drops field ts"},
		{"a field kept only as its salt", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: '|', HasSep: true}, {Type: "string", Field: "item"}}}, Entity: []string{"user"},
			Target: LayoutSpec{Row: []ComponentSpec{{Type: "salt", Of: []string{"item"}, Buckets: 4}, {Type: "string", Field: "user"}}}},
			"the new key drops field item"},
		{"the old qualifier, not parsed, not kept", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}}, Entity: []string{"user"},
			Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}, Qualifier: []ComponentSpec{{Type: "literal", Bytes: []byte("x")}}}},
			"the new key drops field $qualifier"},
		{"a salt of the old key read without a field", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "salt", Buckets: 4}, {Type: "string", Field: "user"}}}, Entity: []string{"user"},
			Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}}},
			"the new key drops field source_layout.row[0] (salt)"},
		{"two families merged", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}}, Entity: []string{"user"},
			Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}}, Families: map[string]string{"a": "c", "b": "c"}},
			"old families a, b become c"},
		{"two fields dropped", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: '|', HasSep: true}, {Type: "string", Field: "x", Sep: '|', HasSep: true}, {Type: "string", Field: "y"}}}, Entity: []string{"user"},
			Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}}},
			"the new key drops fields x, y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			ok, why := p.Invertible()
			if ok != (tc.why == "") || ok == p.MayCollide() {
				t.Fatalf("Invertible = %v (%s), MayCollide = %v", ok, why, p.MayCollide())
			}
			if ok {
				return
			}
			if why != tc.why {
				t.Errorf("why %q, want %q", why, tc.why)
			}
			c := cellIn("c", "u1", "q", 1)
			if _, err := p.New().Unmap(&c); !errors.Is(err, ErrNoInverse) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("Unmap: %v", err)
			}
		})
	}
}
