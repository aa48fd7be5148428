package hfiles

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/state"
)

// A split whose cells fit in memory is not spilled at Commit: its sort
// buffer is sorted and kept (a kept split), and Finish writes the HFiles
// straight from the kept buffers, merged with the runs of the splits that
// did spill. No run of it is written or read back.
//
// A kept split is not durable, so nothing on disk claims it: it has no
// splits/SPLIT.json, its Ack says Held, and the runner records it done in
// its checkpoint only when the sink calls the OnDurable function with its
// ID. That happens when
//
//   - a Write needs memory the kept buffers hold: the largest kept splits
//     are spilled as runs and recorded, as Commit would have;
//   - Finish has written and recorded every HFile of the job (finish.json
//     says Written): then each kept split's record is written, with no
//     runs, as its cells are in those HFiles.
//
// A process that dies before either loses the kept cells and nothing
// else: the resumed run redoes those splits (new attempts), so the merge's
// fingerprint of the splits changes and the HFiles of the dead Finish are
// dropped and written again.

// OnDurable implements sink.Deferring. Without it (a caller that would
// not know what Ack.Held means) no split is kept.
func (s *Sink) OnDurable(fn func(ids []string) error) {
	s.heldMu.Lock()
	s.onDurable = fn
	s.heldMu.Unlock()
}

var _ sink.Deferring = (*Sink)(nil)

// mayKeep says w may be kept in memory rather than spilled at Commit: the
// job runs in one process (a spill task's splits are merged by other
// processes), the runner records held splits, and w spilled nothing yet
// and wrote no HFiles of its own (its cells are all in its buffer).
func (s *Sink) mayKeep(w *splitSink) bool {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	return s.task.Phase == PhaseAll && s.onDurable != nil && len(w.runs) == 0 && len(w.segs) == 0 && len(w.ents) > 0
}

// keep sorts w's buffer and keeps it. A record an earlier attempt of the
// split left goes now, with its runs: the runner redoes only splits its
// checkpoint does not hold, so that attempt is no longer part of the job.
func (w *splitSink) keep() (sink.Ack, error) {
	w.sort()
	w.ranges = rangesOf(w)
	var old splitRecord
	name := w.recordName()
	hadOld, err := readJSON(w.s.fs, name, &old)
	if err != nil {
		return sink.Ack{}, err
	}
	if hadOld {
		if err := w.s.fenced("removing the record of split " + w.info.ID); err != nil {
			return sink.Ack{}, err
		}
		if err := w.s.fs.Remove(name); err != nil && !notExist(err) {
			return sink.Ack{}, fmt.Errorf("hfiles: split %s: remove the record of attempt %s: %w", w.info.ID, old.Attempt, err)
		}
		w.s.removeRuns(&old)
	}
	w.done = true
	w.s.heldMu.Lock()
	w.s.kept = append(w.s.kept, w)
	w.s.keptBytes.Add(w.held)
	w.s.heldMu.Unlock()
	return sink.Ack{Cells: w.cells, Bytes: w.bytes, Held: true}, nil
}

// reserve accounts need more bytes of sort buffer, spilling kept splits
// first, the largest first, until they fit within Options.Memory beside
// every buffer (the spilled ones are reported durable). Every growth of a
// buffer is reserved under heldMu, so two Writes cannot both take the
// last room; it happens once a chunk or an entries growth, not per cell.
func (s *Sink) reserve(ctx context.Context, need int64) error {
	if need <= 0 {
		return nil
	}
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	// With nothing kept and nothing being spilled, the split's own share
	// bounds what it takes.
	for s.held.Load()+need > s.o.Memory && (len(s.kept) > 0 || s.freeing > 0) {
		switch {
		case s.freeing > 0 && s.held.Load()-s.freeing+need <= s.o.Memory:
			// A kept split another worker is spilling frees enough.
			s.freed.Wait()
		case len(s.kept) > 0:
			i := largestKept(s.kept)
			w := s.kept[i]
			s.kept = slices.Delete(s.kept, i, i+1)
			if err := s.spillKeptUnlocked(ctx, w); err != nil {
				return err
			}
		default:
			s.freed.Wait() // what is in flight may be enough after all
		}
	}
	s.hold(need)
	return nil
}

