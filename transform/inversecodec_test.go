package transform

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestInverseCodecIsIndependent: the inverse path (inverse.go,
// inversecodec.go) calls no function of the forward codec and reads none
// of its tables (layout.go, timefmt.go, rekey.go), so a bug there cannot
// reach it. It may use the compiled description (types, kinds, the record)
// and a few helpers for messages.
func TestInverseCodecIsIndependent(t *testing.T) {
	// Names of the forward files the inverse may use: the description
	// (component types, field kinds), the error every bad key wraps, and
	// helpers for messages and record bookkeeping.
	allowed := map[string]bool{"ErrBadKey": true, "printable": true, "AppendPrintable": true, "sameName": true, "cellName": true,
		"KindNone": true, "KindBytes": true, "KindNumber": true}
	for ty := Uint; ty <= Offset; ty++ {
		allowed[typeConst(ty)] = true
	}
	allowedMethods := map[string]bool{"reset": true, "String": true}
	fset := token.NewFileSet()
	names, methods := map[string]bool{}, map[string]bool{}
	for _, file := range []string{"layout.go", "timefmt.go", "rekey.go"} {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					methods[d.Name.Name] = !allowedMethods[d.Name.Name]
				} else {
					names[d.Name.Name] = !allowed[d.Name.Name]
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok {
						for _, n := range vs.Names {
							names[n.Name] = !allowed[n.Name]
						}
					}
				}
			}
		}
	}
	if !names["appendUint"] || !methods["parse"] || !names["parseISO"] {
		t.Fatal("the forward codec's names were not found")
	}
	for _, file := range []string{"inverse.go", "inversecodec.go"} {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		pkgs := map[string]bool{}
		for _, im := range f.Imports {
			path := strings.Trim(im.Path.Value, `"`)
			pkgs[path[strings.LastIndex(path, "/")+1:]] = true
		}
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && pkgs[id.Name] {
					return false // another package's name
				}
				// After the dot: a method or a field, never a
				// package-level name of this package.
				if methods[n.Sel.Name] {
					t.Errorf("%s: the inverse path uses the forward code's .%s", fset.Position(n.Sel.Pos()), n.Sel.Name)
				}
				ast.Inspect(n.X, visit)
				return false
			case *ast.KeyValueExpr:
				// The key of a struct literal names a field.
				ast.Inspect(n.Value, visit)
				return false
			case *ast.Ident:
				if names[n.Name] {
					t.Errorf("%s: the inverse path uses the forward code's %s", fset.Position(n.Pos()), n.Name)
				}
			}
			return true
		}
		ast.Inspect(f, visit)
	}
}

// typeConst is the Go name of a component type's constant.
func typeConst(ty Type) string {
	return map[Type]string{Uint: "Uint", Int: "Int", SortableInt: "SortableInt", ReversedTS: "ReversedTS", Fixed: "Fixed",
		String: "String", Decimal: "Decimal", Literal: "Literal", Salt: "Salt", TimeBucket: "TimeBucket", Offset: "Offset"}[ty]
}

