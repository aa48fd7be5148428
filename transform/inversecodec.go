package transform

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// The inverse path's own reader and writer of key components. Unmap reads
// new keys and writes old keys with these functions only; they are written
// from the byte forms of configs/README.md and doc.go, not from the
// forward codec (layout.go, timefmt.go), whose functions they never call
// (TestInverseCodecIsIndependent checks it). What the two share is the
// compiled description of each component: its type, width, pad, separator,
// escape flag, literal bytes, fields, salt bucket count and bucket span. So
// a bug the forward parser and builder have in common (a key that
// round-trips, but in a byte form other than the documented one) gives new
// keys this reader reads to other fields, and Unmap to other old cells.
//
// The rules, as this code implements them:
//
//   - uint: width 1, 2, 4 or 8 bytes, the unsigned value big-endian; values
//     below 0 or from 2^(8*width) on do not fit.
//   - int: the same width, the value in two's complement (what Java's
//     Bytes.toBytes writes for a byte, short, int or long), from
//     -2^(8*width-1) to 2^(8*width-1)-1.
//   - sortable_int: the same range, stored as the unsigned value plus
//     2^(8*width-1) (offset binary; the same bytes as two's complement with
//     the top bit flipped), so byte order is numeric order.
//   - reversed_ts: 8 bytes, 2^63-1 minus the timestamp (0 to 2^63-1),
//     big-endian; a stored number with the top bit set is no timestamp.
//   - fixed: exactly width bytes, the value then the pad byte up to the
//     width. Reading drops every trailing pad byte, so a value may not end
//     with the pad byte (it would read back shorter) nor be longer than
//     the width.
//   - string: without sep, the rest of the key (it is the last component).
//     With sep and no escape: the value, then sep; the value may not hold
//     sep, and reading stops at the first sep. With escape: each sep inside
//     the value is written sep 0xFF, and the value ends with sep 0x00; any
//     other byte after a sep, or a sep at the end of the key, is damage.
//   - decimal: ASCII digits of an unsigned value below 2^64. With width,
//     exactly width digits, zero-padded on the left (value below
//     10^width). Without width, the shortest digits (no leading zero but
//     for "0", at least one digit), then sep; without sep either, the
//     digits run to the end of the key (last component).
//   - literal: the given bytes, exactly.
//   - salt: width 1 or 2 bytes, the bucket number big-endian, below the
//     bucket count. Its value is FNV-1a 32 over the salted fields (bytes as
//     they are, numbers as 8 big-endian bytes of their 64 bits, a 0x00 byte
//     between two fields) modulo the bucket count.
//   - time_bucket: the start of the bucket holding a timestamp: the
//     timestamp (millis, 0 or more) rounded down to a multiple of the
//     bucket length (an hour, a day, or N seconds, counted from
//     1970-01-01T00:00:00Z). binary: 8 bytes, the start big-endian. iso:
//     the start as UTC text, 2026-01-31 (day), 2026-01-31T13 (hour) or
//     2026-01-31T13:20:00 (seconds), four-digit years only.
//   - offset: width 4 (default) or 8 bytes, big-endian, the timestamp minus
//     the start of its time bucket (from 0 to the bucket length less one);
//     reading it gives the timestamp back as the bucket's start plus it,
//     so its bucket must be read first.
//
// Numbers read by int, sortable_int, reversed_ts, time_bucket and offset
// are signed, those read by uint, decimal and salt unsigned, as the
// forward reader marks them: the entity key a Rekey gives depends on it.

// backCodec is the inverse codec's scratch, one per Rekey.
type backCodec struct {
	// arena holds strings the reader unescaped, for one Unmap.
	arena []byte
	fnv   hash.Hash32
	num   [8]byte
	// The last ISO text read and the start it gave: neighbouring new cells
	// mostly share a bucket, and package time's parse costs allocations.
	isoText  []byte
	isoStart int64
}

// newBackCodec returns the scratch one Rekey's Unmap reuses.
func newBackCodec() *backCodec { return &backCodec{fnv: fnv.New32a()} }

// isoLayouts are the text forms of ISO buckets, in package time's
// notation, by unit.
var isoLayouts = map[string]string{"day": "2006-01-02", "hour": "2006-01-02T15", "seconds": "2006-01-02T15:04:05"}

