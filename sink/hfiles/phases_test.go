package hfiles

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/vfs"
)

// TestSpillCommitsOnlyItsSplits: a spill shard's commit names the records
// of its own splits only; a record an earlier run of other options left
// in the shard's folder is not merged, and a split of the shard without a
// record fails the commit.
func TestSpillCommitsOnlyItsSplits(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 1 << 20, Workers: 1,
		Task: Task{PhaseSpill, 0, 1}}
	cells := genCells(3, 3000)
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "stale", cells[:1000]) // an earlier run's split
	s.Close()

	o.SplitIDs = []string{"a", "b"}
	s, err = New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	writeSplit(t, s, "a", cells[1000:2000])
	if err := s.Finish(ctx, logRep{t}); err == nil || !strings.Contains(err.Error(), "split b") {
		t.Fatalf("commit without split b's record: %v, want an error naming it", err)
	}
	writeSplit(t, s, "b", cells[2000:])
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	m, err := New(ctx, Options{Staging: dir, Table: "t", Memory: 1 << 20, Workers: 1, Task: Task{PhaseMerge, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.Cells != 2000 || st.CellsStaged != 2000 {
		t.Errorf("merged %d cells of %d staged, want the 2000 of splits a and b", st.Cells, st.CellsStaged)
	}
	var got int
	for _, f := range readStaged(t, dir) {
		got += len(f.cells)
	}
	if got != 2000 {
		t.Errorf("%d cells in the HFiles, want 2000", got)
	}
}

// TestDealPartitions: every partition goes to exactly one part, the
// largest first to the lightest part, and the deal does not depend on the
// order the partitions come in.
func TestDealPartitions(t *testing.T) {
	sizes := []int64{10, 9, 8, 1, 1, 1, 7}
	var ps []*partition
	for i, b := range sizes {
		ps = append(ps, &partition{region: i, family: "f", bytes: b})
	}
	deal := func(in []*partition) [][]int {
		var out [][]int
		for _, part := range dealPartitions(in, 2) {
			var regions []int
			for _, p := range part {
				regions = append(regions, p.region)
			}
			out = append(out, regions)
		}
		return out
	}
	got := deal(ps)
	// By the rule: 10 -> part 0; 9 -> 1; 8 -> 1 (9 < 10); 7 -> 0 (10 < 17);
	// then the three 1s (regions 3, 4, 5) to the lighter part each time:
	// 0 (17 = 17, the lower index), 1, 0.
	want := [][]int{{0, 6, 3, 5}, {1, 2, 4}}
	if len(got) != 2 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		t.Errorf("dealt %v, want %v", got, want)
	}
	rev := slices.Clone(ps)
	slices.Reverse(rev)
	if again := deal(rev); !slices.Equal(again[0], got[0]) || !slices.Equal(again[1], got[1]) {
		t.Errorf("dealt %v from the reversed order, %v from the first", again, got)
	}
}

// TestMergePartRedoneAfterRespill: a shard spilled again after the merge
// began makes a part's state stale; the part run again merges afresh and
// removes only its own stale HFiles, never another part's finished ones,
// so the HFiles hold exactly the cells of the current spills.
func TestMergePartRedoneAfterRespill(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	open := func(task Task) *Sink {
		t.Helper()
		s, err := New(ctx, Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 1 << 20, Workers: 1, Task: task})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cells := genCells(4, 6000)
	spill := func(shard int, cs []cell.Cell) {
		s := open(Task{PhaseSpill, shard, 2})
		defer s.Close()
		writeSplit(t, s, fmt.Sprint("split-", shard), cs)
		if err := s.Finish(ctx, logRep{t}); err != nil {
			t.Fatal(err)
		}
	}
	merge := func(part int, stop bool) error {
		s := open(Task{PhaseMerge, part, 2})
		defer s.Close()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		return s.Finish(cctx, reporterFunc(func(f string, a ...any) {
			if stop && strings.HasPrefix(f, "hfiles: region") {
				cancel()
			}
		}))
	}
	spill(0, cells[:3000])
	spill(1, cells[3000:5000])
	if err := merge(0, true); err == nil {
		t.Fatal("part 0 was not interrupted")
	}
	spill(1, cells[3000:]) // shard 1 redone, with more cells
	if err := merge(1, false); err != nil {
		t.Fatal(err)
	}
	if err := merge(0, false); err != nil {
		t.Fatalf("part 0 after shard 1 was spilled again: %v", err)
	}
	var got []cell.Cell
	for _, f := range readStaged(t, dir) {
		got = append(got, f.cells...)
	}
	equalDumps(t, sorted(got), sorted(cells))
}

// TestPlanReadWhileBeingWritten: the first spill task creates plan.json
// exclusively and then writes it, so another task (or `rekey status`) can
// find the name with only part of its bytes. The reader waits for the
// whole file; one that never becomes whole is called damaged, naming the
// file and the way out.
func TestPlanReadWhileBeingWritten(t *testing.T) {
	p, err := RegionMapFromSplitKeys("t", [][]byte{[]byte("m")})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	fsys := vfs.NewMem()
	fsys.WriteFile("/s/plan.json", whole[:len(whole)/2])
	go func() {
		time.Sleep(400 * time.Millisecond)
		fsys.WriteFile("/s/plan.json", whole)
	}()
	var got RegionMap
	found, err := readRegionMap(fsys, "/s/plan.json", &got)
	if err != nil || !found {
		t.Fatalf("plan written while read: found %v, %v", found, err)
	}
	if got.Table != "t" || len(got.Regions) != 2 {
		t.Errorf("plan read: table %q, %d regions; want t, 2", got.Table, len(got.Regions))
	}

	defer func(w time.Duration) { regionMapWait = w }(regionMapWait)
	regionMapWait = 600 * time.Millisecond
	fsys.WriteFile("/s/plan.json", whole[:len(whole)/3])
	found, err = readRegionMap(fsys, "/s/plan.json", &got)
	if err == nil || found {
		t.Fatalf("a plan that stays short: found %v, err %v; want an error", found, err)
	}
	for _, want := range []string{"/s/plan.json", "not valid", "remove the file and rerun the shards"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := readPublishedRegionMap(fsys, "/s/plan.json", "t"); err == nil {
		t.Error("readPublishedRegionMap accepted a short plan")
	}
}
