package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/source"
	"github.com/rekeyhq/rekey/transform"
)

// readSplit reads one split into its own output of the sink and commits
// it; st receives the split's counts, and the split's entity sketch is
// returned. The split is done (st.Done) only when the sink acknowledged
// every cell it was given; held says the sink holds its cells in memory
// only (sink.Ack.Held), which the checkpoint must not count yet.
func (r *Run) readSplit(ctx context.Context, w work, st *SplitStats) (_ *entity.Sketch, held bool, _ error) {
	out, err := r.sink.Begin(ctx, sink.SplitInfo{ID: w.id, Region: w.split.Region, Bytes: w.bytes})
	if err != nil {
		return nil, false, err
	}
	sr := r.newSplitReader(w, st, out)
	committed := false
	defer func() {
		if !committed {
			out.Abort()
			sr.rej.abort()
		}
	}()
	opts := r.scan
	opts.StartRow, opts.StopRow = w.start, w.stop
	sc, err := r.src.Open(ctx, w.split, opts)
	if err != nil {
		return nil, false, err
	}
	defer sc.Close()
	if err := sr.readAll(ctx, sc); err != nil {
		return nil, false, err
	}
	if err := sr.rej.commit(); err != nil {
		return nil, false, fmt.Errorf("reject file: %w", err)
	}
	ack, err := out.Commit(ctx)
	committed = true
	if err != nil {
		out.Abort()
		return nil, false, err
	}
	return sr.sketch, ack.Held, sr.acknowledged(ack)
}

// splitReader is the hot loop of one split: old cells from the split's
// scanner, through the transform, into the split's sink, counting
// entities and collisions on the way. A worker makes one per split and
// uses it from its own goroutine only.
type splitReader struct {
	r    *Run
	w    work
	st   *SplitStats
	out  sink.SplitSink
	out1 cell.Cell // the new cell write passes to out (valid during the call)
	rej  *rejectWriter

	mapper  transform.Mapper
	inPlace transform.InPlaceMapper // the mapper, when it maps in place
	named   transform.EntityMapper  // the mapper, when it names its entities
	parser  *transform.Rekey        // parses the entities of other mappers' cells
	sketch  *entity.Sketch
	coll    *collisionSet // nil when the layout cannot collide
	setTS   int64

	ctx                context.Context // readAll's, for the sink's writes
	src                *cell.Cell      // the old cell being mapped
	writeErr           error           // the sink's first error; emit stops on it
	refused            []cell.Cell     // new cells the sink refused for their key, not yet rejected (copies)
	refusedWhy         []string        // why, for each of refused
	dropped            int64           // new cells the sink took, counted in emitted, and later refused with their row
	emitted, emittedB  int64           // new cells (and their bytes) given to the sink
	curEnt, ent        []byte          // the entity being counted, the last cell's
	rowEntity          bool            // the mapper's entities are read from the old row alone
	entRow             uint64          // with rowEntity, the scanner's RowGen of the old row curEnt was read from
	haveEntRow         bool            // entRow is set
	entCells, entBytes int64           // the current entity's new cells and bytes
	pending            int64           // cells written since the last limiter wait
	readShown          int64           // st.Read already added to the run's counter
}

func (r *Run) newSplitReader(w work, st *SplitStats, out sink.SplitSink) *splitReader {
	sr := &splitReader{
		r: r, w: w, st: st, out: out, rej: r.rejects.open(w.id),
		mapper: r.o.NewMapper(),
		sketch: entity.NewSketch(r.o.HeavyHitters, r.o.SampleEntities, r.seed),
		setTS:  r.o.SetTimestamp,
	}
	sr.inPlace, _ = sr.mapper.(transform.InPlaceMapper)
	sr.named, _ = sr.mapper.(transform.EntityMapper)
	if m, ok := sr.mapper.(transform.RowEntityMapper); ok {
		sr.rowEntity = m.EntityOfOldRow()
	}
	if sr.named == nil && r.j.Program != nil {
		sr.parser = r.j.Program.New()
	}
	if r.collide {
		sr.coll = newCollisionSet(r.maxTrack)
	}
	return sr
}

