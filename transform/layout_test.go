package transform

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// oneLayout compiles comps as an old-key row layout, the way a job's source
// layout is compiled, and returns it with a record sized for its fields.
func oneLayout(t testing.TB, comps ...ComponentSpec) (*Layout, *Program) {
	t.Helper()
	p := &Program{index: map[string]int{}}
	cc := &compiler{p: p}
	for _, b := range []string{FieldRow, FieldFamily, FieldQualifier, FieldTS} {
		p.index[b] = len(p.fields)
		p.fields = append(p.fields, fieldInfo{name: b, source: true})
	}
	l := cc.layout("row", comps, true)
	if len(cc.errs) > 0 {
		t.Fatalf("compile: %v", cc.errs)
	}
	p.srcRow = l
	return l, p
}

func newRecord(p *Program) *record { return &record{vals: make([]Value, len(p.fields))} }

// setField stores v in the named field of rec.
func setField(t testing.TB, p *Program, rec *record, name string, v Value) {
	t.Helper()
	idx, ok := p.index[name]
	if !ok {
		t.Fatalf("no field %q", name)
	}
	v.Set = true
	rec.vals[idx] = v
}

func num(n int64) Value   { return Value{N: uint64(n), Signed: true} }
func unum(n uint64) Value { return Value{N: n} }
func str(s string) Value  { return Value{Bytes: []byte(s)} }

