package hfile

import (
	"io"

	"github.com/rekeyhq/rekey/cell"
)

// Iterator walks the cells of one HFile in order. It follows the
// cell.Iterator contract (a new iterator's first Next moves to the file's
// first cell; Cell's slices point into the iterator's block buffers and stay
// valid until the next positioning call; Err is nil at a clean end; Close is
// required and returns the first error) and adds two positioning calls:
// First, and SeekGE, which report like Next whether a cell is now current.
// Next after a false return keeps returning false until First or SeekGE
// repositions the iterator.
//
// In steady state (blocks no larger than ones already seen) iteration
// allocates nothing per cell or per block.
type Iterator struct {
	r  *Reader
	bb blockBuf
	// idx caches the last index block read at each level (deeper levels
	// share the last slot), so nearby seeks skip re-reading them.
	idx   [4]idxCache
	dec   blockDecoder
	cur   cell.Cell
	err   error
	valid bool
	// started is set by the first positioning call; closed by Close.
	started, closed bool
	// data, when set, serves the data block reads (a read-ahead stream over
	// the same file); index blocks always come from the reader's own
	// ReaderAt.
	data io.ReaderAt
	// blockOff and blockType locate the current data block for errors;
	// nextOff is where the block after it starts.
	blockOff  int64
	blockType BlockType
	nextOff   int64
	// seekKey serializes SeekGE's target for index comparisons.
	seekKey cell.Cell
	// fromStart is true while every cell since the file's first has been
	// read in order; counted is how many. Reaching the end that way checks
	// counted against the trailer's entry count (countChecked).
	fromStart    bool
	counted      uint64
	countChecked bool
}

// NewIterator returns an unpositioned iterator over the file's cells.
func (rd *Reader) NewIterator() *Iterator { return rd.NewStreamIterator(nil) }

// NewStreamIterator is NewIterator with data blocks read from data instead
// of the reader's own ReaderAt: a read-ahead stream over the same file
// (vfs.ReadAhead), so that a scan streams the file front to back while the
// index blocks a seek walks stay positional reads. data must serve exactly
// the bytes of the file the Reader was opened on; nil means the reader's.
// The iterator does not close data.
func (rd *Reader) NewStreamIterator(data io.ReaderAt) *Iterator {
	if data == nil {
		data = rd.r
	}
	it := &Iterator{r: rd, data: data}
	it.bb.peekOff = -1
	for i := range it.idx {
		it.idx[i].off, it.idx[i].bb.peekOff = -1, -1
	}
	it.dec.tags = rd.info.IncludesTags
	it.dec.mvcc = rd.info.IncludesMVCC
	it.dec.keepSeqID = rd.info.IncludesMVCC && rd.info.MaxMemstoreTS > 0
	it.dec.tagsCompressed = rd.info.TagsCompressed
	return it
}

// Cell returns the current cell; see the type's contract for its lifetime.
func (it *Iterator) Cell() *cell.Cell {
	if !it.valid {
		return nil
	}
	return &it.cur
}

// Err returns the error that stopped the iterator, nil at clean exhaustion.
func (it *Iterator) Err() error { return it.err }

// CountChecked reports whether the iterator reached the end of the file
// having read every cell from the first one (after First, or a SeekGE that
// landed on the first cell), so that the number of cells read was checked
// against the trailer's entry count. A mismatch is reported by Err as
// ErrCorrupt: it means cells were skipped or invented, which no per-block
// checksum can notice when the trailer or the index is what is damaged.
func (it *Iterator) CountChecked() bool { return it.countChecked }

// Close releases the iterator's buffers and returns the error that stopped
// it, if any.
func (it *Iterator) Close() error {
	it.valid, it.started, it.closed = false, true, true
	// Nothing may alias the buffers once they are pooled: the current
	// cell and the decoder point into them, and both are dropped here.
	it.bb.release()
	for i := range it.idx {
		it.idx[i].bb.release()
	}
	it.bb, it.idx = blockBuf{}, [4]idxCache{}
	it.dec.key, it.dec.tagBuf, it.dec.data = nil, nil, nil
	return it.err
}

func (it *Iterator) fail(err error) bool {
	it.err = err
	it.valid = false
	return false
}

// Repeat says what the current cell's key shares with the cell this
// iterator decoded just before it (including cells a SeekGE stepped over):
// see Repeat. Valid while the current cell is.
func (it *Iterator) Repeat() Repeat { return it.dec.repeat }

// ColumnKey returns the current cell's row, family and qualifier as one
// slice of its flat key: the row, a byte holding the family's length, the
// family, the qualifier. Between two cells whose rows are as long as each
// other and whose families are too, comparing these slices as unsigned
// bytes orders them as comparing row, family and qualifier in turn does,
// in one call instead of three. Valid while the current cell is.
func (it *Iterator) ColumnKey() []byte { return it.dec.colKey }

