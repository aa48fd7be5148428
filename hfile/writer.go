package hfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rekeyhq/rekey/cell"
)

// ErrOutOfOrder is matched (errors.Is) by the error Append returns for a
// cell that sorts before the previous one; its message names both keys.
var ErrOutOfOrder = errors.New("hfile: cell out of order")

// WriterOptions configure a Writer. The zero value writes what HBase's
// HFileOutputFormat2 writes for a column family with default settings,
// except that it has no tags section (set Tags) and no memstore
// timestamps (set SeqIDs): 64 KiB blocks, no encoding, no compression,
// CRC32C checksums, no bloom filter.
type WriterOptions struct {
	// Name identifies the file in errors (a path or URL).
	Name string
	// BlockSize is the uncompressed size at which a data block is closed
	// (HBase's BLOCKSIZE, default 64 KiB). A block ends only between
	// cells with different keys, so one big cell makes one big block.
	BlockSize int
	// Encoding is the data block encoding.
	Encoding Encoding
	// Codec compresses every block. The zero value (CodecLZO, which has
	// no Go implementation) means CodecNone; GZ, SNAPPY, LZ4 and ZSTD are
	// written in the framings HBase 2.x reads.
	Codec Codec
	// Bloom is the general bloom filter: BloomNone, BloomRow or BloomRowCol.
	Bloom BloomType
	// Tags gives every cell a tags section (HFile v3's MAX_TAGS_LEN), as
	// HFileOutputFormat2 does. Without it, appending a cell that carries
	// tags is an error rather than a silent drop.
	Tags bool
	// CompressTags dictionary-compresses tags in encoded blocks (the
	// column family's COMPRESS_TAGS); ignored without an encoding.
	CompressTags bool
	// SeqIDs writes each cell's SeqID after it (KEY_VALUE_VERSION 1 and
	// MAX_MEMSTORE_TS_KEY). HFileOutputFormat2 does, with every id 0;
	// without them a bulk-loaded file's cells take the sequence id the
	// region assigns to the file, which is the same thing.
	SeqIDs bool
	// BytesPerChecksum is the CRC32C chunk size (default 16 KiB).
	BytesPerChecksum int
	// IndexBlockSize is the size at which index blocks are cut
	// (hfile.index.block.max.size, default 128 KiB); smaller values make
	// deeper indexes.
	IndexBlockSize int
	// BulkLoadTime is the file info BULKLOAD_TIMESTAMP in milliseconds;
	// zero means the time of Close. CreateTime (hfile.CREATE_TIME_TS)
	// likewise.
	BulkLoadTime, CreateTime int64
	// SourceTask is BULKLOAD_SOURCE_TASK, the task that wrote the file
	// (HFileOutputFormat2 puts the task attempt id there); default "rekey".
	SourceTask string
	// FileInfo adds entries to the file info block. Keys starting with
	// "hfile." are HBase's own and are refused.
	FileInfo map[string][]byte
}

// BloomType is a column family's general bloom filter type.
type BloomType uint8

// Bloom filter types HBase 2.x writes for a family.
const (
	BloomNone BloomType = iota
	BloomRow
	BloomRowCol
)

// String returns HBase's name for the bloom type (BLOOM_FILTER_TYPE).
func (b BloomType) String() string {
	switch b {
	case BloomNone:
		return "NONE"
	case BloomRow:
		return "ROW"
	case BloomRowCol:
		return "ROWCOL"
	}
	return fmt.Sprintf("BloomType(%d)", uint8(b))
}

// Stats describes what a Writer has written so far.
type Stats struct {
	// Entries is the number of cells appended.
	Entries int64
	// Family is the family of every cell (files hold one family).
	Family []byte
	// FirstRow and LastRow bound the rows of the file: what a bulk load
	// checks against region boundaries. Nil before the first cell.
	FirstRow, LastRow []byte
	// Written counts the bytes passed to the io.Writer; after Close it is
	// the file size.
	Written int64
	// Pending counts the bytes of the open data block, not yet written
	// (uncompressed).
	Pending int64
}

