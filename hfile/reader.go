package hfile

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rekeyhq/rekey/cell"
)

// Reader reads one HFile. Open parses the trailer and the load-on-open
// section once; iterators then read data blocks on demand. A Reader is safe
// for concurrent use by several iterators (each owns its buffers), provided
// the io.ReaderAt is, as io.ReaderAt implementations must be.
type Reader struct {
	r       io.ReaderAt
	closer  io.Closer
	size    int64
	name    string
	trailer Trailer
	info    FileInfo
	// root is the root data index; its keys alias loadOnOpen.
	root       []IndexEntry
	meta       []IndexEntry
	loadOnOpen []byte
	// midKey holds the 16-byte mid-key metadata of multi-level indexes.
	midKey []byte
	// rootSize is the root index block's uncompressed payload size.
	rootSize int
	// blocks describes the load-on-open blocks, for inspect.
	blocks []BlockInfo
	// checksumType and bytesPerChecksum are the file's: HBase writes every
	// block of a file with the same two, so a block that differs (above
	// all one that claims no checksum) is damaged.
	checksumType     byte
	bytesPerChecksum int
}

// BlockInfo describes one block for inspection: where it is, its type and
// sizes.
type BlockInfo struct {
	Offset           int64
	Type             BlockType
	OnDiskSize       int
	UncompressedSize int
}

// Open reads the trailer and the load-on-open section (root data index,
// meta index, file info; bloom metadata is skipped) and validates them.
// name is used in error messages (a path or URL). Open itself must not run
// concurrently with other users of r; the returned Reader's iterators may.
// Closing the Reader does not close r.
func Open(r io.ReaderAt, size int64, name string) (*Reader, error) {
	rd := &Reader{r: r, size: size, name: name}
	if err := rd.open(); err != nil {
		return nil, err
	}
	return rd, nil
}

// OpenFile opens a local HFile; Close closes the file.
func OpenFile(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hfile: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hfile: %w", err)
	}
	rd, err := Open(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	rd.closer = f
	return rd, nil
}

// readAt reads len(b) bytes at off, mapping a short file to ErrCorrupt.
func (rd *Reader) readAt(b []byte, off int64, what string) error {
	return rd.readAtFrom(rd.r, b, off, what)
}

// readAtFrom is readAt from src, which holds the same bytes as rd.r.
func (rd *Reader) readAtFrom(src io.ReaderAt, b []byte, off int64, what string) error {
	if off < 0 || off+int64(len(b)) > rd.size {
		return corruptf(rd.name, -1, 0, "%s at offset %d (%d bytes) lies outside the %d-byte file", what, off, len(b), rd.size)
	}
	n, err := src.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptf(rd.name, -1, 0, "file truncated: %s at offset %d: read %d of %d bytes", what, off, n, len(b))
	}
	return fmt.Errorf("hfile: %s: reading %s at offset %d: %w", rd.name, what, off, err)
}

// openTail is how much of a file's end Open reads at once: the trailer
// (4 KiB in v3) and, in most files, the whole load-on-open section (root
// data index, meta index, file info, bloom metadata), which is a few KiB
// to a few tens of KiB for store files of up to a few GB.
const openTail = 64 << 10

