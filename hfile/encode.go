package hfile

import (
	"bytes"
	"encoding/binary"
	"math/bits"

	"github.com/rekeyhq/rekey/cell"
)

// blockEncoder lays out the cells of one data block, in any of the
// encodings decode.go reads back, into a buffer that starts with room for
// the block header. It keeps what the delta encodings need of the previous
// cell (lengths, timestamp, type, where its value lies in the buffer), so
// encoding allocates nothing once the buffer has grown to a block's size.
type blockEncoder struct {
	enc          Encoding
	tags, mvcc   bool
	compressTags bool

	buf   []byte // headerSize reserved bytes, then the payload
	cells int    // offset in buf where the cells area starts
	unenc int    // the block's size as plain cells (HBase's unencoded size)
	n     int    // cells in the block

	prevValOff, prevValLen int
	rowOffs                []uint32 // ROW_INDEX_V1: where each row starts
	dict                   tagDict
	key                    []byte // scratch: the current cell's flat key
}

// reset starts a new block.
func (e *blockEncoder) reset() {
	if cap(e.buf) < headerSize {
		e.buf = make([]byte, headerSize, 64<<10+headerSize)
	}
	e.buf = e.buf[:headerSize]
	switch e.enc {
	case EncodingNone:
	case EncodingRowIndexV1:
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(e.enc))
	default:
		// The unencoded size goes in the four bytes after the id once
		// the block is complete.
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(e.enc))
		e.buf = append(e.buf, 0, 0, 0, 0)
	}
	e.cells = len(e.buf)
	e.unenc, e.n = 0, 0
	e.rowOffs = e.rowOffs[:0]
	e.dict.clear()
}

// lastValue is the value of the cell added last, where the block holds
// it (for FAST_DIFF, a value equal to the one before is stored once).
// Valid until the next reset.
func (e *blockEncoder) lastValue() []byte {
	return e.buf[e.prevValOff : e.prevValOff+e.prevValLen : e.prevValOff+e.prevValLen]
}

// encodedSize is the size of the cells area so far.
func (e *blockEncoder) encodedSize() int { return len(e.buf) - e.cells }

// add appends c. p is the previous cell of the same block, nil for the
// first; the writer guarantees both have the same family.
func (e *blockEncoder) add(c, p *cell.Cell) {
	var pre prefixes
	if p != nil {
		pre = prefixesOf(c, p)
	}
	e.addKnown(c, p, pre)
}

// prefixes holds how many leading bytes a cell's row shares with the
// previous cell's, and when the rows are equal its qualifier: what the
// delta encodings store once. The writer's order check finds them.
type prefixes struct{ row, qual int }

func prefixesOf(c, p *cell.Cell) prefixes {
	pre := prefixes{row: commonPrefix(c.Row, p.Row)}
	if pre.row == len(c.Row) && pre.row == len(p.Row) {
		pre.qual = commonPrefix(c.Qualifier, p.Qualifier)
	}
	return pre
}

// addKnown is add with the prefixes c shares with p (p not nil).
func (e *blockEncoder) addKnown(c, p *cell.Cell, pre prefixes) {
	kl := cell.KeyLen(c)
	vl := len(c.Value)
	e.unenc += 8 + kl + vl
	if e.tags {
		e.unenc += 2 + len(c.Tags)
	}
	if e.mvcc {
		e.unenc += vlongSize(int64(c.SeqID))
	}
	b := e.buf
	switch e.enc {
	case EncodingNone, EncodingRowIndexV1:
		if e.enc == EncodingRowIndexV1 && (p == nil || !bytes.Equal(p.Row, c.Row)) {
			e.rowOffs = append(e.rowOffs, uint32(len(b)-e.cells))
		}
		b = binary.BigEndian.AppendUint32(b, uint32(kl))
		b = binary.BigEndian.AppendUint32(b, uint32(vl))
		b = cell.AppendKey(b, c)
		e.prevValOff, e.prevValLen = len(b), vl
		b = append(b, c.Value...)
		e.buf = b
		e.plainTail(c)
	case EncodingPrefix:
		common := 0
		if p != nil {
			common = sharedKeyPrefix(c, p, pre, true)
		}
		e.key = cell.AppendKey(e.key[:0], c)
		b = appendCInt(b, kl-common)
		b = appendCInt(b, vl)
		b = appendCInt(b, common)
		b = append(b, e.key[common:]...)
		e.prevValOff, e.prevValLen = len(b), vl
		b = append(b, c.Value...)
		e.buf = b
		e.encodedTail(c)
	case EncodingDiff:
		e.buf = e.addDiff(b, c, p, pre, kl, vl)
		e.encodedTail(c)
	case EncodingFastDiff:
		e.buf = e.addFastDiff(b, c, p, pre, kl, vl)
		e.encodedTail(c)
	}
	e.n++
}