// Writer writes one HFile v3 that HBase 2.x reads and bulk-loads: data
// blocks (optionally encoded and compressed) with CRC32C checksums, a
// block index of as many levels as its size needs, an optional bloom
// filter, the file info of a bulk-loaded file and the trailer. Cells must
// be appended in HBase's cell order (cell.Compare); equal keys are
// allowed and stay in one block. A Writer is not safe for concurrent use.
//
// Writes go to the io.Writer one block at a time; wrap it in a
// bufio.Writer for small blocks over a slow stream. Close writes the
// load-on-open section and the trailer but does not close the io.Writer.
type Writer struct {
	w    io.Writer
	o    WriterOptions
	name string
	err  error
	done bool

	off      int64
	z        *compressor
	out      []byte // compressed block under construction
	prevOff  [BlockIndexV1 + 1]int64
	totalUnc uint64

	blk      blockEncoder
	blockKey []byte // index key of the open data block

	// The last cell appended, its key only: the row and qualifier copied
	// into lastRow and lastQual (the row only when it changes: a wide row's
	// cells share it), the family the file's own.
	lastRow, lastQual []byte
	last              cell.Cell
	has               bool
	// lastTags copies the last cell's tags (files with tags only), which
	// the block may hold compressed: AppendDistinct compares them.
	lastTags []byte

	family   []byte
	firstRow []byte
	firstKey []byte

	entries                int64
	keyBytes, valueBytes   int64
	maxTags                int
	maxSeq                 uint64
	minTS, maxTS, minPutTS int64
	deleteFamilies         int64
	biggestLen             int64
	biggestKey             []byte

	firstData, lastData int64
	leaf, root          indexChunk
	levels              int
	indexUnc            uint64
	ibuf                []byte // index and meta block payloads

	bloom *bloomWriter
}

// NewWriter returns a Writer that writes an HFile to w.
func NewWriter(w io.Writer, o WriterOptions) (*Writer, error) {
	if o.Codec == CodecLZO {
		o.Codec = CodecNone
	}
	if o.BlockSize <= 0 {
		o.BlockSize = 64 << 10
	}
	if o.BytesPerChecksum <= 0 {
		o.BytesPerChecksum = 16 << 10
	}
	if o.BytesPerChecksum < headerSize {
		return nil, fmt.Errorf("hfile: writer %s: bytes per checksum %d below the %d-byte minimum", o.Name, o.BytesPerChecksum, headerSize)
	}
	if o.IndexBlockSize <= 0 {
		o.IndexBlockSize = maxIndexChunk
	}
	if o.SourceTask == "" {
		o.SourceTask = "rekey"
	}
	switch o.Encoding {
	case EncodingNone, EncodingPrefix, EncodingDiff, EncodingFastDiff, EncodingRowIndexV1:
	default:
		return nil, fmt.Errorf("%w: writer %s: data block encoding %s", ErrUnsupported, o.Name, o.Encoding)
	}
	if o.Bloom > BloomRowCol {
		return nil, fmt.Errorf("%w: writer %s: bloom filter %s", ErrUnsupported, o.Name, o.Bloom)
	}
	for k := range o.FileInfo {
		if strings.HasPrefix(k, "hfile.") {
			return nil, fmt.Errorf("hfile: writer %s: file info key %q is reserved for HBase", o.Name, k)
		}
	}
	z, err := newCompressor(o.Codec)
	if err != nil {
		return nil, err
	}
	wr := &Writer{w: w, o: o, name: o.Name, z: z, firstData: -1, lastData: -1, levels: 1,
		minTS: cell.LatestTimestamp, maxTS: -1, minPutTS: cell.LatestTimestamp,
		ibuf: make([]byte, headerSize, 4<<10)}
	if wr.name == "" {
		wr.name = "hfile"
	}
	for i := range wr.prevOff {
		wr.prevOff[i] = -1
	}
	wr.blk = blockEncoder{enc: o.Encoding, tags: o.Tags, mvcc: o.SeqIDs, compressTags: o.CompressTags && o.Encoding != EncodingNone && o.Encoding != EncodingRowIndexV1}
	wr.blk.reset()
	if o.Bloom != BloomNone {
		wr.bloom = newBloomWriter(o.Bloom)
	}
	return wr, nil
}

