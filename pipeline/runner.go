package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"sync"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/source"
	"github.com/rekeyhq/rekey/transform"
)

// work is one split to read, maybe clipped to a row range.
type work struct {
	id          string
	split       source.Split
	start, stop []byte
	bytes       int64
}

// queue hands the run's splits to its workers, at most workers at once,
// largest first. With spread, a free worker takes the largest split of a
// region no other worker is reading, if any: the pieces of one region
// hold neighbouring keys, which most re-keyings write into the same
// target regions, and two workers putting into one target region share
// its region server's work instead of adding to it: two pieces of one
// heavy region written at once queue on one server while another server
// sits idle.
type queue struct {
	slots  chan struct{}
	spread bool

	mu   sync.Mutex
	todo []work
	busy map[string]int // regions being read, by encoded name
}

func newQueue(todo []work, workers int, spread bool) *queue {
	return &queue{slots: make(chan struct{}, max(1, workers)), spread: spread, todo: append([]work(nil), todo...), busy: map[string]int{}}
}

// take waits for a free worker and returns the split it takes; false once
// none is left or ctx ends.
func (q *queue) take(ctx context.Context) (work, bool) {
	if ctx.Err() != nil {
		return work{}, false
	}
	q.mu.Lock()
	empty := len(q.todo) == 0
	q.mu.Unlock()
	if empty {
		return work{}, false
	}
	select {
	case q.slots <- struct{}{}:
	case <-ctx.Done():
		return work{}, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	k := q.nextLocked()
	w := q.todo[k]
	q.todo = append(q.todo[:k], q.todo[k+1:]...)
	q.busy[w.split.Region]++
	return w, true
}

// peek returns the split take would return if a worker were free now.
func (q *queue) peek() (work, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.todo) == 0 {
		return work{}, false
	}
	return q.todo[q.nextLocked()], true
}

// nextLocked is the index of the split to hand out next; len(q.todo) > 0.
func (q *queue) nextLocked() int {
	if q.spread {
		for k := range q.todo {
			if q.busy[q.todo[k].split.Region] == 0 {
				return k
			}
		}
	}
	return 0
}

// done frees the worker that read w.
func (q *queue) done(w work) {
	q.mu.Lock()
	q.busy[w.split.Region]--
	q.mu.Unlock()
	<-q.slots
}

// shardOf deals the items, largest first, each to the shard with the
// fewest bytes so far (ties to the lower index), and returns this shard's:
// every process computes the same deal from the same snapshot.
func shardOf(items []work, sh Shard) []work {
	load := make([]int64, sh.Count)
	var mine []work
	for _, w := range items {
		best := 0
		for i := 1; i < sh.Count; i++ {
			if load[i] < load[best] {
				best = i
			}
		}
		load[best] += max(w.bytes, 1)
		if best == sh.Index {
			mine = append(mine, w)
		}
	}
	return mine
}

// clip turns splits into work items, cut to the --only ranges.
func clip(splits []source.Split, only []KeyRange) []work {
	var out []work
	for _, sp := range splits {
		if len(only) == 0 {
			out = append(out, work{id: sp.ID, split: sp, bytes: sp.Bytes})
			continue
		}
		for i, kr := range only {
			// The rows the split holds cells of: a piece that ends inside
			// a row holds some of that row too. The scan keeps to the
			// split's own column bounds within them.
			start, stop := sp.StartRow, sp.StopRow()
			if bytes.Compare(kr.Start, start) > 0 {
				start = kr.Start
			}
			if len(kr.Stop) > 0 && (len(stop) == 0 || bytes.Compare(kr.Stop, stop) < 0) {
				stop = kr.Stop
			}
			if len(stop) > 0 && bytes.Compare(start, stop) >= 0 {
				continue
			}
			out = append(out, work{id: fmt.Sprintf("%s#%d", sp.ID, i), split: sp, start: start, stop: stop, bytes: sp.Bytes})
		}
	}
	return out
}

func (r *Run) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.warnings = append(r.warnings, msg)
	r.mu.Unlock()
	r.logf("warning: %s", msg)
}

// example keeps one of at most 20 examples of rejected, colliding or
// failed cells for the summary. The versions of one cell say the same
// thing (their messages name the row and column, not the timestamp), so
// a message already kept is not kept again.
func (r *Run) example(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.examples) >= 20 {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if slices.Contains(r.examples, msg) {
		return
	}
	r.examples = append(r.examples, msg)
}

// runSplit reads one split, maps its cells into the sink and records it.
func (r *Run) runSplit(ctx context.Context, w work) error {
	start := r.now()
	st := &SplitStats{ID: w.id, Region: w.split.Region, FileBytes: w.bytes}
	r.mu.Lock()
	if prev := r.state.Splits[w.id]; prev != nil {
		st.Attempts = prev.Attempts
	}
	r.mu.Unlock()
	st.Attempts++
	r.running.Add(1)
	defer r.running.Add(-1)

	sketch, held, err := r.readSplit(ctx, w, st)
	st.Seconds = r.now().Sub(start).Seconds()
	if err != nil && ctx.Err() == nil {
		st.Error = err.Error()
	}
	r.mu.Lock()
	r.state.Splits[w.id] = st
	var serr error
	if h, early := r.held[w.id]; st.Done && held && !(early && h.st == nil) {
		// Done for this run, but only in the sink's memory: the checkpoint
		// (and the sketch it saves) learns of it when the sink says the
		// split is durable (durable); a crash before that redoes it.
		r.held[w.id] = heldSplit{st: st, sketch: sketch}
	} else {
		delete(r.held, w.id)
		if st.Done {
			r.sketch.Merge(sketch)
		}
		serr = r.recordLocked(st, sketch)
	}
	r.mu.Unlock()
	if st.Done {
		r.doneSplits.Add(1)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("split %s (region %s): %w", w.id, st.Region, err)
	}
	return serr
}