// addDiff encodes one DIFF cell: the family once per block before the
// first flag; then flag, lengths that changed, the shared-prefix length,
// the unshared row and qualifier bytes, a little-endian timestamp (or its
// difference from the previous one when that is shorter), the type if it
// changed, and the value.
func (e *blockEncoder) addDiff(b []byte, c, p *cell.Cell, pre prefixes, kl, vl int) []byte {
	var flag byte
	ts := c.Timestamp
	common := 0
	var stored int64
	var n int
	if p == nil {
		b = append(b, byte(len(c.Family)))
		b = append(b, c.Family...)
		if ts < 0 {
			flag |= 0x80
			ts = -ts
		}
		n = bytesFor(ts)
		flag |= byte(n-1) << 4
		stored = ts
	} else {
		common = sharedKeyPrefix(c, p, pre, false)
		if kl == cell.KeyLen(p) {
			flag |= 0x01
		}
		if vl == e.prevValLen {
			flag |= 0x02
		}
		if c.Type == p.Type {
			flag |= 0x04
		}
		diff := p.Timestamp - ts
		if ts < 0 {
			ts = -ts
		}
		tn := bytesFor(ts)
		dneg := diff < 0
		if dneg {
			diff = -diff
		}
		dn := bytesFor(diff)
		if dn < tn {
			flag |= byte(dn-1)<<4 | 0x08
			if dneg {
				flag |= 0x80
			}
			stored, n = diff, dn
		} else {
			flag |= byte(tn-1) << 4
			if c.Timestamp < 0 {
				flag |= 0x80
			}
			stored, n = ts, tn
		}
	}
	b = append(b, flag)
	if flag&0x01 == 0 {
		b = appendCInt(b, kl)
	}
	if flag&0x02 == 0 {
		b = appendCInt(b, vl)
	}
	b = appendCInt(b, common)
	b = appendDiffKey(b, c, common)
	for i := 0; i < n; i++ {
		b = append(b, byte(stored>>(8*i)))
	}
	if flag&0x04 == 0 {
		b = append(b, byte(c.Type))
	}
	e.prevValOff, e.prevValLen = len(b), vl
	return append(b, c.Value...)
}

// addFastDiff encodes one FAST_DIFF cell: the first cell of a block in
// full (flag 0, lengths, whole key, value); later ones with a flag of
// which lengths, type and value repeat and how many leading timestamp
// bytes are shared, then only what differs.
func (e *blockEncoder) addFastDiff(b []byte, c, p *cell.Cell, pre prefixes, kl, vl int) []byte {
	if p == nil {
		b = append(b, 0)
		b = appendCInt(b, kl)
		b = appendCInt(b, vl)
		b = appendCInt(b, 0)
		b = cell.AppendKey(b, c)
		e.prevValOff, e.prevValLen = len(b), vl
		return append(b, c.Value...)
	}
	var flag byte
	common := sharedKeyPrefix(c, p, pre, false)
	if kl == cell.KeyLen(p) {
		flag |= 0x08
	}
	if vl == e.prevValLen {
		flag |= 0x10
	}
	if c.Type == p.Type {
		flag |= 0x20
	}
	// The leading timestamp bytes shared with the previous cell, at most 7.
	shared := min(bits.LeadingZeros64(uint64(c.Timestamp)^uint64(p.Timestamp))/8, 7)
	flag |= byte(shared)
	sameValue := vl == e.prevValLen && bytes.Equal(c.Value, b[e.prevValOff:e.prevValOff+e.prevValLen])
	if sameValue {
		flag |= 0x40
	}
	b = append(b, flag)
	if flag&0x08 == 0 {
		b = appendCInt(b, kl)
	}
	if flag&0x10 == 0 {
		b = appendCInt(b, vl)
	}
	b = appendCInt(b, common)
	b = appendDiffKey(b, c, common)
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(c.Timestamp))
	b = append(b, t[shared:]...)
	if flag&0x20 == 0 {
		b = append(b, byte(c.Type))
	}
	if !sameValue {
		e.prevValOff, e.prevValLen = len(b), vl
		b = append(b, c.Value...)
	}
	return b
}

// appendDiffKey appends the key bytes DIFF and FAST_DIFF store for a
// cell whose flat key shares common bytes with the previous one: when the
// row differs, the rest of the length-prefixed row and the whole qualifier
// (the family is known); else the qualifier's unshared tail.
func appendDiffKey(b []byte, c *cell.Cell, common int) []byte {
	rws := 2 + len(c.Row)
	if common < rws {
		if common < 2 {
			var rl [2]byte
			binary.BigEndian.PutUint16(rl[:], uint16(len(c.Row)))
			b = append(b, rl[common:]...)
			b = append(b, c.Row...)
		} else {
			b = append(b, c.Row[common-2:]...)
		}
		return append(b, c.Qualifier...)
	}
	q := common - rws - 1 - len(c.Family)
	return append(b, c.Qualifier[q:]...)
}