// Append adds c to the file. The writer copies what it keeps, so c's
// slices may be reused once Append returns. A cell that sorts before the
// previous one (ErrOutOfOrder), belongs to another family, has tags the
// file has no room for, or cannot be serialized is refused with an error
// and nothing is written for it; after a write error every call fails.
func (w *Writer) Append(c *cell.Cell) error {
	_, err := w.add(c, false)
	return err
}

// Kept says what AppendDistinct did with a cell.
type Kept uint8

const (
	// Appended: the cell was written.
	Appended Kept = iota
	// Duplicate: the cell has the key, value and tags of the cell appended
	// last, and was not written.
	Duplicate
	// Collision: the cell has the key of the cell appended last but
	// another value or other tags; it was not written, the first stays.
	Collision
)

// AppendDistinct is Append for a file that keeps one cell per key: a cell
// whose key (row, family, qualifier, timestamp and type) is that of the
// cell appended last is not written, and the answer says whether it
// repeats that cell whole (Duplicate) or only its key (Collision). It
// refuses what Append refuses, with the same errors. A caller that keeps
// one cell per key needs no copy of the last cell of its own: the writer
// compares once (LastValue gives the kept value for a message).
func (w *Writer) AppendDistinct(c *cell.Cell) (Kept, error) {
	return w.add(c, true)
}

// LastValue returns the value of the cell appended last, nil before the
// first. It points into the open block: valid until the next call on w.
func (w *Writer) LastValue() []byte {
	if !w.has || w.blk.n == 0 {
		return nil
	}
	return w.blk.lastValue()
}

// LastRow returns the row of the cell appended last, nil before the
// first. It is the writer's own buffer: valid until the next call on w.
func (w *Writer) LastRow() []byte {
	if !w.has {
		return nil
	}
	return w.last.Row
}

// AppendLastKey appends the key of the cell appended last (cell.AppendKey's
// layout) to dst; dst unchanged before the first cell.
func (w *Writer) AppendLastKey(dst []byte) []byte {
	if !w.has {
		return dst
	}
	return cell.AppendKey(dst, &w.last)
}