// crossTargets are new-key layouts holding every component type in its
// variants, each after a one-byte entity e, built from the fields of
// crossSource: x bytes, n a number, t a timestamp.
func crossTargets() map[string][]ComponentSpec {
	out := map[string][]ComponentSpec{}
	add := func(name string, comps ...ComponentSpec) {
		out[name] = append([]ComponentSpec{{Type: "uint", Field: "e", Width: 1}}, comps...)
	}
	for _, typ := range []string{"uint", "int", "sortable_int"} {
		for _, w := range []int{1, 2, 4, 8} {
			add(fmt.Sprintf("%s %d", typ, w), ComponentSpec{Type: typ, Field: "n", Width: w})
		}
	}
	add("reversed_ts", ComponentSpec{Type: "reversed_ts", Field: "t"})
	add("reversed_ts of any number", ComponentSpec{Type: "reversed_ts", Field: "n"})
	add("fixed 1", ComponentSpec{Type: "fixed", Field: "x", Width: 1})
	add("fixed 3", ComponentSpec{Type: "fixed", Field: "x", Width: 3})
	add("fixed 4 pad space", ComponentSpec{Type: "fixed", Field: "x", Width: 4, Pad: ' '})
	add("fixed 2 pad 0xFF", ComponentSpec{Type: "fixed", Field: "x", Width: 2, Pad: 0xFF})
	add("string sep 0x00 escaped", ComponentSpec{Type: "string", Field: "x", Sep: 0, HasSep: true, Escape: true}, ComponentSpec{Type: "uint", Field: "n", Width: 1})
	add("string sep 0xFF escaped", ComponentSpec{Type: "string", Field: "x", Sep: 0xFF, HasSep: true, Escape: true}, ComponentSpec{Type: "fixed", Field: "x", Width: 8})
	add("string sep |", ComponentSpec{Type: "string", Field: "x", Sep: '|', HasSep: true}, ComponentSpec{Type: "literal", Bytes: []byte("|")})
	add("string sep 0x00", ComponentSpec{Type: "string", Field: "x", Sep: 0, HasSep: true}, ComponentSpec{Type: "string", Field: "x"})
	add("string to the end", ComponentSpec{Type: "string", Field: "x"})
	for _, w := range []int{1, 3, 13, 19, 20} {
		add(fmt.Sprintf("decimal %d digits", w), ComponentSpec{Type: "decimal", Field: "n", Width: w})
	}
	add("decimal sep #", ComponentSpec{Type: "decimal", Field: "n", Sep: '#', HasSep: true}, ComponentSpec{Type: "decimal", Field: "t"})
	add("decimal sep 0x00", ComponentSpec{Type: "decimal", Field: "n", Sep: 0, HasSep: true}, ComponentSpec{Type: "uint", Field: "n", Width: 8})
	add("literals", ComponentSpec{Type: "literal", Bytes: []byte("::")}, ComponentSpec{Type: "literal", Bytes: []byte{0x00, 0xFF}})
	for _, b := range []int{2, 16, 256, 300, 65536} {
		add(fmt.Sprintf("salt of x, %d buckets", b), ComponentSpec{Type: "salt", Field: "s", Of: []string{"x"}, Buckets: b}, ComponentSpec{Type: "string", Field: "x"})
	}
	add("salt of x and n, 7 buckets in 2 bytes, no field", ComponentSpec{Type: "salt", Of: []string{"x", "n"}, Buckets: 7, Width: 2}, ComponentSpec{Type: "string", Field: "x", Sep: '|', HasSep: true, Escape: true}, ComponentSpec{Type: "int", Field: "n", Width: 8})
	add("salt of t, n", ComponentSpec{Type: "salt", Field: "s", Of: []string{"t", "n"}, Buckets: 1000}, ComponentSpec{Type: "int", Field: "t", Width: 8})
	for _, tb := range []struct {
		name          string
		unit, format  string
		seconds       int64
		offsetWidth   int
		withoutOffset bool
	}{
		{"hour", "hour", "", 0, 0, false},
		{"hour iso", "hour", "iso", 0, 0, false},
		{"day", "day", "binary", 0, 8, false},
		{"day iso", "day", "iso", 0, 4, false},
		{"7 seconds", "seconds", "", 7, 0, false},
		{"90 seconds iso", "seconds", "iso", 90, 0, false},
		{"3 days iso", "seconds", "iso", 3 * 86400, 8, false},
		{"two months", "seconds", "", 60 * 86400, 8, false},
		{"day iso, alone", "day", "iso", 0, 0, true},
	} {
		comps := []ComponentSpec{{Type: "time_bucket", Field: "b", Of: []string{"t"}, Unit: tb.unit, Seconds: tb.seconds, Format: tb.format}}
		if !tb.withoutOffset {
			comps = append(comps, ComponentSpec{Type: "offset", Of: []string{"t"}, Bucket: "b", Width: tb.offsetWidth})
		}
		add("time_bucket "+tb.name, comps...)
	}
	add("time_bucket with no field", ComponentSpec{Type: "time_bucket", Of: []string{"t"}, Unit: "hour", Format: "iso"}, ComponentSpec{Type: "time_bucket", Of: []string{"t"}, Unit: "seconds", Seconds: 5})
	return out
}

// crossSource gives the fields the cross-check's new layouts encode.
var crossSource = []ComponentSpec{
	{Type: "uint", Field: "e", Width: 1},
	{Type: "string", Field: "x", Sep: 0, HasSep: true, Escape: true},
	{Type: "int", Field: "n", Width: 8},
	{Type: "int", Field: "t", Width: 8},
}

// anyNumber draws a number of either signedness, mostly near the edges of
// the component ranges, so both writers see values that fit and values
// that do not.
func anyNumber(rng *rand.Rand) Value {
	edges := []uint64{0, 1, 9, 10, 99, 100, 999, 1000, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000,
		0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, 9_999_999_999_999, 10_000_000_000_000, 1e19 - 1, 1e19,
		math.MaxInt64, 1 << 63, math.MaxUint64}
	var u uint64
	switch rng.IntN(5) {
	case 0:
		u = rng.Uint64()
	case 1:
		u = rng.Uint64N(1 << (rng.IntN(63) + 1))
	case 2:
		u = rng.Uint64N(20)
	default:
		u = edges[rng.IntN(len(edges))] + uint64(rng.IntN(3)) - 1
		if rng.IntN(2) == 0 {
			u = -u // the negative edges, when read as signed
		}
	}
	return Value{N: u, Signed: rng.IntN(2) == 0, Set: true}
}