func (rd *Reader) open() error {
	if rd.size < 4 {
		return corruptf(rd.name, -1, 0, "file is %d bytes, too short for an HFile", rd.size)
	}
	// One read for the trailer and, when it fits in openTail, the
	// load-on-open section before it: on HDFS every positional read is a
	// new block read on a DataNode (a connection and a round trip).
	tail := make([]byte, min(rd.size, openTail))
	tailStart := rd.size - int64(len(tail))
	if err := rd.readAt(tail, tailStart, "trailer"); err != nil {
		return err
	}
	t, err := parseTrailer(tail[len(tail)-int(min(int64(len(tail)), maxTrailerSize)):], rd.size, rd.name)
	if err != nil {
		return err
	}
	rd.trailer = t
	if t.Encrypted {
		return unsupportedf(rd.name, "the file is encrypted (trailer carries a wrapped data key)")
	}
	if !t.Codec.supported() {
		return unsupportedf(rd.name, "compression codec %s (trailer ordinal %d)", t.Codec, uint32(t.Codec))
	}
	if rawBytesComparator(t.ComparatorClassName) {
		return unsupportedf(rd.name, "keys are raw bytes (comparator %s), not HBase cells", t.ComparatorClassName)
	}
	end := rd.size - int64(t.Size)
	tOff := end
	if t.LoadOnOpenOffset >= uint64(end) || t.FileInfoOffset < t.LoadOnOpenOffset || t.FileInfoOffset >= uint64(end) {
		return corruptf(rd.name, tOff, BlockTrailer, "load-on-open offset %d / file info offset %d outside the file's %d bytes before the trailer", t.LoadOnOpenOffset, t.FileInfoOffset, end)
	}
	if err := rd.checkTrailer(); err != nil {
		return err
	}
	// One read for the whole load-on-open section, unless the trailer's
	// read holds it already.
	start := int64(t.LoadOnOpenOffset)
	rd.loadOnOpen = make([]byte, end-start)
	if start >= tailStart {
		copy(rd.loadOnOpen, tail[start-tailStart:])
	} else if err := rd.readAt(rd.loadOnOpen, start, "load-on-open section"); err != nil {
		return err
	}
	var dc decompressor
	pos := 0
	next := func(want BlockType) ([]byte, error) {
		off := start + int64(pos)
		h, err := parseHeader(rd.loadOnOpen[pos:], off, end)
		if err != nil {
			return nil, corruptf(rd.name, off, want, "%v", err)
		}
		if h.typ != want {
			return nil, corruptf(rd.name, off, h.typ, "expected a %s block here", want)
		}
		if pos == 0 {
			rd.checksumType, rd.bytesPerChecksum = h.checksumType, h.bytesPerChecksum
		} else if err := rd.checkChecksumKind(&h); err != nil {
			return nil, corruptf(rd.name, off, h.typ, "%v", err)
		}
		raw := rd.loadOnOpen[pos : pos+h.onDiskSize()]
		if err := verifyChecksums(&h, raw); err != nil {
			return nil, corruptf(rd.name, off, h.typ, "%v", err)
		}
		p, err := dc.decompress(t.Codec, nil, raw[headerSize:h.onDiskDataSizeWithHeader], h.uncompressedSize)
		if err != nil {
			return nil, corruptf(rd.name, off, h.typ, "%v", err)
		}
		rd.blocks = append(rd.blocks, BlockInfo{Offset: off, Type: h.typ, OnDiskSize: h.onDiskSize(), UncompressedSize: h.uncompressedSize})
		pos += h.onDiskSize()
		return p, nil
	}
	rootOff := start
	p, err := next(BlockRootIndex)
	if err != nil {
		return err
	}
	var rest []byte
	if rd.root, rest, err = parseRootIndex(p, int(t.DataIndexCount)); err != nil {
		return corruptf(rd.name, rootOff, BlockRootIndex, "data index: %v", err)
	}
	// The root block holds exactly the trailer's count of entries, plus
	// 16 bytes of mid-key metadata when there are lower levels: bytes
	// left over mean the trailer's count or level number is wrong.
	wantRest := 0
	if t.NumDataIndexLevels >= 2 {
		wantRest = 16
	}
	if len(rest) != wantRest {
		return corruptf(rd.name, rootOff, BlockRootIndex, "data index: %d bytes follow the %d root entries the trailer counts, want %d for a %d-level index", len(rest), t.DataIndexCount, wantRest, t.NumDataIndexLevels)
	}
	if wantRest > 0 {
		rd.midKey = rest[:16]
	}
	for i, e := range rd.root {
		if e.Offset < 0 || e.Offset >= int64(t.LoadOnOpenOffset) || e.Size < headerSize || e.Offset+int64(e.Size) > int64(t.LoadOnOpenOffset) {
			return corruptf(rd.name, rootOff, BlockRootIndex, "entry %d points at offset %d size %d, outside the block section", i, e.Offset, e.Size)
		}
	}
	rd.rootSize = len(p)
	if err := rd.checkRootIndex(rootOff, len(p)); err != nil {
		return err
	}
	metaOff := start + int64(pos)
	if p, err = next(BlockRootIndex); err != nil {
		return err
	}
	if rd.meta, rest, err = parseRootIndex(p, int(t.MetaIndexCount)); err != nil {
		return corruptf(rd.name, metaOff, BlockRootIndex, "meta index: %v", err)
	}
	if len(rest) != 0 {
		return corruptf(rd.name, metaOff, BlockRootIndex, "meta index: %d bytes follow the %d entries the trailer counts", len(rest), t.MetaIndexCount)
	}
	fiOff := start + int64(pos)
	if uint64(fiOff) != t.FileInfoOffset {
		return corruptf(rd.name, fiOff, BlockFileInfo, "file info block found at %d but the trailer says %d", fiOff, t.FileInfoOffset)
	}
	if p, err = next(BlockFileInfo); err != nil {
		return err
	}
	if rd.info, err = parseFileInfo(p); err != nil {
		return corruptf(rd.name, fiOff, BlockFileInfo, "%v", err)
	}
	if rd.info.Encoding == EncodingPrefixTree {
		return unsupportedf(rd.name, "data block encoding PREFIX_TREE (removed in HBase 2.0)")
	}
	// HBase writes LASTKEY exactly when the file has a cell.
	if hasLast := rd.info.LastKey != nil; hasLast != (t.EntryCount > 0) {
		return corruptf(rd.name, fiOff, BlockFileInfo, "file info %s hfile.LASTKEY but the trailer counts %d cells", map[bool]string{true: "has", false: "lacks"}[hasLast], t.EntryCount)
	}
	if err := rd.checkLastKeyIndex(rootOff, fiOff); err != nil {
		return err
	}
	// Bloom metadata blocks follow; record them for inspect, read nothing.
	for pos < len(rd.loadOnOpen) {
		off := start + int64(pos)
		h, err := parseHeader(rd.loadOnOpen[pos:], off, end)
		if err != nil {
			return corruptf(rd.name, off, BlockUnknown, "%v", err)
		}
		if err := rd.checkChecksumKind(&h); err != nil {
			return corruptf(rd.name, off, h.typ, "%v", err)
		}
		rd.blocks = append(rd.blocks, BlockInfo{Offset: off, Type: h.typ, OnDiskSize: h.onDiskSize(), UncompressedSize: h.uncompressedSize})
		pos += h.onDiskSize()
	}
	return nil
}

