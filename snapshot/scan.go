package snapshot

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/vfs"
)

// ScanOptions select and shape what a Scanner returns. The zero value is a
// full read of the newest VERSIONS versions of every family, as of now.
type ScanOptions struct {
	// Raw returns every cell, delete markers included, with no delete
	// masking and no family TTL (HBase's Scan.setRaw).
	Raw bool
	// MaxVersions caps the versions per column. 0 means the family's
	// VERSIONS in normal mode and every version in raw mode. In normal mode
	// the family's VERSIONS still caps it, as in HBase.
	MaxVersions int
	// TimeRange is [min, max) in ms; a zero Max means no upper bound.
	TimeRange TimeRange
	// Families restricts the scan to these families (nil = all).
	Families [][]byte
	// Columns restricts the scan to these family:qualifier columns; a
	// family listed here and not in Families is added to them.
	Columns []Column
	// StartRow (inclusive) and StopRow (exclusive) bound the rows, within
	// the split's own bounds. Empty = unbounded.
	StartRow, StopRow []byte
	// Now is the reference time for TTL expiry. Zero means the current
	// time, which is what HBase's TableSnapshotScanner uses (its store
	// scanners read the clock when they open); pass the snapshot's creation
	// time to get results that do not change as time passes.
	Now time.Time
}

// selection is which families the scan reads and which columns of each:
// all when the options name none; else wanted holds each family named,
// with the qualifiers named in it (nil: the whole family). As HBase's
// Scan.addColumn after addFamily, naming columns of a family restricts it
// to them.
func (o *ScanOptions) selection() (all bool, wanted map[string]map[string]struct{}) {
	wanted = map[string]map[string]struct{}{}
	for _, f := range o.Families {
		wanted[string(f)] = nil
	}
	for _, c := range o.Columns {
		cols := wanted[string(c.Family)]
		if cols == nil {
			cols = map[string]struct{}{}
			wanted[string(c.Family)] = cols
		}
		cols[string(c.Qualifier)] = struct{}{}
	}
	return len(o.Families) == 0 && len(o.Columns) == 0, wanted
}

// TimeRange is a [Min, Max) timestamp range in ms.
type TimeRange struct{ Min, Max int64 }

// Column names one column.
type Column struct{ Family, Qualifier []byte }

// Stats counts a scanner's work.
type Stats struct {
	// Cells is the number of cells returned.
	Cells int64
	// Examined is the number of cells read from store files.
	Examined int64
	// Files is the number of store files opened (after time-range and TTL
	// pruning).
	Files int
	// FileBytes is the total size of those files.
	FileBytes int64
	// ReadAhead sums the read-ahead streams' counters (data block reads
	// only; opening a file reads its trailer and load-on-open section
	// positionally besides).
	ReadAhead vfs.ReadAheadStats
	// FilesCountChecked is the number of store files read from their
	// first cell to their last, whose cell count was checked against the
	// entry count in their trailer (a mismatch ends the scan with an
	// error). Files cut by a split bound or a reference are not counted.
	FilesCountChecked int
}

// countChecked reports whether a store file iterator that just ended read
// its whole file and checked the count (see hfile.Iterator.CountChecked).
func countChecked(it cellIter) bool {
	c, ok := it.(interface{ CountChecked() bool })
	return ok && c.CountChecked()
}