// anyTime draws a timestamp: mostly 1970 to 9999, sometimes past either
// end, often on or next to a bucket boundary.
func anyTime(rng *rand.Rand) Value {
	var ts int64
	switch rng.IntN(8) {
	case 0:
		ts = []int64{-1, 0, isoMax - 1, isoMax, math.MaxInt64, math.MinInt64}[rng.IntN(6)]
	case 1, 2:
		ts = rng.Int64N(isoMax/msPerDay) * msPerDay // a day boundary
		ts += []int64{-1, 0, 1}[rng.IntN(3)]
	default:
		ts = rng.Int64N(isoMax)
	}
	return Value{N: uint64(ts), Signed: true, Set: true}
}

// anyBytes draws a short byte string rich in separators and pads.
func anyBytes(rng *rand.Rand) Value {
	alphabet := []byte{0x00, 0x01, 0xFF, 0xFE, '|', '#', ' ', 'a', 'z'}
	b := make([]byte, rng.IntN(9))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return Value{Bytes: b, Set: true}
}

// showRead renders what a reader gave, for messages.
func showRead(v Value, n int, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if !v.Set {
		return fmt.Sprintf("%d bytes, nothing stored", n)
	}
	if v.Bytes != nil || v.N == 0 && !v.Signed {
		return fmt.Sprintf("%d bytes, %s (n %d, signed %v)", n, quoted(v.Bytes), v.N, v.Signed)
	}
	return fmt.Sprintf("%d bytes, n %d (0x%x), signed %v", n, v.N, v.N, v.Signed)
}

// quoted renders bytes printable, in quotes.
func quoted(b []byte) string { return `"` + printable(b) + `"` }

// sameRead reports whether two reads stored the same value.
func sameRead(a, b Value) bool {
	return a.Set == b.Set && a.N == b.N && a.Signed == b.Signed && bytes.Equal(a.Bytes, b.Bytes)
}

// storedField is the field a component's read stores, or -1.
func storedField(c *component) int {
	if c.typ == Offset {
		return c.of[0]
	}
	return c.field
}

// crossRead reads key under the forward layout fwd and the inverse's copy
// inv, component by component, and reports the first component where the
// readers disagree: one refuses and the other does not, they take
// different lengths, or they store different values. ok says both read
// the whole key.
func crossRead(fwd, inv *Layout, slots int, nfields int, key []byte) (ok bool, recF, recI *record, diff string) {
	recF = &record{vals: make([]Value, nfields+slots), arena: make([]byte, 0, len(key))}
	recI = &record{vals: make([]Value, nfields+slots)}
	k := newBackCodec()
	pos := 0
	for i := range fwd.comps {
		cf, ci := &fwd.comps[i], &inv.comps[i]
		nf, errF := cf.parse(key, pos, recF)
		ni, errI := k.get(ci, key[pos:], recI)
		var vf, vi Value
		if f := storedField(cf); f >= 0 && errF == nil {
			vf = recF.vals[f]
		}
		if f := storedField(ci); f >= 0 && errI == nil && storedField(cf) >= 0 {
			vi = recI.vals[f]
		}
		if (errF == nil) != (errI == nil) || errF == nil && (nf != ni || !sameRead(vf, vi)) {
			return false, recF, recI, fmt.Sprintf("%s at byte %d of %s: forward reads %s, inverse reads %s",
				cf.label, pos, quoted(key), showRead(vf, nf, errF), showRead(vi, ni, errI))
		}
		if errF != nil {
			return false, recF, recI, ""
		}
		pos += nf
	}
	return pos == len(key), recF, recI, ""
}

// mutations are keys near key: every prefix, one byte changed, one byte
// inserted, bytes appended.
func mutations(rng *rand.Rand, key []byte) [][]byte {
	interesting := []byte{0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF, '0', '9', '-', 'T', ':', '|', '#', ' ', 'a'}
	pick := func() byte {
		if rng.IntN(3) == 0 {
			return byte(rng.IntN(256))
		}
		return interesting[rng.IntN(len(interesting))]
	}
	var out [][]byte
	for i := 0; i < len(key); i++ {
		out = append(out, key[:i])
	}
	for n := 0; n < 12 && len(key) > 0; n++ {
		m := bytes.Clone(key)
		m[rng.IntN(len(m))] = pick()
		out = append(out, m)
		at := rng.IntN(len(key) + 1)
		out = append(out, append(append(bytes.Clone(key[:at]), pick()), key[at:]...))
	}
	return append(out, append(bytes.Clone(key), pick(), pick()))
}

