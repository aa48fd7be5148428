package hfiles

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/vfs"
)

// errFenced stands for the lease lost that a task's fence reports.
var errFenced = errors.New("lease lost (test)")

// jsonRecords lists the state records under dir with their bytes: what
// a task writes as its durable state.
func jsonRecords(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".json" {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameRecords(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	var changed []string
	for p, b := range after {
		if before[p] != b {
			changed = append(changed, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			changed = append(changed, p+" (removed)")
		}
	}
	sort.Strings(changed)
	if len(changed) > 0 {
		t.Errorf("%s: records written past the fence: %v", what, changed)
	}
}

// TestFenceStopsEveryRecord: once its fence fails (the task's lease was
// taken), a spill task writes no split record and no commit, and a merge
// part writes no state, each failing with the fence's error; while the
// fence passes they write as ever, and the fence was asked each time.
func TestFenceStopsEveryRecord(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var lost atomic.Bool
	var asked atomic.Int64
	fence := func() error {
		asked.Add(1)
		if lost.Load() {
			return errFenced
		}
		return nil
	}
	cells := genCells(3, 3000)
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 1 << 20, Workers: 1,
		Task: Task{PhaseSpill, 0, 1}, SplitIDs: []string{"a", "b"}, Fence: fence}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "a", cells[:1500])
	if asked.Load() == 0 {
		t.Fatal("the split's record was written without asking the fence")
	}
	lost.Store(true)
	before := jsonRecords(t, dir)
	if _, err := beginSplit(t, s, "b", cells[1500:]).Commit(ctx); !errors.Is(err, errFenced) {
		t.Errorf("a split committed past the fence: %v", err)
	}
	if err := s.Finish(ctx, logRep{t}); !errors.Is(err, errFenced) {
		t.Errorf("the spill commit past the fence: %v", err)
	}
	s.Close()
	sameRecords(t, "spill task", before, jsonRecords(t, dir))

	// The shard committed by an attempt that holds it; then a merge part
	// whose lease is lost writes nothing.
	lost.Store(false)
	s, err = New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "b", cells[1500:])
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	m, err := New(ctx, Options{Staging: dir, Table: "t", Memory: 1 << 20, Workers: 1, Task: Task{PhaseMerge, 0, 1}, Fence: fence})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	lost.Store(true)
	before = jsonRecords(t, dir)
	if err := m.Finish(ctx, logRep{t}); !errors.Is(err, errFenced) {
		t.Errorf("the merge past the fence: %v", err)
	}
	sameRecords(t, "merge part", before, jsonRecords(t, dir))
}

