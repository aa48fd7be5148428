package hfiles

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// localFiles counts the regular files under dir (0 when it is missing).
func localFiles(t *testing.T, dir string) (n int, bytes int64) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			n++
			bytes += fi.Size()
		}
		return nil
	})
	return n, bytes
}

// TestStageLocalRuns: with a local run folder the runs (and the merge's
// extra passes) go there and the staging folder gets only records and
// HFiles; a split staged earlier into the staging folder itself merges
// beside them; the HFiles hold every cell once; the runs are removed once
// merged, and a later Finish over the written folder finds nothing lost.
func TestStageLocalRuns(t *testing.T) {
	dir, local := t.TempDir(), t.TempDir()
	ctx := context.Background()
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("g"), []byte("n"), []byte("t")},
		Memory: 256 << 10, Workers: 2, HFileSize: 64 << 10, MaxFiles: 4}
	cells := genCells(11, 30000)
	a, b, c := cells[:10000], cells[10000:20000], cells[20000:]

	// Split a into the staging folder, as a run without a local folder
	// (or an older rekey) left it.
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "a", a)
	s.Close()
	stagedRuns, _ := localFiles(t, filepath.Join(dir, runsDir))
	if stagedRuns == 0 {
		t.Fatal("split a spilled no run into the staging folder")
	}

	o.LocalRuns = local
	o.SplitIDs = []string{"a", "b", "c"}
	s, err = New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if lost := s.Lost(); len(lost) != 0 {
		t.Fatalf("lost %v, though split a's runs are in the staging folder", lost)
	}
	writeSplit(t, s, "b", b)
	writeSplit(t, s, "c", c)
	if n, _ := localFiles(t, filepath.Join(dir, runsDir)); n != stagedRuns {
		t.Errorf("the staging folder holds %d runs, want split a's %d only", n, stagedRuns)
	}
	localRuns, localBytes := localFiles(t, filepath.Join(local, runsDir))
	if localRuns == 0 {
		t.Fatal("no run in the local folder")
	}
	var rec splitRecord
	if _, err := readJSON(s.fs, filepath.ToSlash(filepath.Join(dir, splitsDir, splitKey("b")+".json")), &rec); err != nil {
		t.Fatal(err)
	}
	for _, r := range rec.Runs {
		if r.Local != s.local.id {
			t.Errorf("split b's run %s says it is in folder %q, want %q", r.Name, r.Local, s.local.id)
		}
	}
	stagedBefore := s.staged.Load()

	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("stats: %+v", st)
	if st.MergePasses == 0 {
		t.Error("no extra merge pass; the test wants one to go to the local folder")
	}
	if st.LocalRuns == "" {
		t.Error("stats name no local run folder")
	}
	got := checkStaged(t, s.RegionMap(), readStaged(t, dir), o.MaxFiles)
	equalDumps(t, got, sorted(cells))
	// The staging folder's account never held the local runs: at its
	// peak, split a's runs and the HFiles (and merge passes of a's runs
	// only, which go to the local folder too).
	if st.PeakStaging >= stagedBefore+st.HFileBytes+localBytes {
		t.Errorf("peak staging %d counts the local runs (%d bytes; staging runs %d, HFiles %d)", st.PeakStaging, localBytes, stagedBefore, st.HFileBytes)
	}
	for _, d := range []string{filepath.Join(local, runsDir), filepath.Join(local, mergeDir), filepath.Join(dir, runsDir), filepath.Join(dir, mergeDir)} {
		if n, _ := localFiles(t, d); n != 0 {
			t.Errorf("%d files left in %s after the merge", n, d)
		}
	}
	s.Close()

	// Resumed after the HFiles were written (say, before the load): the
	// records name runs that are gone, which is no loss any more.
	s, err = New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if lost := s.Lost(); len(lost) != 0 {
		t.Errorf("lost %v after the HFiles were written", lost)
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	equalDumps(t, checkStaged(t, s.RegionMap(), readStaged(t, dir), o.MaxFiles), sorted(cells))
}