// spillKeptUnlocked spills kept split w, taken out of s.kept, with heldMu
// released: the spill (a run written, compressed) takes a while, and the
// other workers' Writes need the lock for every chunk they reserve. What
// w holds counts as freeing meanwhile, so a worker whose need it covers
// waits for it instead of spilling another kept split; heldMu is held on
// entry and on return.
func (s *Sink) spillKeptUnlocked(ctx context.Context, w *splitSink) error {
	n := w.held
	s.freeing += n
	s.heldMu.Unlock()
	err := s.spillKept(ctx, w)
	s.heldMu.Lock()
	s.freeing -= n
	s.freed.Broadcast()
	return err
}

// largestKept is the index of the kept split holding the most memory.
func largestKept(ks []*splitSink) int {
	best := 0
	for i, w := range ks {
		if w.held > ks[best].held {
			best = i
		}
	}
	return best
}

// spillKept writes kept split w, no longer in s.kept, as a run, records
// it and tells the runner it is durable.
func (s *Sink) spillKept(ctx context.Context, w *splitSink) error {
	s.keptBytes.Add(-w.held)
	err := w.spill(ctx)
	// The spill keeps the buffer for a next run; a kept split has none,
	// and its memory is what the caller is waiting for.
	w.release()
	if err != nil {
		return err
	}
	if err := w.record(); err != nil {
		return s.full(err, "spilling split "+w.info.ID)
	}
	if err := s.onDurable([]string{w.info.ID}); err != nil {
		return fmt.Errorf("hfiles: split %s spilled, but the run could not record it: %w", w.info.ID, err)
	}
	return nil
}

