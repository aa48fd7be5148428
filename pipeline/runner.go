package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	iofs "io/fs"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
)

// work is one split to read, maybe clipped to a row range.
type work struct {
	id          string
	split       snapshot.Split
	start, stop []byte
	bytes       int64
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
func clip(splits []snapshot.Split, only []KeyRange) []work {
	var out []work
	for _, sp := range splits {
		if len(only) == 0 {
			out = append(out, work{id: sp.ID, split: sp, bytes: sp.Bytes})
			continue
		}
		for i, kr := range only {
			start, stop := sp.StartRow, sp.EndRow
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

func (r *Run) example(format string, args ...any) {
	r.mu.Lock()
	if len(r.examples) < 20 {
		r.examples = append(r.examples, fmt.Sprintf(format, args...))
	}
	r.mu.Unlock()
}

// runSplit reads one split, maps its cells into the sink and records it.
func (r *Run) runSplit(ctx context.Context, w work) error {
	start := r.now()
	st := &SplitStats{ID: w.id, Region: w.split.Region.EncodedName, FileBytes: w.bytes}
	r.mu.Lock()
	if prev := r.state.Splits[w.id]; prev != nil {
		st.Attempts = prev.Attempts
	}
	r.mu.Unlock()
	st.Attempts++
	r.running.Add(1)
	defer r.running.Add(-1)

	sketch, err := r.readSplit(ctx, w, st)
	st.Seconds = r.now().Sub(start).Seconds()
	if err != nil && ctx.Err() == nil {
		st.Error = err.Error()
	}
	r.mu.Lock()
	r.state.Splits[w.id] = st
	if st.Done {
		r.sketch.Merge(sketch)
	}
	serr := r.recordLocked(st, sketch)
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
	if err := r.ckpt.record(st, delta); err != nil {
		// A new base is the way past a torn append, but not past a run
		// that took this state over: its compaction removed the journal,
		// and a base written now would erase the splits it recorded.
		if lost := r.leases.lostErr(); lost != nil {
			return fmt.Errorf("%w: %v", lost, err)
		}
		if errors.Is(err, iofs.ErrNotExist) && r.leases != nil {
			// Lost for good: later records must not compact either.
			r.leases.lose(fmt.Errorf("%w: %v (another run rewrote this checkpoint)", ErrLeaseLost, err))
			return r.leases.lostErr()
		}
		if cerr := r.compactLocked(); cerr != nil {
			return fmt.Errorf("%w (and writing a new base instead: %v)", err, cerr)
		}
		r.logf("%v; wrote a new checkpoint base instead", err)
		return nil
	}
	if r.ckpt.compactDue() {
		return r.compactLocked()
	}
	return nil
}

// compactLocked writes the whole state as a new checkpoint base, with the
// run's sketch, and starts its journal; r.mu is held.
func (r *Run) compactLocked() error {
	var buf bytes.Buffer
	if err := r.sketch.WriteJSON(&buf); err != nil {
		return err
	}
	r.state.Entities = buf.Bytes()
	r.state.Updated = r.now().UTC()
	return r.ckpt.compact(r.state)
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
