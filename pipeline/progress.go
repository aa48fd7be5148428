package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// startAux starts the progress display and the push-back controller; the
// returned function stops both and prints the last progress.
func (r *Run) startAux(ctx context.Context, splits int) func() {
	start := r.now()
	status := func() Status {
		el := r.now().Sub(start).Seconds()
		s := Status{
			Splits: splits, SplitsDone: int(r.doneSplits.Load()), Running: int(r.running.Load()),
			Read: r.read.Load(), Written: r.written.Load(), Rejected: r.rejected.Load(),
			Collided: r.collided.Load(), Failed: r.failed.Load(), BytesRead: r.bytesRead.Load(),
			TotalBytes: r.totalBytes, Elapsed: el, Paused: r.ctl.Paused(), Limits: r.ctl.Limits(),
			BackoffCap: r.ctl.backoffRate(),
		}
		if el > 0 {
			s.CellsPerSec = float64(s.Written) / el
			s.MBPerSec = float64(s.BytesRead) / 1e6 / el
		}
		// ETA from the store file bytes still to read, at the rate so far
		// (the progress line uses the rate of the last seconds instead).
		left := float64(r.totalBytes - r.doneBytes - s.BytesRead)
		if bps := float64(s.BytesRead) / el; bps > 0 && left > 0 {
			s.ETASeconds = left / bps
		}
		return s
	}
	r.ctl.setStatus(status)

	done := make(chan struct{})
	var wg sync.WaitGroup
	// Push-back: when the sink's retries grow, halve the write rate; after
	// a quiet spell raise it by a quarter until the asked cap (or no cap).
	if rs, ok := r.sink.(sink.Retrier); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			prev, prevW := rs.Retries(), r.written.Load()
			var calm time.Time
			for {
				select {
				case <-done:
					return
				case <-t.C:
				}
				cur, w := rs.Retries(), r.written.Load()
				observed := float64(w - prevW)
				cap := r.ctl.backoffRate()
				switch {
				case cur > prev:
					nc := math.Max(observed/2, 50)
					if cap == 0 || nc < cap {
						r.ctl.setBackoff(nc)
						r.logf("region servers push back (%d retries in the last second): writing at most %.0f cells/s", cur-prev, nc)
					}
					calm = r.now()
				case cap > 0 && r.now().Sub(calm) > 3*time.Second:
					nc := cap * 1.25
					if asked := r.ctl.Limits().CellsPerSec; (asked > 0 && nc >= asked) || nc > 1e7 {
						r.ctl.setBackoff(0)
						r.logf("push-back over: write cap back to %s", capString(asked))
					} else {
						r.ctl.setBackoff(nc)
					}
					calm = r.now()
				}
				prev, prevW = cur, w
			}
		}()
	}
	// Progress: one line rewritten in place on a terminal, else a line
	// every few seconds.
	if out := r.o.Progress; out != nil {
		every := r.o.ProgressEvery
		if every <= 0 {
			every = 5 * time.Second
		}
		if r.o.Interactive {
			every = 500 * time.Millisecond
		}
		recent := newRateWindow(10 * time.Second)
		recent.add(start, r.doneBytes, 0) // the first line measures from the start
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-done:
					if r.o.Interactive {
						// Clear the line: the summary follows.
						fmt.Fprint(out, "\r\033[K")
					}
					return
				case <-t.C:
				}
				s := status()
				now := r.now()
				recent.add(now, r.doneBytes+s.BytesRead, s.Written)
				line := progressLine(s, r.doneBytes, recent.rate())
				if r.o.Interactive {
					// Rewritten in place; a log line clears it first (the
					// rekey command's logger does), and the next tick draws
					// it again below.
					fmt.Fprint(out, "\r"+line+"\033[K")
					continue
				}
				fmt.Fprintln(out, "progress: "+line)
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

func capString(c float64) string {
	if c == 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f cells/s", c)
}

// fill totals the per-split stats of this run into the summary.
func (r *Run) fill(sum *Summary, items []work) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum.Done = 0
	for _, w := range items {
		st := r.state.Splits[w.id]
		if st == nil {
			continue
		}
		if st.Done {
			sum.Done++
		}
		sum.PerSplit = append(sum.PerSplit, *st)
	}
	sort.Slice(sum.PerSplit, func(a, b int) bool { return sum.PerSplit[a].ID < sum.PerSplit[b].ID })
	for _, st := range sum.PerSplit {
		if !st.Done && st.Failed == 0 {
			// An unfinished split is redone: its counts are not final,
			// but a run stopped early says what it read of them.
			sum.ReadUnfinished += st.Read
			continue
		}
		sum.Read += st.Read
		sum.FilesChecked += st.FilesChecked
		sum.Written += st.Written
		sum.Rejected += st.Rejected
		sum.Collided += st.Collided
		sum.Failed += st.Failed
		sum.Bytes += st.Bytes
	}
	sum.SplitTimes = splitTimes(sum.PerSplit)
	sum.BytesRead = r.bytesRead.Load()
	if h := r.sketch.Heaviest(entity.ByCells); len(h) > 0 {
		sum.Heaviest = h[:min(len(h), 3)]
	}
	sum.Examples = append(sum.Examples, r.examples...)
	sum.Warnings = append(sum.Warnings, r.warnings...)
}

