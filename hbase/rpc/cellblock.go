package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rekeyhq/rekey/cell"
)

// CodecClass is the cell block codec rekey names in its ConnectionHeader:
// KeyValues with their tags, so a cell's per-cell TTL, ACL or visibility
// tags reach the region server as they were read (with the tagless
// KeyValueCodec, a run through puts dropped them: copied cells with a
// per-cell TTL never expired). A cell without tags is encoded as the
// tagless codec would; a region server whose access or visibility
// controller forbids a client's tags refuses the mutation, loudly.
const CodecClass = "org.apache.hadoop.hbase.codec.KeyValueCodecWithTags"

// ErrCorrupt is wrapped by every error about a malformed frame or cell block
// received from a server.
var ErrCorrupt = errors.New("hbase/rpc: corrupt data from server")

// MaxTagsLen is the most tag bytes a cell may carry: the cell block, like
// the KeyValue format, gives them a u16 length.
const MaxTagsLen = 1<<16 - 1

// CheckTags returns an error when c's tags do not fit a cell block's u16
// tags length (AppendCell would wrap it and send other bytes). Cells read
// from HFiles always fit; the check keeps a transform's cells honest.
func CheckTags(c *cell.Cell) error {
	if len(c.Tags) > MaxTagsLen {
		return fmt.Errorf("hbase/rpc: cell %s has %d bytes of tags, more than a cell block carries (%d)", c, len(c.Tags), MaxTagsLen)
	}
	return nil
}

// CellBlockLen returns the number of bytes AppendCell adds for c.
func CellBlockLen(c *cell.Cell) int {
	n := 4 + 8 + cell.KeyLen(c) + len(c.Value)
	if len(c.Tags) > 0 {
		n += 2 + len(c.Tags)
	}
	return n
}

// AppendCell appends c to a KeyValueCodecWithTags cell block: the cell's
// length, key and value lengths, key, value, and, only when it has tags, a
// u16 tags length and the tags (the decoder tells the two apart by the
// cell's length). Tags come from HFiles, whose format bounds them by a u16
// length too. HBase keeps the tags a client sends this way
// (snapshot's TestTagsOnHBase; pipeline's TestTagsThroughRuns). Callers
// check the tags' length first (CheckTags).
func AppendCell(dst []byte, c *cell.Cell) []byte {
	klen := cell.KeyLen(c)
	n := 8 + klen + len(c.Value)
	if len(c.Tags) > 0 {
		n += 2 + len(c.Tags)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint32(dst, uint32(klen))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Value)))
	dst = cell.AppendKey(dst, c)
	dst = append(dst, c.Value...)
	if len(c.Tags) > 0 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(c.Tags)))
		dst = append(dst, c.Tags...)
	}
	return dst
}

// CellBlock reads cells one at a time from a cell block. The cells it
// returns point into the block.
type CellBlock struct {
	b   []byte
	off int
}

// NewCellBlock returns a reader over b.
func NewCellBlock(b []byte) *CellBlock { return &CellBlock{b: b} }

// Offset returns the offset of the next cell in the block.
func (r *CellBlock) Offset() int { return r.off }

// Remaining reports whether bytes are left to decode.
func (r *CellBlock) Remaining() bool { return r.off < len(r.b) }

// Next decodes the next cell into c. It returns an error wrapping
// ErrCorrupt, naming the offset, when the block is malformed or ends early.
func (r *CellBlock) Next(c *cell.Cell) error {
	b := r.b[r.off:]
	if len(b) < 12 {
		return fmt.Errorf("%w: cell block: %d bytes left at offset %d, need a 12-byte cell header", ErrCorrupt, len(b), r.off)
	}
	kvLen := uint64(binary.BigEndian.Uint32(b))
	keyLen := uint64(binary.BigEndian.Uint32(b[4:]))
	valLen := uint64(binary.BigEndian.Uint32(b[8:]))
	if kvLen > uint64(len(b)-4) {
		return fmt.Errorf("%w: cell block: cell at offset %d claims %d bytes, %d left", ErrCorrupt, r.off, kvLen, len(b)-4)
	}
	if 8+keyLen+valLen > kvLen {
		return fmt.Errorf("%w: cell block: cell at offset %d: key %d + value %d bytes overrun its length %d", ErrCorrupt, r.off, keyLen, valLen, kvLen)
	}
	kv := b[4 : 4+kvLen]
	key := kv[8 : 8+keyLen]
	*c = cell.Cell{}
	if err := cell.ParseKey(key, c); err != nil {
		return fmt.Errorf("%w: cell block: cell at offset %d: %v", ErrCorrupt, r.off, err)
	}
	vEnd := 8 + keyLen + valLen
	c.Value = kv[8+keyLen : vEnd : vEnd]
	if rest := kv[vEnd:]; len(rest) > 0 {
		// KeyValueCodecWithTags: u16 tags length, then the tags.
		if len(rest) < 2 || int(binary.BigEndian.Uint16(rest)) != len(rest)-2 {
			return fmt.Errorf("%w: cell block: cell at offset %d has %d trailing bytes that are not a tags section", ErrCorrupt, r.off, len(rest))
		}
		if len(rest) > 2 {
			c.Tags = rest[2:]
		}
	}
	r.off += 4 + int(kvLen)
	return nil
}

// DecodeCells decodes the next n cells of r and appends them to dst. The
// cells point into the block, so they live as long as the caller keeps it.
func DecodeCells(r *CellBlock, n int, dst []cell.Cell) ([]cell.Cell, error) {
	for i := 0; i < n; i++ {
		var c cell.Cell
		if err := r.Next(&c); err != nil {
			return dst, err
		}
		dst = append(dst, c)
	}
	return dst, nil
}
