package hfiles

import (
	"context"
	"errors"
	"fmt"
	"github.com/rekeyhq/rekey/sink"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// durableLog records the IDs a sink reports durable, and checks at each
// report that what makes them durable is on disk already: the split's
// record, and for a split with no runs, finish.json saying Written.
type durableLog struct {
	t   *testing.T
	s   *Sink
	dir string
	mu  sync.Mutex
	ids []string
}

func (d *durableLog) report(ids []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		var rec splitRecord
		found, err := readJSON(d.s.fs, filepath.Join(d.dir, splitsDir, splitKey(id)+".json"), &rec)
		if err != nil || !found {
			d.t.Errorf("split %s reported durable with no record (found %v, err %v)", id, found, err)
			continue
		}
		if len(rec.Runs) == 0 {
			var st finishState
			if ok, _ := readJSON(d.s.fs, filepath.Join(d.dir, finishFile), &st); !ok || !st.Written {
				d.t.Errorf("split %s reported durable from HFiles before finish.json says them written", id)
			}
		}
	}
	d.ids = append(d.ids, ids...)
	return nil
}

// newKept opens a sink on a fresh folder that keeps splits, its reports
// of durable splits going to a durableLog.
func newKept(t *testing.T, o Options) (*Sink, *durableLog) {
	t.Helper()
	o.Staging = t.TempDir()
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	log := &durableLog{t: t, s: s, dir: o.Staging}
	s.OnDurable(log.report)
	return s, log
}

func (d *durableLog) reported() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ids)
}

// TestStageKeptSplits: splits that fit in the memory budget are kept in
// their sort buffers (Ack.Held, no run, no record) and written to HFiles
// straight from memory; a split that needs memory the kept ones hold
// makes the largest of them spill, and each is reported durable only once
// its record (and, for the ones written from memory, the HFiles) are on
// disk. Duplicates and collisions across kept and spilled splits collapse
// as between runs, the first split's cell kept; the HFiles read back hold
// exactly the expected cells.
func TestStageKeptSplits(t *testing.T) {
	ctx := context.Background()
	o := Options{Table: "t", SplitKeys: [][]byte{[]byte("g"), []byte("n"), []byte("t")},
		Memory: 2 << 20, Workers: 2, HFileSize: 64 << 10, MaxFiles: 4}
	s, log := newKept(t, o)
	dir := log.dir

	cells := genCells(3, 24000)
	a, b, c, d := cells[:3000], cells[3000:6000], cells[6000:9000], cells[9000:]
	for _, sp := range []struct {
		id    string
		cells []cell.Cell
	}{{"a", a}, {"b", b}} {
		if ack := writeSplit(t, s, sp.id, sp.cells); !ack.Held || ack.Cells != int64(len(sp.cells)) {
			t.Errorf("split %s: ack %+v; want its %d cells held", sp.id, ack, len(sp.cells))
		}
	}
	// Split c repeats 20 of a's cells (duplicates) and 5 of a's keys with
	// other values (collisions: a's kept, as a sorts first).
	extra := slices.Clone(c)
	collide := map[string]bool{}
	for i := 0; i < 20; i++ {
		extra = append(extra, a[i*5])
	}
	for i := 0; i < 5; i++ {
		x := a[i*5+1].Clone()
		x.Value = append(x.Value, 0xEE)
		extra = append(extra, x)
		collide[string(cell.AppendDump(nil, &a[i*5+1]))] = true
	}
	writeSplit(t, s, "c", extra)
	if got := log.reported(); len(got) != 0 {
		t.Errorf("splits %v reported durable while all three fit in memory", got)
	}
	if recs, _ := readSplits(s.fs, dir); len(recs) != 0 {
		t.Errorf("%d split records on disk for splits held in memory", len(recs))
	}
	// Split d is larger than its share: it spills runs of its own, and the
	// memory it needs makes kept splits spill.
	if ack := writeSplit(t, s, "d", d); ack.Held {
		t.Error("split d spilled runs, yet its ack says held")
	}
	spilled := log.reported()
	if len(spilled) == 0 || len(spilled) == 3 {
		t.Errorf("reported durable while d was written: %v; want some of the kept splits, not all", spilled)
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	all := log.reported()
	slices.Sort(all)
	if !slices.Equal(all, []string{"a", "b", "c"}) {
		t.Errorf("reported durable: %v; want a, b and c once each", all)
	}
	st := s.Stats()
	t.Logf("stats: %+v", st)
	if want := int64(3 - len(spilled)); st.SplitsInMemory != want {
		t.Errorf("%d splits written from memory, want %d", st.SplitsInMemory, want)
	}
	if st.PeakMemory > o.Memory {
		t.Errorf("peak sort memory %d over the budget %d", st.PeakMemory, o.Memory)
	}
	if st.Duplicates != 20 || st.Collisions != 5 {
		t.Errorf("duplicates %d collisions %d, want 20 and 5", st.Duplicates, st.Collisions)
	}
	got := checkStaged(t, s.RegionMap(), readStaged(t, dir), o.MaxFiles)
	equalDumps(t, got, sorted(cells))
	for _, line := range dump(got) {
		delete(collide, line)
	}
	if len(collide) != 0 {
		t.Errorf("%d collided cells lost split a's value", len(collide))
	}
	if recs, _ := readSplits(s.fs, dir); len(recs) != 4 {
		t.Errorf("%d split records after Finish, want 4", len(recs))
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, runsDir)); len(ents) != 0 {
		t.Errorf("%d entries left under runs/", len(ents))
	}
}