// checkTrailer cross-checks what the trailer says about the data section,
// so that a damaged trailer (it carries no checksum) cannot make a file
// with data read as empty, or the reverse. These are the values HBase's
// writer always records: at least one index level; first data block
// offset -1 exactly when there are no cells; root index entries exactly
// when there are cells; data blocks before the load-on-open section.
func (rd *Reader) checkTrailer() error {
	t := &rd.trailer
	off := rd.size - int64(t.Size)
	if t.NumDataIndexLevels < 1 || t.NumDataIndexLevels > 16 {
		return corruptf(rd.name, off, BlockTrailer, "%d data index levels (HBase writes 1 to a few)", t.NumDataIndexLevels)
	}
	empty := t.EntryCount == 0
	if empty != (t.DataIndexCount == 0) {
		return corruptf(rd.name, off, BlockTrailer, "the trailer counts %d cells but %d root data index entries", t.EntryCount, t.DataIndexCount)
	}
	if empty != (t.FirstDataBlockOffset == -1) {
		return corruptf(rd.name, off, BlockTrailer, "the trailer counts %d cells but puts the first data block at %d", t.EntryCount, t.FirstDataBlockOffset)
	}
	if empty {
		if t.NumDataIndexLevels != 1 {
			return corruptf(rd.name, off, BlockTrailer, "an empty file with %d data index levels", t.NumDataIndexLevels)
		}
		if t.MetaIndexCount == 0 && t.LoadOnOpenOffset != 0 {
			return corruptf(rd.name, off, BlockTrailer, "the trailer counts no cells and no meta blocks, but %d bytes lie before the load-on-open section", t.LoadOnOpenOffset)
		}
		return nil
	}
	if t.FirstDataBlockOffset < 0 || t.LastDataBlockOffset < t.FirstDataBlockOffset || uint64(t.LastDataBlockOffset) >= t.LoadOnOpenOffset {
		return corruptf(rd.name, off, BlockTrailer, "data block offsets first=%d last=%d do not lie before the load-on-open section at %d", t.FirstDataBlockOffset, t.LastDataBlockOffset, t.LoadOnOpenOffset)
	}
	return nil
}

