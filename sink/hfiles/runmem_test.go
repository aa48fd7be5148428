package hfiles

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
)

// TestRunMemoryTake: the first merge takes all its runs when they leave
// two for the other worker, the next takes what is left, a third waits
// until runs come back, and a partition without runs takes nothing.
func TestRunMemoryTake(t *testing.T) {
	o := Options{Memory: 16 * 2 * (32 << 10), BatchBytes: 32 << 10}
	m := newRunMemory(&o, 0, 2)
	if m.free != 16 {
		t.Fatalf("pool of %d runs, want 16", m.free)
	}
	if got := m.take(15); got != 14 {
		t.Errorf("take(15) with 16 free and one other worker = %d, want 14", got)
	}
	m.give(14)
	if got := m.take(12); got != 12 {
		t.Errorf("take(12) = %d, want 12", got)
	}
	if got := m.take(0); got != 0 {
		t.Errorf("take(0) = %d, want 0", got)
	}
	if got := m.take(9); got != 4 {
		t.Errorf("take(9) with 4 free and every worker holding runs = %d, want 4", got)
	}
	got := make(chan int)
	go func() { got <- m.take(3) }()
	select {
	case n := <-got:
		t.Fatalf("take(3) with no run free returned %d instead of waiting", n)
	case <-time.After(50 * time.Millisecond):
	}
	m.give(4)
	if n := <-got; n != 3 {
		t.Errorf("take(3) after 4 came back = %d, want 3", n)
	}
	m.give(12)
	m.give(3)
	if m.free != 16 || m.active != 0 {
		t.Errorf("after every give: %d free, %d active; want 16 and 0", m.free, m.active)
	}
	// The readers' shares, given as MergeMemory, widen the pool; a
	// MergeMemory below Memory does not narrow it.
	wide := Options{Memory: o.Memory, MergeMemory: 2 * o.Memory, BatchBytes: o.BatchBytes}
	if n := newRunMemory(&wide, 0, 2).free; n != 32 {
		t.Errorf("pool with MergeMemory twice Memory: %d runs, want 32", n)
	}
	narrow := Options{Memory: o.Memory, MergeMemory: o.Memory / 2, BatchBytes: o.BatchBytes}
	if n := newRunMemory(&narrow, 0, 2).free; n != 16 {
		t.Errorf("pool with MergeMemory half Memory: %d runs, want 16", n)
	}
	// A budget below two runs still merges two at a time.
	tiny := Options{Memory: 1 << 10, BatchBytes: 32 << 10}
	if n := tiny.maxFanIn(0); n != 2 {
		t.Errorf("maxFanIn of a tiny budget = %d, want 2", n)
	}
}

// TestStageHeavyPartitionNoExtraPass: one region's partition has more
// runs than an even share of the merge's budget per worker but fewer than
// the whole; it merges in one pass, beside the light partitions, and the
// HFiles hold exactly the cells.
func TestStageHeavyPartitionNoExtraPass(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("g"), []byte("n"), []byte("t")},
		Memory: 1 << 20, Workers: 2, BatchBytes: 32 << 10}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var all []cell.Cell
	// Twelve splits with cells of family f1 in the first region only
	// (rows below "g"), one split with cells in every region.
	for i := range 12 {
		var cs []cell.Cell
		for j, c := range genCells(int64(100+i), 400) {
			c.Row = append([]byte{'a' + byte(j%6)}, c.Row[1:]...)
			c.Family = []byte("f1")
			c.Qualifier = fmt.Appendf(nil, "s%02d-%s", i, c.Qualifier)
			cs = append(cs, c)
		}
		writeSplit(t, s, fmt.Sprintf("heavy-%02d", i), cs)
		all = append(all, cs...)
	}
	light := genCells(7, 2000)
	writeSplit(t, s, "light", light)
	all = append(all, light...)

	recs, err := readSplits(s.fs, s.root)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := s.partitions(recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for _, p := range parts {
		most = max(most, len(p.runs))
	}
	even := s.o.maxFanIn(0) / s.o.Workers
	if most <= even || most > s.o.maxFanIn(0)-2 {
		t.Fatalf("the heaviest partition has %d runs; the test needs more than an even share (%d) and at most %d", most, even, s.o.maxFanIn(0)-2)
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.MergePasses != 0 {
		t.Errorf("%d extra merge passes for a partition of %d runs in a pool of %d", st.MergePasses, most, s.o.maxFanIn(0))
	}
	got := checkStaged(t, s.RegionMap(), readStaged(t, dir), s.o.MaxFiles)
	equalDumps(t, got, sorted(all))
}