// isoEnd is the first millisecond whose year has five digits.
var isoEnd = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// get reads component c at the start of key into rec and returns how
// many bytes it takes. A component without a field reads and checks its
// bytes and stores nothing; an offset stores the timestamp it rebuilds in
// c.of[0].
func (k *backCodec) get(c *component, key []byte, rec *record) (int, error) {
	switch c.typ {
	case Uint, Int, SortableInt, ReversedTS, Salt:
		u, err := getBE(key, c.width)
		if err != nil {
			return 0, err
		}
		v, err := numberOf(c, u)
		if err != nil {
			return 0, err
		}
		store(rec, c.field, v)
		return c.width, nil
	case Offset:
		return getOffset(c, key, rec)
	case Fixed:
		if len(key) < c.width {
			return 0, fmt.Errorf("need %d bytes, have %d", c.width, len(key))
		}
		v := key[:c.width:c.width]
		for len(v) > 0 && v[len(v)-1] == c.pad {
			v = v[:len(v)-1]
		}
		store(rec, c.field, Value{Bytes: v})
		return c.width, nil
	case String:
		v, n, err := k.getString(c, key)
		if err != nil {
			return 0, err
		}
		store(rec, c.field, Value{Bytes: v})
		return n, nil
	case Decimal:
		return getDecimal(c, key, rec)
	case Literal:
		if !bytes.HasPrefix(key, c.lit) {
			return 0, fmt.Errorf("the literal %s is not there", printable(c.lit))
		}
		return len(c.lit), nil
	case TimeBucket:
		return k.getBucket(c, key, rec)
	}
	return 0, fmt.Errorf("no reader for component type %d", c.typ)
}

// getBE reads a width-byte big-endian number.
func getBE(key []byte, width int) (uint64, error) {
	if len(key) < width {
		return 0, fmt.Errorf("need %d bytes, have %d", width, len(key))
	}
	switch width {
	case 1:
		return uint64(key[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(key)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(key)), nil
	case 8:
		return binary.BigEndian.Uint64(key), nil
	}
	return 0, fmt.Errorf("no number is %d bytes wide", width)
}

// numberOf is the value a fixed-width number component stores as u.
func numberOf(c *component, u uint64) (Value, error) {
	nbits := 8 * uint(c.width)
	switch c.typ {
	case Uint:
		return Value{N: u}, nil
	case Int:
		if nbits < 64 && u >= 1<<(nbits-1) {
			// The top bit set: the value is u - 2^bits, negative.
			return Value{N: uint64(int64(u) - int64(1)<<nbits), Signed: true}, nil
		}
		return Value{N: u, Signed: true}, nil
	case SortableInt:
		if nbits == 64 {
			return Value{N: u - 1<<63, Signed: true}, nil
		}
		return Value{N: uint64(int64(u) - int64(1)<<(nbits-1)), Signed: true}, nil
	case ReversedTS:
		if u > math.MaxInt64 {
			return Value{}, fmt.Errorf("0x%016x is no reversed timestamp (its top bit is set)", u)
		}
		return Value{N: math.MaxInt64 - u, Signed: true}, nil
	case Salt:
		if u >= uint64(c.buckets) {
			return Value{}, fmt.Errorf("salt %d is not below the bucket count %d", u, c.buckets)
		}
		return Value{N: u}, nil
	}
	return Value{}, fmt.Errorf("component type %d is no number", c.typ)
}

// store sets field f of rec, when the component has one.
func store(rec *record, f int, v Value) {
	if f >= 0 {
		v.Set = true
		rec.vals[f] = v
	}
}

// getOffset reads an offset and stores its timestamp: the start of its
// bucket, read before it, plus the offset.
func getOffset(c *component, key []byte, rec *record) (int, error) {
	u, err := getBE(key, c.width)
	if err != nil {
		return 0, err
	}
	if u >= uint64(c.span) {
		return 0, fmt.Errorf("offset %d is not below the bucket length %d ms", u, c.span)
	}
	b := rec.vals[c.bucket]
	if !b.Set {
		return 0, errors.New("its time bucket was not read before it")
	}
	start := int64(b.N)
	ts, carry := bits.Add64(uint64(start), u, 0)
	if carry != 0 || ts > math.MaxInt64 {
		return 0, fmt.Errorf("bucket start %d plus offset %d is past the last timestamp", start, u)
	}
	store(rec, c.of[0], Value{N: ts, Signed: true})
	return c.width, nil
}

// getString reads a string component and returns its value and length.
// An escaped value is copied into the arena only when it holds an escape.
func (k *backCodec) getString(c *component, key []byte) ([]byte, int, error) {
	if !c.hasSep {
		return key, len(key), nil
	}
	end := bytes.IndexByte(key, c.sep)
	if end < 0 {
		return nil, 0, fmt.Errorf("no separator 0x%02x ends the string", c.sep)
	}
	if !c.escape {
		return key[:end], end + 1, nil
	}
	start := len(k.arena)
	copied := false
	for pos := 0; ; {
		i := bytes.IndexByte(key[pos:], c.sep)
		if i < 0 || pos+i+1 == len(key) {
			return nil, 0, fmt.Errorf("no separator 0x%02x then 0x00 ends the string", c.sep)
		}
		i += pos
		switch key[i+1] {
		case 0x00:
			if !copied {
				return key[:i], i + 2, nil
			}
			k.arena = append(k.arena, key[pos:i]...)
			return k.arena[start:len(k.arena):len(k.arena)], i + 2, nil
		case 0xFF:
			k.arena = append(k.arena, key[pos:i]...)
			k.arena = append(k.arena, c.sep)
			copied = true
			pos = i + 2
		default:
			return nil, 0, fmt.Errorf("separator 0x%02x at byte %d is followed by 0x%02x, neither 0x00 (end) nor 0xFF (escape)", c.sep, i, key[i+1])
		}
	}
}

// getDecimal reads decimal digits: width of them, or up to the separator,
// or to the end of the key.
func getDecimal(c *component, key []byte, rec *record) (int, error) {
	var digits []byte
	n := 0
	switch {
	case c.width > 0:
		if len(key) < c.width {
			return 0, fmt.Errorf("need %d digits, have %d bytes", c.width, len(key))
		}
		digits, n = key[:c.width], c.width
	case c.hasSep:
		end := bytes.IndexByte(key, c.sep)
		if end < 0 {
			return 0, fmt.Errorf("no separator 0x%02x ends the digits", c.sep)
		}
		digits, n = key[:end], end+1
	default:
		digits, n = key, len(key)
	}
	if c.width == 0 && (len(digits) == 0 || len(digits) > 1 && digits[0] == '0') {
		// The shortest form only: "7" and "007" must not both read as 7.
		return 0, fmt.Errorf("%q is not a number's shortest digits", digits)
	}
	u, err := digitsValue(digits)
	if err != nil {
		return 0, err
	}
	store(rec, c.field, Value{N: u})
	return n, nil
}

// digitsValue is the value of ASCII digits, which must be below 2^64.
func digitsValue(digits []byte) (uint64, error) {
	var u uint64
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, fmt.Errorf("%q holds a byte that is not a digit", digits)
		}
		hi, lo := bits.Mul64(u, 10)
		sum, carry := bits.Add64(lo, uint64(d-'0'), 0)
		if hi != 0 || carry != 0 {
			return 0, fmt.Errorf("%q is not below 2^64", digits)
		}
		u = sum
	}
	return u, nil
}

