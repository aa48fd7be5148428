package transform

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrBadKey marks a key that does not parse under its layout, or fields that
// cannot be encoded by one. The pipeline rejects the cell or fails, as the
// job says.
var ErrBadKey = errors.New("transform: key does not fit the layout")

// Type is a component type of the layout language.
type Type uint8

// Component types; see the package documentation for their byte forms.
const (
	Uint Type = iota + 1
	Int
	SortableInt
	ReversedTS
	Fixed
	String
	Decimal
	Literal
	Salt
	TimeBucket
	Offset
)

var typeNames = [...]string{
	Uint: "uint", Int: "int", SortableInt: "sortable_int", ReversedTS: "reversed_ts",
	Fixed: "fixed", String: "string", Decimal: "decimal", Literal: "literal",
	Salt: "salt", TimeBucket: "time_bucket", Offset: "offset",
}

// String returns the name used in job files.
func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// ParseType maps a job-file type name to its Type.
func ParseType(s string) (Type, bool) {
	for i, n := range typeNames {
		if n != "" && n == s {
			return Type(i), true
		}
	}
	return 0, false
}

// Kind is what a field holds.
type Kind uint8

// Field kinds.
const (
	KindNone   Kind = iota
	KindBytes       // a byte string
	KindNumber      // a 64-bit integer
)

// String names the kind for messages.
func (k Kind) String() string {
	switch k {
	case KindBytes:
		return "bytes"
	case KindNumber:
		return "number"
	}
	return "none"
}

// Value is the content of one field while a cell is mapped. Bytes may point
// into the source cell or the Rekey's scratch buffer: valid until the next
// Map.
type Value struct {
	Bytes []byte
	// N holds a number; Signed says it is an int64 (else a uint64), which
	// matters for range checks when it is encoded.
	N      uint64
	Signed bool
	Set    bool
}

// Int returns the number as an int64 and whether it fits.
func (v Value) Int() (int64, bool) { return v.int() }

// Uint returns the number as a uint64 and whether it fits (is not negative).
func (v Value) Uint() (uint64, bool) { return v.uint() }

// int and uint are Int and Uint for the hot path. Through a pointer they
// read only N and Signed: a copy of the whole Value (what a value receiver
// costs) loads the flags together with N in one wide load, which stalls on
// store forwarding right after the narrower stores that set them.
func (v *Value) int() (int64, bool) {
	if !v.Signed && v.N > math.MaxInt64 {
		return 0, false
	}
	return int64(v.N), true
}

func (v *Value) uint() (uint64, bool) {
	if v.Signed && int64(v.N) < 0 {
		return 0, false
	}
	return v.N, true
}

// record holds the fields of one cell, indexed by the Program's field table.
type record struct {
	vals []Value
	// arena holds unescaped strings; it is sized before parsing so that
	// appends never move it (which would invalidate earlier Values).
	arena []byte
	// The last ISO bucket text built, per worker (see component.build).
	isoStart int64
	isoLen   int
	isoText  [19]byte
	// The last time bucket floored, per worker: neighbouring cells mostly
	// share a bucket (and a bucket and its offset floor the same timestamp),
	// so most cells skip the 64-bit division. span 0 means empty.
	floorSpan, floorStart int64
}

// floor returns the start of the span-long bucket that holds ts (ts >= 0).
func (r *record) floor(ts, span int64) int64 {
	// ts-start < span, not ts < start+span, which could overflow.
	if span == r.floorSpan && ts >= r.floorStart && ts-r.floorStart < span {
		return r.floorStart
	}
	start := ts - ts%span
	r.floorSpan, r.floorStart = span, start
	return start
}

func (r *record) reset() {
	for i := range r.vals {
		r.vals[i] = Value{}
	}
	r.arena = r.arena[:0]
}

// component is one compiled layout component.
type component struct {
	typ    Type
	field  int // index in the field table, -1 when none
	width  int
	pad    byte
	sep    byte
	hasSep bool
	escape bool
	lit    []byte
	of     []int // salt inputs; time_bucket/offset: of[0]
	// ofKinds are the kinds of the of fields (the salt hashes each by kind).
	ofKinds []Kind
	// buckets is the salt bucket count.
	buckets uint32
	// span is the time_bucket (or, for an offset, its bucket's) length in ms.
	span int64
	iso  bool
	unit string
	// isoW is the width of the ISO text, isoWidth(unit), and isoLayout
	// its form in package time's terms (isoLayouts), kept here so a cell
	// neither compares unit names nor looks them up.
	isoW      int
	isoLayout string
	// bucket is the field of the time_bucket an offset is measured from.
	bucket int
	label  string // "row[2] string user", for messages
}

