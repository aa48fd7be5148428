package hfile

import (
	"bytes"
	"encoding/binary"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/writable"
)

// blockDecoder turns one data block's payload into cells, one per next
// call. It owns a key buffer that the delta encodings rebuild in place, so
// decoding allocates nothing once the buffer has grown to the longest key.
// Every length is checked against the block before it is used: a corrupt
// block yields an error, never a panic or a read past the payload.
type blockDecoder struct {
	enc            Encoding
	tags, mvcc     bool
	tagsCompressed bool
	keepSeqID      bool
	data           []byte // the cells area
	pos            int
	first          bool
	key            []byte // rebuilt key; len is the capacity in use
	keyLen         int    // length of the previous key (full flat key)
	rowLen         int    // row length of the previous key
	fam            [1 + 255]byte
	famWS          int // family length + its 1-byte size
	ts             int64
	typ            byte
	valLen         int
	value          []byte
	tagBuf         []byte
	dict           tagDict
	// rowOffsets is ROW_INDEX_V1's table of where each row starts.
	rowOffsets []byte
	// repeat is what the last decoded cell's key shares with the one
	// before it, as the encoding records it (DIFF and FAST_DIFF only).
	repeat Repeat
	// colKey is the last decoded cell's row, family-length byte, family
	// and qualifier as they lie in its flat key (see Iterator.ColumnKey).
	colKey []byte
	// decoded: a cell of this block was decoded (first can turn false
	// without one: a ROW_INDEX_V1 seek past the block's last row).
	decoded bool
	// generalOnly turns off fastDiffSameRow, so tests can hold it to the
	// general decoder.
	generalOnly bool
}

// Repeat says how much of a cell's key repeats the key of the cell decoded
// just before it in the same block, as DIFF and FAST_DIFF record it (their
// shared-prefix length): a scan can then skip comparing the row, family
// and qualifier again. RepeatNone promises nothing: it is also what every
// other encoding and the first cell of a block report.
type Repeat uint8

const (
	// RepeatNone: unknown, or a different row.
	RepeatNone Repeat = iota
	// RepeatRow: the same row and family as the previous cell.
	RepeatRow
	// RepeatColumn: the same row, family and qualifier.
	RepeatColumn
)

// timestamp+type suffix of every flat key
const tsTypeLen = 9

// reset points the decoder at a data block's payload. encoded tells
// whether the block was DATABLKE (payload starts with the u16 encoding id).
func (d *blockDecoder) reset(payload []byte, encoded bool, want Encoding) error {
	d.pos, d.first, d.keyLen, d.rowLen, d.famWS = 0, true, 0, 0, 0
	d.decoded = false
	d.ts, d.typ, d.valLen, d.value = 0, 0, 0, nil
	d.dict.clear()
	d.rowOffsets = nil
	if !encoded {
		d.enc = EncodingNone
		d.data = payload
		return nil
	}
	if len(payload) < 2 {
		return errDecode("encoded block too short for its encoding id")
	}
	id := Encoding(binary.BigEndian.Uint16(payload))
	if id != want {
		return errDecode("block is encoded with %s but the file info says %s", id, want)
	}
	d.enc = id
	body := payload[2:]
	switch id {
	case EncodingPrefix, EncodingDiff, EncodingFastDiff:
		// i32 unencoded size: only a buffer hint for Java readers.
		if len(body) < 4 {
			return errDecode("%s block too short for its unencoded-size field", id)
		}
		d.data = body[4:]
		if id == EncodingDiff && len(d.data) > 0 {
			fl := int(d.data[0])
			if fl > 127 || 1+fl > len(d.data) {
				return errDecode("DIFF block family length %d overruns the block", fl)
			}
			copy(d.fam[:], d.data[:1+fl])
			d.famWS = 1 + fl
			d.pos = 1 + fl
		}
	case EncodingRowIndexV1:
		// cells ‖ i32 rowCount ‖ rowCount × i32 offset ‖ i32 cellsSize
		if len(body) < 8 {
			return errDecode("ROW_INDEX_V1 block too short (%d bytes) for its row index", len(body))
		}
		size := int(int32(binary.BigEndian.Uint32(body[len(body)-4:])))
		if size < 0 || size > len(body)-8 {
			return errDecode("ROW_INDEX_V1 cells area of %d bytes overruns the %d-byte block", size, len(body))
		}
		rows := int(int32(binary.BigEndian.Uint32(body[size:])))
		if rows < 0 || size+4+4*rows+4 != len(body) {
			return errDecode("ROW_INDEX_V1 row index (%d rows after %d bytes of cells) does not fill the %d-byte block", rows, size, len(body))
		}
		d.data = body[:size]
		d.rowOffsets = body[size+4 : size+4+4*rows]
	default:
		return errDecode("data block encoding %s is not supported", id)
	}
	return nil
}

