package hfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/vfs"
)

// Splits whose cells come in order.
//
// Many re-keys keep the old order: wide rows to bucketed rows, tall rows
// to wide rows, any layout whose new key begins with the old key's
// leading fields. A split of such a job hands the sink its cells already
// sorted within each partition (target region and family), and the sort
// buffer, the runs and the merge only copy them about. So a split starts
// in the sort buffer as usual, checking that every cell comes after the
// last cell of its partition; once directAfter bytes are buffered (or the
// buffer fills up, or the split commits) with the order unbroken, the
// split writes the buffered cells
// and every cell after them straight into HFiles of its own, one series
// per partition (segments/SPLIT/ATTEMPT/REGION/FAMILY/NAME). A cell out of
// order ends that: the files written so far stay (they are sorted), and
// the rest of the split goes through the sort buffer and runs as before.
//
// At the merge, a partition made only of such files, none overlapping
// another in key, needs no merge: its files are moved into
// hfiles/REGION/FAMILY/ as they are (adopt). Otherwise the files are one
// more sorted source of the partition's merge, beside its runs and kept
// splits. At SIZE=large (wide -> bucketed) every split writes its files
// this way and no partition is merged (docs/performance.md).

// segmentsDir holds the HFiles splits wrote straight from their cells.
const segmentsDir = "segments"

// directAfter is how much of the sort buffer a split fills in order
// before it writes directly: enough cells that a layout out of order shows
// it first (a salted key does within a few cells; this is thousands),
// few enough that the copy into the buffer is a small part of a split.
// Much larger, a small table's split goes through the buffer almost whole
// and is sorted and written at its commit, the work writing directly is
// meant to skip.
const directAfter = 512 << 10

// maxDirectParts bounds the partitions one split writes at once (an open
// HFile writer each); a split spread wider uses the sort buffer. The
// writers' buffers (a block being encoded, the bloom chunk, the stream's)
// are not counted in the sort buffers' account: a direct split gives its
// whole share back when it starts writing, which is far more.
const maxDirectParts = 64

// segmentFile is one HFile a split wrote straight from its cells.
type segmentFile struct {
	hfileInfo
	Region int    `json:"region"`
	Family string `json:"family"`
	// FirstKey and LastKey are the file's first and last cell keys
	// (cell.AppendKey): the merge adopts files whose keys do not overlap.
	FirstKey []byte `json:"first_key"`
	LastKey  []byte `json:"last_key"`
	// CellBytes is cell.Size summed over the file's cells.
	CellBytes int64 `json:"cell_bytes"`
	// Duplicates and Collisions are the cells dropped while writing the
	// file: a key equal to the cell before it in the split.
	Duplicates int64 `json:"duplicates"`
	Collisions int64 `json:"collisions"`
}

// adoptedName is where the merge moves seg when it adopts it.
func (s *Sink) adoptedName(seg *segmentFile) string {
	return path.Join(hfilesDir, s.regions.Regions[seg.Region].Dir, seg.Family, path.Base(seg.Name))
}

// mayWriteDirect says the sink's splits may write their own HFiles: in
// one process (a job in phases merges runs in other processes), unless
// NoDirect, and not on an object store, where moving a file into
// hfiles/ would copy it (every staged file there is written once, under
// its final name).
func (s *Sink) mayWriteDirect() bool {
	return s.task.Phase == PhaseAll && !s.o.NoDirect && !s.whole
}

// orderTail is a partition's last entry in the first sort buffer of a
// split still in order.
type orderTail struct{ idx int }

// directOut is one partition's open series of HFiles in a direct split.
type directOut struct {
	region   int
	family   []byte
	rel      string // the folder, relative to the staging root
	out      *hfileOut
	reps     repeats // its counts go into the file's segmentFile
	firstKey []byte
}