func TestComponentEncodings(t *testing.T) {
	tests := []struct {
		name string
		comp ComponentSpec
		val  Value
		want []byte // nil: build must fail
		back Value  // the value parse gives back, when it differs from val
	}{
		{"uint1 zero", ComponentSpec{Type: "uint", Field: "f", Width: 1}, unum(0), []byte{0}, Value{}},
		{"uint1 max", ComponentSpec{Type: "uint", Field: "f", Width: 1}, unum(255), []byte{0xff}, Value{}},
		{"uint1 overflow", ComponentSpec{Type: "uint", Field: "f", Width: 1}, unum(256), nil, Value{}},
		{"uint2", ComponentSpec{Type: "uint", Field: "f", Width: 2}, unum(0x1234), []byte{0x12, 0x34}, Value{}},
		{"uint4 max", ComponentSpec{Type: "uint", Field: "f", Width: 4}, unum(math.MaxUint32), []byte{0xff, 0xff, 0xff, 0xff}, Value{}},
		{"uint8 max", ComponentSpec{Type: "uint", Field: "f", Width: 8}, unum(math.MaxUint64), bytes.Repeat([]byte{0xff}, 8), Value{}},
		{"uint negative", ComponentSpec{Type: "uint", Field: "f", Width: 8}, num(-1), nil, Value{}},
		{"int1 -1", ComponentSpec{Type: "int", Field: "f", Width: 1}, num(-1), []byte{0xff}, Value{}},
		{"int2 min", ComponentSpec{Type: "int", Field: "f", Width: 2}, num(math.MinInt16), []byte{0x80, 0}, Value{}},
		{"int2 overflow", ComponentSpec{Type: "int", Field: "f", Width: 2}, num(math.MaxInt16 + 1), nil, Value{}},
		{"int8 java long", ComponentSpec{Type: "int", Field: "f", Width: 8}, num(1), []byte{0, 0, 0, 0, 0, 0, 0, 1}, Value{}},
		{"int8 min", ComponentSpec{Type: "int", Field: "f", Width: 8}, num(math.MinInt64), []byte{0x80, 0, 0, 0, 0, 0, 0, 0}, Value{}},
		{"int8 unsigned too big", ComponentSpec{Type: "int", Field: "f", Width: 8}, unum(math.MaxUint64), nil, Value{}},
		{"sortable1 zero", ComponentSpec{Type: "sortable_int", Field: "f", Width: 1}, num(0), []byte{0x80}, Value{}},
		{"sortable1 min", ComponentSpec{Type: "sortable_int", Field: "f", Width: 1}, num(-128), []byte{0x00}, Value{}},
		{"sortable4 -1", ComponentSpec{Type: "sortable_int", Field: "f", Width: 4}, num(-1), []byte{0x7f, 0xff, 0xff, 0xff}, Value{}},
		{"sortable8 max", ComponentSpec{Type: "sortable_int", Field: "f", Width: 8}, num(math.MaxInt64), bytes.Repeat([]byte{0xff}, 8), Value{}},
		{"sortable8 min", ComponentSpec{Type: "sortable_int", Field: "f", Width: 8}, num(math.MinInt64), make([]byte, 8), Value{}},
		{"reversed ts zero", ComponentSpec{Type: "reversed_ts", Field: "f"}, num(0), []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Value{}},
		{"reversed ts max", ComponentSpec{Type: "reversed_ts", Field: "f"}, num(math.MaxInt64), make([]byte, 8), Value{}},
		{"reversed ts negative", ComponentSpec{Type: "reversed_ts", Field: "f"}, num(-5), nil, Value{}},
		{"fixed padded", ComponentSpec{Type: "fixed", Field: "f", Width: 4}, str("ab"), []byte("ab\x00\x00"), Value{}},
		{"fixed full", ComponentSpec{Type: "fixed", Field: "f", Width: 2}, str("ab"), []byte("ab"), Value{}},
		{"fixed empty", ComponentSpec{Type: "fixed", Field: "f", Width: 2, Pad: ' '}, str(""), []byte("  "), Value{}},
		{"fixed too long", ComponentSpec{Type: "fixed", Field: "f", Width: 2}, str("abc"), nil, Value{}},
		{"fixed ends with pad", ComponentSpec{Type: "fixed", Field: "f", Width: 4, Pad: ' '}, str("ab "), nil, Value{}},
		{"fixed pad inside", ComponentSpec{Type: "fixed", Field: "f", Width: 4, Pad: ' '}, str("a b"), []byte("a b "), Value{}},
		{"string rest", ComponentSpec{Type: "string", Field: "f"}, str("a|b"), []byte("a|b"), Value{}},
		{"string rest empty", ComponentSpec{Type: "string", Field: "f"}, str(""), []byte{}, Value{}},
		{"string sep", ComponentSpec{Type: "string", Field: "f", Sep: '|', HasSep: true}, str("ab"), []byte("ab|"), Value{}},
		{"string sep inside refused", ComponentSpec{Type: "string", Field: "f", Sep: '|', HasSep: true}, str("a|b"), nil, Value{}},
		{"string empty with sep", ComponentSpec{Type: "string", Field: "f", Sep: 0, HasSep: true}, str(""), []byte{0}, Value{}},
		{"string escaped sep inside", ComponentSpec{Type: "string", Field: "f", Sep: '|', HasSep: true, Escape: true}, str("a|b||"), []byte("a|\xffb|\xff|\xff|\x00"), Value{}},
		{"string escaped plain", ComponentSpec{Type: "string", Field: "f", Sep: 0, HasSep: true, Escape: true}, str("ab"), []byte("ab\x00\x00"), Value{}},
		{"decimal padded", ComponentSpec{Type: "decimal", Field: "f", Width: 5}, unum(42), []byte("00042"), Value{}},
		{"decimal zero", ComponentSpec{Type: "decimal", Field: "f", Width: 1}, unum(0), []byte("0"), Value{}},
		{"decimal too many digits", ComponentSpec{Type: "decimal", Field: "f", Width: 2}, unum(100), nil, Value{}},
		{"decimal 20 digits max", ComponentSpec{Type: "decimal", Field: "f", Width: 20}, unum(math.MaxUint64), []byte("18446744073709551615"), Value{}},
		{"decimal variable", ComponentSpec{Type: "decimal", Field: "f"}, unum(4711), []byte("4711"), Value{}},
		{"decimal variable sep", ComponentSpec{Type: "decimal", Field: "f", Sep: '#', HasSep: true}, unum(0), []byte("0#"), Value{}},
		{"decimal negative", ComponentSpec{Type: "decimal", Field: "f", Width: 3}, num(-1), nil, Value{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, p := oneLayout(t, tc.comp)
			rec := newRecord(p)
			setField(t, p, rec, "f", tc.val)
			got, err := l.build(nil, rec)
			if tc.want == nil {
				if err == nil || !errors.Is(err, ErrBadKey) {
					t.Fatalf("build = %x, %v; want an ErrBadKey", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("build = %q, want %q", got, tc.want)
			}
			back := newRecord(p)
			back.arena = make([]byte, 0, len(got))
			if err := l.parse(got, back); err != nil {
				t.Fatalf("parse(%q): %v", got, err)
			}
			v := back.vals[p.index["f"]]
			want := tc.val
			if tc.back.Set {
				want = tc.back
			}
			if !bytes.Equal(v.Bytes, want.Bytes) || v.N != want.N {
				t.Fatalf("parse gave %+v, want %+v", v, want)
			}
		})
	}
}

func TestTimeBuckets(t *testing.T) {
	ts := int64(1767268800123) // 2026-01-01T12:00:00.123Z
	tests := []struct {
		name string
		comp ComponentSpec
		want string
	}{
		{"day iso", ComponentSpec{Type: "time_bucket", Field: "b", Of: []string{"$ts"}, Unit: "day", Format: "iso"}, "2026-01-01"},
		{"hour iso", ComponentSpec{Type: "time_bucket", Field: "b", Of: []string{"$ts"}, Unit: "hour", Format: "iso"}, "2026-01-01T12"},
		{"15 min iso", ComponentSpec{Type: "time_bucket", Field: "b", Of: []string{"$ts"}, Unit: "seconds", Seconds: 900, Format: "iso"}, "2026-01-01T12:00:00"},
		{"hour binary", ComponentSpec{Type: "time_bucket", Field: "b", Of: []string{"$ts"}, Unit: "hour"}, "\x00\x00\x01\x9b\x79\x6d\xd6\x00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(Spec{
				Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "k"}}},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "fixed", Field: "k", Width: 1}, tc.comp},
					Qualifier: []ComponentSpec{{Type: "offset", Of: []string{"$ts"}, Bucket: "b"}}},
				Entity: []string{"k"},
			})
			if err != nil {
				t.Fatal(err)
			}
			r := p.New()
			src := testCell("k", "", ts)
			out, err := r.Apply(&src)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(out.Row[1:]); got != tc.want {
				t.Fatalf("bucket = %q, want %q", got, tc.want)
			}
			// The offset and the bucket give the timestamp back.
			if _, err := r.TargetEntity(nil, &out); err != nil {
				t.Fatal(err)
			}
			v, _, _ := r.Field(FieldTS)
			if int64(v.N) != ts {
				t.Fatalf("timestamp read back = %d, want %d", int64(v.N), ts)
			}
		})
	}
}

