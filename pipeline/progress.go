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

	"github.com/schollz/progressbar/v3"

	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// startAux starts the progress display and the push-back controller; the
// returned function stops both and prints the last progress.
func (r *Run) startAux(ctx context.Context, splits int) func() {
	start := r.now()
	var mu sync.Mutex
	var last struct {
		at      time.Time
		written int64
		read    int64
	}
	last.at = start
	rate := func() (cells, bytes float64) {
		mu.Lock()
		defer mu.Unlock()
		t := r.now()
		dt := t.Sub(last.at).Seconds()
		if dt <= 0 {
			return 0, 0
		}
		w, b := r.written.Load(), r.bytesRead.Load()
		cells, bytes = float64(w-last.written)/dt, float64(b-last.read)/dt
		return cells, bytes
	}
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
		// ETA from the store file bytes still to read, at the rate so far.
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
	// Progress: a bar on a terminal, else a line every few seconds.
	if out := r.o.Progress; out != nil {
		every := r.o.ProgressEvery
		if every <= 0 {
			every = 5 * time.Second
		}
		var bar *progressbar.ProgressBar
		if r.o.Interactive {
			bar = progressbar.NewOptions64(max(r.totalBytes, 1),
				progressbar.OptionSetWriter(out), progressbar.OptionShowBytes(true),
				progressbar.OptionSetWidth(30), progressbar.OptionThrottle(200*time.Millisecond),
				progressbar.OptionClearOnFinish(), progressbar.OptionShowElapsedTimeOnFinish())
			every = 500 * time.Millisecond
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-done:
					if bar != nil {
						bar.Finish()
						fmt.Fprintln(out)
					}
					return
				case <-t.C:
				}
				s := status()
				cps, bps := rate()
				if bar != nil {
					bar.Describe(fmt.Sprintf("splits %d/%d  %s cells/s  %.1f MB/s", s.SplitsDone, s.Splits, human.Rate(cps), bps/1e6))
					bar.Set64(r.doneBytes + s.BytesRead)
					continue
				}
				line := fmt.Sprintf("progress: splits %d/%d (%d running), %d cells read, %d written, %s cells/s, %.1f MB/s read", s.SplitsDone, s.Splits, s.Running, s.Read, s.Written, human.Rate(s.CellsPerSec), s.MBPerSec)
				if s.ETASeconds > 0 {
					line += fmt.Sprintf(", ETA %s", (time.Duration(s.ETASeconds) * time.Second).String())
				}
				if s.Paused {
					line += " (paused)"
				}
				fmt.Fprintln(out, line)
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
			continue // an unfinished split is redone: its counts are not final
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
		p := path.Join(path.Dir(r.ckpt.loc.Path), name)
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