// TestMergeIgnoresCommitOfSupersededAttempt: a spill shard's commit
// carries the lease its attempt held; the merge leaves out a commit whose
// shard's lease another attempt holds now (that attempt redoes the shard:
// the commit may have landed after the takeover, as HDFS cannot refuse
// it), saying why, and merges it once the lease names its attempt again
// (released by it, or never taken over).
func TestMergeIgnoresCommitOfSupersededAttempt(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cells := genCells(3, 2000)
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 1 << 20, Workers: 1,
		Task: Task{PhaseSpill, 0, 1}, Lease: func() (string, int64) { return "attempt-a", 3 }}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "a", cells)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	holder := "attempt-b"
	var asked []string
	m, err := New(ctx, Options{Staging: dir, Table: "t", Memory: 1 << 20, Workers: 1, Task: Task{PhaseMerge, 0, 1},
		Holder: func(_ vfs.FS, lease string) (string, bool, error) {
			asked = append(asked, lease)
			return holder, true, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	err = m.Finish(ctx, logRep{t})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "generation 3, which another attempt took over") {
		t.Fatalf("merge of a superseded attempt's commit: %v", err)
	}
	if want := filepath.Join(dir, "spill", "shard-0000-of-0001", "_rekey.lease"); len(asked) == 0 || filepath.Clean(asked[0]) != want {
		t.Errorf("asked the lease at %v, want %s", asked, want)
	}
	// The status counts the shard as the merge does: not done.
	st, err := ReadStatus(dir, func(vfs.FS, string) bool { return true },
		func(vfs.FS, string) (string, bool, error) { return holder, true, nil }, time.Now(), vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Spill.Done != 0 || len(st.Spill.List) != 1 || !st.Spill.List[0].Superseded || st.Spill.List[0].State != TaskRunning {
		t.Errorf("status of a superseded commit: done %d, tasks %+v; want not done, superseded, running", st.Spill.Done, st.Spill.List)
	}
	holder = "attempt-a"
	if err := m.Finish(ctx, logRep{t}); err != nil {
		t.Fatalf("merge once the lease names the committing attempt: %v", err)
	}
	st, err = ReadStatus(dir, func(vfs.FS, string) bool { return false },
		func(vfs.FS, string) (string, bool, error) { return holder, true, nil }, time.Now(), vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Spill.Done != 1 || st.Spill.List[0].Superseded {
		t.Errorf("status once the lease names the committing attempt: done %d, tasks %+v", st.Spill.Done, st.Spill.List)
	}
	if st := m.Stats(); st.Cells != 2000 {
		t.Errorf("merged %d cells, want 2000", st.Cells)
	}
}

// TestLoadIgnoresPartStateOfSupersededAttempt: a merge part's state
// carries the lease its attempt held; the load's gathering of the parts
// leaves out a part whose lease another attempt holds now, saying why,
// and takes it once the lease names its attempt.
func TestLoadIgnoresPartStateOfSupersededAttempt(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 1 << 20, Workers: 1, Task: Task{PhaseSpill, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "a", genCells(3, 2000))
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	holder := "part-a"
	m, err := New(ctx, Options{Staging: dir, Table: "t", Memory: 1 << 20, Workers: 1, Task: Task{PhaseMerge, 0, 1},
		Lease:  func() (string, int64) { return "part-a", 5 },
		Holder: func(vfs.FS, string) (string, bool, error) { return holder, true, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	recs, _, err := committedSpills(m.fs, m.root, m.regionsDigest, nil)
	if err != nil {
		t.Fatal(err)
	}
	holder = "part-b"
	_, err = m.mergedParts(fingerprint(recs))
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "generation 5, which another attempt took over") {
		t.Fatalf("gathering a superseded part: %v", err)
	}
	holder = "part-a"
	st, err := m.mergedParts(fingerprint(recs))
	if err != nil || len(st.Parts) == 0 {
		t.Fatalf("gathering the part once its lease names its attempt: %v", err)
	}
}

// TestMergePartRunAgainStampsItsState: a merge part run again after an
// earlier attempt finished it (a duplicate pod, a retried one, an
// operator's rerun) takes the part's lease, so the state the earlier
// attempt saved is of a superseded lease, which the load leaves out. The
// part has nothing left to merge, but it saves its state again under its
// own lease, so the load takes the part; it must not wait for it for good.
func TestMergePartRunAgainStampsItsState(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 1 << 20, Workers: 1, Task: Task{PhaseSpill, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "a", genCells(3, 2000))
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	holder := "part-a"
	merge := func(attempt string, gen int64) *Sink {
		t.Helper()
		m, err := New(ctx, Options{Staging: dir, Table: "t", Memory: 1 << 20, Workers: 1, Task: Task{PhaseMerge, 0, 1},
			Lease:  func() (string, int64) { return attempt, gen },
			Holder: func(vfs.FS, string) (string, bool, error) { return holder, true, nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, logRep{t}); err != nil {
			t.Fatalf("merge part 0/1 by %s: %v", attempt, err)
		}
		return m
	}
	merge("part-a", 5).Close()
	holder = "part-b"
	m := merge("part-b", 7)
	defer m.Close()
	recs, _, err := committedSpills(m.fs, m.root, m.regionsDigest, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.mergedParts(fingerprint(recs))
	if err != nil || len(st.Parts) == 0 {
		t.Fatalf("the load's gathering after the part ran again under lease part-b: %v", err)
	}
}