// Scanner iterates over the cells of one split in HBase's cell order,
// with HBase's read semantics. It follows the cell.Iterator contract; its
// Close also releases the split's store file readers to the Snapshot. It is
// not safe for concurrent use.
type Scanner struct {
	ctx    context.Context
	h      iterHeap
	rules  map[string]*familyRules
	m      matcher
	curRow []byte
	curFam []byte
	// prevIter is the store file whose cell was last given to the
	// matcher (nil: none, or cells were skipped since).
	prevIter *fileIter
	// curRules are the rules of curFam's family.
	curRules *familyRules
	haveRow  bool
	// rowGen numbers the rows (and families) begun: see RowGen.
	rowGen uint64
	// low, when set, is the split's first key inside its first row (a
	// split that starts at a column): cells before it are the piece
	// before's, and only its row's family delete markers are applied
	// here (see skipBeforeStart). Cleared once the scan passes it.
	low     *cell.Cell
	raw     bool
	pending bool // the top iterator's cell was returned; advance it first
	// rep is what the top cell shares with the cell matched last, as far
	// as the store file encoding tells (see advance).
	rep     hfile.Repeat
	out     *cell.Cell
	err     error
	stats   Stats
	closed  bool
	iters   []*fileIter
	qualBuf []byte
	tick    int
	// minChild is the index (1 or 2) of the top's smaller child, 0 when
	// not known; see fixTop.
	minChild int
	// snap lent the store file readers in held; Close gives them back.
	snap *Snapshot
	held []*resolvedFile
}

// fileIter is one store file's cells, cut to its half (references) and the
// scan's rows, with sequence ids assigned as HBase's StoreFileScanner does.
type fileIter struct {
	it cellIter
	// ra streams the file's data blocks (nil: read-ahead off).
	ra    *vfs.ReadAhead
	f     *resolvedFile
	order int // position in HBase's store file order: higher = newer
	// stamp, when >= 0, replaces every cell's sequence id (bulk-loaded
	// files).
	stamp int64
	// stopKey: cells >= it end the file (bottom half of a reference, or
	// the split's end). stopRow is its row: load compares rows only, and
	// the whole key only within that row, unless stopFirst says the key
	// is the first of its row (it nearly always is).
	stopKey   *cell.Cell
	stopRow   []byte
	stopFirst bool
	cur       *cell.Cell
	// ck is cur's row, family and qualifier as one slice when the
	// iterator gives it (hf.ColumnKey), else nil.
	ck      []byte
	stamped cell.Cell
	// hf is it as an HFile iterator (nil for other iterators): its
	// Repeat hint spares the scanner re-comparing rows and qualifiers.
	hf *hfile.Iterator
}

func (fi *fileIter) load(ok bool) bool {
	if !ok {
		fi.cur = nil
		return false
	}
	var c *cell.Cell
	if fi.hf != nil {
		c = fi.hf.Cell() // a direct call: this runs once per cell
		fi.ck = fi.hf.ColumnKey()
	} else {
		c = fi.it.Cell()
	}
	if fi.stopKey != nil {
		if r := bytes.Compare(c.Row, fi.stopRow); r > 0 || (r == 0 && (fi.stopFirst || cell.CompareColumnsAndVersion(c, fi.stopKey) >= 0)) {
			fi.cur = nil
			return false
		}
	}
	if fi.stamp >= 0 {
		fi.stamped = *c
		fi.stamped.SeqID = uint64(fi.stamp)
		c = &fi.stamped
	}
	fi.cur = c
	return true
}

type iterHeap []*fileIter

func (h iterHeap) Len() int           { return len(h) }
func (h iterHeap) Less(i, j int) bool { return h[i].before(h[j]) }