// seekRow moves a fresh ROW_INDEX_V1 decoder to the first row >= row by
// binary search over the block's row offsets, so a seek does not decode
// the rows before it. Other encodings and bad offsets leave it in place.
func (d *blockDecoder) seekRow(row []byte) {
	if d.enc != EncodingRowIndexV1 || !d.first {
		return
	}
	n := len(d.rowOffsets) / 4
	rowAt := func(i int) ([]byte, bool) {
		o := int(int32(binary.BigEndian.Uint32(d.rowOffsets[4*i:])))
		// i32 keyLen, i32 valueLen, u16 rowLen, row
		if o < 0 || o+10 > len(d.data) {
			return nil, false
		}
		rl := int(binary.BigEndian.Uint16(d.data[o+8:]))
		if o+10+rl > len(d.data) {
			return nil, false
		}
		return d.data[o+10 : o+10+rl], true
	}
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		r, ok := rowAt(m)
		if !ok {
			return
		}
		if bytes.Compare(r, row) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return
	}
	if lo == n {
		d.pos = len(d.data)
	} else {
		d.pos = int(int32(binary.BigEndian.Uint32(d.rowOffsets[4*lo:])))
	}
	d.first = false
}

// next decodes the next cell into c. It returns false with a nil error at
// the end of the block.
func (d *blockDecoder) next(c *cell.Cell) (bool, error) {
	if d.pos >= len(d.data) {
		return false, nil
	}
	d.repeat = RepeatNone
	var err error
	switch d.enc {
	case EncodingNone, EncodingRowIndexV1:
		err = d.nextPlain(c)
	case EncodingPrefix:
		err = d.nextPrefix(c)
	case EncodingDiff:
		err = d.nextDiff(c, false)
	case EncodingFastDiff:
		done := false
		if !d.generalOnly {
			done, err = d.fastDiffSameRow(c)
		}
		if !done {
			err = d.nextDiff(c, true)
		}
	default:
		err = errDecode("encoding %s is not supported", d.enc)
	}
	if err != nil {
		return false, err
	}
	d.first, d.decoded = false, true
	return true, nil
}

// nextPlain reads an unencoded cell (NONE and ROW_INDEX_V1):
// i32 keyLen, i32 valueLen, key, value, [u16 tagsLen, tags], [VLong mvcc].
func (d *blockDecoder) nextPlain(c *cell.Cell) error {
	b, p := d.data, d.pos
	if len(b)-p < 8 {
		return errDecode("cell at block byte %d: truncated lengths", p)
	}
	kl := int(int32(binary.BigEndian.Uint32(b[p:])))
	vl := int(int32(binary.BigEndian.Uint32(b[p+4:])))
	p += 8
	if kl < 0 || vl < 0 || kl > len(b)-p || vl > len(b)-p-kl {
		return errDecode("cell at block byte %d: key length %d and value length %d overrun the block", d.pos, kl, vl)
	}
	if err := cell.ParseKey(b[p:p+kl:p+kl], c); err != nil {
		return errDecode("cell at block byte %d: %v", d.pos, err)
	}
	d.colKey = b[p+2 : p+kl-tsTypeLen : p+kl-tsTypeLen]
	p += kl
	c.Value = b[p : p+vl : p+vl]
	p += vl
	c.Tags = nil
	if d.tags {
		if len(b)-p < 2 {
			return errDecode("cell at block byte %d: truncated tags length", d.pos)
		}
		tl := int(binary.BigEndian.Uint16(b[p:]))
		p += 2
		if tl > len(b)-p {
			return errDecode("cell at block byte %d: tags length %d overruns the block", d.pos, tl)
		}
		if tl > 0 {
			c.Tags = b[p : p+tl : p+tl]
		}
		p += tl
	}
	return d.finish(c, p)
}

// finish reads the optional memstore timestamp and advances.
func (d *blockDecoder) finish(c *cell.Cell, p int) error {
	c.SeqID = 0
	if d.mvcc {
		v, n, err := writable.ReadVLong(d.data[p:])
		if err != nil {
			return errDecode("cell at block byte %d: memstore timestamp: %v", d.pos, err)
		}
		p += n
		if d.keepSeqID {
			c.SeqID = uint64(v)
		}
	}
	d.pos = p
	return nil
}