// TestInverseCodecAgreesWithForward: on random values of every component
// type, the inverse writer writes the bytes the forward builder writes and
// refuses what it refuses; on those keys and keys near them, the inverse
// reader reads what the forward parser reads and refuses what it refuses.
// A difference names the component, the value or key, and both results.
func TestInverseCodecAgreesWithForward(t *testing.T) {
	for name, target := range crossTargets() {
		t.Run(name, func(t *testing.T) {
			p, err := Compile(Spec{Source: LayoutSpec{Row: crossSource}, Target: LayoutSpec{Row: target}, Entity: []string{"e"}})
			if err != nil {
				t.Fatal(err)
			}
			fwd, inv := p.dstRow, p.inv.dstRow
			rng := rand.New(rand.NewPCG(uint64(len(name)), 31))
			k := newBackCodec()
			written, read := 0, 0
			for n := 0; n < 600; n++ {
				rec := &record{vals: make([]Value, len(p.fields)+p.inv.slots)}
				rec.vals[p.index["e"]] = Value{N: rng.Uint64N(256), Set: true}
				rec.vals[p.index["x"]] = anyBytes(rng)
				rec.vals[p.index["n"]] = anyNumber(rng)
				rec.vals[p.index["t"]] = anyTime(rng)
				recF := &record{vals: rec.vals[:len(p.fields):len(p.fields)]}
				var keyF, keyI []byte
				for i := range fwd.comps {
					cf, ci := &fwd.comps[i], &inv.comps[i]
					if ci.typ == TimeBucket {
						// The inverse writes a bucket from its start:
						// the timestamp rounded down to the span.
						ts := int64(rec.vals[ci.of[0]].N)
						rec.vals[ci.field] = Value{}
						if ts >= 0 {
							rec.vals[ci.field] = Value{N: uint64(ts - ts%ci.span), Signed: true, Set: true}
						}
					}
					var errF, errI error
					lf, li := len(keyF), len(keyI)
					keyF, errF = cf.build(keyF, recF)
					keyI, errI = k.put(keyI, ci, rec)
					if (errF == nil) != (errI == nil) || errF == nil && !bytes.Equal(keyF[lf:], keyI[li:]) {
						t.Fatalf("%s of n=%d (signed %v) x=%s t=%d: forward writes %s (%v), inverse writes %s (%v)", cf.label,
							rec.vals[p.index["n"]].N, rec.vals[p.index["n"]].Signed, quoted(rec.vals[p.index["x"]].Bytes),
							int64(rec.vals[p.index["t"]].N), quoted(keyF[lf:]), errF, quoted(keyI[li:]), errI)
					}
					if errF != nil {
						keyF = nil
						break
					}
				}
				if keyF == nil {
					continue
				}
				written++
				for _, key := range append(mutations(rng, keyF), keyF) {
					ok, _, _, diff := crossRead(fwd, inv, p.inv.slots, len(p.fields), key)
					if diff != "" {
						t.Fatal(diff)
					}
					if ok {
						read++
					}
				}
			}
			t.Logf("%d keys written alike, %d keys read alike", written, read)
			if written < 50 || read < written {
				t.Fatalf("only %d of 600 random values fit and %d keys read: the check shows little", written, read)
			}
		})
	}
}

// crossOldLayouts are old-key layouts with the components only old keys
// have in that form: salts read from the key (with and without the fields
// they hash), time buckets read from the key, offsets from them.
var crossOldLayouts = map[string][]ComponentSpec{
	"sorting": sortingLayout,
	"loose":   looseLayout,
	"salt, ISO hour": {{Type: "salt", Field: "s", Buckets: 300}, {Type: "time_bucket", Field: "h", Unit: "hour", Format: "iso"},
		{Type: "string", Field: "x", Sep: 0, HasSep: true}},
	"20 digits, escaped strings": {{Type: "decimal", Field: "d", Width: 20}, {Type: "string", Field: "x", Sep: '/', HasSep: true, Escape: true},
		{Type: "string", Field: "y", Sep: '/', HasSep: true, Escape: true}},
	"seconds bucket, offset": {{Type: "time_bucket", Field: "b", Unit: "seconds", Seconds: 7}, {Type: "offset", Of: []string{"t"}, Bucket: "b"},
		{Type: "reversed_ts", Field: "r"}},
	"salted, ISO day, 8-byte offset": {{Type: "string", Field: "k", Sep: '|', HasSep: true}, {Type: "salt", Field: "s", Of: []string{"k", "n"}, Buckets: 16},
		{Type: "time_bucket", Field: "day", Unit: "day", Format: "iso"}, {Type: "offset", Of: []string{"ts"}, Bucket: "day", Width: 8},
		{Type: "decimal", Field: "n", Sep: '#', HasSep: true}, {Type: "int", Field: "i", Width: 2}, {Type: "sortable_int", Field: "j", Width: 1},
		{Type: "uint", Field: "u", Width: 4}, {Type: "fixed", Field: "f", Width: 5, Pad: 0xFF}},
	"ISO 2-day buckets": {{Type: "time_bucket", Field: "w", Unit: "seconds", Seconds: 2 * 86400, Format: "iso"},
		{Type: "offset", Of: []string{"t"}, Bucket: "w", Width: 8}, {Type: "decimal", Field: "rest"}},
}