// recordLocked appends the split's record to the checkpoint's journal,
// with the split's own entity sketch when it is done, in the order the
// run's sketch merged them; r.mu is held. When the journal has grown as
// large as the base, or an append failed (the journal may end torn), a
// compaction writes a new base and journal.
func (r *Run) recordLocked(st *SplitStats, sketch *entity.Sketch) error {
	var delta []byte
	if st.Done {
		var buf bytes.Buffer
		if err := sketch.WriteJSON(&buf); err != nil {
			return err
		}
		delta = buf.Bytes()
	}
	// The fence: a run whose lease another run took records nothing
	// more, however late its renewal notices.
	if err := r.leases.Check(); err != nil {
		return err
	}
	if err := r.ckpt.Record(st, delta); err != nil {
		// A new base is the way past a torn append, but not past a run
		// that took this state over: its compaction removed the journal,
		// and a base written now would erase the splits it recorded.
		if lost := r.leases.Lost(); lost != nil {
			return fmt.Errorf("%w: %v", lost, err)
		}
		if errors.Is(err, iofs.ErrNotExist) && r.leases != nil {
			// Lost for good: later records must not compact either.
			r.leases.Lose(fmt.Errorf("%w: %v (another run rewrote this checkpoint)", ErrLeaseLost, err))
			return r.leases.Lost()
		}
		if cerr := r.compactLocked(); cerr != nil {
			return fmt.Errorf("%w (and writing a new base instead: %v)", err, cerr)
		}
		r.logf("%v; wrote a new checkpoint base instead", err)
		return nil
	}
	if f := r.o.afterDone; f != nil && st.Done {
		defer f()
	}
	if r.ckpt.CompactDue() {
		return r.compactLocked()
	}
	return nil
}

// compactLocked writes the whole state as a new checkpoint base, with the
// run's sketch, and starts its journal; r.mu is held.
func (r *Run) compactLocked() error {
	// The fence (see recordLocked): a base written by a run that lost
	// its lease would replace the new holder's.
	if err := r.leases.Check(); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := r.sketch.WriteJSON(&buf); err != nil {
		return err
	}
	r.state.Entities = buf.Bytes()
	r.state.Updated = r.now().UTC()
	return r.ckpt.Compact(r.durableStateLocked())
}

// heldSplit is a split done in this run whose cells the sink holds in
// memory only (sink.Ack.Held), with its entity sketch, both kept out of
// the checkpoint until the sink reports the split durable. With no st, it
// marks a split the sink reported durable before its Ack reached the run.
type heldSplit struct {
	st     *SplitStats
	sketch *entity.Sketch
}

// deferDurability gives a Deferring sink the run's way to record held
// splits once they are durable.
func (r *Run) deferDurability() {
	r.held = map[string]heldSplit{}
	if d, ok := r.sink.(sink.Deferring); ok {
		d.OnDurable(r.durable)
	}
}

// durable records the held splits ids done in the checkpoint, merging
// their sketches into the run's in the order they are recorded.
func (r *Run) durable(ids []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		h, ok := r.held[id]
		if !ok || h.st == nil {
			// Made durable before runSplit took the Ack (another worker's
			// Write spilled it): runSplit records it at once.
			r.held[id] = heldSplit{}
			continue
		}
		delete(r.held, id)
		r.sketch.Merge(h.sketch)
		if err := r.recordLocked(h.st, h.sketch); err != nil {
			return err
		}
	}
	return nil
}

// durableStateLocked is the state a checkpoint base may hold: r.state
// without the held splits, which are not durable yet; r.mu is held.
func (r *Run) durableStateLocked() *Checkpoint {
	if len(r.held) == 0 {
		return r.state
	}
	c := *r.state
	c.Splits = make(map[string]*SplitStats, len(r.state.Splits))
	for id, st := range r.state.Splits {
		if _, held := r.held[id]; !held {
			c.Splits[id] = st
		}
	}
	return &c
}

// shortCell names a cell in messages, values left out.
func shortCell(c *cell.Cell) string {
	if c == nil {
		return "?"
	}
	return fmt.Sprintf("%s/%s:%s/%d", transform.AppendPrintable(nil, c.Row), c.Family, transform.AppendPrintable(nil, c.Qualifier), c.Timestamp)
}

// onlyID names a set of ranges to redo: the first 8 bytes, in hex, of the
// SHA-256 of the ranges.
func onlyID(rs []KeyRange) string {
	h := sha256.New()
	for _, r := range rs {
		fmt.Fprintf(h, "%x-%x;", r.Start, r.Stop)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