// Layout is a compiled list of components for a row key or a qualifier.
type Layout struct {
	comps []component
	// fixedLen is the encoded length when every component has a fixed
	// width, else -1.
	fixedLen int
	// minLen is the sum of the fixed-width components' lengths: the least
	// any key of the layout takes.
	minLen int
}

// MaxRowKeyLength is HBase's limit on a row key (Short.MAX_VALUE bytes):
// a Put with a longer row fails, and a job refuses or rejects such rows
// under its bad_keys policy.
const MaxRowKeyLength = 32767

// Len returns the number of components.
func (l *Layout) Len() int { return len(l.comps) }

// powers of ten for decimal widths up to 20 digits (uint64 max has 20).
var pow10 = func() [21]uint64 {
	var p [21]uint64
	p[0] = 1
	for i := 1; i < 20; i++ {
		p[i] = p[i-1] * 10
	}
	p[20] = math.MaxUint64 // sentinel: any uint64 fits in 20 digits
	return p
}()

// parse reads key into rec. It returns the first problem, wrapped in
// ErrBadKey, naming the component and byte offset.
func (l *Layout) parse(key []byte, rec *record) error {
	pos := 0
	for i := range l.comps {
		c := &l.comps[i]
		n, err := c.parse(key, pos, rec)
		if err != nil {
			return fmt.Errorf("%w: %s at byte %d of %s: %s", ErrBadKey, c.label, pos, printable(key), err)
		}
		pos += n
	}
	if pos != len(key) {
		return fmt.Errorf("%w: %d unexpected bytes after the last component at byte %d of %s", ErrBadKey, len(key)-pos, pos, printable(key))
	}
	return nil
}

var (
	errShort     = errors.New("key too short")
	errNoSep     = errors.New("separator not found")
	errBadEscape = errors.New("bad escape after separator")
)

func (c *component) set(rec *record, v Value) {
	if c.field >= 0 {
		v.Set = true
		rec.vals[c.field] = v
	}
}