// checkRootIndex cross-checks the root data index against the trailer.
// With one level the root lists every data block, in file order, from the
// first data block to the last, and is the whole data index.
func (rd *Reader) checkRootIndex(rootOff int64, payload int) error {
	t := &rd.trailer
	if t.NumDataIndexLevels != 1 {
		if uint64(payload) > t.UncompressedDataIndexSize {
			return corruptf(rd.name, rootOff, BlockRootIndex, "root index of %d bytes is larger than the %d bytes the trailer gives the whole data index", payload, t.UncompressedDataIndexSize)
		}
		return nil
	}
	if uint64(payload) != t.UncompressedDataIndexSize {
		return corruptf(rd.name, rootOff, BlockRootIndex, "single-level data index is %d bytes but the trailer says %d", payload, t.UncompressedDataIndexSize)
	}
	if len(rd.root) == 0 {
		return nil
	}
	for i := 1; i < len(rd.root); i++ {
		if rd.root[i].Offset <= rd.root[i-1].Offset {
			return corruptf(rd.name, rootOff, BlockRootIndex, "entry %d (offset %d) does not follow entry %d (offset %d)", i, rd.root[i].Offset, i-1, rd.root[i-1].Offset)
		}
	}
	if first, last := rd.root[0].Offset, rd.root[len(rd.root)-1].Offset; first != t.FirstDataBlockOffset || last != t.LastDataBlockOffset {
		return corruptf(rd.name, rootOff, BlockRootIndex, "data blocks indexed from offset %d to %d, but the trailer says %d to %d", first, last, t.FirstDataBlockOffset, t.LastDataBlockOffset)
	}
	return nil
}

// checkLastKeyIndex holds the file info's LASTKEY to the data index at
// open: the index key of the last data block must not sort after it. The
// iterator's end-of-file check (checkLastKey) catches an understated
// LASTKEY only in a pass that reaches the last block; a reader that stops
// early (rekey plan's sample, any consumer that stops consuming) never gets
// there, yet a scanner that trusts LASTKEY (snapshot's addFile) has dropped
// its per-cell stop test for the whole file. This check catches most such
// damage before any data block is read: a LASTKEY that sorts before the
// last block's key, so before every cell of that block.
//
// HBase indexes a data block by getMidpoint(last cell of the previous
// block, first cell of this block) (HFileWriterImpl.finishBlock): the real
// first key for the first block and for hbase:meta files, otherwise
// possibly a shorter separator that sorts after the previous block's last
// cell and no later than this block's first. So the index key is at most
// the block's first key, and "index key <= LASTKEY" holds for every file
// HBase writes; against a separator it is weaker, as a LASTKEY between the
// separator and the block's real first key passes here and is left to
// the iterator's end check.
//
// With a multi-level index the last data block's key is in the last leaf
// block, reached through the last entry of each level: one positional read
// per level below the root, of index blocks only, never a data block. HBase
// writes leaf blocks only once the index outgrows one index block
// (hfile.index.block.max.size, 128 KiB by default), i.e. for files of some
// thousands of data blocks (fewer with long keys), so the extra read is
// small next to any scan of the file.
func (rd *Reader) checkLastKeyIndex(rootOff, fiOff int64) error {
	lk, ok := rd.LastKey()
	if !ok || len(rd.root) == 0 || !cellOrdered(rd.trailer.ComparatorClassName) {
		return nil
	}
	var last cell.Cell
	if cell.ParseKey(lk, &last) != nil {
		// The iterator's end check reports it, and a scanner cannot
		// trust a LASTKEY it cannot parse, so nothing leaks meanwhile.
		return nil
	}
	e, at, bt, err := rd.lastDataIndexEntry(rootOff)
	if err != nil {
		return err
	}
	var first cell.Cell
	if err := cell.ParseKey(e.Key, &first); err != nil {
		return corruptf(rd.name, at, bt, "the index key of the last data block (at offset %d) does not parse: %v", e.Offset, err)
	}
	if cell.Compare(&first, &last) > 0 {
		return corruptf(rd.name, fiOff, BlockFileInfo, "hfile.LASTKEY %s sorts before %s, the index key of the last data block (at offset %d): the file holds cells past its LASTKEY", clipHex(lk), clipHex(e.Key), e.Offset)
	}
	return nil
}