// trackOrder checks the entry just appended against the last entry of its
// partition; the first one out of order (or a partition past
// maxDirectParts) ends the split's chance to write directly.
func (w *splitSink) trackOrder() {
	i := len(w.ents) - 1
	e := &w.ents[i]
	for k := range w.tails {
		t := &w.tails[(w.lastTail+k)%len(w.tails)]
		if !samePart(w, &w.ents[t.idx], e) {
			continue
		}
		if w.compare(&w.ents[t.idx], e) > 0 {
			w.inOrder, w.tails = false, nil
			return
		}
		t.idx = i
		w.lastTail = (w.lastTail + k) % len(w.tails)
		return
	}
	if len(w.tails) >= maxDirectParts {
		w.inOrder, w.tails = false, nil
		return
	}
	w.tails = append(w.tails, orderTail{idx: i})
	w.lastTail = len(w.tails) - 1
}

// spreadTooWide says the split, in order so far, touches so many regions
// that if every split did the same, a region would get more than MaxFiles
// files from the splits, and the merge would read and write them all
// again (a salted layout: each split's cells in order within every
// region): such a split sorts instead. A layout that keeps the old order
// puts each split in a region or two.
func (w *splitSink) spreadTooWide() bool {
	regions := map[int32]bool{}
	for _, t := range w.tails {
		regions[w.ents[t.idx].region] = true
	}
	return int64(len(regions))*int64(max(w.s.o.Splits, 1)) > int64(max(w.s.o.MaxFiles, 1))*int64(len(w.s.regions.Regions))
}

// goDirect writes the buffered cells, in order, into the split's own
// HFiles and frees the buffer: from now on Write writes each cell there.
// A split spread too wide (spreadTooWide) stays in the buffer instead,
// no longer checked.
func (w *splitSink) goDirect(ctx context.Context) error {
	if w.spreadTooWide() {
		w.inOrder, w.tails = false, nil
		return nil
	}
	var c cell.Cell
	for i := range w.ents {
		w.view(&w.ents[i], &c)
		ok, err := w.writeDirect(ctx, &c)
		if err != nil {
			return err
		}
		if !ok {
			// trackOrder found them in order: the two checks disagree.
			return fmt.Errorf("hfiles: split %s: buffered cell %s is out of order, though the buffer was checked in order", w.info.ID, &c)
		}
	}
	w.release()
	w.tails = nil
	w.direct = true
	return nil
}

// outFor returns the open series of c's partition, starting one if need
// be; nil when the split already writes maxDirectParts partitions.
func (w *splitSink) outFor(c *cell.Cell) *directOut {
	if o := w.lastOut; o != nil && bytes.Equal(o.family, c.Family) && w.s.regions.Regions[o.region].Contains(c.Row) {
		return o
	}
	region := w.s.regions.locate(c.Row)
	for _, o := range w.outs {
		if o.region == region && bytes.Equal(o.family, c.Family) {
			w.lastOut = o
			return o
		}
	}
	if len(w.outs) >= maxDirectParts {
		return nil
	}
	o := &directOut{region: region, family: bytes.Clone(c.Family)}
	o.rel = path.Join(w.s.spill, segmentsDir, w.key, w.attempt, w.s.regions.Regions[region].Dir, string(c.Family))
	w.outs = append(w.outs, o)
	w.lastOut = o
	return o
}