// plainTail appends the tags and memstore timestamp of an unencoded cell.
func (e *blockEncoder) plainTail(c *cell.Cell) {
	if e.tags {
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(len(c.Tags)))
		e.buf = append(e.buf, c.Tags...)
	}
	if e.mvcc {
		e.buf = appendVLong(e.buf, int64(c.SeqID))
	}
}

// encodedTail appends what follows a cell in PREFIX, DIFF and FAST_DIFF
// blocks: a compressed-int tags length and the tags (each one either new,
// 0xFF + length + bytes, or a u16 index into the block's dictionary, when
// tags are compressed), then the memstore timestamp.
func (e *blockEncoder) encodedTail(c *cell.Cell) {
	b := e.buf
	if e.tags {
		b = appendCInt(b, len(c.Tags))
		if len(c.Tags) > 0 && e.compressTags {
			for t := c.Tags; len(t) >= 2; {
				l := int(binary.BigEndian.Uint16(t))
				tag := t[2 : 2+l]
				t = t[2+l:]
				if i := e.dict.find(tag); i >= 0 {
					e.dict.get(i)
					b = binary.BigEndian.AppendUint16(b, uint16(i))
					continue
				}
				b = append(b, 0xFF)
				b = appendCInt(b, l)
				start := len(b)
				b = append(b, tag...)
				// The entry points into the block buffer: if the buffer
				// grows later, the old array keeps these bytes.
				e.dict.add(b[start:len(b):len(b)])
			}
		} else {
			b = append(b, c.Tags...)
		}
	}
	if e.mvcc {
		b = appendVLong(b, int64(c.SeqID))
	}
	e.buf = b
}

// finish completes the block's payload (after the reserved header bytes)
// and returns its block type.
func (e *blockEncoder) finish() BlockType {
	switch e.enc {
	case EncodingNone:
		return BlockData
	case EncodingRowIndexV1:
		size := len(e.buf) - e.cells
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(len(e.rowOffs)))
		for _, o := range e.rowOffs {
			e.buf = binary.BigEndian.AppendUint32(e.buf, o)
		}
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(size))
		return BlockEncodedData
	}
	binary.BigEndian.PutUint32(e.buf[headerSize+2:], uint32(e.unenc))
	return BlockEncodedData
}

// sharedKeyPrefix is how many leading bytes the flat keys of c and p
// share, as HBase's encoders count them: over the row length, row, family
// (the same in both) and qualifier, and with withTsType also the timestamp
// and type, but only when the qualifiers are equal. pre holds the common
// prefixes of their rows and qualifiers.
func sharedKeyPrefix(c, p *cell.Cell, pre prefixes, withTsType bool) int {
	if len(c.Row) != len(p.Row) {
		if len(c.Row)>>8 == len(p.Row)>>8 {
			return 1
		}
		return 0
	}
	n := 2 + pre.row
	if pre.row != len(c.Row) {
		return n
	}
	n += 1 + len(c.Family)
	q := pre.qual
	n += q
	if !withTsType || q != len(c.Qualifier) || q != len(p.Qualifier) {
		return n
	}
	x := uint64(c.Timestamp) ^ uint64(p.Timestamp)
	for i := 0; i < 8; i++ {
		if byte(x>>(56-8*i)) != 0 {
			return n + i
		}
	}
	n += 8
	if c.Type == p.Type {
		n++
	}
	return n
}

// commonPrefix is the length of the longest common prefix of a and b,
// compared eight bytes at a time: a row key shares most of its bytes with
// the row before it.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for ; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// bytesFor is HBase's longFitsIn: the bytes a non-negative long needs
// (at least 1); a negative one needs all 8.
func bytesFor(v int64) int {
	if v < 0 {
		return 8
	}
	n := 1
	for v >= 1<<8 && n < 8 {
		v >>= 8
		n++
	}
	return n
}

// appendCInt appends HBase's compressed int (unsigned LEB128).
func appendCInt(b []byte, v int) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendVLong appends a Hadoop VLong.
func appendVLong(b []byte, v int64) []byte {
	if v >= -112 && v <= 127 {
		return append(b, byte(int8(v)))
	}
	marker := -112
	if v < 0 {
		v = ^v
		marker = -120
	}
	n := 0
	for t := v; t != 0; t >>= 8 {
		n++
	}
	b = append(b, byte(int8(marker-n)))
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// vlongSize is the length of appendVLong's output for v.
func vlongSize(v int64) int {
	if v >= -112 && v <= 127 {
		return 1
	}
	if v < 0 {
		v = ^v
	}
	n := 1
	for ; v != 0; v >>= 8 {
		n++
	}
	return n
}

// find returns the dictionary index holding tag, or -1.
func (t *tagDict) find(tag []byte) int {
	for i := 0; i < t.n; i++ {
		if bytes.Equal(t.entries[i], tag) {
			return i
		}
	}
	return -1
}