// First positions the iterator at the file's first cell.
func (it *Iterator) First() bool {
	if it.closed {
		return false
	}
	it.err, it.valid, it.started = nil, false, true
	it.fromStart, it.counted, it.countChecked = true, 0, false
	t := &it.r.trailer
	if t.EntryCount == 0 && len(it.r.root) == 0 {
		return it.end()
	}
	it.nextOff = t.FirstDataBlockOffset
	return it.nextBlock(0)
}

// Next advances to the next cell; on a new iterator, to the first.
func (it *Iterator) Next() bool {
	if !it.started {
		return it.First()
	}
	if !it.valid {
		return false
	}
	return it.step()
}

// step decodes the next cell of the current block, moving on to the next
// data block (skipping inline index and bloom blocks) at a block's end.
func (it *Iterator) step() bool {
	ok, err := it.dec.next(&it.cur)
	if err != nil {
		return it.fail(corruptf(it.r.name, it.blockOff, it.blockType, "%v", err))
	}
	if ok {
		it.counted++
		it.valid = true
		return true
	}
	return it.nextBlock(0)
}

// end is reached when the data section is exhausted: the last cell read
// must be the file info's LASTKEY, and a pass that read the whole file
// checks its cell count against the trailer's.
func (it *Iterator) end() bool {
	it.valid = false
	if err := it.checkLastKey(); err != nil {
		return it.fail(err)
	}
	if !it.fromStart {
		return false
	}
	it.fromStart = false
	if n := it.r.trailer.EntryCount; it.counted != n {
		return it.fail(corruptf(it.r.name, -1, 0, "read %d cells from the first data block at %d to the last at %d, but the trailer counts %d", it.counted, it.r.trailer.FirstDataBlockOffset, it.r.trailer.LastDataBlockOffset, n))
	}
	it.countChecked = true
	return false
}

// checkLastKey holds the file info's LASTKEY to the last cell of the data
// section, when this pass decoded it (it.cur still holds it: nothing is
// decoded after it). A scanner that trusts LASTKEY to skip its per-cell
// stop-row test (snapshot's addFile) relies on this check: a file whose
// LASTKEY understates its cells fails at the end instead of leaking cells
// past the stop row unnoticed. A pass that stops early never gets here;
// Open's checkLastKeyIndex covers most of that case from the index.
func (it *Iterator) checkLastKey() error {
	lk, ok := it.r.LastKey()
	if !ok || !it.dec.decoded {
		return nil
	}
	var want cell.Cell
	if err := cell.ParseKey(lk, &want); err != nil {
		return corruptf(it.r.name, -1, 0, "the file info's LASTKEY does not parse: %v", err)
	}
	if last := it.r.trailer.LastDataBlockOffset; it.blockOff != last || cell.Compare(&it.cur, &want) != 0 {
		return corruptf(it.r.name, it.blockOff, it.blockType, "the last cell read (%s, in the block at %d) is not the file info's LASTKEY (%s; the trailer's last data block is at %d)", it.cur.String(), it.blockOff, want.String(), last)
	}
	return nil
}

// nextBlock loads data blocks from it.nextOff on until one yields a cell or
// the data section ends. size is the first block's known on-disk size.
func (it *Iterator) nextBlock(size int) bool {
	it.valid = false
	last := it.r.trailer.LastDataBlockOffset
	for it.nextOff <= last {
		off := it.nextOff
		h, p, err := it.r.readBlock(it.data, &it.bb, off, size)
		size = 0
		if err != nil {
			return it.fail(err)
		}
		it.nextOff = off + int64(h.onDiskSize())
		if !h.typ.isData() {
			switch h.typ {
			case BlockLeafIndex, BlockBloomChunk, BlockMeta:
				continue
			}
			return it.fail(corruptf(it.r.name, off, h.typ, "unexpected block type among data blocks"))
		}
		it.blockOff, it.blockType = off, h.typ
		if err := it.dec.reset(p, h.typ == BlockEncodedData, it.r.info.Encoding); err != nil {
			return it.fail(corruptf(it.r.name, off, h.typ, "%v", err))
		}
		ok, err := it.dec.next(&it.cur)
		if err != nil {
			return it.fail(corruptf(it.r.name, off, h.typ, "%v", err))
		}
		if ok {
			it.counted++
			it.valid = true
			return true
		}
	}
	return it.end()
}

// idxCache remembers one decoded index block.
type idxCache struct {
	off int64
	p   []byte // payload, aliasing bb
	bb  blockBuf
}