// writeDirect writes c into its partition's HFile. It returns false,
// writing nothing, when c comes before the last cell of its partition. A
// cell with the key of the one before it is dropped and counted, as the
// merge does.
func (w *splitSink) writeDirect(ctx context.Context, c *cell.Cell) (bool, error) {
	o := w.lastOut
	if o == nil || o.out == nil || o.out.w.StartsRow(c) || !bytes.Equal(o.family, c.Family) {
		// Not a wide row's next cell (whose partition is the cell before
		// it's): find c's partition, and roll its file at the size limit.
		if o = w.outFor(c); o == nil {
			return false, nil
		}
		// Only for a row after the file's last: a file rolled before an
		// earlier row would take it, as nothing would compare it with the
		// closed file's last cell; the writer refuses it below instead.
		if o.out != nil && o.out.bytes >= w.s.o.HFileSize && bytes.Compare(o.out.w.LastRow(), c.Row) < 0 {
			if err := w.closeSegment(o); err != nil {
				return false, err
			}
		}
		if o.out == nil {
			if err := w.s.fs.MkdirAll(path.Join(w.s.root, o.rel)); err != nil {
				return false, fmt.Errorf("hfiles: split %s: create %s: %w", w.info.ID, o.rel, err)
			}
			out, err := w.s.createHFile(o.rel, w.s.familyOptions(string(o.family)))
			if err != nil {
				return false, err
			}
			o.out = out
			o.firstKey = cell.AppendKey(o.firstKey[:0], c)
		}
	}
	if _, err := o.out.add(w.s, c, &o.reps); err != nil {
		if errors.Is(err, hfile.ErrOutOfOrder) {
			return false, nil
		}
		return false, fmt.Errorf("hfiles: split %s: region %s family %s: %w", w.info.ID, w.s.regions.Regions[o.region].Dir, o.family, err)
	}
	w.directN++
	if w.directN%4096 == 0 {
		return true, ctx.Err()
	}
	return true, nil
}

// closeSegment finishes o's open file and keeps it as one of the split's
// segments.
func (w *splitSink) closeSegment(o *directOut) error {
	lastKey, cellB := o.out.w.AppendLastKey(nil), o.out.bytes
	info, err := w.s.finishHFile(o.out)
	o.out = nil
	if err != nil {
		return err
	}
	seg := segmentFile{hfileInfo: info, Region: o.region, Family: string(o.family),
		FirstKey: bytes.Clone(o.firstKey), LastKey: lastKey,
		CellBytes: cellB, Duplicates: o.reps.dups, Collisions: o.reps.colls}
	o.reps = repeats{}
	w.segs = append(w.segs, seg)
	if err := w.s.addStaged(info.Size); err != nil {
		return fmt.Errorf("hfiles: split %s: %w", w.info.ID, err)
	}
	return nil
}

// endDirect closes every open file of the split: what it wrote directly
// stays as its segments, and the split writes no more directly.
func (w *splitSink) endDirect() error {
	var first error
	for _, o := range w.outs {
		if o.out == nil {
			continue
		}
		if err := w.closeSegment(o); err != nil && first == nil {
			first = err
		}
	}
	w.outs, w.lastOut = nil, nil
	w.direct, w.inOrder = false, false
	return first
}

// abortDirect drops the open files and the segments of this attempt.
func (w *splitSink) abortDirect() {
	for _, o := range w.outs {
		if o.out != nil {
			o.out.abort(w.s)
		}
	}
	w.outs, w.lastOut = nil, nil
	w.direct, w.inOrder = false, false
	for _, seg := range w.segs {
		if w.s.fs.Remove(path.Join(w.s.root, seg.Name)) == nil {
			w.s.staged.Add(-seg.Size)
		}
	}
	w.segs = nil
	w.s.fs.RemoveAll(path.Join(w.s.root, w.s.spill, segmentsDir, w.key, w.attempt))
}

// removeSegments removes the segments of rec, an attempt no longer part
// of the job.
func (s *Sink) removeSegments(rec *splitRecord) {
	for _, seg := range rec.Segments {
		if s.fs.Remove(path.Join(s.root, seg.Name)) == nil {
			s.staged.Add(-seg.Size)
		}
	}
	if len(rec.Segments) > 0 {
		s.fs.RemoveAll(path.Join(s.root, s.spill, segmentsDir, splitKey(rec.ID), rec.Attempt))
	}
}

