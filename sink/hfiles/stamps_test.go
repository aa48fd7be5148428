package hfiles

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// stampLeases is the in-memory file system the stamp tests keep their
// lease folders on, under the stamptest:// scheme: its exclusive create is
// atomic, as the NameNode's is, so the leases change hands as on HDFS.
var stampLeases = vfs.NewMem()

func init() {
	vfs.Register(func(*url.URL, vfs.Options) (vfs.WriteFS, func() error, error) { return stampLeases, nil, nil }, "stamptest")
}

// TestLateSplitRecordAfterTakeoverLeftOut: attempt A stages split one;
// B takes the folder's lease over by force and goes on from A's record
// (it stamps it anew, as its own), stages split two; then A, which has
// not noticed, writes its record of split two late, over B's, naming
// runs of other cells (as an attempt of another build would). B's merge
// leaves A's record out, with a line that says so, and refuses to merge
// without split two (not a silent difference); the next run, which
// takes the lease once B gives it back, drops A's record on opening the
// folder (Lost, marked superseded: the run redoes the split even where
// the checkpoint counts it done), redoes split two, and the staged
// HFiles hold the cells of the two splits, each once, as one process
// staging them would. Before the stamps, B merged A's late record: the
// staged cells of split two were A's.
func TestLateSplitRecordAfterTakeoverLeftOut(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lease := "stamptest:///" + t.Name() + "/_rekey.lease"
	take := func(force bool) *state.Leases {
		t.Helper()
		ls := state.NewLeases(state.LeaseOptions{TTL: time.Minute, Force: force, Logf: t.Logf})
		if err := ls.Take(lease, "staging folder "+dir); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ls.Release() })
		return ls
	}
	open := func(ls *state.Leases) *Sink {
		t.Helper()
		s, err := New(ctx, Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 16 << 20, Workers: 2,
			SplitIDs: []string{"one", "two"}, Lease: ls.Stamp(lease), Superseded: ls.Superseded(lease)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	one := orderedCells(rowNames("a", 30), 10, "one")
	two := orderedCells(rowNames("p", 30), 10, "two")

	a := open(take(false))
	defer a.Close()
	writeSplit(t, a, "one", one)
	lsB := take(true)
	b := open(lsB)
	if lost := b.Lost(); len(lost) != 0 {
		t.Errorf("B, taking over, goes on from A's record of split one; lost %+v", lost)
	}
	writeSplit(t, b, "two", two)
	writeSplit(t, a, "two", orderedCells(rowNames("p", 30), 10, "stale")) // A's late record, over B's
	err := b.Finish(ctx, logRep{t})
	b.Close()
	if !errors.Is(err, ErrSplitsMissing) {
		t.Fatalf("B's merge with A's late record of split two: %v, want ErrSplitsMissing (A's record left out)", err)
	}
	if err := lsB.Release(); err != nil {
		t.Fatal(err)
	}

	c := open(take(false))
	defer c.Close()
	lost := c.Lost()
	if len(lost) != 1 || lost[0].ID != "two" || !lost[0].Superseded {
		t.Fatalf("the next run's open: lost %+v, want split two, superseded", lost)
	}
	writeSplit(t, c, "two", two) // the run redoes it
	if err := c.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	got := checkStaged(t, c.regions, readStaged(t, dir), 10)
	equalDumps(t, got, sorted(append(append([]cell.Cell{}, one...), two...)))
}
