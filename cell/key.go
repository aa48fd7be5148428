package cell

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrBadKey reports a serialized KeyValue key that does not parse.
var ErrBadKey = errors.New("cell: malformed KeyValue key")

// KeyLen returns the length of c's serialized KeyValue key:
// u16 rowLen, row, u8 famLen, family, qualifier, i64 ts, u8 type.
func KeyLen(c *Cell) int {
	return 2 + len(c.Row) + 1 + len(c.Family) + len(c.Qualifier) + 8 + 1
}

// Size returns the length of c serialized as a KeyValue: u32 key length,
// u32 value length, the key (KeyLen), the value, and, when c has tags, u16
// tags length and the tags. It is the length HBase's KeyValue carries
// (KeyValue.getKeyValueDataStructureSize, KeyValueUtil.length with tags,
// a KeyValue's getSerializedSize()), and the one unit of every byte count
// rekey reports or budgets: run summaries, staging, plan and verify.
//
// The framings that carry a KeyValue differ at the edges, so their writers
// do their own arithmetic: an HFile that records tags writes the u16 tags
// length for every cell, tags or not, and one that keeps memstore
// timestamps appends a vlong after each cell; a KeyValueCodec cell block
// puts a u32 length before each cell and sends no tags.
func Size(c *Cell) int64 {
	n := int64(4 + 4 + KeyLen(c) + len(c.Value))
	if len(c.Tags) > 0 {
		n += int64(2 + len(c.Tags))
	}
	return n
}

// AppendKey appends c's serialized KeyValue key (the form HBase uses in
// HFile data blocks, block indexes, LASTKEY and Reference split keys).
func AppendKey(dst []byte, c *Cell) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(c.Row)))
	dst = append(dst, c.Row...)
	dst = append(dst, byte(len(c.Family)))
	dst = append(dst, c.Family...)
	dst = append(dst, c.Qualifier...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.Timestamp))
	return append(dst, byte(c.Type))
}

// ParseKey fills the key fields of c (row, family, qualifier, timestamp,
// type) from a serialized KeyValue key. The slices point into key.
func ParseKey(key []byte, c *Cell) error {
	if len(key) < 2+1+8+1 {
		return fmt.Errorf("%w: %d bytes is shorter than the 12-byte minimum", ErrBadKey, len(key))
	}
	rowLen := int(binary.BigEndian.Uint16(key))
	if 2+rowLen+1+8+1 > len(key) {
		return fmt.Errorf("%w: row length %d overruns a %d-byte key", ErrBadKey, rowLen, len(key))
	}
	famLen := int(key[2+rowLen])
	famEnd := 2 + rowLen + 1 + famLen
	if famEnd+8+1 > len(key) {
		return fmt.Errorf("%w: family length %d overruns a %d-byte key", ErrBadKey, famLen, len(key))
	}
	c.Row = key[2 : 2+rowLen : 2+rowLen]
	c.Family = key[2+rowLen+1 : famEnd : famEnd]
	qEnd := len(key) - 9
	c.Qualifier = key[famEnd:qEnd:qEnd]
	c.Timestamp = int64(binary.BigEndian.Uint64(key[qEnd:]))
	c.Type = Type(key[len(key)-1])
	return nil
}

// CompareKeys compares two serialized KeyValue keys in cell order. Keys that
// do not parse sort by raw bytes after every well-formed key, so a corrupt
// index never causes a panic.
func CompareKeys(a, b []byte) int {
	var ca, cb Cell
	ea, eb := ParseKey(a, &ca), ParseKey(b, &cb)
	switch {
	case ea != nil && eb != nil:
		return compareBytes(a, b)
	case ea != nil:
		return 1
	case eb != nil:
		return -1
	}
	return Compare(&ca, &cb)
}

func compareBytes(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// FirstOnRow returns the smallest possible cell of row: the seek key that
// positions an iterator at the row's first cell.
func FirstOnRow(row []byte) Cell {
	return Cell{Row: row, Timestamp: LatestTimestamp, Type: Maximum}
}