// getBucket reads a time bucket's start.
func (k *backCodec) getBucket(c *component, key []byte, rec *record) (int, error) {
	var start int64
	n := 8
	if c.iso {
		layout := c.isoLayout
		if layout == "" {
			layout = isoLayouts[c.unit] // a component not compiled
		}
		n = len(layout)
		if len(key) < n {
			return 0, fmt.Errorf("need %d bytes of date text, have %d", n, len(key))
		}
		var err error
		if start, err = k.isoStartOf(key[:n], layout); err != nil {
			return 0, err
		}
	} else {
		u, err := getBE(key, 8)
		if err != nil {
			return 0, err
		}
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("bucket start 0x%016x is negative", u)
		}
		start = int64(u)
	}
	if start%c.span != 0 {
		return 0, fmt.Errorf("bucket start %d is not a multiple of %d ms", start, c.span)
	}
	store(rec, c.field, Value{N: uint64(start), Signed: true})
	return n, nil
}

// isoStartOf reads UTC date text with package time. Only the text time
// writes back for the instant it read is accepted, so one instant has one
// text.
func (k *backCodec) isoStartOf(text []byte, layout string) (int64, error) {
	if k.isoText != nil && bytes.Equal(text, k.isoText) {
		return k.isoStart, nil
	}
	t, err := time.Parse(layout, string(text))
	if err != nil || t.Format(layout) != string(text) {
		return 0, fmt.Errorf("%q is not a date in the form %s", text, layout)
	}
	ms := t.UnixMilli()
	if ms < 0 {
		return 0, fmt.Errorf("%q is before 1970", text)
	}
	k.isoText, k.isoStart = append(k.isoText[:0], text...), ms
	return ms, nil
}

