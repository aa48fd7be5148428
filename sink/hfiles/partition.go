package hfiles

import (
	"bytes"
	"context"
	"errors"
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
	// reps' counts are folded into ps when a file is recorded: a resumed
	// merge skips the recorded files' rows, and counts the rest again.
	reps repeats
	n    int // cells written, for the periodic cancellation check
}

// newPartWriter prepares the partition's folder (removing what a crash
// left that no record names) and the writer that continues after the
// files already recorded.
func (s *Sink) newPartWriter(st *finishState, ps *partState, total int64) (*partWriter, error) {
	w := &partWriter{s: s, st: st, ps: ps, reg: &s.regions.Regions[ps.Region],
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
		return fmt.Errorf("hfiles: create %s: %w", dir, err)
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
	if w.out == nil || w.out.w.StartsRow(c) {
		// A new row, or one out of order, which the writer refuses below.
		if !w.reg.Contains(c.Row) {
			return fmt.Errorf("hfiles: run cell %s lies outside its partition's region %s (runs and plan disagree)", c, w.reg)
		}
		if w.resume != nil && bytes.Compare(c.Row, w.resume) <= 0 {
			return nil
		}
		// Rolled only for a row after the last one: a file rolled before
		// an earlier row would take it without a word, as nothing would
		// compare it with the closed file's last cell.
		if w.out != nil && w.out.bytes >= w.limit && bytes.Compare(w.out.w.LastRow(), c.Row) < 0 {
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
	if _, err := w.out.add(w.s, c, &w.reps); err != nil {
		if errors.Is(err, hfile.ErrOutOfOrder) {
			return fmt.Errorf("hfiles: region %s family %s: merged cell out of order (runs out of order): %w", w.reg.Dir, w.ps.Family, err)
		}
		return fmt.Errorf("hfiles: region %s family %s: %w", w.reg.Dir, w.ps.Family, err)
	}
	w.n++
	if w.n%4096 == 0 {
		return ctx.Err()
	}
	return nil
}

// repeats counts the cells a series of HFiles dropped for repeating the
// key of the cell written before them: duplicates (the same value and
// tags too) and collisions (another value or tags; the first is kept).
type repeats struct{ dups, colls int64 }

// add writes c into o unless it repeats the key of the cell written last,
// which reps counts (a collision with an example). A cell out of order is
// refused with an error matching hfile.ErrOutOfOrder, nothing written.
func (o *hfileOut) add(s *Sink, c *cell.Cell, reps *repeats) (hfile.Kept, error) {
	kept, err := o.w.AppendDistinct(c)
	if err != nil {
		return kept, err
	}
	switch kept {
	case hfile.Appended:
		o.cells++
		o.bytes += cell.Size(c)
	case hfile.Duplicate:
		reps.dups++
	case hfile.Collision:
		reps.colls++
		prev := o.w.LastValue()
		s.example(fmt.Sprintf("%s: kept value %x (%d bytes), dropped %x (%d bytes)", c, clip(prev), len(prev), clip(c.Value), len(c.Value)))
	}
	return kept, nil
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
	ps.Duplicates += w.reps.dups
	ps.Collisions += w.reps.colls
	w.reps = repeats{}
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
		return fmt.Errorf("hfiles: region %s family %s: %w", w.reg.Dir, w.ps.Family, err)
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

// clip shortens a value for an example message.
func clip(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}