// TestInverseCodecReadsOldKeysAsForward: old keys written by the inverse
// writer from random fields, and keys near them, read the same with both
// readers; and what the forward parser reads, the inverse writer writes
// back to the same bytes (each component its own).
func TestInverseCodecReadsOldKeysAsForward(t *testing.T) {
	for name, comps := range crossOldLayouts {
		t.Run(name, func(t *testing.T) {
			l, p := oneLayout(t, comps...)
			for i := range l.comps {
				// oneLayout skips the settling of salted fields' kinds.
				c := &l.comps[i]
				c.ofKinds = nil
				for _, f := range c.of {
					c.ofKinds = append(c.ofKinds, p.fields[f].kind)
				}
			}
			inv := &Layout{comps: append([]component(nil), l.comps...)}
			rng := rand.New(rand.NewPCG(uint64(len(name)), 37))
			k := newBackCodec()
			written, read := 0, 0
			for n := 0; n < 500; n++ {
				rec := newRecord(p)
				for i := range l.comps {
					c := &l.comps[i]
					switch {
					case c.typ == Salt && len(c.of) == 0:
						rec.vals[c.field] = Value{N: rng.Uint64N(uint64(c.buckets)), Set: true}
					case c.typ == TimeBucket:
						rec.vals[c.field] = Value{N: uint64(rng.Int64N(isoMax) / c.span * c.span), Signed: true, Set: true}
					case c.typ == Offset:
						start := int64(rec.vals[c.bucket].N)
						rec.vals[c.of[0]] = Value{N: uint64(start + rng.Int64N(min(c.span, isoMax-start))), Signed: true, Set: true}
					case c.field >= 0 && c.typ != Salt:
						rec.vals[c.field] = randomValue(rng, c)
						rec.vals[c.field].Set = true
					}
				}
				key, err := buildSource(inv, rec)
				if err != nil {
					continue
				}
				written++
				for _, m := range append(mutations(rng, key), key) {
					ok, recF, _, diff := crossRead(l, inv, 0, len(p.fields), m)
					if diff != "" {
						t.Fatal(diff)
					}
					if !ok {
						continue
					}
					read++
					checkWritesBack(t, k, l, recF, m)
				}
			}
			t.Logf("%d keys written, %d keys read alike and written back", written, read)
			if written < 250 || read < written {
				t.Fatalf("only %d keys written and %d read: the check shows little", written, read)
			}
		})
	}
}

// checkWritesBack writes each component of key, from the fields the
// forward parser read, with the inverse writer, and compares with the
// bytes the component takes in key. A salt of fields is skipped: a key
// near a good one may hold another salt than its fields hash to.
func checkWritesBack(t *testing.T, k *backCodec, l *Layout, rec *record, key []byte) {
	t.Helper()
	var out []byte
	pos := 0
	scratch := &record{vals: make([]Value, len(rec.vals))}
	for i := range l.comps {
		c := &l.comps[i]
		n, err := c.parse(key, pos, scratch)
		if err != nil {
			t.Fatalf("%s: forward reads %s, then refuses it: %v", c.label, quoted(key), err)
		}
		start := len(out)
		out, err = k.put(out, c, rec)
		switch {
		case c.typ == Salt && len(c.of) > 0:
		case err != nil:
			t.Fatalf("%s: forward reads %s, the inverse cannot write its fields back: %v", c.label, quoted(key), err)
		case !bytes.Equal(out[start:], key[pos:pos+n]):
			t.Fatalf("%s: forward reads %s from %s, the inverse writes it %s", c.label, quoted(key[pos:pos+n]), quoted(key), quoted(out[start:]))
		}
		out = append(out[:start], key[pos:pos+n]...)
		pos += n
	}
}