// growKey makes the key buffer hold at least n bytes, keeping its contents
// (the delta encodings rebuild each key on top of the previous one).
func (d *blockDecoder) growKey(n int) {
	if n <= len(d.key) {
		return
	}
	k := make([]byte, max(n, 2*len(d.key), 64))
	copy(k, d.key)
	d.key = k
}

// nextPrefix reads a PREFIX cell: cint keyLen-common, cint valueLen,
// cint common, the key's non-shared tail, value, [tags], [mvcc].
func (d *blockDecoder) nextPrefix(c *cell.Cell) error {
	b, p := d.data, d.pos
	rest, p, err := readCInt(b, p)
	if err != nil {
		return errDecode("PREFIX cell at block byte %d: key length: %v", d.pos, err)
	}
	vl, p, err := readCInt(b, p)
	if err != nil {
		return errDecode("PREFIX cell at block byte %d: value length: %v", d.pos, err)
	}
	common, p, err := readCInt(b, p)
	if err != nil {
		return errDecode("PREFIX cell at block byte %d: common prefix: %v", d.pos, err)
	}
	if common > d.keyLen {
		return errDecode("PREFIX cell at block byte %d: common prefix %d longer than the previous %d-byte key", d.pos, common, d.keyLen)
	}
	kl := common + rest
	if rest > len(b)-p || vl > len(b)-p-rest {
		return errDecode("PREFIX cell at block byte %d: key and value lengths overrun the block", d.pos)
	}
	d.growKey(kl)
	copy(d.key[common:kl], b[p:p+rest])
	p += rest
	if err := cell.ParseKey(d.key[:kl:kl], c); err != nil {
		return errDecode("PREFIX cell at block byte %d: %v", d.pos, err)
	}
	d.colKey = d.key[2 : kl-tsTypeLen : kl-tsTypeLen]
	d.keyLen = kl
	c.Value = b[p : p+vl : p+vl]
	p += vl
	return d.encodedTail(c, p)
}

