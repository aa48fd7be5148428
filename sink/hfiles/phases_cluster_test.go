package hfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
)

// phaseSplit is one split of the phased test: its ID, the spill shard it
// is dealt to and its cells.
type phaseSplit struct {
	id    string
	shard int
	cells []cell.Cell
}

// phaseSplits deals distinct cells to five splits over three shards, and
// plants across shards: one cell staged identically by two splits (a
// duplicate, as from a split redone elsewhere) and three cells whose key
// another split holds with another value (collisions).
func phaseSplits() []phaseSplit {
	cells := genCells(21, 40000)
	sp := []phaseSplit{
		{id: "a", shard: 0, cells: cells[:8000]},
		{id: "b", shard: 0, cells: cells[8000:16000]},
		{id: "c", shard: 1, cells: cells[16000:26000]},
		{id: "d", shard: 2, cells: cells[26000:33000]},
		{id: "e", shard: 2, cells: slices.Clone(cells[33000:])},
	}
	sp[2].cells = append(slices.Clone(sp[2].cells), cells[5]) // the duplicate of a's cell 5
	for _, k := range []int{100, 2000, 7000} {
		c := cells[k].Clone()
		c.Value = append(c.Value, 0xee)
		sp[4].cells = append(sp[4].cells, c) // collides with a's cell k
	}
	return sp
}

// expectedCells is the rule for what the target holds: every cell staged,
// one per key; of cells with one key, the one of the split whose ID sorts
// first (the merge reads runs in split order).
func expectedCells(sp []phaseSplit) (want []cell.Cell, collisions int) {
	type tagged struct {
		id string
		c  cell.Cell
	}
	var all []tagged
	for _, s := range sp {
		for _, c := range s.cells {
			all = append(all, tagged{s.id, c})
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if c := cell.Compare(&all[i].c, &all[j].c); c != 0 {
			return c < 0
		}
		return all[i].id < all[j].id
	})
	for i, a := range all {
		if i > 0 && cell.Compare(&all[i-1].c, &a.c) == 0 {
			if !bytes.Equal(all[i-1].c.Value, a.c.Value) {
				collisions++
			}
			continue
		}
		want = append(want, a.c)
	}
	return want, collisions
}

// TestPhasesCluster runs a job in phases over one staging folder on the
// cluster's HDFS: three spill shards (one redone), two merge parts (one
// interrupted after its first partition and rerun) and the load. The
// target equals the rule applied to what was staged, holds one store file
// per region and family, collisions across shards are counted once, and
// a one-process run of the same splits gives the same table. Tasks
// started before their phase's input is complete are refused with
// ErrNotReady.
func TestPhasesCluster(t *testing.T) {
	c, table, staging := clusterTable(t, "phases", "g", "n", "t")
	_, table1, staging1 := clusterTable(t, "phases1", "g", "n", "t")
	ctx := context.Background()
	sp := phaseSplits()
	want, wantColl := expectedCells(sp)
	open := func(task Task) *Sink {
		t.Helper()
		s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Memory: 1 << 20, Workers: 1, Task: task})
		if err != nil {
			t.Fatalf("%s: %v", task, err)
		}
		return s
	}
	spill := func(shard int) {
		s := open(Task{PhaseSpill, shard, 3})
		defer s.Close()
		for _, x := range sp {
			if x.shard == shard {
				writeSplit(t, s, x.id, x.cells)
			}
		}
		if err := s.Finish(ctx, logRep{t}); err != nil {
			t.Fatalf("spill %d: %v", shard, err)
		}
	}
	spill(0)
	spill(1)
	if err := open(Task{PhaseMerge, 0, 2}).Finish(ctx, logRep{t}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("merge with shard 2 not spilled: %v, want ErrNotReady", err)
	}
	spill(2)
	spill(1) // a redone attempt replaces its output

	// Part 0 stops after its first partition; its rerun redoes only the
	// others.
	merge := func(part int, stopAfterFirst bool) (done []string, st Stats, err error) {
		s := open(Task{PhaseMerge, part, 2})
		defer s.Close()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var mu sync.Mutex
		rep := reporterFunc(func(format string, args ...any) {
			logRep{t}.Printf(format, args...)
			if strings.HasPrefix(format, "hfiles: region %s family %s") {
				mu.Lock()
				done = append(done, args[0].(string)+"/"+args[1].(string))
				mu.Unlock()
				if stopAfterFirst {
					cancel()
				}
			}
		})
		err = s.Finish(cctx, rep)
		return done, s.Stats(), err
	}
	first, _, err := merge(0, true)
	if err == nil || len(first) != 1 {
		t.Fatalf("interrupted merge: %v, %d partitions done, want an error after 1", err, len(first))
	}
	rest, st0, err := merge(0, false)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(rest, first[0]) || len(rest) == 0 {
		t.Errorf("rerun of part 0 merged %v again (the first attempt finished %v)", rest, first)
	}
	if err := open(Task{Phase: PhaseLoad}).Finish(ctx, logRep{t}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("load with part 1 not merged: %v, want ErrNotReady", err)
	}
	p1, st1, err := merge(1, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(first) + len(rest) + len(p1); got != 8 {
		t.Errorf("the parts merged %d partitions, the job has 8 (4 regions, 2 families)", got)
	}
	if n := st0.Collisions + st1.Collisions; n != int64(wantColl) {
		t.Errorf("parts counted %d + %d collisions, %d were planted", st0.Collisions, st1.Collisions, wantColl)
	}
	ld := open(Task{Phase: PhaseLoad})
	if err := ld.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	lst := ld.Stats()
	ld.Close()
	if lst.Collisions != int64(wantColl) || lst.Duplicates != 1 || lst.RegionsLoaded != 4 {
		t.Errorf("load: %d collisions (want %d), %d duplicates (want 1), %d regions loaded (want 4)", lst.Collisions, wantColl, lst.Duplicates, lst.RegionsLoaded)
	}
	got := oracleDump(t, table)
	equalLines(t, got, dump(want))
	testenv.OneStoreFileEach(t, table, 8)

	// The same splits in one process.
	one, err := New(ctx, Options{Staging: staging1, Table: table1, Client: c, Memory: 1 << 20, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	for _, x := range sp {
		writeSplit(t, one, x.id, x.cells)
	}
	if err := one.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	if n := one.Stats().Collisions; n != int64(wantColl) {
		t.Errorf("one process counted %d collisions, want %d", n, wantColl)
	}
	equalLines(t, oracleDump(t, table1), got)
}

// TestLoadTaskAfterNoLoad: a one-process run with NoLoad leaves its HFiles
// in the folder and names the load task; the load task loads them, and
// HBase's scan of the target returns every cell once.
func TestLoadTaskAfterNoLoad(t *testing.T) {
	c, table, staging := clusterTable(t, "noload", "k")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, NoLoad: true, LoadCommand: "rekey load JOB", Memory: 1 << 20, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	cells := genCells(9, 6000)
	writeSplit(t, s, "one", cells[:3000])
	writeSplit(t, s, "two", cells[3000:])
	var said []string
	if err := s.Finish(ctx, reporterFunc(func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) })); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !strings.Contains(strings.Join(said, "\n"), "rekey load JOB") || s.Stats().LoadCommand != "rekey load JOB" {
		t.Errorf("NoLoad does not name the load task: %q", said)
	}
	if got := oracleDump(t, table); len(got) != 0 {
		t.Fatalf("%d cells in the target before the load", len(got))
	}
	ld, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Task: Task{Phase: PhaseLoad}})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	if err := ld.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	if n := ld.Stats().RegionsLoaded; n != 2 {
		t.Errorf("%d regions loaded, want 2", n)
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))
}