// before orders two store files' current cells as HBase's store heap
// does: by key, then sequence id (newest first), then file order (newer
// first). It runs one to two times per cell of a merge. When both files
// give their cells' column as one slice (HFile iterators) and the rows and
// families are as long as each other, one byte comparison orders row,
// family and qualifier together (see hfile.Iterator.ColumnKey).
func (fi *fileIter) before(o *fileIter) bool {
	a, b := fi.cur, o.cur
	var c int
	if fi.ck != nil && o.ck != nil && len(a.Row) == len(b.Row) && len(a.Family) == len(b.Family) && len(a.Family) > 0 {
		// A non-empty family rules out the "last on row" seek key, which
		// the general comparison orders specially.
		if c = bytes.Compare(fi.ck, o.ck); c == 0 {
			c = cell.CompareVersionAndSeqID(a, b)
		}
	} else {
		c = cell.CompareWithSeqID(a, b)
	}
	if c != 0 {
		return c < 0
	}
	return fi.order > o.order
}
func (h iterHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

// fixTop restores the heap after the top iterator moved on: the one heap
// operation per cell. It is container/heap's down written out for this
// type (no interface calls), and it keeps which child of the top is the
// smaller: while the top stays on top (a store file usually yields several
// cells in a row: a column's versions, a row's columns) the children do
// not change, so each cell costs one comparison instead of two.
func (sc *Scanner) fixTop() {
	h := sc.h
	n := len(h)
	if n < 2 {
		return
	}
	j := sc.minChild
	if j == 0 {
		j = 1
		if n > 2 && h.Less(2, 1) {
			j = 2
		}
		sc.minChild = j
	}
	if !h.Less(j, 0) {
		return
	}
	h[0], h[j] = h[j], h[0]
	sc.minChild = 0
	for i := j; ; {
		l := 2*i + 1
		if l >= n {
			return
		}
		k := l
		if r := l + 1; r < n && h.Less(r, l) {
			k = r
		}
		if !h.Less(k, i) {
			return
		}
		h[i], h[k] = h[k], h[i]
		i = k
	}
}

func (h *iterHeap) Push(x any) { *h = append(*h, x.(*fileIter)) }
func (h *iterHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// storeFileInfo is a store file with what HBase sorts store files by.
type storeFileInfo struct {
	f        *resolvedFile
	rd       storeReader
	file     vfs.File
	meta     fileMeta
	seqID    int64
	bulk     bool
	resetSeq bool
}

// NewScanner opens the store files of sp's region and returns a scanner
// over the split's rows.
func (s *Snapshot) NewScanner(ctx context.Context, sp Split, opts ScanOptions) (*Scanner, error) {
	if err := s.checkScan(&sp, &opts); err != nil {
		return nil, err
	}
	rules, err := s.scanRules(&opts)
	if err != nil {
		return nil, err
	}
	sc := &Scanner{ctx: ctx, snap: s, rules: rules, raw: opts.Raw}
	start, stop, ok := scanBounds(&sp, &opts)
	if !ok {
		return sc, nil // nothing to read
	}
	if start.Family != nil {
		sc.low = &start
	}
	todo, err := sc.storeFiles(&sp.Region)
	if err == nil {
		err = sc.openFiles(todo, start, stop)
	}
	if err != nil {
		sc.Close()
		return nil, err
	}
	heap.Init(&sc.h)
	sc.minChild = 0
	return sc, nil
}

// checkScan refuses options that select nothing sensible and a split that
// another Snapshot made.
func (s *Snapshot) checkScan(sp *Split, opts *ScanOptions) error {
	if opts.MaxVersions < 0 {
		return fmt.Errorf("snapshot: MaxVersions %d < 0", opts.MaxVersions)
	}
	if opts.TimeRange.Max != 0 && opts.TimeRange.Max < opts.TimeRange.Min {
		return fmt.Errorf("snapshot: time range [%d, %d) is empty", opts.TimeRange.Min, opts.TimeRange.Max)
	}
	if sp.snap != s {
		return fmt.Errorf("snapshot %s: split %q was not made by this Snapshot's Splits", s.info.Name, sp.ID)
	}
	return nil
}

// scanRules returns the read rules of every family the scan reads, by
// family name. A family the options name must exist, and a MOB family is
// refused rather than read.
func (s *Snapshot) scanRules(opts *ScanOptions) (map[string]*familyRules, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	nowMs := now.UnixMilli()
	tr := newTimeRange(opts.TimeRange.Min, opts.TimeRange.Max)

	all, wanted := opts.selection()
	for name := range wanted {
		if s.table.Family([]byte(name)) == nil {
			return nil, fmt.Errorf("%w: family %q is not in table %s", ErrNotFound, name, s.info.Table)
		}
	}
	rules := map[string]*familyRules{}
	for i := range s.table.Families {
		f := &s.table.Families[i]
		cols, ok := wanted[string(f.Name)]
		if !all && !ok {
			continue
		}
		if strings.EqualFold(f.Attributes["IS_MOB"], "true") {
			// MOB cells hold a pointer to a file under mobdir/, not the
			// value; returning them would silently pass off pointers as data.
			return nil, fmt.Errorf("%w: family %q of %s is a MOB family (IS_MOB=true); rekey does not read MOB files", ErrUnsupported, f.Name, s.info.Table)
		}
		rules[string(f.Name)] = newFamilyRules(f, opts, cols, nowMs, tr)
	}
	return rules, nil
}

// newFamilyRules derives one family's read rules from its schema and the
// scan options: in raw mode the options' version cap (default all) and no
// TTL; otherwise the family's VERSIONS, lowered by the options, and its TTL
// counted back from nowMs.
func newFamilyRules(f *Family, opts *ScanOptions, cols map[string]struct{}, nowMs int64, tr timeRange) *familyRules {
	r := &familyRules{raw: opts.Raw, minVersions: f.MinVersions, now: nowMs, tr: tr, columns: cols,
		seePastDeletes: f.KeepDeletedCells != KeepDeletedFalse}
	if opts.Raw {
		r.maxVersions = opts.MaxVersions
		if r.maxVersions == 0 {
			r.maxVersions = math.MaxInt32
		}
		r.oldestUnexpired = 0
	} else {
		r.maxVersions = f.MaxVersions
		if opts.MaxVersions > 0 && opts.MaxVersions < r.maxVersions {
			r.maxVersions = opts.MaxVersions
		}
		r.oldestUnexpired = nowMs - f.TTLMillis()
	}
	return r
}

// scanBounds returns the keys the scan reads from (inclusive) and to
// (exclusive; nil: to the end): the split's bounds narrowed by the
// options' StartRow and StopRow, which are whole rows; ok is false when
// nothing is left. start has a family only when the scan starts at a
// column inside its row.
func scanBounds(sp *Split, opts *ScanOptions) (start cell.Cell, stop *cell.Cell, ok bool) {
	start = sp.startKey()
	if len(opts.StartRow) > 0 {
		if o := cell.FirstOnRow(opts.StartRow); cell.Compare(&o, &start) > 0 {
			start = o
		}
	}
	if k, bounded := sp.endKey(); bounded {
		stop = &k
	}
	if len(opts.StopRow) > 0 {
		if o := cell.FirstOnRow(opts.StopRow); stop == nil || cell.Compare(&o, stop) < 0 {
			stop = &o
		}
	}
	if stop != nil && cell.Compare(&start, stop) >= 0 {
		return cell.Cell{}, nil, false
	}
	return start, stop, true
}

// pendingFile is a store file the scan will read, with its place in its
// family's store file order (see sortStoreFiles).
type pendingFile struct {
	si    storeFileInfo
	order int
}

// storeFiles acquires the store files of the families the scan reads,
// which the scanner holds from then on (Close releases them), and returns
// those worth reading, each with its order among its family's files.
func (sc *Scanner) storeFiles(region *Region) ([]pendingFile, error) {
	opened, err := sc.snap.acquireRegion(region, func(fam []byte) bool { _, ok := sc.rules[string(fam)]; return ok })
	if err != nil {
		return nil, err
	}
	var todo []pendingFile
	for fi, fam := range region.Families {
		r, ok := sc.rules[string(fam.Family)]
		if !ok {
			continue
		}
		files := make([]storeFileInfo, 0, len(fam.Files))
		for _, o := range opened[fi] {
			sc.held = append(sc.held, o.rf)
			si := storeInfo(o.rf, o.rd)
			si.file = o.file
			files = append(files, si)
		}
		sortStoreFiles(files)
		for order, si := range files {
			if r.readsFile(si.meta) {
				todo = append(todo, pendingFile{si, order})
			}
		}
	}
	return todo, nil
}

// sortStoreFiles puts one family's store files in HBase's
// StoreFileComparators.SEQ_ID order: sequence id, then larger file first,
// then bulk-load time, then path name. A file's scanner order is its index
// here; on equal keys the higher one wins.
func sortStoreFiles(files []storeFileInfo) {
	sort.SliceStable(files, func(i, j int) bool {
		a, b := &files[i], &files[j]
		if a.seqID != b.seqID {
			return a.seqID < b.seqID
		}
		if a.f.size != b.f.size {
			return a.f.size > b.f.size
		}
		at, bt := bulkTime(a.meta), bulkTime(b.meta)
		if at != bt {
			return at < bt
		}
		return a.f.sortName < b.f.sortName
	})
}

// readsFile is StoreScanner.selectScannersFrom's test: a file wholly
// outside the time range, or wholly expired (when MIN_VERSIONS is 0), is
// not read. A file without a time range is always read.
func (r *familyRules) readsFile(m fileMeta) bool {
	if !m.HasTimeRange {
		return true
	}
	cutoff := int64(math.MinInt64)
	if r.minVersions == 0 {
		cutoff = r.oldestUnexpired
	}
	fileAll := m.TimeRangeMin == 0 && m.TimeRangeMax == math.MaxInt64
	if !fileAll && !(m.TimeRangeMin < r.tr.max && m.TimeRangeMax >= r.tr.min) {
		return false
	}
	return m.TimeRangeMax >= cutoff
}

// openFiles positions every pending file at the scan's first cell. Every
// file's read-ahead starts before any file is positioned: over HDFS the
// first chunks of a region's store files (one per flush, per family) then
// arrive side by side instead of one round trip after another. On error
// the read-aheads not handed to a file are closed; the caller closes the
// scanner.
func (sc *Scanner) openFiles(todo []pendingFile, start cell.Cell, stop *cell.Cell) error {
	ras := make([]*vfs.ReadAhead, len(todo))
	for i, p := range todo {
		ras[i] = sc.readAhead(p.si, start, stop)
	}
	for i, p := range todo {
		if err := sc.addFile(p.si, p.order, start, stop, ras[i]); err != nil {
			for _, ra := range ras[i+1:] {
				if ra != nil {
					ra.Close()
				}
			}
			return err
		}
	}
	return sc.err
}

func bulkTime(m fileMeta) int64 {
	if m.HasBulkLoadTS {
		return m.BulkLoadTS
	}
	return math.MaxInt64
}

// storeInfo computes a store file's sequence id as HStoreFile.open does.
func storeInfo(f *resolvedFile, rd storeReader) storeFileInfo {
	m := rd.meta()
	si := storeFileInfo{f: f, rd: rd, meta: m, seqID: -1}
	top := f.ref != nil && f.ref.Top
	if m.HasMaxSeqID {
		si.seqID = m.MaxSeqID
		if top {
			si.seqID++
		}
	}
	bulkSeq, hasBulkSeq := bulkLoadSeqID(f.entry)
	if hasBulkSeq || m.HasBulkLoadTS {
		si.bulk = true
		if hasBulkSeq {
			si.seqID = bulkSeq
			if top {
				si.seqID++
			}
		}
		if m.SkipResetSeqID {
			si.seqID++
		}
		si.resetSeq = !m.SkipResetSeqID
	}
	return si
}

// readAhead returns the read-ahead reader of a store file the scan will
// read, or nil when the options want none for it. When the scan starts at
// or before the file's first cell (a whole region read; start is the
// region's start row), the stream starts at the first data block at once.
// A scan with a stop key streams no further than the blocks that can hold
// cells before it: a split cut inside a region would otherwise read ahead
// two chunks past its end, the next split's bytes, and throw them away.
func (sc *Scanner) readAhead(si storeFileInfo, start cell.Cell, stop *cell.Cell) *vfs.ReadAhead {
	if si.file == nil || !sc.snap.readAhead.Wants(si.file) {
		return nil
	}
	end := si.rd.dataEnd()
	if stop != nil {
		// An index the bound cannot be read from is read again by the
		// scan's own seek, which reports it; the stream keeps the whole
		// data section meanwhile.
		if e, err := si.rd.blocksEnd(stop); err == nil && e > 0 && (end <= 0 || e < end) {
			end = e
		}
	}
	ra := vfs.NewReadAhead(si.file, end, sc.snap.readAhead)
	if si.meta.FirstKey == nil || (si.f.ref != nil && si.f.ref.Top) {
		// The top half of a reference starts at its split key: a seek.
		return ra
	}
	var first cell.Cell
	if cell.ParseKey(si.meta.FirstKey, &first) != nil {
		return ra
	}
	if c := bytes.Compare(start.Row, first.Row); len(start.Row) == 0 || c < 0 || (c == 0 && start.Family == nil) {
		ra.Prefetch(si.meta.DataStart)
	}
	return ra
}

// addFile positions one store file at the first cell of the scan, reading
// its data blocks through ra (nil: from the file).
func (sc *Scanner) addFile(si storeFileInfo, order int, start cell.Cell, stop *cell.Cell, ra *vfs.ReadAhead) error {
	var data io.ReaderAt
	if ra != nil {
		data = ra
	}
	it := si.rd.newIter(data)
	fi := &fileIter{it: it, ra: ra, f: si.f, order: order, stamp: -1}
	fi.hf, _ = it.(*hfile.Iterator)
	if si.resetSeq {
		fi.stamp = si.seqID
	}
	// The lower bound: the scan's start row, or for the top half of a
	// reference the split key, whichever is later. A scan that starts at
	// a column seeks to the start of that column's family in its row: the
	// family's delete markers sort there (empty qualifier) and still
	// apply; skipBeforeStart jumps over the columns between.
	var seek *cell.Cell
	if len(start.Row) > 0 {
		c := cell.FirstOnRow(start.Row)
		if start.Family != nil {
			c = firstOnColumn(start.Row, start.Family, nil)
		}
		seek = &c
	}
	if ref := si.f.ref; ref != nil {
		if ref.Top {
			if seek == nil || cell.Compare(&ref.Key, seek) > 0 {
				seek = &ref.Key
			}
		} else {
			fi.stopKey = &ref.Key
		}
	}
	if stop != nil {
		if fi.stopKey == nil || cell.Compare(stop, fi.stopKey) < 0 {
			fi.stopKey = stop
		}
	}
	if fi.stopKey != nil && len(si.meta.LastKey) > 0 {
		// A file that ends before the stop key needs no stop test per
		// cell: the common case of a whole region read. hfile.Open holds
		// LASTKEY to the last data block's index key, and the iterator to
		// the file's real last cell when it gets there, so a file that
		// understates it fails instead of leaking cells.
		var last cell.Cell
		if cell.ParseKey(si.meta.LastKey, &last) == nil && cell.Compare(&last, fi.stopKey) < 0 {
			fi.stopKey = nil
		}
	}
	if k := fi.stopKey; k != nil {
		fi.stopRow = k.Row
		// The first key of its row sorts before every cell of the row, so
		// "cell >= key" is "row >= key's row".
		fi.stopFirst = k.Type == cell.Maximum && k.Timestamp == cell.LatestTimestamp && len(k.Family) == 0 && len(k.Qualifier) == 0
	}
	var ok bool
	if seek != nil {
		ok = it.SeekGE(seek)
	} else {
		ok = it.First()
	}
	sc.iters = append(sc.iters, fi)
	sc.stats.Files++
	sc.stats.FileBytes += si.f.size
	if !fi.load(ok) {
		if err := it.Err(); err != nil {
			return fmt.Errorf("snapshot: %s: %w", si.f.where(), err)
		}
		if countChecked(it) {
			sc.stats.FilesCountChecked++
		}
		return nil
	}
	sc.stats.Examined++
	sc.h = append(sc.h, fi)
	return nil
}

// advance moves the top iterator forward and restores the heap.
func (sc *Scanner) advance() bool {
	top := sc.h[0]
	var ok bool
	if top.hf != nil {
		ok = top.hf.Next() // a direct call: this runs once per cell
	} else {
		ok = top.it.Next()
	}
	sc.rep = hfile.RepeatNone
	if top.load(ok) {
		sc.stats.Examined++
		// What top's new cell shares with the last cell matched, when
		// that cell was top's previous one. It holds for whichever cell
		// is on top once the heap is restored: that cell sorts between
		// the two (not before the matched cell, which was the smallest;
		// not after top's new cell), and cells in order that agree on
		// their row (and column) agree with every cell between them.
		if top == sc.prevIter && top.hf != nil {
			sc.rep = top.hf.Repeat()
		}
		if len(sc.h) > 1 {
			sc.fixTop()
		}
		return true
	}
	if err := top.it.Err(); err != nil {
		sc.err = fmt.Errorf("snapshot: %s: %w", top.f.where(), err)
		return false
	}
	if countChecked(top.it) {
		sc.stats.FilesCountChecked++
	}
	heap.Pop(&sc.h)
	sc.minChild = 0
	return true
}

// Next moves to the next cell; false at the end or on error (see Err).
func (sc *Scanner) Next() bool {
	if sc.next() {
		return true
	}
	sc.out = nil
	return false
}

func (sc *Scanner) next() bool {
	if sc.err != nil || sc.closed {
		return false
	}
	if sc.pending {
		sc.pending = false
		if !sc.advance() {
			return false
		}
	}
	for len(sc.h) > 0 {
		if sc.tick++; sc.tick&1023 == 0 && sc.ctx != nil {
			if err := sc.ctx.Err(); err != nil {
				sc.err = err
				return false
			}
		}
		top := sc.h[0]
		c := top.cur
		if sc.low != nil {
			skip, ok := sc.skipBeforeStart(c)
			if !ok {
				return false
			}
			if skip {
				continue
			}
		}
		// The store file encoding may say c repeats the row (and column)
		// of the cell matched last (see advance), so the current row's
		// state holds without comparing bytes.
		rep := sc.rep
		if rep == hfile.RepeatNone && (!sc.haveRow || !bytes.Equal(c.Row, sc.curRow) || !bytes.Equal(c.Family, sc.curFam)) {
			// A new row, usually of the same family: its rules are the
			// current ones, without a map lookup.
			r := sc.curRules
			sameFam := sc.haveRow && bytes.Equal(c.Family, sc.curFam)
			if !sameFam {
				r = sc.rules[string(c.Family)]
			}
			if r == nil {
				// A cell of a family the region's descriptor does not
				// have, or one that is not selected: HBase opens no store
				// for it, so it never shows.
				sc.prevIter = nil
				if !sc.advance() {
					return false
				}
				continue
			}
			sc.curRow = append(sc.curRow[:0], c.Row...)
			if !sameFam {
				sc.curFam = append(sc.curFam[:0], c.Family...)
				sc.curRules = r
			}
			sc.haveRow = true
			sc.rowGen++
			sc.m.reset(r)
		}
		sc.prevIter = top
		switch sc.m.match(c, rep == hfile.RepeatColumn) {
		case matchInclude:
			sc.out = c
			sc.pending = true
			sc.stats.Cells++
			return true
		case matchSkip:
			if !sc.advance() {
				return false
			}
		case matchSeekNextCol:
			if len(c.Qualifier) == 0 {
				// The empty qualifier is where a family's delete markers
				// sort, after that column's newer Puts: HBase's next-column
				// seek moves only past this cell there (HBASE-18471), so
				// the markers still mask the family.
				if !sc.advance() {
					return false
				}
				continue
			}
			// The cells skipped here are not matched: the next one is
			// compared in full.
			sc.prevIter = nil
			sc.qualBuf = append(sc.qualBuf[:0], c.Qualifier...)
			for {
				if !sc.advance() {
					return false
				}
				if len(sc.h) == 0 {
					break
				}
				n := sc.h[0].cur
				if !bytes.Equal(n.Qualifier, sc.qualBuf) || !bytes.Equal(n.Family, sc.curFam) || !bytes.Equal(n.Row, sc.curRow) {
					break
				}
			}
		}
	}
	return false
}

// skipBeforeStart deals with the top cell c of a scan that starts at a
// column inside its first row (sc.low). A cell before that column is the
// piece before's: a cell of another qualifier moves its file to the
// column (skip); a cell of the family's empty qualifier, where a family's
// delete markers sort, is dropped too (skip) unless it is a delete marker
// in normal mode, which goes on to the matcher so it masks this piece's
// cells of the row and family as it would in a whole-row scan (the
// matcher never returns a marker in normal mode). The piece before
// returns the empty qualifier's cells themselves: raw markers, and a
// Put with an empty qualifier. ok is false when the scan ended.
func (sc *Scanner) skipBeforeStart(c *cell.Cell) (skip, ok bool) {
	low := sc.low
	if cell.Compare(c, low) >= 0 {
		sc.low = nil // the heap's smallest cell is past it: so is every file
		return false, true
	}
	sc.prevIter = nil
	sc.rep = hfile.RepeatNone
	if len(c.Qualifier) > 0 || !bytes.Equal(c.Family, low.Family) || !bytes.Equal(c.Row, low.Row) {
		return true, sc.seekTop(low)
	}
	if sc.raw || !c.Type.IsDelete() {
		return true, sc.advance()
	}
	return false, true
}

// seekTop moves the top iterator to the first cell >= key and restores
// the heap.
func (sc *Scanner) seekTop(key *cell.Cell) bool {
	top := sc.h[0]
	if top.load(top.it.SeekGE(key)) {
		sc.stats.Examined++
		heap.Fix(&sc.h, 0)
		sc.minChild = 0
		return true
	}
	if err := top.it.Err(); err != nil {
		sc.err = fmt.Errorf("snapshot: %s: %w", top.f.where(), err)
		return false
	}
	heap.Pop(&sc.h)
	sc.minChild = 0
	return true
}

// Cell returns the current cell, valid until the next call to Next.
func (sc *Scanner) Cell() *cell.Cell { return sc.out }

// RowGen numbers the current cell's row: cells given with one number
// share their row and family, without comparing bytes. A new number does
// not say the row changed (a new family in a row takes one too).
func (sc *Scanner) RowGen() uint64 { return sc.rowGen }

// Err returns the error that ended the scan, if any. Reaching the end is
// not an error.
func (sc *Scanner) Err() error { return sc.err }

// Stats returns the scanner's counters so far.
func (sc *Scanner) Stats() Stats {
	st := sc.stats
	if sc.closed {
		return st
	}
	st.ReadAhead = vfs.ReadAheadStats{}
	for _, fi := range sc.iters {
		if fi.ra != nil {
			r := fi.ra.Stats()
			st.ReadAhead.Streams += r.Streams
			st.ReadAhead.Chunks += r.Chunks
			st.ReadAhead.StreamBytes += r.StreamBytes
			st.ReadAhead.Positional += r.Positional
		}
	}
	return st
}

// FilesChecked is Stats().FilesCountChecked without the read-ahead
// totals Stats gathers: what a run records of each split it read (it makes
// a Scanner a source.Scanner).
func (sc *Scanner) FilesChecked() int { return sc.stats.FilesCountChecked }

// Close releases the scanner's iterators; it returns the scan's error, if
// any.
func (sc *Scanner) Close() error {
	if sc.closed {
		return sc.err
	}
	sc.stats = sc.Stats()
	sc.closed = true
	for _, fi := range sc.iters {
		fi.it.Close()
		if fi.ra != nil {
			fi.ra.Close()
		}
	}
	sc.iters = nil
	sc.h = nil
	for _, f := range sc.held {
		sc.snap.release(f)
	}
	sc.held = nil
	return sc.err
}

// ReadSplit scans sp with opts and calls fn with each cell, in order, until
// the end, an error, or fn returning cell.ErrStop (an early stop, not an
// error). It closes the scanner in every case and returns the first error,
// naming the split. The cell passed to fn is valid only during the call.
func (s *Snapshot) ReadSplit(ctx context.Context, sp Split, opts ScanOptions, fn func(*cell.Cell) error) error {
	sc, err := s.NewScanner(ctx, sp, opts)
	if err != nil {
		return fmt.Errorf("split %s: %w", sp.ID, err)
	}
	if err := cell.ForEach(sc, fn); err != nil {
		return fmt.Errorf("split %s: %w", sp.ID, err)
	}
	return nil
}

var _ cell.Iterator = (*Scanner)(nil)