// add appends c; distinct says a cell with the last cell's key is
// reported instead of written.
func (w *Writer) add(c *cell.Cell, distinct bool) (Kept, error) {
	if w.err != nil {
		return Appended, w.err
	}
	if w.done {
		return Appended, fmt.Errorf("hfile: writer %s: Append after Close", w.name)
	}
	if err := w.check(c); err != nil {
		return Appended, err
	}
	dup := false
	// The row, and in a row the qualifier, are compared once, as common
	// prefixes: they order the cells, and serve the bloom filter, the copy
	// of the last key and the delta encodings (which store a key after
	// what it shares with the one before). check has made the families
	// equal.
	var pre prefixes
	sameRow := false
	if w.has {
		pre.row = commonPrefix(w.last.Row, c.Row)
		sameRow = pre.row == len(c.Row) && pre.row == len(w.last.Row)
		var cmp int
		if sameRow {
			pre.qual = commonPrefix(w.last.Qualifier, c.Qualifier)
			if cmp = compareFrom(w.last.Qualifier, c.Qualifier, pre.qual); cmp == 0 {
				cmp = cell.CompareVersion(&w.last, c)
			}
		} else {
			cmp = compareFrom(w.last.Row, c.Row, pre.row)
		}
		switch {
		case cmp > 0:
			return Appended, fmt.Errorf("%w: writer %s: cell %s appended after %s", ErrOutOfOrder, w.name, c.String(), w.last.String())
		case cmp == 0 && distinct:
			// The last cell is still in the open block: a block is
			// finished only when the next cell is added.
			if bytes.Equal(w.blk.lastValue(), c.Value) && bytes.Equal(w.lastTags, c.Tags) {
				return Duplicate, nil
			}
			return Collision, nil
		case cmp == 0:
			dup = true
		}
	} else {
		w.family = append(w.family[:0], c.Family...)
		w.firstRow = append(w.firstRow[:0], c.Row...)
		w.firstKey = cell.AppendKey(w.firstKey[:0], c)
	}
	if w.blk.n > 0 && !dup && (w.blk.unenc >= w.o.BlockSize || w.blk.encodedSize() >= w.o.BlockSize) {
		if err := w.finishBlock(); err != nil {
			return Appended, err
		}
	}
	var prev *cell.Cell
	if w.blk.n == 0 {
		if w.has {
			w.blockKey = midKey(w.blockKey[:0], &w.last, c)
		} else {
			w.blockKey = cell.AppendKey(w.blockKey[:0], c)
		}
	} else {
		prev = &w.last
	}
	if w.bloom != nil {
		var before *cell.Cell
		if w.has {
			before = &w.last
		}
		w.bloom.add(c, before, sameRow)
	}
	w.blk.addKnown(c, prev, pre)

	// Remember the cell (its key only) for the next order check.
	// Field by field: assigning a whole Cell costs more than the copies.
	if !sameRow {
		w.lastRow = append(w.lastRow[:0], c.Row...)
		w.last.Row = w.lastRow
		w.last.Family = w.family
	}
	w.lastQual = append(w.lastQual[:0], c.Qualifier...)
	w.last.Qualifier = w.lastQual
	w.last.Timestamp, w.last.Type = c.Timestamp, c.Type
	if w.o.Tags {
		w.lastTags = append(w.lastTags[:0], c.Tags...)
	}
	w.has = true

	kl := int64(cell.KeyLen(c))
	w.entries++
	w.keyBytes += kl
	w.valueBytes += int64(len(c.Value))
	w.maxTags = max(w.maxTags, len(c.Tags))
	w.maxSeq = max(w.maxSeq, c.SeqID)
	// The time range of the file, as HBase's tracker keeps it: column
	// and family deletes cover every older version, so they reach 0.
	w.minTS = min(w.minTS, c.Timestamp)
	w.maxTS = max(w.maxTS, c.Timestamp)
	switch c.Type {
	case cell.Put:
		w.minPutTS = min(w.minPutTS, c.Timestamp)
	case cell.DeleteFamily:
		w.deleteFamilies++
		w.minTS = min(w.minTS, 0)
	case cell.DeleteColumn:
		w.minTS = min(w.minTS, 0)
	}
	size := 8 + kl + int64(len(c.Value))
	if w.o.Tags {
		size += 2 + int64(len(c.Tags))
	}
	if size > w.biggestLen {
		w.biggestLen = size
		w.biggestKey = cell.AppendKey(w.biggestKey[:0], c)
	}
	return Appended, nil
}