// TestLoadRefusesMissingHFile: a staged HFile that finish.json records but
// that is gone from the folder, although no load of its region was ever
// sent, fails the load naming the file (its cells would otherwise be left
// out without a word); the same load rerun with the file back loads every
// cell.
func TestLoadRefusesMissingHFile(t *testing.T) {
	c, table, staging := clusterTable(t, "missing", "k")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, NoLoad: true, Memory: 1 << 20, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	cells := genCells(9, 6000)
	writeSplit(t, s, "one", cells)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	loc, err := vfs.Open(staging)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	files := hfilesUnder(t, loc.FS, path.Join(loc.Path, "hfiles"))
	if len(files) < 2 {
		t.Fatalf("staged %d HFiles, want one per region at least: %v", len(files), files)
	}
	gone := files[len(files)-1]
	// Out of the hfiles folder: the load removes files it finds there
	// unrecorded.
	kept := path.Join(loc.Path, "aside-"+path.Base(gone))
	if err := loc.FS.Rename(gone, kept); err != nil {
		t.Fatal(err)
	}
	ld, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Task: Task{Phase: PhaseLoad}})
	if err != nil {
		t.Fatal(err)
	}
	err = ld.Finish(ctx, logRep{t})
	ld.Close()
	if !errors.Is(err, ErrMissingHFile) || !strings.Contains(err.Error(), path.Base(gone)) {
		t.Fatalf("load with %s gone: %v, want ErrMissingHFile naming it", gone, err)
	}
	t.Logf("refused: %v", err)
	if got := len(oracleDump(t, table)); got >= len(cells) {
		t.Errorf("%d cells in the target after the refused load, of %d: the missing file's cannot be there", got, len(cells))
	}

	if err := loc.FS.Rename(kept, gone); err != nil {
		t.Fatal(err)
	}
	ld, err = New(ctx, Options{Staging: staging, Table: table, Client: c, Task: Task{Phase: PhaseLoad}})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	if err := ld.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))
}

// hfilesUnder lists the files under dir (region/family/file), sorted.
func hfilesUnder(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	var out []string
	var walk func(string)
	walk = func(d string) {
		ents, err := fs.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			p := path.Join(d, e.Name())
			if e.IsDir() {
				walk(p)
			} else {
				out = append(out, p)
			}
		}
	}
	walk(dir)
	sort.Strings(out)
	return out
}