// removeStraySegments removes the segment folders of attempts no record
// names (a split that died before its commit, or an earlier attempt), and
// returns the bytes of the recorded segments still in the folder.
func removeStraySegments(fsys vfs.WriteFS, root, spill string, recs []*splitRecord) (int64, error) {
	keep := map[string]bool{}
	var held int64
	for _, r := range recs {
		if len(r.Segments) == 0 {
			continue
		}
		keep[path.Join(splitKey(r.ID), r.Attempt)] = true
		for _, seg := range r.Segments {
			if fi, err := fsys.Stat(path.Join(root, seg.Name)); err == nil && fi.Size() == seg.Size {
				held += seg.Size
			}
		}
	}
	dir := path.Join(root, spill, segmentsDir)
	splits, err := fsys.ReadDir(dir)
	if notExist(err) {
		return held, nil
	}
	if err != nil {
		return 0, fmt.Errorf("hfiles: list %s: %w", dir, err)
	}
	for _, sd := range splits {
		attempts, err := fsys.ReadDir(path.Join(dir, sd.Name()))
		if err != nil {
			return 0, fmt.Errorf("hfiles: list %s: %w", path.Join(dir, sd.Name()), err)
		}
		for _, a := range attempts {
			if !keep[path.Join(sd.Name(), a.Name())] {
				if err := fsys.RemoveAll(path.Join(dir, sd.Name(), a.Name())); err != nil {
					return 0, fmt.Errorf("hfiles: remove stray segments %s: %w", path.Join(dir, sd.Name(), a.Name()), err)
				}
			}
		}
	}
	return held, nil
}

// partSeg is one segment holding cells of a partition.
type partSeg struct {
	seg   *segmentFile
	order string // as partRun's
}

// adoptable says a partition of segments alone can keep them as its
// HFiles: no runs or kept cells beside them, at most MaxFiles of them,
// and no two overlapping in key (sorted by first key, each ends before
// the next begins). It sorts segs by first key.
func (s *Sink) adoptable(p *partition) bool {
	if len(p.segs) == 0 || len(p.runs) > 0 || len(p.kept) > 0 || len(p.segs) > max(s.o.MaxFiles, 1) {
		return false
	}
	keys := make([]cell.Cell, 2*len(p.segs))
	for i, ps := range p.segs {
		if cell.ParseKey(ps.seg.FirstKey, &keys[2*i]) != nil || cell.ParseKey(ps.seg.LastKey, &keys[2*i+1]) != nil {
			return false
		}
	}
	idx := make([]int, len(p.segs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cell.Compare(&keys[2*a], &keys[2*b]) })
	for k := 1; k < len(idx); k++ {
		if cell.Compare(&keys[2*idx[k-1]+1], &keys[2*idx[k]]) >= 0 {
			return false
		}
	}
	sorted := make([]partSeg, len(p.segs))
	for k, i := range idx {
		sorted[k] = p.segs[i]
	}
	p.segs = sorted
	return true
}

// adopt moves p's segments into hfiles/REGION/FAMILY/ as its HFiles and
// marks the partition done in the load state. The mark is not saved by
// itself: the next save of finish.json carries it (a merged partition's
// record, or the one that records every partition written), a write of it
// less per adopted partition (on HDFS a create, a close and a rename). A run
// cut short before that save adopts again: a segment already moved is
// found at its new name (moveChecked), and a merge that starts over
// moves it back from that name (restoreSegments).
func (s *Sink) adopt(ps *partState, p *partition) error {
	dir := path.Join(s.root, hfilesDir, s.regions.Regions[p.region].Dir, p.family)
	if err := s.fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("hfiles: create %s: %w", dir, err)
	}
	files := make([]hfileInfo, 0, len(p.segs))
	var dups, colls int64
	for _, x := range p.segs {
		seg := x.seg
		final := s.adoptedName(seg)
		if err := s.moveChecked(path.Join(s.root, seg.Name), path.Join(s.root, final), seg.Size); err != nil {
			return err
		}
		info := seg.hfileInfo
		info.Name = final
		files = append(files, info)
		dups += seg.Duplicates
		colls += seg.Collisions
	}
	s.finMu.Lock()
	defer s.finMu.Unlock()
	ps.Files = files
	ps.Duplicates, ps.Collisions = dups, colls
	ps.Done = true
	s.mu.Lock()
	s.stats.Adopted += int64(len(files))
	s.mu.Unlock()
	return nil
}