// lastDataIndexEntry returns the data index entry of the last data block
// and where it was found (the root at rootOff, or the last leaf block).
// Below the root it follows the last entry of each level, and checks that
// the leaf entry it reaches is the trailer's last data block, as
// checkRootIndex does for a one-level index. The key aliases a buffer of
// its own.
func (rd *Reader) lastDataIndexEntry(rootOff int64) (IndexEntry, int64, BlockType, error) {
	e := rd.root[len(rd.root)-1]
	at, bt := rootOff, BlockRootIndex
	levels := int(rd.trailer.NumDataIndexLevels)
	if levels <= 1 {
		return e, at, bt, nil
	}
	var b blockBuf
	for level := 1; level < levels; level++ {
		want := BlockIntermediateIndex
		if level == levels-1 {
			want = BlockLeafIndex
		}
		p, err := rd.readIndexBlock(&b, e, want)
		if err != nil {
			return e, at, bt, err
		}
		x, err := parseNonRootIndex(p)
		if err != nil {
			return e, at, bt, corruptf(rd.name, e.Offset, want, "%v", err)
		}
		if x.n == 0 {
			return e, at, bt, corruptf(rd.name, e.Offset, want, "index block has no entries")
		}
		at, bt = e.Offset, want
		e = x.entry(x.n - 1)
	}
	if last := rd.trailer.LastDataBlockOffset; e.Offset != last {
		return e, at, bt, corruptf(rd.name, at, bt, "the last leaf index entry points at offset %d, but the trailer puts the last data block at %d", e.Offset, last)
	}
	return e, at, bt, nil
}

// cellOrdered reports whether the file's comparator orders keys as
// cell.Compare does. hbase:meta files (Meta comparators, and the -ROOT-
// comparator of old releases) order rows by their table,startrow,id parts,
// so comparing their keys byte-wise could call a valid file damaged.
func cellOrdered(comparator string) bool {
	return !strings.Contains(comparator, "Meta") && !strings.Contains(comparator, "Root")
}

// clipHex renders a key for an error message: hex, cut after 40 bytes
// (rows can be kilobytes long) with the full length noted.
func clipHex(k []byte) string {
	const clip = 40
	if len(k) <= clip {
		return hex.EncodeToString(k)
	}
	return fmt.Sprintf("%s... (%d bytes)", hex.EncodeToString(k[:clip]), len(k))
}

// checkChecksumKind refuses a block whose checksum type or chunk size
// differs from the file's.
func (rd *Reader) checkChecksumKind(h *blockHeader) error {
	if h.checksumType != rd.checksumType {
		return errDecode("checksum type %s differs from the file's %s (every block of an HFile has the same)", checksumName(h.checksumType), checksumName(rd.checksumType))
	}
	if h.checksumType != checksumNull && h.bytesPerChecksum != rd.bytesPerChecksum {
		return errDecode("%d bytes per checksum differs from the file's %d (every block of an HFile has the same)", h.bytesPerChecksum, rd.bytesPerChecksum)
	}
	return nil
}

// Trailer returns the decoded fixed file trailer.
func (rd *Reader) Trailer() Trailer { return rd.trailer }

// Info returns the decoded file-info block.
func (rd *Reader) Info() FileInfo { return rd.info }

// Name returns the name given to Open.
func (rd *Reader) Name() string { return rd.name }

// Size returns the file size given to Open.
func (rd *Reader) Size() int64 { return rd.size }

// Entries returns the number of cells, from the trailer.
func (rd *Reader) Entries() uint64 { return rd.trailer.EntryCount }

// LoadOnOpenBlocks lists the blocks of the load-on-open section.
func (rd *Reader) LoadOnOpenBlocks() []BlockInfo { return rd.blocks }

// RootIndex returns the root data index entries (their keys alias the
// reader's memory; do not modify them).
func (rd *Reader) RootIndex() []IndexEntry { return rd.root }

// MetaIndex returns the meta block index (keys are meta block names).
func (rd *Reader) MetaIndex() []IndexEntry { return rd.meta }

// FirstKey returns the serialized KeyValue key of the first cell. HBase
// writers always index the first data block by its real first key, and
// every upper index level starts with the first key below it, so the first
// root entry is that key.
func (rd *Reader) FirstKey() ([]byte, bool) {
	if len(rd.root) == 0 || rd.trailer.EntryCount == 0 {
		return nil, false
	}
	return rd.root[0].Key, true
}