// takeKept returns the kept splits, ordered by ID, for Finish.
func (s *Sink) takeKept() []*splitSink {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	ks := slices.Clone(s.kept)
	slices.SortFunc(ks, func(a, b *splitSink) int { return cmpString(a.info.ID, b.info.ID) })
	return ks
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keptRecords are the records the kept splits will have once durable:
// with the committed records, what the merge's fingerprint is taken of.
func keptRecords(recs []*splitRecord, ks []*splitSink) []*splitRecord {
	if len(ks) == 0 {
		return recs
	}
	out := slices.Clone(recs)
	for _, w := range ks {
		out = append(out, &splitRecord{ID: w.info.ID, Attempt: w.attempt, Runs: []runFile{}, Cells: w.cells, Bytes: w.bytes, SourceBytes: w.info.Bytes, Lease: state.Stamped(w.s.o.Lease)})
	}
	slices.SortFunc(out, func(a, b *splitRecord) int { return cmpString(a.ID, b.ID) })
	return out
}

// writeKept writes the record of every kept split, with no runs: their
// cells are in the HFiles finish.json records.
func (s *Sink) writeKept(ks []*splitSink) error {
	for _, w := range ks {
		if err := w.record(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.SplitsInMemory += int64(len(ks))
	for _, w := range ks {
		s.stats.CellsInMemory += w.cells
	}
	return nil
}

// keptDurable tells the runner the kept splits are durable, once
// finish.json records their HFiles Written.
func (s *Sink) keptDurable(ks []*splitSink) error {
	if len(ks) == 0 {
		return nil
	}
	ids := make([]string, 0, len(ks))
	for _, w := range ks {
		ids = append(ids, w.info.ID)
	}
	if err := s.onDurable(ids); err != nil {
		return fmt.Errorf("hfiles: %d splits written to HFiles, but the run could not record them: %w", len(ids), err)
	}
	return nil
}

// releaseKept gives the kept buffers' memory back.
func (s *Sink) releaseKept() {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	for _, w := range s.kept {
		s.keptBytes.Add(-w.held)
		w.release()
	}
	s.kept = nil
}

// memPart is one partition's cells in a kept split's sorted buffer:
// entries lo to hi.
type memPart struct {
	w      *splitSink
	lo, hi int
}

// keptRange is one partition's cells in a kept split's sorted buffer.
type keptRange struct {
	region int
	family string
	mp     memPart
	bytes  int64 // the cells' cell.Size
}

// rangesOf cuts w's sorted buffer into its partitions' ranges. Kept
// splits do it at Commit, in their workers, rather than Finish alone. It
// reads the arena only where the family could change: the entries are
// sorted, and a view of every one (a cache miss each, in sort order) cost
// more than the cut itself.
func rangesOf(w *splitSink) []keptRange {
	var out []keptRange
	var c cell.Cell
	lo := 0
	var size int64
	cut := func(hi int) {
		w.view(&w.ents[lo], &c)
		out = append(out, keptRange{region: int(w.ents[lo].region), family: string(c.Family), mp: memPart{w: w, lo: lo, hi: hi}, bytes: size})
	}
	for i := range w.ents {
		e := &w.ents[i]
		if i > lo && !samePart(w, &w.ents[i-1], e) {
			cut(i)
			lo, size = i, 0
		}
		size += entryCellSize(e)
	}
	if lo < len(w.ents) {
		cut(len(w.ents))
	}
	return out
}

// entryCellSize is cell.Size of e's cell, from its lengths alone: the two
// u32 lengths, the key (u16 row length, row, u8 family length, family,
// qualifier, u64 timestamp, type byte) and the value, then the tags.
func entryCellSize(e *entry) int64 {
	n := int64(4+4+2+int(e.row)+1+int(e.fam)+8+1) + int64(e.qual) + int64(e.val)
	if e.tags > 0 {
		n += int64(2 + int(e.tags))
	}
	return n
}

// samePart says entries a and b of w lie in one partition.
func samePart(w *splitSink, a, b *entry) bool {
	if a.region != b.region || a.fam != b.fam {
		return false
	}
	fa := w.chunks[a.chunk][a.off:][:a.fam]
	fb := w.chunks[b.chunk][b.off:][:b.fam]
	return bytes.Equal(fa, fb)
}

// memCursor reads one memPart in order; its cell points into the kept
// buffer.
type memCursor struct {
	mp memPart
	c  cell.Cell
}

func (m *memCursor) next() bool {
	if m.mp.lo >= m.mp.hi {
		return false
	}
	m.mp.w.view(&m.mp.w.ents[m.mp.lo], &m.c)
	m.mp.lo++
	return true
}

func (m *memCursor) at() *cell.Cell { return &m.c }
func (m *memCursor) fail() error    { return nil }
func (m *memCursor) close() error   { return nil }

// A process can die after Finish recorded the kept splits and their HFiles
// Written but before the runner recorded those splits: the resumed run
// redoes them, though their cells are in the HFiles already. Such a redo
// (a split whose record has no runs, in a folder whose HFiles are Written
// for exactly the records there) is only counted, and checked against the
// record: the same cells in number and bytes, else it fails.

// noteWritten remembers, at open, the splits whose cells are in HFiles
// recorded Written for exactly the folder's records.
func (s *Sink) noteWritten(recs []*splitRecord, st *finishState) {
	if s.task.Phase != PhaseAll || !st.Written || st.Splits != fingerprint(recs) {
		return
	}
	for _, r := range recs {
		if len(r.Runs) == 0 && r.Cells > 0 {
			if s.written == nil {
				s.written = map[string]*splitRecord{}
			}
			s.written[r.ID] = r
		}
	}
}

// writtenSplit is the redo of a split whose cells the HFiles hold: it
// counts what the split gives and checks it against the record.
type writtenSplit struct {
	rec          *splitRecord
	cells, bytes int64
}

func (w *writtenSplit) Write(_ context.Context, c *cell.Cell) error {
	w.cells++
	w.bytes += cell.Size(c)
	return nil
}

func (w *writtenSplit) Commit(context.Context) (sink.Ack, error) {
	if w.cells != w.rec.Cells || w.bytes != w.rec.Bytes {
		return sink.Ack{}, fmt.Errorf("hfiles: split %s redone with %d cells (%d bytes), but the HFiles written for it hold %d (%d bytes): the source or the job changed since; stage into a fresh folder", w.rec.ID, w.cells, w.bytes, w.rec.Cells, w.rec.Bytes)
	}
	return sink.Ack{Cells: w.cells, Bytes: w.bytes}, nil
}

func (w *writtenSplit) Abort() {}