// moveChecked renames from to to, checking the file holds size bytes; a
// file already at to (moved before a crash) with those bytes is taken
// as moved.
func (s *Sink) moveChecked(from, to string, size int64) error {
	fi, err := s.fs.Stat(from)
	if notExist(err) {
		if ti, terr := s.fs.Stat(to); terr == nil && ti.Size() == size {
			return nil
		}
		return fmt.Errorf("hfiles: segment %s is gone, and not at %s either (removed under the run?)", from, to)
	}
	if err != nil {
		return fmt.Errorf("hfiles: segment %s: %w", from, err)
	}
	if fi.Size() != size {
		return fmt.Errorf("hfiles: segment %s holds %d bytes, its record says %d (torn or overwritten?)", from, fi.Size(), size)
	}
	if err := s.fs.Rename(from, to); err != nil {
		return fmt.Errorf("hfiles: move segment %s to %s: %w", from, to, err)
	}
	return nil
}

// recordedSegments lists the segments of recs.
func recordedSegments(recs []*splitRecord) []*segmentFile {
	var out []*segmentFile
	for _, r := range recs {
		for i := range r.Segments {
			out = append(out, &r.Segments[i])
		}
	}
	return out
}

// partSegments lists the segments of a partition.
func partSegments(segs []partSeg) []*segmentFile {
	out := make([]*segmentFile, len(segs))
	for i, x := range segs {
		out[i] = x.seg
	}
	return out
}

// restoreSegments moves every one of segs that a merge adopted back to
// its segment name: the merge is starting over (its HFiles are removed,
// or the partition is merged after all), and the segments are still its
// sources.
func (s *Sink) restoreSegments(segs []*segmentFile) error {
	for _, seg := range segs {
		from := path.Join(s.root, seg.Name)
		if _, err := s.fs.Stat(from); err == nil {
			continue
		}
		to := path.Join(s.root, s.adoptedName(seg))
		if fi, err := s.fs.Stat(to); err != nil || fi.Size() != seg.Size {
			continue // not adopted: the merge finds it missing and says so
		}
		if err := s.fs.Rename(to, from); err != nil {
			return fmt.Errorf("hfiles: move adopted segment %s back to %s: %w", to, from, err)
		}
	}
	return nil
}

// segCursor reads one segment in order for a merge.
type segCursor struct {
	f    vfs.File
	it   *hfile.Iterator
	name string
	want int64
	n    int64
	seq  int
	err  error
	live bool
}

func openSegCursor(fsys vfs.FS, root string, seg *segmentFile) (*segCursor, error) {
	name := path.Join(root, seg.Name)
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("hfiles: open segment %s: %w", name, err)
	}
	if f.Size() != seg.Size {
		f.Close()
		return nil, fmt.Errorf("hfiles: segment %s holds %d bytes, its record says %d (torn or overwritten?)", name, f.Size(), seg.Size)
	}
	rd, err := hfile.Open(f, f.Size(), name)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("hfiles: segment %s: %w", name, err)
	}
	return &segCursor{f: f, it: rd.NewIterator(), name: name, want: seg.Cells}, nil
}

func (c *segCursor) next() bool {
	var ok bool
	if !c.live {
		c.live = true
		ok = c.it.First()
	} else {
		ok = c.it.Next()
	}
	if ok {
		c.n++
		return true
	}
	if err := c.it.Err(); err != nil {
		c.err = fmt.Errorf("hfiles: segment %s: %w", c.name, err)
	} else if c.n != c.want {
		c.err = fmt.Errorf("hfiles: segment %s: read %d cells, its record says %d", c.name, c.n, c.want)
	}
	return false
}

func (c *segCursor) at() *cell.Cell { return c.it.Cell() }
func (c *segCursor) fail() error    { return c.err }
func (c *segCursor) close() error {
	c.it.Close()
	return c.f.Close()
}