// LastKey returns the serialized KeyValue key of the last cell, from the
// file info (hfile.LASTKEY).
func (rd *Reader) LastKey() ([]byte, bool) {
	if rd.trailer.EntryCount == 0 || rd.info.LastKey == nil {
		return nil, false
	}
	return rd.info.LastKey, true
}

// DataIndex returns the leaf-level data index: one entry per data block in
// file order, with copied keys. For multi-level indexes it reads every
// leaf (and intermediate) block, so callers that cut splits call it once.
func (rd *Reader) DataIndex() ([]IndexEntry, error) {
	levels := int(rd.trailer.NumDataIndexLevels)
	var out []IndexEntry
	if levels <= 1 {
		out = make([]IndexEntry, len(rd.root))
		for i, e := range rd.root {
			e.Key = append([]byte(nil), e.Key...)
			out[i] = e
		}
		return out, nil
	}
	var b blockBuf
	// A corrupt index could make blocks point at each other; no real file
	// has more index entries than 33-byte blocks fit in it.
	budget := rd.size / headerSize
	// The index blocks' payloads add up to the trailer's total.
	idxBytes := uint64(rd.rootSize)
	var walk func(e IndexEntry, level int) error
	walk = func(e IndexEntry, level int) error {
		if budget--; budget < 0 {
			return corruptf(rd.name, e.Offset, BlockLeafIndex, "data index references more blocks than the file can hold")
		}
		want := BlockIntermediateIndex
		if level == levels-1 {
			want = BlockLeafIndex
		}
		p, err := rd.readIndexBlock(&b, e, want)
		if err != nil {
			return err
		}
		idxBytes += uint64(len(p))
		x, err := parseNonRootIndex(p)
		if err != nil {
			return corruptf(rd.name, e.Offset, want, "%v", err)
		}
		if budget -= int64(x.n); budget < 0 {
			return corruptf(rd.name, e.Offset, want, "data index references more blocks than the file can hold")
		}
		children := make([]IndexEntry, x.n)
		for i := range children {
			c := x.entry(i)
			c.Key = append([]byte(nil), c.Key...)
			children[i] = c
		}
		for _, c := range children {
			if level == levels-1 {
				out = append(out, c)
			} else if err := walk(c, level+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range rd.root {
		if err := walk(e, 1); err != nil {
			return nil, err
		}
	}
	// Cross-check the leaves as the root of a one-level index is checked
	// at open: every data block once, in order, first to last.
	t := &rd.trailer
	if idxBytes != t.UncompressedDataIndexSize {
		return nil, corruptf(rd.name, int64(t.LoadOnOpenOffset), BlockRootIndex, "the %d-level data index is %d bytes but the trailer says %d", levels, idxBytes, t.UncompressedDataIndexSize)
	}
	for i := 1; i < len(out); i++ {
		if out[i].Offset <= out[i-1].Offset {
			return nil, corruptf(rd.name, int64(t.LoadOnOpenOffset), BlockRootIndex, "leaf entry %d (offset %d) does not follow entry %d (offset %d)", i, out[i].Offset, i-1, out[i-1].Offset)
		}
	}
	if len(out) > 0 && (out[0].Offset != t.FirstDataBlockOffset || out[len(out)-1].Offset != t.LastDataBlockOffset) {
		return nil, corruptf(rd.name, int64(t.LoadOnOpenOffset), BlockRootIndex, "data blocks indexed from offset %d to %d, but the trailer says %d to %d", out[0].Offset, out[len(out)-1].Offset, t.FirstDataBlockOffset, t.LastDataBlockOffset)
	}
	return out, nil
}

// Close releases the reader. It closes the file only when the reader came
// from OpenFile.
func (rd *Reader) Close() error {
	if rd.closer != nil {
		c := rd.closer
		rd.closer = nil
		return c.Close()
	}
	return nil
}

// blockBuf holds the reusable buffers of one block reader: the on-disk
// bytes, the decompressed payload, codec state, and a peeked next header.
type blockBuf struct {
	raw     []byte
	payload []byte
	dc      decompressor
	// peek is the header of the block right after the last one read, when
	// the read that fetched that block also fetched it.
	peek    [headerSize]byte
	peekOff int64
	hdr     blockHeader
	// scratch receives a header read on its own (kept here so it does not
	// escape to a fresh allocation per read).
	scratch [headerSize]byte
}

// readBlock reads, verifies and decompresses the block at off from src
// (rd.r or a stream over the same bytes). size is its on-disk size with
// header when known (from an index), else 0. The payload returned aliases b
// and is valid until the next read with b.
func (rd *Reader) readBlock(src io.ReaderAt, b *blockBuf, off int64, size int) (*blockHeader, []byte, error) {
	limit := int64(rd.trailer.LoadOnOpenOffset)
	if off < 0 || off+headerSize > limit {
		return nil, nil, corruptf(rd.name, off, BlockUnknown, "block offset outside the block section (which ends at %d)", limit)
	}
	var h blockHeader
	var err error
	switch {
	case b.peekOff == off && off > 0:
		if h, err = parseHeader(b.peek[:], off, limit); err != nil {
			return nil, nil, corruptf(rd.name, off, BlockUnknown, "%v", err)
		}
		n := h.onDiskSize()
		want := int(min(int64(n+headerSize), limit-off))
		if cap(b.raw) < want {
			putBlock(b.raw)
			b.raw = getBlock(want)
		}
		b.raw = b.raw[:want]
		copy(b.raw, b.peek[:])
		if err := rd.readAtFrom(src, b.raw[headerSize:], off+headerSize, "block"); err != nil {
			return nil, nil, err
		}
	default:
		// Read header+payload (plus the next header) in one go when the
		// size is known; otherwise the header first.
		if size < headerSize {
			hb := b.scratch[:]
			if err := rd.readAtFrom(src, hb, off, "block header"); err != nil {
				return nil, nil, err
			}
			if h, err = parseHeader(hb, off, limit); err != nil {
				return nil, nil, corruptf(rd.name, off, BlockUnknown, "%v", err)
			}
			size = h.onDiskSize()
		}
		want := int(min(int64(size+headerSize), limit-off))
		if want < size || int64(size) > limit-off {
			return nil, nil, corruptf(rd.name, off, BlockUnknown, "block of %d bytes runs past the block section end at %d", size, limit)
		}
		if cap(b.raw) < want {
			putBlock(b.raw)
			b.raw = getBlock(want)
		}
		b.raw = b.raw[:want]
		if err := rd.readAtFrom(src, b.raw, off, "block"); err != nil {
			return nil, nil, err
		}
		if h, err = parseHeader(b.raw, off, limit); err != nil {
			return nil, nil, corruptf(rd.name, off, BlockUnknown, "%v", err)
		}
		if h.onDiskSize() != size {
			return nil, nil, corruptf(rd.name, off, h.typ, "on-disk size %d differs from the %d bytes the index records", h.onDiskSize(), size)
		}
	}
	n := h.onDiskSize()
	if len(b.raw) >= n+headerSize {
		copy(b.peek[:], b.raw[n:n+headerSize])
		b.peekOff = off + int64(n)
	} else {
		b.peekOff = -1
	}
	block := b.raw[:n]
	if err := rd.checkChecksumKind(&h); err != nil {
		return nil, nil, corruptf(rd.name, off, h.typ, "%v", err)
	}
	if err := verifyChecksums(&h, block); err != nil {
		return nil, nil, corruptf(rd.name, off, h.typ, "%v", err)
	}
	stored := block[headerSize:h.onDiskDataSizeWithHeader]
	var payload []byte
	if rd.trailer.Codec == CodecNone {
		if len(stored) != h.uncompressedSize {
			return nil, nil, corruptf(rd.name, off, h.typ, "uncompressed block stores %d payload bytes but its header says %d", len(stored), h.uncompressedSize)
		}
		payload = stored
	} else {
		b.payload, err = b.dc.decompress(rd.trailer.Codec, b.payload, stored, h.uncompressedSize)
		if err != nil {
			return nil, nil, corruptf(rd.name, off, h.typ, "%v", err)
		}
		payload = b.payload
	}
	b.hdr = h
	return &b.hdr, payload, nil
}

// readIndexBlock reads the index block an index entry points at.
func (rd *Reader) readIndexBlock(b *blockBuf, e IndexEntry, want BlockType) ([]byte, error) {
	h, p, err := rd.readBlock(rd.r, b, e.Offset, int(e.Size))
	if err != nil {
		return nil, err
	}
	if h.typ != want {
		return nil, corruptf(rd.name, e.Offset, h.typ, "index points here expecting a %s block", want)
	}
	return p, nil
}
