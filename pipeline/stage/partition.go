package stage

import (
	"bytes"
	"context"
	"fmt"
	"path"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/vfs"
)

// writePartition merges one partition's runs into HFiles. Rows up to the
// last row of the HFiles a previous Finish recorded are skipped (files
// roll only between rows, so those rows are complete in them). Cells with
// equal keys collapse into one: a duplicate when value and tags agree
// (a redone split), a collision otherwise (counted, the first run's cell
// kept).
//
// A partition marked pipe reads its merge on a goroutine of its own, in
// batches of pipeBatch bytes (pipe.go).
//
// Partitions merge in parallel: ps is this call's own, but finish.json
// holds every partition, so changes to ps that others may save (and the
// save itself) happen under finMu.
func (s *Sink) writePartition(ctx context.Context, st *finishState, ps *partState, p *partition, fan, pipeBatch int) error {
	if err := s.restoreSegments(partSegments(p.segs)); err != nil {
		return err
	}
	w, err := s.newPartWriter(st, ps, p.bytes)
	if err != nil {
		return err
	}
	runs, made, err := s.reduce(p.runs, ps.Region, ps.Family, fan)
	defer s.removeMerged(made)
	if err != nil {
		return err
	}
	m, err := newMerger(s.fs, s.root, runs, p.kept, p.segs)
	if err != nil {
		return err
	}
	defer m.close()
	add := func(c *cell.Cell) error { return w.add(ctx, c) }
	if p.pipe {
		err = pipeCells(ctx, m, pipeBatch, add)
	} else {
		err = m.each(add)
	}
	if err != nil {
		w.abort()
		return err
	}
	return w.finish()
}

// removeMerged removes the intermediate runs reduce wrote and gives their
// space back to the staging budget (or the local run folder's count).
func (s *Sink) removeMerged(made []partRun) {
	for _, m := range made {
		wfs, ok := m.fs.(vfs.WriteFS)
		if !ok || wfs.Remove(m.name) != nil {
			continue
		}
		if s.local != nil {
			s.local.held.Add(-m.size)
		} else {
			s.staged.Add(-m.size)
		}
	}
}

// partWriter writes one partition's merged cells into HFiles under
// hfiles/REGION/FAMILY, rolling to a new file between rows once the open
// one holds limit bytes, and records each file in finish.json when it is
// closed.
type partWriter struct {
	s     *Sink
	st    *finishState
	ps    *partState
	reg   *Region
	rel   string // the partition's folder, relative to the staging root
	opts  hfile.WriterOptions
	limit int64
	// resume is the last row of the files already recorded: rows up to it
	// are skipped.
	resume []byte

	out *hfileOut // the open file, nil between files
	// seq's counts are folded into ps when a file is recorded: a resumed
	// merge skips the recorded files' rows, and counts the rest again.
	seq keySeq
	n   int // cells written, for the periodic cancellation check
}

// newPartWriter prepares the partition's folder (removing what a crash
// left that no record names) and the writer that continues after the
// files already recorded.
func (s *Sink) newPartWriter(st *finishState, ps *partState, total int64) (*partWriter, error) {
	w := &partWriter{s: s, st: st, ps: ps, reg: &s.plan.Regions[ps.Region],
		opts: s.familyOptions(ps.Family), limit: s.fileLimit(total)}
	w.rel = path.Join(hfilesDir, w.reg.Dir, ps.Family)
	if err := s.clearUnrecorded(path.Join(s.root, w.rel), ps.Files); err != nil {
		return nil, err
	}
	if n := len(ps.Files); n > 0 {
		w.resume = ps.Files[n-1].LastRow
	}
	return w, nil
}

// clearUnrecorded creates dir if need be and removes every file in it that
// files does not name: the partial HFiles of a merge that crashed.
func (s *Sink) clearUnrecorded(dir string, files []hfileInfo) error {
	if err := s.fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("stage: create %s: %w", dir, err)
	}
	recorded := map[string]bool{}
	for _, f := range files {
		recorded[path.Join(s.root, f.Name)] = true
	}
	if ents, err := s.fs.ReadDir(dir); err == nil {
		for _, e := range ents {
			if p := path.Join(dir, e.Name()); !recorded[p] {
				s.fs.Remove(p)
			}
		}
	}
	return nil
}

// fileLimit is the size at which a partition's HFile rolls: HFileSize,
// raised so that at most MaxFiles files hold the partition's total bytes
// of cells, or no limit when MaxFiles is 1.
func (s *Sink) fileLimit(total int64) int64 {
	if s.o.MaxFiles <= 1 {
		return 1<<63 - 1
	}
	// Every file but the last holds at least the limit, so at most
	// MaxFiles files are written.
	return max(s.o.HFileSize, (total+int64(s.o.MaxFiles)-2)/int64(s.o.MaxFiles-1))
}

