package hfiles

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// TestStatusNoETAWhenNothingRuns: one of two spill shards committed and
// no task running: work is left and nothing moves, so there is no ETA
// (it was a time from the rates so far, which counted down to 0s) but a
// reason naming the tasks to start; the rates are in human units.
func TestStatusNoETAWhenNothingRuns(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 1 << 20, Workers: 1,
		Task: Task{PhaseSpill, 0, 2}, SourceBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Begin(ctx, sink.SplitInfo{ID: "a", Bytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	cells := genCells(3, 2000)
	for i := range cells {
		if err := w.Write(ctx, &cells[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	read := func(live bool) *Status {
		st, err := ReadStatus(dir, func(vfs.FS, string) bool { return live }, nil, time.Now().Add(time.Minute), vfs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := read(false)
	if st.Spill.Done != 1 || st.Spill.Tasks != 2 || st.Spill.Running != 0 {
		t.Fatalf("spill %+v, want 1 of 2 done, none running", st.Spill)
	}
	if st.ETASeconds >= 0 || !strings.Contains(st.ETABasis, "no task is running") {
		t.Errorf("ETA %.0fs (%s) with nothing running", st.ETASeconds, st.ETABasis)
	}
	// Shard 1 started, its lease live.
	if err := os.MkdirAll(filepath.Join(dir, Task{PhaseSpill, 1, 2}.Dir()), 0o755); err != nil {
		t.Fatal(err)
	}
	if live := read(true); live.Spill.Running != 1 || live.ETASeconds < 0 || !strings.Contains(live.ETABasis, "KiB") {
		t.Errorf("with the other shard running: ETA %.0fs (%s), want one, in human units", live.ETASeconds, live.ETABasis)
	}
	if st.OneProcess != nil {
		t.Errorf("a job in phases read as one process: %+v", st.OneProcess)
	}
}