// parse reads one component at key[pos:] and returns how many bytes it used.
func (c *component) parse(key []byte, pos int, rec *record) (int, error) {
	rest := key[pos:]
	switch c.typ {
	case Uint, Int, SortableInt, ReversedTS, Salt, Offset:
		if len(rest) < c.width {
			return 0, fmt.Errorf("%w: need %d bytes, have %d", errShort, c.width, len(rest))
		}
		u := readUint(rest[:c.width])
		switch c.typ {
		case Uint:
			c.set(rec, Value{N: u})
		case Int:
			shift := 64 - 8*uint(c.width)
			c.set(rec, Value{N: uint64(int64(u<<shift) >> shift), Signed: true})
		case SortableInt:
			bits := 8 * uint(c.width)
			v := int64(u) - int64(1)<<(bits-1)
			if bits == 64 {
				v = int64(u ^ 1<<63)
			}
			c.set(rec, Value{N: uint64(v), Signed: true})
		case ReversedTS:
			if int64(u) < 0 {
				return 0, fmt.Errorf("reversed timestamp 0x%016x is negative", u)
			}
			c.set(rec, Value{N: uint64(math.MaxInt64 - int64(u)), Signed: true})
		case Salt:
			if u >= uint64(c.buckets) {
				return 0, fmt.Errorf("salt %d is not below the bucket count %d", u, c.buckets)
			}
			c.set(rec, Value{N: u})
		case Offset:
			if u >= uint64(c.span) {
				return 0, fmt.Errorf("offset %d is not below the bucket length %d ms", u, c.span)
			}
			b := &rec.vals[c.bucket]
			if !b.Set {
				return 0, errors.New("its time bucket was not read first")
			}
			start, _ := b.int()
			if start > math.MaxInt64-int64(u) {
				return 0, fmt.Errorf("bucket start %d plus offset %d overflows a timestamp", start, u)
			}
			rec.vals[c.of[0]] = Value{N: uint64(start + int64(u)), Signed: true, Set: true}
		}
		return c.width, nil
	case Fixed:
		if len(rest) < c.width {
			return 0, fmt.Errorf("%w: need %d bytes, have %d", errShort, c.width, len(rest))
		}
		v := rest[:c.width]
		for len(v) > 0 && v[len(v)-1] == c.pad {
			v = v[:len(v)-1]
		}
		c.set(rec, Value{Bytes: v})
		return c.width, nil
	case String:
		v, n, err := c.parseString(rest, rec)
		if err != nil {
			return 0, err
		}
		c.set(rec, Value{Bytes: v})
		return n, nil
	case Decimal:
		var digits []byte
		n := 0
		if c.width > 0 {
			if len(rest) < c.width {
				return 0, fmt.Errorf("%w: need %d digits, have %d bytes", errShort, c.width, len(rest))
			}
			digits, n = rest[:c.width], c.width
		} else {
			end := len(rest)
			if c.hasSep {
				end = indexByte(rest, c.sep)
				if end < 0 {
					return 0, errNoSep
				}
				n = end + 1
			} else {
				n = end
			}
			digits = rest[:end]
			if len(digits) == 0 {
				return 0, errors.New("no digits")
			}
			if len(digits) > 1 && digits[0] == '0' {
				// Two keys ("7", "007") must not read as one id.
				return 0, fmt.Errorf("decimal %q has a leading zero", digits)
			}
		}
		u, ok := parseDigits(digits)
		if !ok {
			return 0, fmt.Errorf("%q is not a decimal number below 2^64", digits)
		}
		c.set(rec, Value{N: u})
		return n, nil
	case Literal:
		if len(rest) < len(c.lit) || string(rest[:len(c.lit)]) != string(c.lit) {
			return 0, fmt.Errorf("expected literal %s", printable(c.lit))
		}
		return len(c.lit), nil
	case TimeBucket:
		if !c.iso {
			if len(rest) < 8 {
				return 0, fmt.Errorf("%w: need 8 bytes, have %d", errShort, len(rest))
			}
			start := int64(readUint(rest[:8]))
			if start < 0 || start%c.span != 0 {
				return 0, fmt.Errorf("bucket start %d is not a multiple of %d ms", start, c.span)
			}
			c.set(rec, Value{N: uint64(start), Signed: true})
			return 8, nil
		}
		w := c.isoW
		if len(rest) < w {
			return 0, fmt.Errorf("%w: need %d bytes of date text, have %d", errShort, w, len(rest))
		}
		start, ok := parseISO(rest[:w])
		if !ok {
			return 0, fmt.Errorf("%q is not a date in the form %s", rest[:w], isoForm(c.unit))
		}
		if start%c.span != 0 {
			return 0, fmt.Errorf("bucket start %q is not a multiple of %d ms", rest[:w], c.span)
		}
		c.set(rec, Value{N: uint64(start), Signed: true})
		return w, nil
	}
	return 0, fmt.Errorf("unknown component type %d", c.typ)
}

func (c *component) parseString(rest []byte, rec *record) ([]byte, int, error) {
	if !c.hasSep {
		return rest, len(rest), nil
	}
	if !c.escape {
		i := indexByte(rest, c.sep)
		if i < 0 {
			return nil, 0, errNoSep
		}
		return rest[:i], i + 1, nil
	}
	// Escaped: sep,0xFF is a literal sep; sep,0x00 ends the string. Copy into
	// the arena only when an escape occurs.
	i := indexByte(rest, c.sep)
	if i < 0 || i+1 >= len(rest) {
		return nil, 0, errNoSep
	}
	if rest[i+1] == 0x00 {
		return rest[:i], i + 2, nil
	}
	start := len(rec.arena)
	p := 0
	for {
		i := indexByte(rest[p:], c.sep)
		if i < 0 || p+i+1 >= len(rest) {
			return nil, 0, errNoSep
		}
		rec.arena = append(rec.arena, rest[p:p+i]...)
		switch rest[p+i+1] {
		case 0x00:
			return rec.arena[start:len(rec.arena):len(rec.arena)], p + i + 2, nil
		case 0xFF:
			rec.arena = append(rec.arena, c.sep)
			p += i + 2
		default:
			return nil, 0, fmt.Errorf("%w at byte %d: 0x%02x", errBadEscape, p+i+1, rest[p+i+1])
		}
	}
}

// build appends the encoded key to dst.
func (l *Layout) build(dst []byte, rec *record) ([]byte, error) {
	for i := range l.comps {
		c := &l.comps[i]
		var err error
		dst, err = c.build(dst, rec)
		if err != nil {
			return dst, fmt.Errorf("%w: %s: %s", ErrBadKey, c.label, err)
		}
	}
	return dst, nil
}