// put appends component c of a key built from rec: its field's value, or
// for a salt with fields their hash, for an offset its timestamp minus its
// bucket's start. A time bucket writes the start its field holds.
func (k *backCodec) put(dst []byte, c *component, rec *record) ([]byte, error) {
	switch c.typ {
	case Literal:
		return append(dst, c.lit...), nil
	case Salt:
		s, err := k.saltValue(c, rec)
		if err != nil {
			return dst, err
		}
		return putBE(dst, s, c.width), nil
	case Offset:
		return putOffset(dst, c, rec)
	}
	if c.field < 0 || !rec.vals[c.field].Set {
		return dst, errors.New("the field has no value")
	}
	v := rec.vals[c.field]
	switch c.typ {
	case Uint, Int, SortableInt, ReversedTS:
		u, err := storedNumber(c, v)
		if err != nil {
			return dst, err
		}
		return putBE(dst, u, c.width), nil
	case Fixed:
		return putFixed(dst, c, v.Bytes)
	case String:
		return putString(dst, c, v.Bytes)
	case Decimal:
		return putDecimal(dst, c, v)
	case TimeBucket:
		return putBucket(dst, c, v)
	}
	return dst, fmt.Errorf("no writer for component type %d", c.typ)
}

// putBE appends the low width bytes of u, big-endian.
func putBE(dst []byte, u uint64, width int) []byte {
	switch width {
	case 1:
		return append(dst, byte(u))
	case 2:
		return binary.BigEndian.AppendUint16(dst, uint16(u))
	case 4:
		return binary.BigEndian.AppendUint32(dst, uint32(u))
	}
	return binary.BigEndian.AppendUint64(dst, u)
}

// signedOf is v as an int64, when it is one.
func signedOf(v Value) (int64, bool) {
	if v.Signed {
		return int64(v.N), true
	}
	return int64(v.N), v.N <= math.MaxInt64
}

// unsignedOf is v as a uint64, when it is one.
func unsignedOf(v Value) (uint64, bool) {
	if v.Signed {
		return v.N, int64(v.N) >= 0
	}
	return v.N, true
}

// storedNumber is the unsigned number a fixed-width number component
// stores for v, its range checked.
func storedNumber(c *component, v Value) (uint64, error) {
	nbits := 8 * uint(c.width)
	switch c.typ {
	case Uint:
		u, ok := unsignedOf(v)
		if !ok || nbits < 64 && u>>nbits != 0 {
			return 0, fmt.Errorf("%s does not fit in %d unsigned bytes", showNumber(v), c.width)
		}
		return u, nil
	case Int, SortableInt:
		s, ok := signedOf(v)
		half := int64(1) << (nbits - 1) // nbits 64: math.MinInt64, unused
		if !ok || nbits < 64 && (s < -half || s >= half) {
			return 0, fmt.Errorf("%s does not fit in %d signed bytes", showNumber(v), c.width)
		}
		if c.typ == Int {
			if nbits < 64 && s < 0 {
				return uint64(s + int64(1)<<nbits), nil
			}
			return uint64(s), nil
		}
		if nbits == 64 {
			return uint64(s) + 1<<63, nil
		}
		return uint64(s + half), nil
	case ReversedTS:
		s, ok := signedOf(v)
		if !ok || s < 0 {
			return 0, fmt.Errorf("%s is no timestamp (0 to 2^63-1)", showNumber(v))
		}
		return uint64(math.MaxInt64 - s), nil
	}
	return 0, fmt.Errorf("component type %d is no number", c.typ)
}

func showNumber(v Value) string {
	if v.Signed {
		return strconv.FormatInt(int64(v.N), 10)
	}
	return strconv.FormatUint(v.N, 10)
}

// putFixed appends b padded to the width.
func putFixed(dst []byte, c *component, b []byte) ([]byte, error) {
	missing := c.width - len(b)
	switch {
	case missing < 0:
		return dst, fmt.Errorf("%s is longer than %d bytes", printable(b), c.width)
	case bytes.HasSuffix(b, []byte{c.pad}):
		return dst, fmt.Errorf("%s ends with the pad byte 0x%02x, so it would read back shorter", printable(b), c.pad)
	}
	dst = append(dst, b...)
	for ; missing > 0; missing-- {
		dst = append(dst, c.pad)
	}
	return dst, nil
}