// compareFrom compares a and b, which share their first n bytes.
func compareFrom(a, b []byte, n int) int {
	switch {
	case n < len(a) && n < len(b):
		return int(a[n]) - int(b[n])
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// check refuses cells the file cannot hold.
func (w *Writer) check(c *cell.Cell) error {
	switch {
	case len(c.Family) == 0:
		return fmt.Errorf("hfile: writer %s: cell %s has no family", w.name, c.String())
	case len(c.Row) > 32767:
		return fmt.Errorf("hfile: writer %s: row of %d bytes exceeds HBase's 32767-byte limit: %s", w.name, len(c.Row), c.String())
	case len(c.Family) > 127:
		return fmt.Errorf("hfile: writer %s: family of %d bytes exceeds HBase's 127-byte limit: %s", w.name, len(c.Family), c.String())
	case !c.Type.Valid():
		return fmt.Errorf("hfile: writer %s: cell type %d is not a KeyValue type: %s", w.name, uint8(c.Type), c.String())
	case w.has && !cell.SameName(c.Family, w.family):
		return fmt.Errorf("hfile: writer %s: cell %s has family %q but the file holds family %q", w.name, c.String(), c.Family, w.family)
	case len(c.Tags) > 0 && !w.o.Tags:
		return fmt.Errorf("hfile: writer %s: cell %s has %d bytes of tags but the writer was opened without Tags", w.name, c.String(), len(c.Tags))
	case len(c.Tags) > 0xFFFF:
		return fmt.Errorf("hfile: writer %s: cell %s has %d bytes of tags, more than 65535", w.name, c.String(), len(c.Tags))
	}
	for t := c.Tags; len(t) > 0; {
		if len(t) < 3 {
			return fmt.Errorf("hfile: writer %s: cell %s: tags end in a truncated tag", w.name, c.String())
		}
		l := int(binary.BigEndian.Uint16(t))
		if l < 1 || 2+l > len(t) {
			return fmt.Errorf("hfile: writer %s: cell %s: a tag of length %d overruns the %d bytes left", w.name, c.String(), l, len(t)-2)
		}
		t = t[2+l:]
	}
	if int64(cell.KeyLen(c))+int64(len(c.Value)) > 1<<31-1-64 {
		return fmt.Errorf("hfile: writer %s: cell %s is larger than 2 GiB", w.name, c.String())
	}
	return nil
}

// midKey appends the index key HBase gives a data block: a key that sorts
// after the previous block's last cell and no later than this block's
// first, shortened where possible (the first cell of the shortest row, or
// of the shortest qualifier, that lies between them).
func midKey(dst []byte, left, right *cell.Cell) []byte {
	if !bytes.Equal(left.Row, right.Row) {
		m := cell.FirstOnRow(midBytes(left.Row, right.Row))
		return cell.AppendKey(dst, &m)
	}
	if bytes.Equal(left.Family, right.Family) && !bytes.Equal(left.Qualifier, right.Qualifier) {
		m := cell.Cell{Row: right.Row, Family: right.Family, Qualifier: midBytes(left.Qualifier, right.Qualifier), Timestamp: cell.LatestTimestamp, Type: cell.Maximum}
		return cell.AppendKey(dst, &m)
	}
	return cell.AppendKey(dst, right)
}

// midBytes returns the shortest prefix-based byte string s with
// left < s <= right (left < right): either right cut one byte after the
// first difference, or left's prefix with that byte incremented when that
// still sorts below right. It aliases its inputs only when returning
// right's prefix unchanged, which the caller copies.
func midBytes(left, right []byte) []byte {
	d := commonPrefix(left, right)
	if d >= len(left) || d >= len(right) {
		return right[:min(d+1, len(right))]
	}
	if left[d] < 0xFF && left[d]+1 < right[d] {
		m := make([]byte, d+1)
		copy(m, left[:d])
		m[d] = left[d] + 1
		return m
	}
	return right[:d+1]
}

// finishBlock writes the open data block and indexes it.
func (w *Writer) finishBlock() error {
	if w.blk.n == 0 {
		return nil
	}
	bt := w.blk.finish()
	off := w.off
	size, err := w.writeBlock(bt, &w.blk.buf)
	if err != nil {
		return err
	}
	if w.firstData < 0 {
		w.firstData = off
	}
	w.lastData = off
	w.leaf.add(w.blockKey, off, int32(size), -1)
	w.blk.reset()
	// Inline blocks follow the data block, index first, as HBase orders
	// its inline writers.
	if w.leaf.blockSize() >= w.o.IndexBlockSize {
		if err := w.writeLeaf(); err != nil {
			return err
		}
	}
	if w.bloom != nil {
		if err := w.bloom.flushChunks(w, false); err != nil {
			return err
		}
	}
	return nil
}

// writeLeaf writes the current leaf chunk as an inline leaf index block.
func (w *Writer) writeLeaf() error {
	w.ibuf = w.leaf.appendNonRoot(w.ibuf[:headerSize])
	off := w.off
	payload := len(w.ibuf) - headerSize
	size, err := w.writeBlock(BlockLeafIndex, &w.ibuf)
	if err != nil {
		return err
	}
	w.indexUnc += uint64(payload)
	w.levels = 2
	w.root.add(w.leaf.key(0), off, int32(size), int64(w.root.dataBlocks()+w.leaf.n()))
	w.leaf.clear()
	return nil
}

// dataBlocks is how many data blocks the leaves under a root chunk index.
func (c *indexChunk) dataBlocks() int {
	if len(c.subs) == 0 {
		return 0
	}
	return int(c.subs[len(c.subs)-1])
}

// writeBlock frames the payload in (*b)[headerSize:] as one block: the
// payload compressed with the file's codec, the 33-byte header in front,
// CRC32C checksums of header and stored payload behind, and writes it. It
// returns the block's on-disk size.
func (w *Writer) writeBlock(bt BlockType, b *[]byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	payload := len(*b) - headerSize
	block := *b
	compressed := w.o.Codec != CodecNone && payload > 0
	if compressed {
		if cap(w.out) < headerSize {
			w.out = make([]byte, headerSize, len(block)+1024)
		}
		var err error
		w.out, err = w.z.appendCompressed(w.out[:headerSize], block[headerSize:])
		if err != nil {
			w.err = fmt.Errorf("hfile: writer %s: %s block at offset %d: %w", w.name, bt, w.off, err)
			return 0, w.err
		}
		block = w.out
	}
	bpc := w.o.BytesPerChecksum
	data := len(block)
	chunks := (data + bpc - 1) / bpc
	h := block[:headerSize]
	copy(h, blockMagics[bt])
	binary.BigEndian.PutUint32(h[8:], uint32(data-headerSize+4*chunks))
	binary.BigEndian.PutUint32(h[12:], uint32(payload))
	kind := bt
	if bt == BlockEncodedData {
		kind = BlockData
	}
	binary.BigEndian.PutUint64(h[16:], uint64(w.prevOff[kind]))
	h[24] = checksumCRC32C
	binary.BigEndian.PutUint32(h[25:], uint32(bpc))
	binary.BigEndian.PutUint32(h[29:], uint32(data))
	for s := 0; s < data; s += bpc {
		block = binary.BigEndian.AppendUint32(block, crc32.Checksum(block[s:min(s+bpc, data)], castagnoli))
	}
	// Keep whichever buffer grew for the next block.
	if compressed {
		w.out = block
	} else {
		*b = block
	}
	if _, err := w.w.Write(block); err != nil {
		w.err = fmt.Errorf("hfile: writer %s: writing %s block at offset %d: %w", w.name, bt, w.off, err)
		return 0, w.err
	}
	w.prevOff[kind] = w.off
	w.off += int64(len(block))
	w.totalUnc += uint64(headerSize + payload)
	return len(block), nil
}

// Size is the file's size so far: the bytes written plus the open data
// block's. It allocates nothing, for callers that check it per cell.
func (w *Writer) Size() int64 {
	if w.blk.n == 0 {
		return w.off
	}
	return w.off + int64(len(w.blk.buf)-headerSize)
}

// StartsRow reports whether c would begin a new row: true for the first
// cell, else whether its row differs from the last cell's. A caller that
// rolls over to a new file at a size limit does so only when
//
//	w.Size() >= limit && w.StartsRow(c)
//
// so no row is split across files (HFileOutputFormat2's rule too: a row
// larger than the limit stays whole in one file).
func (w *Writer) StartsRow(c *cell.Cell) bool {
	return !w.has || !bytes.Equal(w.last.Row, c.Row)
}

// Stats reports what has been written so far. The slices are copies the
// caller may keep.
func (w *Writer) Stats() Stats {
	s := Stats{Entries: w.entries, Written: w.off}
	if w.blk.n > 0 {
		s.Pending = int64(len(w.blk.buf) - headerSize)
	}
	if w.has {
		s.Family = bytes.Clone(w.family)
		s.FirstRow = bytes.Clone(w.firstRow)
		s.LastRow = bytes.Clone(w.last.Row)
	}
	return s
}

// Close writes the last data block, the rest of the index, the bloom
// filter, the file info and the trailer. It does not close the
// underlying io.Writer. A file with no cells is a valid, empty HFile
// (HBase refuses to bulk-load it).
func (w *Writer) Close() error {
	if w.done {
		return w.err
	}
	w.done = true
	if w.err != nil {
		return w.err
	}
	if err := w.finishBlock(); err != nil {
		return err
	}
	if w.leaf.n() > 0 {
		if w.root.n() == 0 {
			// Never wrote a leaf: the entries become the root.
			w.leaf, w.root = w.root, w.leaf
		} else if err := w.writeLeaf(); err != nil {
			return err
		}
	}
	if w.bloom != nil {
		if err := w.bloom.flushChunks(w, true); err != nil {
			return err
		}
	}
	var mid []byte
	if w.levels > 1 {
		mid = w.root.midKeyMetadata(nil)
	}
	for w.root.rootSize > w.o.IndexBlockSize && w.root.n() > minIndexEntries && w.levels < maxIndexLevels {
		if err := w.writeIntermediateLevel(); err != nil {
			return err
		}
		w.levels++
	}
	loadOnOpen := w.off
	w.ibuf = append(w.root.appendRoot(w.ibuf[:headerSize]), mid...)
	w.indexUnc += uint64(len(w.ibuf) - headerSize)
	unc := w.totalUnc
	if _, err := w.writeBlock(BlockRootIndex, &w.ibuf); err != nil {
		return err
	}
	w.totalUnc = unc             // HBase leaves the root index out of this total
	w.ibuf = w.ibuf[:headerSize] // an empty meta index
	if _, err := w.writeBlock(BlockRootIndex, &w.ibuf); err != nil {
		return err
	}
	fileInfoOff := w.off
	w.ibuf = w.appendFileInfo(w.ibuf[:headerSize])
	if _, err := w.writeBlock(BlockFileInfo, &w.ibuf); err != nil {
		return err
	}
	if w.bloom != nil && w.bloom.keys > 0 {
		w.ibuf = w.bloom.appendMeta(w.ibuf[:headerSize])
		if _, err := w.writeBlock(BlockGeneralBloomMeta, &w.ibuf); err != nil {
			return err
		}
	}
	return w.writeTrailer(uint64(fileInfoOff), uint64(loadOnOpen))
}

// writeIntermediateLevel cuts the root chunk into intermediate index
// blocks (each at least minIndexEntries entries, closed once its root
// form reaches the index block size) and makes their entries the root.
func (w *Writer) writeIntermediateLevel() error {
	var parent, chunk indexChunk
	flush := func() error {
		w.ibuf = chunk.appendNonRoot(w.ibuf[:headerSize])
		off := w.off
		payload := len(w.ibuf) - headerSize
		size, err := w.writeBlock(BlockIntermediateIndex, &w.ibuf)
		if err != nil {
			return err
		}
		w.indexUnc += uint64(payload)
		parent.add(chunk.key(0), off, int32(size), -1)
		chunk.clear()
		return nil
	}
	for i := 0; i < w.root.n(); i++ {
		chunk.add(w.root.key(i), w.root.offsets[i], w.root.sizes[i], -1)
		if i >= minIndexEntries && chunk.rootSize >= w.o.IndexBlockSize {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if chunk.n() > 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	w.root = parent
	return nil
}

// appendFileInfo appends the FILEINF2 payload: PBUF and a delimited
// FileInfoProto whose entries are sorted by key, as HBase's TreeMap keeps
// them. The entries are those HBase's HFile writer, StoreFileWriter and
// HFileOutputFormat2 write for a bulk-load file.
func (w *Writer) appendFileInfo(b []byte) []byte {
	now := time.Now().UnixMilli()
	i32 := func(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
	i64 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	boolean := func(v bool) []byte {
		if v {
			return []byte{0xFF}
		}
		return []byte{0}
	}
	info := map[string][]byte{}
	for k, v := range w.o.FileInfo {
		info[k] = v
	}
	avg := func(total int64) int32 {
		if w.entries == 0 {
			return 0
		}
		return int32(total / w.entries)
	}
	if w.has {
		info["hfile.LASTKEY"] = cell.AppendKey(nil, &w.last)
	}
	info["hfile.AVG_KEY_LEN"] = i32(avg(w.keyBytes))
	info["hfile.AVG_VALUE_LEN"] = i32(avg(w.valueBytes))
	created := w.o.CreateTime
	if created == 0 {
		created = now
	}
	info["hfile.CREATE_TIME_TS"] = i64(created)
	if w.biggestKey != nil {
		info["hfile.KEY_OF_BIGGEST_CELL"] = w.biggestKey
		info["hfile.LEN_OF_BIGGEST_CELL"] = i64(w.biggestLen)
	}
	if w.o.Tags {
		info["hfile.MAX_TAGS_LEN"] = i32(int32(w.maxTags))
		info["hfile.TAGS_COMPRESSED"] = boolean(w.blk.compressTags)
	}
	if w.o.SeqIDs {
		info["MAX_MEMSTORE_TS_KEY"] = i64(int64(w.maxSeq))
		info["KEY_VALUE_VERSION"] = i32(1)
	}
	if w.o.Encoding != EncodingNone {
		info["DATA_BLOCK_ENCODING"] = []byte(w.o.Encoding.String())
	}
	if w.bloom != nil && w.bloom.keys > 0 {
		info["BLOOM_FILTER_TYPE"] = []byte(w.o.Bloom.String())
		info["LAST_BLOOM_KEY"] = w.bloom.lastKey
	}
	info["DELETE_FAMILY_COUNT"] = i64(w.deleteFamilies)
	bulk := w.o.BulkLoadTime
	if bulk == 0 {
		bulk = now
	}
	info["BULKLOAD_TIMESTAMP"] = i64(bulk)
	info["BULKLOAD_SOURCE_TASK"] = []byte(w.o.SourceTask)
	info["MAJOR_COMPACTION_KEY"] = boolean(true)
	info["EXCLUDE_FROM_MINOR_COMPACTION"] = boolean(false)
	info["TIMERANGE"] = append(i64(w.minTS), i64(w.maxTS)...)
	info["EARLIEST_PUT_TS"] = i64(w.minPutTS)

	keys := make([]string, 0, len(info))
	for k := range info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var msg []byte
	for _, k := range keys {
		v := info[k]
		n := protowire.SizeTag(1) + protowire.SizeBytes(len(k)) + protowire.SizeTag(2) + protowire.SizeBytes(len(v))
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendVarint(msg, uint64(n))
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendString(msg, k)
		msg = protowire.AppendTag(msg, 2, protowire.BytesType)
		msg = protowire.AppendBytes(msg, v)
	}
	b = append(b, pbMagic...)
	b = protowire.AppendVarint(b, uint64(len(msg)))
	return append(b, msg...)
}

// comparatorName is what HBase 2.x records for its default cell
// comparator: the HBase 1.x class name, so 1.x readers open the file.
const comparatorName = "org.apache.hadoop.hbase.KeyValue$KVComparator"

// writeTrailer writes the 4096-byte v3 trailer: magic, a delimited
// FileTrailerProto, zero padding, and the version (minor 3, major 3).
func (w *Writer) writeTrailer(fileInfoOff, loadOnOpen uint64) error {
	var p []byte
	field := func(n protowire.Number, v uint64) {
		p = protowire.AppendTag(p, n, protowire.VarintType)
		p = protowire.AppendVarint(p, v)
	}
	field(1, fileInfoOff)
	field(2, loadOnOpen)
	field(3, w.indexUnc)
	field(4, w.totalUnc+trailerSizeV3)
	field(5, uint64(w.root.n()))
	field(6, 0)
	field(7, uint64(w.entries))
	field(8, uint64(w.levels))
	field(9, uint64(w.firstData))
	field(10, uint64(w.lastData))
	p = protowire.AppendTag(p, 11, protowire.BytesType)
	p = protowire.AppendString(p, comparatorName)
	field(12, uint64(w.o.Codec))
	t := make([]byte, 0, trailerSizeV3)
	t = append(t, trailerMagic...)
	t = protowire.AppendVarint(t, uint64(len(p)))
	t = append(t, p...)
	t = t[:trailerSizeV3-4]
	t = binary.BigEndian.AppendUint32(t, 3<<24|3)
	if _, err := w.w.Write(t); err != nil {
		w.err = fmt.Errorf("hfile: writer %s: writing the trailer at offset %d: %w", w.name, w.off, err)
		return w.err
	}
	w.off += int64(len(t))
	return nil
}