// buildComps appends components from to to-1 of the key to dst.
func (l *Layout) buildComps(dst []byte, rec *record, from, to int) ([]byte, error) {
	for i := from; i < to; i++ {
		c := &l.comps[i]
		var err error
		dst, err = c.build(dst, rec)
		if err != nil {
			return dst, fmt.Errorf("%w: %s: %s", ErrBadKey, c.label, err)
		}
	}
	return dst, nil
}

// errNoValue is returned when a field the new key needs was not read from
// the old one (compile checks make this a bug, not a user error).
var errNoValue = errors.New("field has no value for this cell")

func (c *component) build(dst []byte, rec *record) ([]byte, error) {
	switch c.typ {
	case Literal:
		return append(dst, c.lit...), nil
	case Salt:
		h := c.saltHash(rec)
		return appendUint(dst, uint64(h%c.buckets), c.width), nil
	case TimeBucket, Offset:
		v := &rec.vals[c.of[0]]
		if !v.Set {
			return dst, errors.New("its timestamp field has no value for this cell")
		}
		ts, ok := v.int()
		if !ok || ts < 0 {
			return dst, fmt.Errorf("timestamp %d is out of range (0 to 2^63-1 ms)", v.N)
		}
		start := rec.floor(ts, c.span)
		if c.typ == Offset {
			return appendUint(dst, uint64(ts-start), c.width), nil
		}
		if !c.iso {
			return appendUint(dst, uint64(start), 8), nil
		}
		if start >= isoMax {
			return dst, fmt.Errorf("timestamp %d is after year 9999", ts)
		}
		// Neighbouring cells mostly share a bucket: reuse the last text.
		w := c.isoW
		if rec.isoLen != w || rec.isoStart != start {
			rec.isoLen, rec.isoStart = w, start
			appendISO(rec.isoText[:0], start, w)
		}
		return append(dst, rec.isoText[:w]...), nil
	}
	if c.field < 0 || !rec.vals[c.field].Set {
		return dst, errNoValue
	}
	v := &rec.vals[c.field]
	switch c.typ {
	case Uint:
		u, ok := v.uint()
		if !ok {
			return dst, fmt.Errorf("negative value %d", int64(v.N))
		}
		if c.width < 8 && u >= 1<<(8*uint(c.width)) {
			return dst, fmt.Errorf("value %d does not fit in %d bytes", u, c.width)
		}
		return appendUint(dst, u, c.width), nil
	case Int, SortableInt:
		s, ok := v.int()
		if !ok {
			return dst, fmt.Errorf("value %d does not fit in a signed 64-bit integer", v.N)
		}
		bits := 8 * uint(c.width)
		if bits < 64 && (s < -(int64(1)<<(bits-1)) || s >= int64(1)<<(bits-1)) {
			return dst, fmt.Errorf("value %d does not fit in %d signed bytes", s, c.width)
		}
		u := uint64(s)
		if c.typ == SortableInt {
			u ^= 1 << (bits - 1)
		}
		return appendUint(dst, u, c.width), nil
	case ReversedTS:
		s, ok := v.int()
		if !ok || s < 0 {
			return dst, fmt.Errorf("timestamp %d is out of range (0 to 2^63-1)", v.N)
		}
		return appendUint(dst, uint64(math.MaxInt64-s), 8), nil
	case Decimal:
		u, ok := v.uint()
		if !ok {
			return dst, fmt.Errorf("negative value %d", int64(v.N))
		}
		if c.width > 0 {
			if c.width < 20 && u >= pow10[c.width] {
				return dst, fmt.Errorf("value %d has more than %d digits", u, c.width)
			}
			return appendDigits(dst, u, c.width), nil
		}
		dst = appendDigits(dst, u, 0)
		if c.hasSep {
			dst = append(dst, c.sep)
		}
		return dst, nil
	case Fixed:
		b := v.Bytes
		if len(b) > c.width {
			return dst, fmt.Errorf("value %s is longer than %d bytes", printable(b), c.width)
		}
		if len(b) > 0 && b[len(b)-1] == c.pad {
			return dst, fmt.Errorf("value %s ends with the pad byte 0x%02x", printable(b), c.pad)
		}
		dst = append(dst, b...)
		for i := len(b); i < c.width; i++ {
			dst = append(dst, c.pad)
		}
		return dst, nil
	case String:
		b := v.Bytes
		if !c.hasSep {
			return append(dst, b...), nil
		}
		if !c.escape {
			if i := indexByte(b, c.sep); i >= 0 {
				return dst, fmt.Errorf("value %s contains the separator 0x%02x at byte %d", printable(b), c.sep, i)
			}
			dst = append(dst, b...)
			return append(dst, c.sep), nil
		}
		for {
			i := indexByte(b, c.sep)
			if i < 0 {
				break
			}
			dst = append(dst, b[:i]...)
			dst = append(dst, c.sep, 0xFF)
			b = b[i+1:]
		}
		dst = append(dst, b...)
		return append(dst, c.sep, 0x00), nil
	}
	return dst, fmt.Errorf("unknown component type %d", c.typ)
}