// add writes one merged cell, skipping it when it lies in a row already
// recorded or repeats the previous cell's key.
func (w *partWriter) add(ctx context.Context, c *cell.Cell) error {
	var newRow bool
	switch w.seq.place(w.s, c) {
	case repeated:
		return nil
	case before:
		// Checked here, not only by the HFile writer: a file rolled
		// between the two rows would take the earlier row without a word.
		return fmt.Errorf("stage: region %s family %s: merged cell %s comes after %s (runs out of order)", w.reg.Dir, w.ps.Family, c, &w.seq.prev.c)
	case nextRow:
		newRow = true
	}
	if newRow {
		if !w.reg.Contains(c.Row) {
			return fmt.Errorf("stage: run cell %s lies outside its partition's region %s (runs and plan disagree)", c, w.reg)
		}
		if w.resume != nil && bytes.Compare(c.Row, w.resume) <= 0 {
			return nil
		}
		if w.out != nil && w.out.bytes >= w.limit {
			if err := w.closeOut(); err != nil {
				return err
			}
		}
	}
	if w.out == nil {
		o, err := w.s.createHFile(w.rel, w.opts)
		if err != nil {
			return err
		}
		w.out = o
	}
	if err := w.out.append(c); err != nil {
		return fmt.Errorf("stage: region %s family %s: %w", w.reg.Dir, w.ps.Family, err)
	}
	w.seq.prev.set(c, newRow)
	w.n++
	if w.n%4096 == 0 {
		return ctx.Err()
	}
	return nil
}

// keySeq follows the keys of a series of cells written in order to
// HFiles (a merged partition, or a split writing its own files): it keeps
// the cell written last and counts the cells dropped for repeating its
// key.
type keySeq struct {
	prev        lastCell
	dups, colls int64
}

// The places of a cell against the cell written before it.
const (
	nextRow  = iota // in a later row (or the first cell)
	sameRow         // in the same row, after it
	repeated        // with its key: dropped and counted
	before          // before it: out of order
)

// place says where c lies against the cell written last, comparing the
// row once (a wide row's cells need only their columns compared); a
// repeat is counted (collapse).
func (q *keySeq) place(s *Sink, c *cell.Cell) int {
	if !q.prev.has {
		return nextRow
	}
	switch bytes.Compare(q.prev.c.Row, c.Row) {
	case 1:
		return before
	case -1:
		return nextRow
	}
	return q.placeInRow(s, c)
}

// placeInRow is place for a cell its caller knows to have the row of the
// cell written last.
func (q *keySeq) placeInRow(s *Sink, c *cell.Cell) int {
	switch cell.CompareColumnsAndVersion(&q.prev.c, c) {
	case 1:
		return before
	case 0:
		q.collapse(s, c)
		return repeated
	}
	return sameRow
}

// collapse counts c, whose key the cell written before it has: a duplicate
// when value and tags agree, else a collision, with an example.
func (q *keySeq) collapse(s *Sink, c *cell.Cell) {
	prev := &q.prev.c
	if sameCell(prev, c) {
		q.dups++
		return
	}
	q.colls++
	s.example(fmt.Sprintf("%s: kept value %x (%d bytes), dropped %x (%d bytes)", c, clip(prev.Value), len(prev.Value), clip(c.Value), len(c.Value)))
}

// record saves the partition's progress in finish.json: info, when not
// nil, is a file just finished; done says the partition is complete.
func (w *partWriter) record(info *hfileInfo, done bool) error {
	s, ps := w.s, w.ps
	s.finMu.Lock()
	defer s.finMu.Unlock()
	if info != nil {
		ps.Files = append(ps.Files, *info)
	}
	ps.Duplicates += w.seq.dups
	ps.Collisions += w.seq.colls
	w.seq.dups, w.seq.colls = 0, 0
	ps.Done = done
	return s.saveFinish(w.st)
}

// closeOut finishes the open file, counts it against the staging budget
// and records it.
func (w *partWriter) closeOut() error {
	info, err := w.s.finishHFile(w.out)
	w.out = nil
	if err != nil {
		return err
	}
	if err := w.s.addStaged(info.Size); err != nil {
		return fmt.Errorf("stage: region %s family %s: %w", w.reg.Dir, w.ps.Family, err)
	}
	return w.record(&info, false)
}

// finish closes the last file and records the partition done.
func (w *partWriter) finish() error {
	if w.out != nil {
		if err := w.closeOut(); err != nil {
			return err
		}
	}
	return w.record(nil, true)
}

// abort drops the open file after a failed merge.
func (w *partWriter) abort() {
	if w.out != nil {
		w.out.abort(w.s)
	}
}

// lastCell is a copy of the cell last written, in buffers reused from
// cell to cell: the merge's cells are valid only until its next one. The
// row has a buffer of its own, copied only when the row changes.
type lastCell struct {
	c                         cell.Cell
	row, fam, qual, val, tags []byte
	has                       bool
}

// set copies c, each slice into a buffer of its own; newRow false says c's
// row is the one held already. Field by field, and the family only when it
// changes: assigning a whole Cell per cell cost more than the copies.
func (l *lastCell) set(c *cell.Cell, newRow bool) {
	if newRow || !l.has {
		l.row = append(l.row[:0], c.Row...)
		l.c.Row = l.row[:len(l.row):len(l.row)]
	}
	if !l.has || string(l.fam) != string(c.Family) {
		l.fam = append(l.fam[:0], c.Family...)
		l.c.Family = l.fam[:len(l.fam):len(l.fam)]
	}
	l.qual = append(l.qual[:0], c.Qualifier...)
	l.c.Qualifier = l.qual[:len(l.qual):len(l.qual)]
	l.val = append(l.val[:0], c.Value...)
	l.c.Value = l.val[:len(l.val):len(l.val)]
	if len(c.Tags) > 0 || len(l.c.Tags) > 0 {
		l.tags = append(l.tags[:0], c.Tags...)
		l.c.Tags = l.tags[:len(l.tags):len(l.tags)]
	}
	l.c.Timestamp, l.c.Type = c.Timestamp, c.Type
	l.has = true
}

// clip shortens a value for an example message.
func clip(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}