// nextDiff reads a DIFF or FAST_DIFF cell. Both keep the family once per
// block, share a common prefix over row+family+qualifier only, and differ
// in how they store the timestamp, the type and repeated values.
func (d *blockDecoder) nextDiff(c *cell.Cell, fast bool) error {
	name := "DIFF"
	sameKeyLen, sameValLen, sameType := byte(0x01), byte(0x02), byte(0x04)
	if fast {
		name = "FAST_DIFF"
		sameKeyLen, sameValLen, sameType = 0x08, 0x10, 0x20
	}
	b, p := d.data, d.pos
	flag := b[p]
	p++
	var err error
	kl := d.keyLen
	if flag&sameKeyLen == 0 {
		if kl, p, err = readCInt(b, p); err != nil {
			return errDecode("%s cell at block byte %d: key length: %v", name, d.pos, err)
		}
	} else if d.first {
		return errDecode("%s cell at block byte %d: first cell of the block claims the previous key length", name, d.pos)
	}
	if flag&sameValLen == 0 {
		if d.valLen, p, err = readCInt(b, p); err != nil {
			return errDecode("%s cell at block byte %d: value length: %v", name, d.pos, err)
		}
	} else if d.first {
		return errDecode("%s cell at block byte %d: first cell of the block claims the previous value length", name, d.pos)
	}
	common, p, err := readCInt(b, p)
	if err != nil {
		return errDecode("%s cell at block byte %d: common prefix: %v", name, d.pos, err)
	}
	if kl < 2+1+tsTypeLen {
		return errDecode("%s cell at block byte %d: key length %d below the 12-byte minimum", name, d.pos, kl)
	}
	if d.first && common != 0 {
		return errDecode("%s cell at block byte %d: first cell has a common prefix of %d", name, d.pos, common)
	}
	if !d.first && common > d.keyLen-tsTypeLen {
		return errDecode("%s cell at block byte %d: common prefix %d longer than the previous key's %d-byte row, family and qualifier", name, d.pos, common, d.keyLen-tsTypeLen)
	}
	need := func(n int) error {
		if n < 0 || n > len(b)-p {
			return errDecode("%s cell at block byte %d: %d bytes needed at block byte %d, %d left", name, d.pos, n, p, len(b)-p)
		}
		return nil
	}
	d.growKey(kl)
	k := d.key
	if fast && d.first {
		// The first cell stores its whole flat key, family included.
		if err := need(kl); err != nil {
			return err
		}
		copy(k[:kl], b[p:p+kl])
		p += kl
		rl := int(binary.BigEndian.Uint16(k))
		if 2+rl+1 > kl-tsTypeLen {
			return errDecode("%s cell at block byte %d: row length %d overruns a %d-byte key", name, d.pos, rl, kl)
		}
		fws := 1 + int(k[2+rl])
		if 2+rl+fws > kl-tsTypeLen {
			return errDecode("%s cell at block byte %d: family length %d overruns a %d-byte key", name, d.pos, fws-1, kl)
		}
		copy(d.fam[:], k[2+rl:2+rl+fws])
		d.famWS, d.rowLen = fws, rl
		d.ts = int64(binary.BigEndian.Uint64(k[kl-tsTypeLen:]))
		d.typ = k[kl-1]
	} else {
		if d.famWS == 0 {
			return errDecode("%s cell at block byte %d: no family recorded for the block", name, d.pos)
		}
		if d.first || common < 2+d.rowLen {
			if common < 2 {
				if err := need(2 - common); err != nil {
					return err
				}
				copy(k[common:2], b[p:p+2-common])
				p += 2 - common
			}
			rl := int(binary.BigEndian.Uint16(k))
			rws := 2 + rl
			ql := kl - rws - d.famWS - tsTypeLen
			if ql < 0 {
				return errDecode("%s cell at block byte %d: row length %d and family leave no room in a %d-byte key", name, d.pos, rl, kl)
			}
			from := max(common, 2)
			if err := need(rws - from + ql); err != nil {
				return err
			}
			copy(k[from:rws], b[p:p+rws-from])
			p += rws - from
			copy(k[rws:rws+d.famWS], d.fam[:d.famWS])
			copy(k[rws+d.famWS:kl-tsTypeLen], b[p:p+ql])
			p += ql
			d.rowLen = rl
		} else {
			if kl-tsTypeLen < 2+d.rowLen+d.famWS || common > kl-tsTypeLen {
				return errDecode("%s cell at block byte %d: key length %d shorter than the shared row and family", name, d.pos, kl)
			}
			n := kl - tsTypeLen - common
			if err := need(n); err != nil {
				return err
			}
			copy(k[common:kl-tsTypeLen], b[p:p+n])
			p += n
			// The row is shared (one family per block); the whole row,
			// family and qualifier are when the prefix covers them and the
			// key is as long as the previous one (d.keyLen, still).
			d.repeat = RepeatRow
			if kl == d.keyLen && common == kl-tsTypeLen {
				d.repeat = RepeatColumn
			}
		}
		if fast {
			shared := int(flag & 0x07)
			if err := need(8 - shared); err != nil {
				return err
			}
			d.ts = replaceLowBytes(d.ts, b[p:p+8-shared])
			p += 8 - shared
		} else {
			n := int((flag>>4)&0x07) + 1
			if err := need(n); err != nil {
				return err
			}
			var v uint64
			for i := 0; i < n; i++ {
				v |= uint64(b[p+i]) << (8 * i)
			}
			p += n
			x := int64(v)
			if flag&0x80 != 0 {
				x = -x
			}
			if flag&0x08 != 0 {
				x = d.ts - x
			}
			d.ts = x
		}
		if flag&sameType == 0 {
			if err := need(1); err != nil {
				return err
			}
			d.typ = b[p]
			p++
		} else if d.first {
			return errDecode("%s cell at block byte %d: first cell of the block claims the previous type", name, d.pos)
		}
	}
	d.keyLen = kl
	rl := d.rowLen
	fe := 2 + rl + d.famWS
	c.Row = k[2 : 2+rl : 2+rl]
	c.Family = k[2+rl+1 : fe : fe]
	c.Qualifier = k[fe : kl-tsTypeLen : kl-tsTypeLen]
	d.colKey = k[2 : kl-tsTypeLen : kl-tsTypeLen]
	c.Timestamp = d.ts
	c.Type = cell.Type(d.typ)
	if fast && !d.first && flag&0x40 != 0 {
		// FAST_DIFF: same value as the previous cell.
		if d.valLen != len(d.value) {
			return errDecode("%s cell at block byte %d: repeats a %d-byte value but declares %d bytes", name, d.pos, len(d.value), d.valLen)
		}
	} else {
		if err := need(d.valLen); err != nil {
			return err
		}
		d.value = b[p : p+d.valLen : p+d.valLen]
		p += d.valLen
	}
	c.Value = d.value
	return d.encodedTail(c, p)
}