// finishFiles writes the entity sketch beside the checkpoint and gathers
// the reject files into the job's reject file.
func (r *Run) finishFiles(sum *Summary, items []work) {
	r.mu.Lock()
	var buf bytes.Buffer
	err := r.sketch.WriteJSON(&buf)
	r.mu.Unlock()
	if err == nil {
		wfs := r.rejects.fs
		name := "entities.json"
		if sh := r.o.Shard; sh.Count > 1 {
			name = fmt.Sprintf("entities.shard-%d-of-%d.json", sh.Index, sh.Count)
		}
		if len(r.o.Only) > 0 {
			// A redo sees only its ranges: its sketch must not replace the
			// whole run's, which verify reads.
			name = strings.TrimSuffix(name, ".json") + ".only-" + onlyID(r.o.Only) + ".json"
		}
		p := path.Join(path.Dir(r.ckpt.Location().Path), name)
		if err := vfs.WriteFileAtomic(wfs, p, buf.Bytes()); err != nil {
			r.warn("entity sketch: %v", err)
		} else {
			sum.Entities = p
		}
	}
	if f := r.j.BadKeys.File; f != "" && sum.Rejected > 0 {
		ids := make([]string, 0, len(items))
		for _, w := range items {
			ids = append(ids, w.id)
		}
		if _, err := r.rejects.gather(f, ids); err != nil {
			r.warn("reject file %s: %v", f, err)
		} else {
			sum.Rejects = f
		}
	}
}

// rateWindow measures the recent rates of the bytes read and cells
// written over a sliding window: under a cell-rate cap, a pause or a slow
// region server the rate of the whole run so far overstates what comes
// next, and an ETA from it ran out two to three times too early.
type rateWindow struct {
	span    time.Duration
	samples []rateSample
}

type rateSample struct {
	at           time.Time
	bytes, cells int64
}

func newRateWindow(span time.Duration) *rateWindow { return &rateWindow{span: span} }

// add records the totals at t, dropping samples older than the span
// (keeping one at or before its start, to measure from).
func (w *rateWindow) add(t time.Time, bytes, cells int64) {
	w.samples = append(w.samples, rateSample{t, bytes, cells})
	for len(w.samples) > 2 && t.Sub(w.samples[1].at) >= w.span {
		w.samples = w.samples[1:]
	}
}

// rate returns the bytes and cells per second over the window, and ok
// false until two samples are apart in time.
func (w *rateWindow) rate() windowRate {
	if len(w.samples) < 2 {
		return windowRate{}
	}
	a, b := w.samples[0], w.samples[len(w.samples)-1]
	dt := b.at.Sub(a.at).Seconds()
	if dt <= 0 {
		return windowRate{}
	}
	return windowRate{ok: true, bytes: float64(b.bytes-a.bytes) / dt, cells: float64(b.cells-a.cells) / dt, seconds: dt}
}

// windowRate is what a rateWindow measured.
type windowRate struct {
	ok           bool
	bytes, cells float64
	seconds      float64
}

// progressLine is the one line of progress: splits and bytes done of the
// total with the share, the cells written, the recent rates, and the ETA
// from the bytes left at the recent rate.
func progressLine(s Status, doneBefore int64, w windowRate) string {
	done := doneBefore + s.BytesRead
	line := fmt.Sprintf("splits %d/%d", s.SplitsDone, s.Splits)
	if s.TotalBytes > 0 {
		line += fmt.Sprintf(", %s of %s (%.0f%%)", human.Bytes(done), human.Bytes(s.TotalBytes), 100*float64(done)/float64(s.TotalBytes))
	}
	line += fmt.Sprintf(", %s cells written", human.Count(s.Written))
	if s.Rejected > 0 {
		line += fmt.Sprintf(" (%s rejected)", human.Count(s.Rejected))
	}
	if w.ok {
		line += fmt.Sprintf(", %s cells/s, %s read", human.Rate(w.cells), human.ByteRate(w.bytes))
	}
	left := s.TotalBytes - done
	switch {
	case s.Paused:
		line += ", paused"
	case left <= 0:
	case w.ok && w.bytes > 0:
		line += ", ETA " + time.Duration(float64(left)/w.bytes*float64(time.Second)).Round(time.Second).String()
	case w.ok:
		line += fmt.Sprintf(", ETA unknown (nothing read in %.0fs)", w.seconds)
	}
	return line
}