// putString appends b in the string's form.
func putString(dst []byte, c *component, b []byte) ([]byte, error) {
	switch {
	case !c.hasSep:
		return append(dst, b...), nil
	case !c.escape:
		if bytes.IndexByte(b, c.sep) >= 0 {
			return dst, fmt.Errorf("%s holds the separator 0x%02x", printable(b), c.sep)
		}
		return append(append(dst, b...), c.sep), nil
	}
	for _, x := range b {
		dst = append(dst, x)
		if x == c.sep {
			dst = append(dst, 0xFF)
		}
	}
	return append(dst, c.sep, 0x00), nil
}

// putDecimal appends v's digits, zero-padded to the width, or then the
// separator.
func putDecimal(dst []byte, c *component, v Value) ([]byte, error) {
	u, ok := unsignedOf(v)
	if !ok {
		return dst, fmt.Errorf("%s is negative", showNumber(v))
	}
	var tmp [20]byte
	digits := strconv.AppendUint(tmp[:0], u, 10)
	if c.width == 0 {
		dst = append(dst, digits...)
		if c.hasSep {
			dst = append(dst, c.sep)
		}
		return dst, nil
	}
	if len(digits) > c.width {
		return dst, fmt.Errorf("%d has more than %d digits", u, c.width)
	}
	for i := len(digits); i < c.width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, digits...), nil
}

// putBucket appends a bucket start, which must be one.
func putBucket(dst []byte, c *component, v Value) ([]byte, error) {
	start, ok := signedOf(v)
	if !ok || start < 0 || start%c.span != 0 {
		return dst, fmt.Errorf("%s is not the start of a %d ms bucket", showNumber(v), c.span)
	}
	if !c.iso {
		return binary.BigEndian.AppendUint64(dst, uint64(start)), nil
	}
	if start >= isoEnd {
		return dst, fmt.Errorf("bucket start %d is after year 9999", start)
	}
	return time.UnixMilli(start).UTC().AppendFormat(dst, isoLayouts[c.unit]), nil
}

// bucketStart is the start of the span-long bucket that holds ts.
func bucketStart(ts, span int64) (int64, error) {
	if ts < 0 {
		return 0, fmt.Errorf("timestamp %d is before 1970", ts)
	}
	return ts / span * span, nil
}

// putOffset appends the timestamp's millis past its bucket's start: the
// start the bucket field holds, else the start of its bucket.
func putOffset(dst []byte, c *component, rec *record) ([]byte, error) {
	tv := rec.vals[c.of[0]]
	ts, ok := signedOf(tv)
	if !tv.Set || !ok {
		return dst, errors.New("the timestamp has no value")
	}
	b := rec.vals[c.bucket]
	start, ok := signedOf(b)
	if !b.Set {
		var err error
		if start, err = bucketStart(ts, c.span); err != nil {
			return dst, err
		}
	} else if !ok {
		return dst, fmt.Errorf("bucket start %s is out of range", showNumber(b))
	}
	if ts < start || ts-start >= c.span {
		return dst, fmt.Errorf("timestamp %d is not in the %d ms bucket starting at %d", ts, c.span, start)
	}
	off := uint64(ts - start)
	if c.width == 4 && off > math.MaxUint32 {
		return dst, fmt.Errorf("offset %d does not fit in 4 bytes", off)
	}
	return putBE(dst, off, c.width), nil
}

// saltValue is a salt's bucket: the hash of its fields, or for a salt of
// the old key with no fields the value its field holds.
func (k *backCodec) saltValue(c *component, rec *record) (uint64, error) {
	if len(c.of) == 0 {
		if c.field < 0 || !rec.vals[c.field].Set {
			return 0, errors.New("the salt has no value")
		}
		if s := rec.vals[c.field].N; s < uint64(c.buckets) {
			return s, nil
		}
		return 0, fmt.Errorf("salt %d is not below the bucket count %d", rec.vals[c.field].N, c.buckets)
	}
	h := k.fnv
	h.Reset()
	for i, f := range c.of {
		v := &rec.vals[f]
		if !v.Set {
			return 0, errors.New("a salted field has no value")
		}
		if i > 0 {
			h.Write([]byte{0})
		}
		if c.ofKinds[i] == KindBytes {
			h.Write(v.Bytes)
			continue
		}
		binary.BigEndian.PutUint64(k.num[:], v.N)
		h.Write(k.num[:])
	}
	return uint64(h.Sum32() % c.buckets), nil
}