// fastDiffSameRow decodes the commonest FAST_DIFF cell quickly: not the
// block's first, in the previous cell's row, with its lengths in one byte
// each. It checks, before it changes anything, that the cell is of that
// kind and lies wholly inside the block; for any other cell, damaged ones
// included, it returns false and nextDiff decodes the cell with its full
// checks and error messages. A scan spends little per cell besides its
// decoding, and nextDiff's generality (two encodings, calls per length, a
// closure per bounds check) is a good part of that.
func (d *blockDecoder) fastDiffSameRow(c *cell.Cell) (bool, error) {
	b, p := d.data, d.pos
	// The flag and at most three one-byte lengths.
	if len(b)-p < 4 || d.first || d.famWS == 0 {
		return false, nil
	}
	flag := b[p]
	p++
	kl, vl := d.keyLen, d.valLen
	if flag&0x08 == 0 {
		if b[p] >= 0x80 {
			return false, nil
		}
		kl = int(b[p])
		p++
	}
	if flag&0x10 == 0 {
		if b[p] >= 0x80 {
			return false, nil
		}
		vl = int(b[p])
		p++
	}
	if b[p] >= 0x80 {
		return false, nil
	}
	common := int(b[p])
	p++
	// The prefix covers the row (and its length), stays within the previous
	// key's row, family and qualifier and within this key's, which holds
	// the shared row and the block's family; the key buffer already fits.
	qualEnd := kl - tsTypeLen
	if common < 2+d.rowLen || common > d.keyLen-tsTypeLen || common > qualEnd ||
		qualEnd < 2+d.rowLen+d.famWS || kl > len(d.key) {
		return false, nil
	}
	n := qualEnd - common
	tsLen := 8 - int(flag&0x07)
	end := p + n + tsLen
	if flag&0x20 == 0 {
		end++ // the type byte
	}
	sameValue := flag&0x40 != 0
	if sameValue {
		if vl != len(d.value) {
			return false, nil
		}
	} else {
		end += vl
	}
	if end > len(b) {
		return false, nil
	}
	// From here every read is inside the block.
	k := d.key
	copy(k[common:qualEnd], b[p:p+n])
	p += n
	d.ts = replaceLowBytes(d.ts, b[p:p+tsLen])
	p += tsLen
	if flag&0x20 == 0 {
		d.typ = b[p]
		p++
	}
	d.repeat = RepeatRow
	if kl == d.keyLen && common == qualEnd {
		d.repeat = RepeatColumn
	}
	d.keyLen, d.valLen = kl, vl
	rl := d.rowLen
	fe := 2 + rl + d.famWS
	c.Row = k[2 : 2+rl : 2+rl]
	c.Family = k[2+rl+1 : fe : fe]
	c.Qualifier = k[fe:qualEnd:qualEnd]
	d.colKey = k[2:qualEnd:qualEnd]
	c.Timestamp = d.ts
	c.Type = cell.Type(d.typ)
	if !sameValue {
		d.value = b[p : p+vl : p+vl]
		p += vl
	}
	c.Value = d.value
	return true, d.encodedTail(c, p)
}

// replaceLowBytes is a FAST_DIFF timestamp: the previous one (prev) with
// its last len(low) bytes replaced by low, big-endian. It is assembled in
// a register: copying the bytes into an array and loading the eight back
// would stall the load on the partial stores before it.
func replaceLowBytes(prev int64, low []byte) int64 {
	var v uint64
	for _, x := range low {
		v = v<<8 | uint64(x)
	}
	n := 8 * uint(len(low)) // a shift by 64 gives 0: all 8 bytes replaced
	return int64(uint64(prev)>>n<<n | v)
}

// encodedTail reads what follows a cell in PREFIX/DIFF/FAST_DIFF blocks:
// [cint tagsLen + tags (maybe dictionary-compressed)] [VLong mvcc].
func (d *blockDecoder) encodedTail(c *cell.Cell, p int) error {
	b := d.data
	c.Tags = nil
	if d.tags {
		tl, q, err := readCInt(b, p)
		if err != nil {
			return errDecode("cell at block byte %d: tags length: %v", d.pos, err)
		}
		p = q
		if tl > 0 {
			if d.tagsCompressed {
				if tl > len(b)*maxTagExpansion {
					return errDecode("cell at block byte %d: tags length %d impossible for the block", d.pos, tl)
				}
				if cap(d.tagBuf) < tl {
					d.tagBuf = make([]byte, tl, max(tl, 256))
				}
				n, err := d.dict.uncompress(b[p:], d.tagBuf[:tl])
				if err != nil {
					return errDecode("cell at block byte %d: compressed tags: %v", d.pos, err)
				}
				p += n
				c.Tags = d.tagBuf[:tl:tl]
			} else {
				if tl > len(b)-p {
					return errDecode("cell at block byte %d: tags length %d overruns the block", d.pos, tl)
				}
				c.Tags = b[p : p+tl : p+tl]
				p += tl
			}
		}
	}
	return d.finish(c, p)
}