// saltHash is FNV-1a 32 over the salted fields: bytes as they are, numbers
// as 8 big-endian bytes, 0x00 between fields. Documented in doc.go; never
// change it.
func (c *component) saltHash(rec *record) uint32 {
	const (
		offset32 = 2166136261
		prime32  = 16777619
	)
	h := uint32(offset32)
	for i, f := range c.of {
		if i > 0 {
			h ^= 0
			h *= prime32
		}
		v := &rec.vals[f]
		if c.ofKinds[i] == KindBytes {
			for _, b := range v.Bytes {
				h ^= uint32(b)
				h *= prime32
			}
			continue
		}
		for s := 56; s >= 0; s -= 8 {
			h ^= uint32(byte(v.N >> uint(s)))
			h *= prime32
		}
	}
	return h
}

func readUint(b []byte) uint64 {
	if len(b) == 8 {
		return binary.BigEndian.Uint64(b)
	}
	var u uint64
	for _, x := range b {
		u = u<<8 | uint64(x)
	}
	return u
}

func appendUint(dst []byte, u uint64, width int) []byte {
	if width == 8 {
		return binary.BigEndian.AppendUint64(dst, u)
	}
	for s := 8 * (width - 1); s >= 0; s -= 8 {
		dst = append(dst, byte(u>>uint(s)))
	}
	return dst
}

func appendDigits(dst []byte, u uint64, width int) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	for n := len(tmp) - i; n < width; n++ {
		dst = append(dst, '0')
	}
	return append(dst, tmp[i:]...)
}

// parseDigits reads unsigned decimal digits. Up to 19 digits cannot
// overflow a uint64, so those skip the per-digit overflow check and go eight
// digits at a time; only a 20-digit number takes the checked loop. Digit
// parsing was the largest single cost of the decimal presets.
func parseDigits(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	if len(b) > 19 {
		return parseDigitsChecked(b)
	}
	var u uint64
	for len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		if !eightDigits(v) {
			return 0, false
		}
		u = u*100_000_000 + digits8(v)
		b = b[8:]
	}
	for _, x := range b {
		d := x - '0'
		if d > 9 {
			return 0, false
		}
		u = u*10 + uint64(d)
	}
	return u, true
}

// eightDigits reports whether all eight bytes of v are ASCII digits: each
// high nibble is 3, and adding 6 to a byte does not carry out of its low
// nibble (so the low nibble is at most 9). No byte can carry into the next.
func eightDigits(v uint64) bool {
	const hi, three, six = 0xF0F0F0F0F0F0F0F0, 0x3030303030303030, 0x0606060606060606
	return v&hi == three && (v+six)&hi == three
}

// digits8 is the value of eight ASCII digits loaded little-endian (first
// digit in the low byte), combining pairs, then quads, then the halves with
// one multiply each (Lemire's parse_eight_digits_unrolled).
func digits8(v uint64) uint64 {
	v &= 0x0F0F0F0F0F0F0F0F
	v = (v * (1 + 10<<8)) >> 8
	v = ((v & 0x00FF00FF00FF00FF) * (1 + 100<<16)) >> 16
	return ((v & 0x0000FFFF0000FFFF) * (1 + 10000<<32)) >> 32
}

// parseDigitsChecked is parseDigits for numbers long enough to overflow.
func parseDigitsChecked(b []byte) (uint64, bool) {
	var u uint64
	for _, x := range b {
		if x < '0' || x > '9' {
			return 0, false
		}
		d := uint64(x - '0')
		if u > (math.MaxUint64-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	return u, true
}

// indexByte is bytes.IndexByte with short slices scanned inline: key fields
// are mostly a few bytes, where the call into the vector code costs more
// than the scan.
func indexByte(b []byte, c byte) int {
	if len(b) <= 16 {
		for i, x := range b {
			if x == c {
				return i
			}
		}
		return -1
	}
	return bytes.IndexByte(b, c)
}