// TestStageNothingKeptWithoutOnDurable: a caller that never said it
// records held splits gets every split spilled and recorded at Commit.
func TestStageNothingKeptWithoutOnDurable(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: dir, Table: "t", Memory: 2 << 20, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ack := writeSplit(t, s, "a", genCells(4, 500)); ack.Held {
		t.Error("split held though no OnDurable was given")
	}
	if recs, _ := readSplits(s.fs, dir); len(recs) != 1 {
		t.Errorf("%d split records, want 1", len(recs))
	}
}

// TestStageKeptRedoneAfterWritten: a process that recorded its kept
// splits and their HFiles written, then died before the run recorded the
// splits (here: the run's OnDurable fails), leaves a folder whose resumed
// run redoes those splits; each redo only counts its cells against the
// record, the Finish goes on from the written HFiles, and they hold the
// expected cells once. A redo with other cells than the record fails.
func TestStageKeptRedoneAfterWritten(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("n")}, Memory: 8 << 20, Workers: 2}
	cells := genCells(5, 4000)
	a, b := cells[:2000], cells[2000:]
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	s.OnDurable(func([]string) error { return errors.New("checkpoint lost") })
	writeSplit(t, s, "a", a)
	writeSplit(t, s, "b", b)
	if err := s.Finish(ctx, logRep{t}); err == nil || !strings.Contains(err.Error(), "checkpoint lost") {
		t.Fatalf("Finish: %v; want the run's failure to record the splits", err)
	}
	s.Close()

	s, err = New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var reported []string
	s.OnDurable(func(ids []string) error { reported = append(reported, ids...); return nil })
	for _, sp := range []struct {
		id    string
		cells []cell.Cell
	}{{"a", a}, {"b", b}} {
		if ack := writeSplit(t, s, sp.id, sp.cells); ack.Held || ack.Cells != int64(len(sp.cells)) {
			t.Errorf("redo of %s: ack %+v; want its %d cells durable", sp.id, ack, len(sp.cells))
		}
	}
	w, err := s.Begin(ctx, sink.SplitInfo{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a[1:] {
		w.Write(ctx, &a[1+i])
	}
	if _, err := w.Commit(ctx); err == nil {
		t.Error("a redo of split a short of one cell committed")
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	if len(reported) != 0 {
		t.Errorf("reported %v durable: nothing was held", reported)
	}
	equalDumps(t, checkStaged(t, s.RegionMap(), readStaged(t, dir), 32), sorted(cells))
}

// TestMergeKeptAllocs: merging kept buffers allocates per merge, never per
// cell: the same few allocations for 5,000 cells as for 50.
func TestMergeKeptAllocs(t *testing.T) {
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: t.TempDir(), Table: "t", Memory: 8 << 20, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.OnDurable(func([]string) error { return nil })
	allocs := func(n int) float64 {
		cells := genCells(int64(n), 2*n)
		var kept []keptPart
		for i, id := range []string{"a", "b"} {
			w, err := s.Begin(ctx, sink.SplitInfo{ID: fmt.Sprintf("%s%d", id, n)})
			if err != nil {
				t.Fatal(err)
			}
			for j := range cells[i*n : (i+1)*n] {
				if err := w.Write(ctx, &cells[i*n+j]); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			ss := w.(*splitSink)
			kept = append(kept, keptPart{mp: memPart{w: ss, lo: 0, hi: len(ss.ents)}, order: id})
		}
		var seen int
		a := testing.AllocsPerRun(5, func() {
			m, err := newMerger(s.fs, s.root, nil, kept, nil)
			if err != nil {
				t.Fatal(err)
			}
			seen = 0
			m.each(func(*cell.Cell) error { seen++; return nil })
			m.close()
		})
		if seen != 2*n {
			t.Fatalf("merged %d cells, want %d", seen, 2*n)
		}
		return a
	}
	small, large := allocs(25), allocs(2500)
	t.Logf("allocations per merge: %v for 50 cells, %v for 5,000", small, large)
	if large > small {
		t.Errorf("%v allocations merging 5,000 kept cells, %v merging 50: the merge allocates per cell", large, small)
	}
}

// TestStageKeptConcurrent: splits written at once, some kept, some made to
// spill by the others' Writes, each reported durable exactly once, and the
// HFiles hold every cell (run with -race).
func TestStageKeptConcurrent(t *testing.T) {
	ctx := context.Background()
	o := Options{Table: "t", SplitKeys: [][]byte{[]byte("h"), []byte("p")}, Memory: 3 << 20, Workers: 4}
	s, log := newKept(t, o)
	dir := log.dir
	cells := genCells(7, 32000)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 4; k++ {
				lo := (g*4 + k) * 2000
				w, err := s.Begin(ctx, sink.SplitInfo{ID: fmt.Sprintf("s%02d", g*4+k)})
				if err != nil {
					t.Error(err)
					return
				}
				for i := range cells[lo : lo+2000] {
					if err := w.Write(ctx, &cells[lo+i]); err != nil {
						t.Error(err)
						return
					}
				}
				if _, err := w.Commit(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	ids := log.reported()
	slices.Sort(ids)
	if len(slices.Compact(slices.Clone(ids))) != len(ids) || len(ids) != 16 {
		t.Errorf("reported durable: %v; want each of the 16 splits once", ids)
	}
	st := s.Stats()
	t.Logf("%d splits written from memory, %d runs", st.SplitsInMemory, st.Runs)
	if st.PeakMemory > o.Memory {
		t.Errorf("peak sort memory %d over the budget %d", st.PeakMemory, o.Memory)
	}
	equalDumps(t, checkStaged(t, s.RegionMap(), readStaged(t, dir), 32), sorted(cells))
}

// TestEntryCellSizeIsCellSize holds entryCellSize, which rangesOf sums
// instead of viewing each entry, to cell.Size of the entry's cell.
func TestEntryCellSizeIsCellSize(t *testing.T) {
	w := &splitSink{}
	for i, c := range []cell.Cell{
		{Row: []byte("r"), Family: []byte("d"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: []byte("v")},
		{Row: []byte("row-two"), Family: []byte("fam"), Timestamp: 2, Type: cell.Delete},
		{Row: []byte("r3"), Family: []byte("d"), Qualifier: make([]byte, 300), Timestamp: 3, Type: cell.Put, Value: make([]byte, 70000), Tags: []byte{0, 2, 1, 'x'}},
	} {
		off := 0
		if len(w.chunks) > 0 {
			off = len(w.chunks[0])
		} else {
			w.chunks = [][]byte{nil}
		}
		w.chunks[0] = append(append(append(append(append(w.chunks[0], c.Row...), c.Family...), c.Qualifier...), c.Value...), c.Tags...)
		e := entry{ts: c.Timestamp, off: uint32(off), qual: uint32(len(c.Qualifier)), val: uint32(len(c.Value)), row: uint16(len(c.Row)), tags: uint16(len(c.Tags)), fam: uint8(len(c.Family)), typ: c.Type}
		var v cell.Cell
		w.view(&e, &v)
		if got, want := entryCellSize(&e), cell.Size(&c); got != want || cell.Size(&v) != want {
			t.Errorf("cell %d: entryCellSize %d, view's cell.Size %d, cell.Size %d", i, got, cell.Size(&v), want)
		}
	}
}