// TestStageLocalRunsLost: a record whose runs are not in this process's
// local folder (one removed, or the records read with another folder: a
// resume on another machine) stages nothing: Lost reports it when the
// sink opens, the record stays until the split is staged again, and a
// Finish that the run's splits reach without it fails (ErrSplitsMissing)
// instead of merging fewer cells; staged again, the splits merge whole.
func TestStageLocalRunsLost(t *testing.T) {
	dir, local, other := t.TempDir(), t.TempDir(), t.TempDir()
	ctx := context.Background()
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")},
		Memory: 128 << 10, Workers: 1, HFileSize: 64 << 10, MaxFiles: 8, LocalRuns: local,
		SplitIDs: []string{"a", "b", "c"}}
	cells := genCells(12, 18000)
	a, b, c := cells[:6000], cells[6000:12000], cells[12000:]
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "a", a)
	writeSplit(t, s, "b", b)
	var rb splitRecord
	if _, err := readJSON(s.fs, filepath.ToSlash(filepath.Join(dir, splitsDir, splitKey("b")+".json")), &rb); err != nil {
		t.Fatal(err)
	}
	if len(rb.Runs) < 2 {
		t.Fatalf("split b spilled %d runs, want several", len(rb.Runs))
	}
	s.Close()

	// One of b's runs removed: b is lost, a is not.
	if err := os.Remove(filepath.Join(local, rb.Runs[1].Name)); err != nil {
		t.Fatal(err)
	}
	s, err = New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	lost := s.Lost()
	if len(lost) != 1 || lost[0].ID != "b" || !strings.Contains(lost[0].Why, rb.Runs[1].Name) {
		t.Fatalf("lost %+v, want split b naming its removed run %s", lost, rb.Runs[1].Name)
	}
	if _, err := os.Stat(filepath.Join(dir, splitsDir, splitKey("b")+".json")); err != nil {
		t.Errorf("split b's record is gone before b was staged again: %v", err)
	}
	if n, _ := localFiles(t, filepath.Join(local, runsDir, splitKey("b"))); n != 0 {
		t.Errorf("%d runs of the lost split b left in the local folder", n)
	}
	writeSplit(t, s, "c", c)
	// The run counts a, b and c done; b has no record.
	err = s.Finish(ctx, logRep{t})
	if !errors.Is(err, ErrSplitsMissing) || !strings.Contains(err.Error(), "first: b") {
		t.Fatalf("Finish without split b's record: %v, want ErrSplitsMissing naming b", err)
	}
	s.Close()

	// Opened with another local folder: a and c, whose runs are in the
	// first one, are lost too, beside b.
	o.LocalRuns = other
	s, err = New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []string
	for _, l := range s.Lost() {
		ids = append(ids, l.ID)
		if l.ID != "b" && !strings.Contains(l.Why, "another local folder") {
			t.Errorf("split %s lost: %s", l.ID, l.Why)
		}
	}
	if strings.Join(ids, ",") != "a,b,c" {
		t.Fatalf("lost %v with another local folder, want a, b and c", ids)
	}
	writeSplit(t, s, "a", a)
	writeSplit(t, s, "b", b)
	writeSplit(t, s, "c", c)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	equalDumps(t, checkStaged(t, s.RegionMap(), readStaged(t, dir), o.MaxFiles), sorted(cells))
}

// TestStageLocalRunsRefusedInPhases: a phase task's runs are read by
// other tasks, on other machines; a local folder is refused.
func TestStageLocalRunsRefusedInPhases(t *testing.T) {
	o := Options{Staging: t.TempDir(), Table: "t", SplitKeys: [][]byte{[]byte("m")}, LocalRuns: t.TempDir(),
		Task: Task{Phase: PhaseSpill, Index: 0, Count: 1}}
	s, err := New(context.Background(), o)
	if err == nil {
		s.Close()
		t.Fatal("a spill task opened with a local run folder")
	}
	if !strings.Contains(err.Error(), "local run folder is for one process") {
		t.Errorf("error %v", err)
	}
}