// readCInt reads HBase's "compressed int": unsigned LEB128, at most 5 bytes,
// within int32 range.
func readCInt(b []byte, p int) (int, int, error) {
	var v uint64
	for i := 0; i < 5; i++ {
		if p >= len(b) {
			return 0, p, errDecode("truncated varint")
		}
		x := b[p]
		p++
		v |= uint64(x&0x7f) << (7 * i)
		if x&0x80 == 0 {
			if v > 1<<31-1 {
				return 0, p, errDecode("varint %d overflows int32", v)
			}
			return int(v), p, nil
		}
	}
	return 0, p, errDecode("varint longer than 5 bytes")
}

// maxTagExpansion bounds how much a dictionary-compressed tag section can
// grow: a 2-byte dictionary reference can stand for an entry of up to 64 KiB.
const maxTagExpansion = 1 << 15

// tagDict is the LRU dictionary HBase uses to compress tags in encoded
// blocks: 127 entries, reset at each block, a hit moves an entry to the
// front, and a new entry takes a free index or the least recently used one.
// Entries point into the block buffer, which outlives the block's decoding.
type tagDict struct {
	entries    [127][]byte
	n          int
	prev, next [127]int16
	head, tail int16
}

func (t *tagDict) clear() { t.n, t.head, t.tail = 0, -1, -1 }

func (t *tagDict) unlink(i int16) {
	if t.prev[i] >= 0 {
		t.next[t.prev[i]] = t.next[i]
	} else {
		t.head = t.next[i]
	}
	if t.next[i] >= 0 {
		t.prev[t.next[i]] = t.prev[i]
	} else {
		t.tail = t.prev[i]
	}
}

func (t *tagDict) pushFront(i int16) {
	t.prev[i], t.next[i] = -1, t.head
	if t.head >= 0 {
		t.prev[t.head] = i
	}
	t.head = i
	if t.tail < 0 {
		t.tail = i
	}
}

func (t *tagDict) add(e []byte) {
	if t.n < len(t.entries) {
		i := int16(t.n)
		t.n++
		t.entries[i] = e
		t.pushFront(i)
		return
	}
	i := t.tail
	t.entries[i] = e
	t.unlink(i)
	t.pushFront(i)
}

func (t *tagDict) get(i int) ([]byte, bool) {
	if i < 0 || i >= t.n {
		return nil, false
	}
	t.unlink(int16(i))
	t.pushFront(int16(i))
	return t.entries[i], true
}

// uncompress expands dictionary-compressed tags from src into dst (whose
// length is the uncompressed tags length) and returns the bytes consumed.
// Each tag is 0xFF + varint length + bytes (a new dictionary entry) or a
// u16 dictionary index; dst receives u16 length + bytes per tag.
func (t *tagDict) uncompress(src, dst []byte) (int, error) {
	p, o := 0, 0
	for o < len(dst) {
		if p >= len(src) {
			return 0, errDecode("compressed tags truncated")
		}
		var e []byte
		if src[p] == 0xFF {
			l, q, err := readCInt(src, p+1)
			if err != nil {
				return 0, err
			}
			if l > len(src)-q {
				return 0, errDecode("compressed tag of %d bytes overruns the block", l)
			}
			e = src[q : q+l : q+l]
			p = q + l
			t.add(e)
		} else {
			if p+2 > len(src) {
				return 0, errDecode("compressed tags truncated")
			}
			idx := int(binary.BigEndian.Uint16(src[p:]))
			p += 2
			var ok bool
			if e, ok = t.get(idx); !ok {
				return 0, errDecode("tag dictionary index %d not defined", idx)
			}
		}
		if o+2+len(e) > len(dst) || len(e) > 0xFFFF {
			return 0, errDecode("tags overrun their declared length %d", len(dst))
		}
		binary.BigEndian.PutUint16(dst[o:], uint16(len(e)))
		copy(dst[o+2:], e)
		o += 2 + len(e)
	}
	return p, nil
}