// readAll maps every cell of the scanner into the split's sink, then
// flushes what the transform and the entity count hold back.
func (sr *splitReader) readAll(ctx context.Context, sc source.Scanner) error {
	r, st := sr.r, sr.st
	sr.ctx = ctx
	emit := sr.emit
	for sc.Next() {
		sr.src = sc.Cell()
		st.Read++
		before, beforeB := sr.emitted, sr.emittedB
		var merr error
		if sr.inPlace != nil {
			sr.out1 = *sr.src
			if merr = sr.inPlace.MapInPlace(&sr.out1); merr == nil {
				sr.write()
			}
		} else {
			merr = sr.mapper.Map(*sr.src, emit)
		}
		if sr.writeErr != nil {
			return sr.writeErr
		}
		if len(sr.refused) > 0 {
			if err := sr.rejectRefused(); err != nil {
				return err
			}
		}
		if merr != nil {
			if err := sr.rejectKey(merr); err != nil {
				return err
			}
			continue
		}
		st.Mapped += sr.emitted - before
		if sr.emitted > before {
			sr.countEntity(sc.RowGen(), sr.emitted-before, sr.emittedB-beforeB)
		}
		if sr.pending >= 256 {
			// Shared counters move in steps, not per cell: workers on
			// other cores would otherwise fight over their cache line.
			r.read.Add(st.Read - sr.readShown)
			sr.readShown = st.Read
			r.written.Add(sr.pending)
			if err := r.ctl.write.wait(ctx, float64(sr.pending)); err != nil {
				return err
			}
			sr.pending = 0
		}
		if st.Read&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	r.written.Add(sr.pending)
	r.read.Add(st.Read - sr.readShown)
	if err := sc.Err(); err != nil {
		return err
	}
	st.FilesChecked = sc.FilesChecked()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	sr.flushEntity()
	if f, ok := sr.mapper.(transform.Flusher); ok {
		if err := f.Flush(emit); err != nil {
			return fmt.Errorf("transform: %w", err)
		}
		if sr.writeErr != nil {
			return sr.writeErr
		}
		if len(sr.refused) > 0 {
			if err := sr.rejectRefused(); err != nil {
				return err
			}
		}
	}
	if sr.coll != nil && sr.coll.full {
		r.warn("split %s: the collision check covered only its first %d new cells (memory budget)", sr.w.id, sr.coll.limit)
	}
	return nil
}

// emit writes one new cell to the split's sink; the transform calls it.
// The cell is passed on from sr.out1, not from emit's argument: a pointer
// to the argument, given to the sink through its interface, made the
// argument escape, one heap allocation per cell.
func (sr *splitReader) emit(c cell.Cell) {
	if sr.writeErr != nil {
		return
	}
	sr.out1 = c
	sr.write()
}

// write writes sr.out1, the new cell of a mapper's call, to the sink.
func (sr *splitReader) write() {
	o := &sr.out1
	if sr.setTS != 0 {
		o.Timestamp = sr.setTS
	}
	if sr.coll != nil && sr.coll.add(o, sr.src) {
		sr.st.Collided++
		sr.r.collided.Add(1)
		sr.r.example("collision: %s and another old cell both become %s", shortCell(sr.src), shortCell(o))
	}
	if sr.writeErr = sr.out.Write(sr.ctx, o); sr.writeErr != nil {
		var bk *sink.BadKeyError
		if errors.As(sr.writeErr, &bk) {
			// Not written: a bad key, by the job's action, with the
			// cells of its row the sink gave back (taken, now dropped).
			sr.writeErr = nil
			sr.dropped += int64(len(bk.Dropped))
			for _, c := range append(bk.Dropped, o.Clone()) {
				sr.refused = append(sr.refused, c)
				sr.refusedWhy = append(sr.refusedWhy, bk.Why)
			}
		}
		return
	}
	sr.emitted++
	sr.pending++
	sr.emittedB += cell.Size(o)
}

// rejectKey deals with an old cell whose key does not fit the layout: to
// the reject file, or the end of the run, as the job says.
func (sr *splitReader) rejectKey(merr error) error {
	if !errors.Is(merr, transform.ErrBadKey) {
		return fmt.Errorf("transform: %w", merr)
	}
	if sr.r.j.BadKeys.Action != job.Reject {
		return fmt.Errorf("%w: %v", ErrBadKeyFatal, merr)
	}
	sr.st.Rejected++
	sr.r.rejected.Add(1)
	sr.r.example("rejected: %v", merr)
	return sr.rej.add(sr.src, merr)
}

// rejectRefused deals with the new cells the sink refused for their key
// (sink.BadKeyError) as rejectKey does with an old key the layout
// refuses: each is counted rejected and goes to the reject file, as the
// new cell it is (a row-level transform may emit it long after its old
// cells were read), or the run ends when the job says bad_keys: fail.
func (sr *splitReader) rejectRefused() error {
	refused, why := sr.refused, sr.refusedWhy
	sr.refused, sr.refusedWhy = sr.refused[:0], sr.refusedWhy[:0]
	if sr.r.j.BadKeys.Action != job.Reject {
		return fmt.Errorf("%w: new cell %s: %s", ErrBadKeyFatal, shortCell(&refused[0]), why[0])
	}
	n := int64(len(refused))
	sr.st.Rejected += n
	sr.r.rejected.Add(n)
	sr.r.example("rejected by the %s sink: new cell %s: %s", sr.r.sink.Name(), shortCell(&refused[0]), why[0])
	for i := range refused {
		if err := sr.rej.add(&refused[i], fmt.Errorf("new cell refused by the %s sink: %s", sr.r.sink.Name(), why[i])); err != nil {
			return err
		}
	}
	return nil
}

// countEntity adds the new cells of the old cell just mapped to its
// entity; consecutive cells of one entity are added to the sketch at once.
func (sr *splitReader) countEntity(rowGen uint64, cells, bytesOf int64) {
	if sr.haveEntRow && sr.entRow == rowGen {
		// Another cell of the old row just counted: its entity, without
		// building the entity key again.
		sr.entCells += cells
		sr.entBytes += bytesOf
		return
	}
	switch {
	case sr.named != nil:
		sr.ent = sr.named.LastEntity(sr.ent[:0])
	case sr.parser != nil:
		sr.ent, _ = sr.parser.SourceEntity(sr.ent[:0], sr.src)
	}
	if !bytes.Equal(sr.ent, sr.curEnt) {
		sr.flushEntity()
		sr.curEnt = append(sr.curEnt[:0], sr.ent...)
	}
	if sr.rowEntity {
		sr.entRow, sr.haveEntRow = rowGen, true
	}
	sr.entCells += cells
	sr.entBytes += bytesOf
}

// flushEntity adds the current entity's counts to the split's sketch.
func (sr *splitReader) flushEntity() {
	if sr.entCells > 0 {
		sr.sketch.Add(sr.curEnt, sr.entCells, sr.entBytes)
	}
	sr.entCells, sr.entBytes = 0, 0
}

// acknowledged records what the sink acknowledged at the split's commit:
// done only when it took every cell; failed cells leave the split to redo.
func (sr *splitReader) acknowledged(ack sink.Ack) error {
	r, st := sr.r, sr.st
	st.Written, st.Bytes, st.Failed = ack.Cells, ack.Bytes, ack.Failed
	if ack.Failed > 0 {
		r.failed.Add(ack.Failed)
		for _, e := range ack.FailedExamples {
			r.example("failed: %s", e)
		}
		st.Error = fmt.Sprintf("%d cells failed after every retry (the split is redone by --resume)", ack.Failed)
		return nil
	}
	if ack.Cells != sr.emitted-sr.dropped {
		return fmt.Errorf("the %s sink acknowledged %d cells of the %d it was given and kept", r.sink.Name(), ack.Cells, sr.emitted-sr.dropped)
	}
	st.Done = true
	return nil
}