// SeekGE positions the iterator at the first cell >= key in cell.Compare
// order. It walks the block index from the root down to the one data block
// that can hold that cell, then scans forward inside it (ROW_INDEX_V1
// blocks first jump to the row by their row index). A seek forward within
// the current block just scans on.
func (it *Iterator) SeekGE(key *cell.Cell) bool {
	if it.closed {
		return false
	}
	it.err, it.started = nil, true
	it.countChecked = false
	rd := it.r
	if len(rd.root) == 0 {
		it.valid = false
		it.fromStart = false
		return false
	}
	e, err := rd.blockFor(key, &it.idx)
	if err != nil {
		return it.fail(err)
	}
	if it.valid && it.blockOff == e.Offset && cell.Compare(&it.cur, key) < 0 {
		return it.scanTo(key)
	}
	it.valid = false
	it.fromStart = false
	t := &rd.trailer
	if e.Offset < t.FirstDataBlockOffset || e.Offset > t.LastDataBlockOffset {
		return it.fail(corruptf(rd.name, e.Offset, BlockData, "data index points outside the data section [%d, %d]", t.FirstDataBlockOffset, t.LastDataBlockOffset))
	}
	h, p, err := rd.readBlock(it.data, &it.bb, e.Offset, int(e.Size))
	if err != nil {
		return it.fail(err)
	}
	if !h.typ.isData() {
		return it.fail(corruptf(rd.name, e.Offset, h.typ, "data index points at a non-data block"))
	}
	it.blockOff, it.blockType = e.Offset, h.typ
	it.nextOff = e.Offset + int64(h.onDiskSize())
	if err := it.dec.reset(p, h.typ == BlockEncodedData, rd.info.Encoding); err != nil {
		return it.fail(corruptf(rd.name, e.Offset, h.typ, "%v", err))
	}
	it.dec.seekRow(key.Row)
	// Landing in the first data block before any row was skipped is the
	// same as starting from First, so the pass can still count the file.
	if e.Offset == t.FirstDataBlockOffset && it.dec.first {
		it.fromStart, it.counted = true, 0
	}
	if !it.step() {
		return false
	}
	return it.scanTo(key)
}

// blockFor descends the data index to the entry of the data block a seek
// to key reads: the last whose index key is <= key, or the first when key
// sorts before them all. cache keeps the index block read at each level
// (deeper levels share the last slot). rd.root must not be empty.
func (rd *Reader) blockFor(key *cell.Cell, cache *[4]idxCache) (IndexEntry, error) {
	levels := int(rd.trailer.NumDataIndexLevels)
	i := searchEntries(len(rd.root), func(i int) []byte { return rd.root[i].Key }, key)
	e := rd.root[i]
	for level := 1; level < levels; level++ {
		want := BlockIntermediateIndex
		if level == levels-1 {
			want = BlockLeafIndex
		}
		c := &cache[min(level, len(cache))-1]
		if c.p == nil || c.off != e.Offset {
			p, err := rd.readIndexBlock(&c.bb, e, want)
			if err != nil {
				c.p = nil
				return IndexEntry{}, err
			}
			c.off, c.p = e.Offset, p
		}
		x, err := parseNonRootIndex(c.p)
		if err != nil {
			return IndexEntry{}, corruptf(rd.name, e.Offset, want, "%v", err)
		}
		if x.n == 0 {
			return IndexEntry{}, corruptf(rd.name, e.Offset, want, "index block has no entries")
		}
		e = x.entry(searchEntries(x.n, func(i int) []byte { return x.entry(i).Key }, key))
		e.Key = nil
	}
	return e, nil
}

// BlocksEnd returns where the data blocks that can hold a cell sorting
// before key end: the end of the block a seek to key reads first, as every
// later block's index key, and so each of its cells, sorts after key. A
// reader that stops at key needs no byte from there on, so a stream
// bounded there reads nothing past it. With a multi-level index it reads
// the index blocks on the way down. With no data blocks it returns where
// the data section ends.
func (rd *Reader) BlocksEnd(key *cell.Cell) (int64, error) {
	end := int64(rd.trailer.LoadOnOpenOffset)
	if len(rd.root) == 0 {
		return end, nil
	}
	var cache [4]idxCache
	e, err := rd.blockFor(key, &cache)
	if err != nil {
		return 0, err
	}
	return min(e.Offset+int64(e.Size), end), nil
}

// scanTo steps forward until the current cell is >= key.
func (it *Iterator) scanTo(key *cell.Cell) bool {
	for cell.Compare(&it.cur, key) < 0 {
		if !it.step() {
			return false
		}
	}
	return true
}