func TestISODates(t *testing.T) {
	// Every day boundary from 1970 to 9999 in coarse steps, plus leap days.
	for ms := int64(0); ms < isoMax; ms += 997 * msPerDay {
		text := appendISO(nil, ms, 19)
		back, ok := parseISO(text)
		if !ok || back != ms-ms%1000 {
			t.Fatalf("ISO %s for %d read back as %d, %v", text, ms, back, ok)
		}
	}
	for _, s := range []string{"2024-02-29", "2000-02-29", "9999-12-31T23:59:59"} {
		if _, ok := parseISO([]byte(s)); !ok {
			t.Errorf("%s did not parse", s)
		}
	}
	for _, s := range []string{"2023-02-29", "1900-02-29", "2026-13-01", "2026-00-10", "2026-01-32", "2026-01-01T24", "2026-01-01T10:60:00", "2026/01/01", "20a6-01-01", "1969-12-31"} {
		if _, ok := parseISO([]byte(s)); ok {
			t.Errorf("%s parsed, want refused", s)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name  string
		comps []ComponentSpec
		key   string
		msg   string
	}{
		{"short uint", []ComponentSpec{{Type: "uint", Field: "f", Width: 4}}, "abc", "key too short"},
		{"trailing bytes", []ComponentSpec{{Type: "uint", Field: "f", Width: 1}}, "ab", "unexpected bytes"},
		{"missing sep", []ComponentSpec{{Type: "string", Field: "f", Sep: '|', HasSep: true}}, "abc", "separator not found"},
		{"bad escape", []ComponentSpec{{Type: "string", Field: "f", Sep: '|', HasSep: true, Escape: true}, {Type: "string", Field: "g"}}, "a|xb", "bad escape"},
		{"escape at end", []ComponentSpec{{Type: "string", Field: "f", Sep: '|', HasSep: true, Escape: true}}, "a|", "separator not found"},
		{"literal", []ComponentSpec{{Type: "literal", Bytes: []byte("#")}, {Type: "string", Field: "f"}}, "x1", "expected literal #"},
		{"decimal letters", []ComponentSpec{{Type: "decimal", Field: "f", Width: 3}}, "1a3", "not a decimal"},
		{"decimal leading zero", []ComponentSpec{{Type: "decimal", Field: "f"}}, "007", "leading zero"},
		{"decimal empty", []ComponentSpec{{Type: "decimal", Field: "f", Sep: '#', HasSep: true}}, "#", "no digits"},
		{"decimal overflow", []ComponentSpec{{Type: "decimal", Field: "f"}}, "18446744073709551616", "below 2^64"},
		{"salt range", []ComponentSpec{{Type: "salt", Field: "s", Buckets: 10}, {Type: "string", Field: "f"}}, "\x0ax", "bucket count"},
		{"reversed negative", []ComponentSpec{{Type: "reversed_ts", Field: "f"}}, "\x80\x00\x00\x00\x00\x00\x00\x00", "negative"},
		{"bucket misaligned", []ComponentSpec{{Type: "time_bucket", Field: "f", Unit: "day"}}, "\x00\x00\x00\x00\x00\x00\x00\x01", "not a multiple"},
		{"iso garbage", []ComponentSpec{{Type: "time_bucket", Field: "f", Unit: "day", Format: "iso"}}, "2026-02-30", "not a date"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, p := oneLayout(t, tc.comps...)
			rec := newRecord(p)
			rec.arena = make([]byte, 0, len(tc.key))
			err := l.parse([]byte(tc.key), rec)
			if err == nil || !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("parse(%q) = %v, want ErrBadKey mentioning %q", tc.key, err, tc.msg)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	okSrc := LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}}
	okDst := LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}}
	tests := []struct {
		name string
		spec Spec
		msg  string
	}{
		{"unknown type", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "varchar", Field: "user"}}}, Target: okDst, Entity: []string{"user"}}, `unknown type "varchar"`},
		{"bad width", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "uint", Field: "user", Width: 3}}}, Target: okDst, Entity: []string{"user"}}, "expected 1, 2, 4 or 8"},
		{"string not last", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "a"}, {Type: "string", Field: "user"}}}, Target: okDst, Entity: []string{"user"}}, "must be the last component"},
		{"unknown field", Spec{Source: okSrc, Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "usr"}}}, Entity: []string{"user"}}, `field "usr" is not read from the old key`},
		{"kind mismatch", Spec{Source: okSrc, Target: LayoutSpec{Row: []ComponentSpec{{Type: "uint", Field: "user", Width: 8}}}, Entity: []string{"user"}}, "holds bytes but type uint encodes number"},
		{"entity not in target", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: '|', HasSep: true}, {Type: "string", Field: "item"}}}, Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "item"}}}, Entity: []string{"user"}}, "cannot be read back"},
		{"no entity", Spec{Source: okSrc, Target: okDst}, "no entity fields"},
		{"read twice", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "fixed", Field: "user", Width: 2}, {Type: "string", Field: "user"}}}, Target: okDst, Entity: []string{"user"}}, "read twice"},
		{"offset without bucket", Spec{Source: okSrc, Target: LayoutSpec{Row: okDst.Row, Qualifier: []ComponentSpec{{Type: "offset", Of: []string{"$ts"}, Bucket: "day"}}}, Entity: []string{"user"}}, `no time_bucket with field "day"`},
		{"salt width", Spec{Source: okSrc, Target: LayoutSpec{Row: []ComponentSpec{{Type: "salt", Of: []string{"user"}, Buckets: 300, Width: 1}, {Type: "string", Field: "user"}}}, Entity: []string{"user"}}, "do not fit in one byte"},
		{"time bucket of bytes", Spec{Source: okSrc, Target: LayoutSpec{Row: []ComponentSpec{{Type: "time_bucket", Of: []string{"user"}, Unit: "day"}}}, Entity: []string{"user"}}, "needs a number"},
		{"option of other type", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "uint", Field: "user", Width: 8, FieldPos: map[string]Pos{"sep": {Line: 3, Col: 4}}}}}, Target: okDst, Entity: []string{"user"}}, `option "sep" does not apply to type uint`},
		{"reserved name", Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "$user"}}}, Target: okDst, Entity: []string{"user"}}, "reserved"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.spec)
			var se SpecErrors
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Compile = %v, want SpecErrors mentioning %q", err, tc.msg)
			}
		})
	}
}
