package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// failFS is the local file system with chosen operations failing, as a
// crash at that step would leave the files.
type failFS struct {
	vfs.Local
	fail func(op, name string) error
}

func (f failFS) check(op, name string) error {
	if f.fail == nil {
		return nil
	}
	return f.fail(op, name)
}

func (f failFS) Create(name string) (vfs.WriteFile, error) {
	if err := f.check("create", name); err != nil {
		return nil, err
	}
	return f.Local.Create(name)
}

func (f failFS) Rename(o, n string) error {
	if err := f.check("rename", n); err != nil {
		return err
	}
	return f.Local.Rename(o, n)
}

func (f failFS) Remove(name string) error {
	if err := f.check("remove", name); err != nil {
		return err
	}
	return f.Local.Remove(name)
}

func (f failFS) Append(name string) (vfs.WriteFile, error) {
	if err := f.check("append", name); err != nil {
		return nil, err
	}
	return f.Local.Append(name)
}

var errCrash = errors.New("crash here")

// testStore is a checkpoint store on fsys at dir/checkpoint.json.
func testStore(dir string, fsys vfs.WriteFS) *checkpointStore {
	p := filepath.ToSlash(filepath.Join(dir, "checkpoint.json"))
	return &checkpointStore{loc: &vfs.Location{FS: fsys, Path: p}, url: p}
}

func done(id string) *SplitStats { return &SplitStats{ID: id, Done: true, Attempts: 1} }

// doneIDs lists the splits a loaded checkpoint records done.
func doneIDs(l *loadedCheckpoint) string {
	var ids []string
	for id, st := range l.Splits {
		if st.Done {
			ids = append(ids, id)
		}
	}
	for i := 1; i < len(ids); i++ {
		for k := i; k > 0 && ids[k] < ids[k-1]; k-- {
			ids[k], ids[k-1] = ids[k-1], ids[k]
		}
	}
	return strings.Join(ids, ",")
}

// TestCompactionCrashSafe: a compaction that stops at any of its steps
// (the new journal not written, the base not renamed, the old journal not
// removed) leaves a base and the journal it names that load to every split
// recorded so far; the next compaction clears what was left.
func TestCompactionCrashSafe(t *testing.T) {
	for _, step := range []string{"create", "rename", "remove"} {
		t.Run("stopped at "+step, func(t *testing.T) {
			dir := t.TempDir()
			fs := &failFS{}
			s := testStore(dir, fs)
			c := &Checkpoint{Fingerprint: "fp", Splits: map[string]*SplitStats{}}
			if err := s.compact(c); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"a", "b"} {
				c.Splits[id] = done(id)
				if err := s.record(c.Splits[id], nil); err != nil {
					t.Fatal(err)
				}
			}
			fs.fail = func(op, name string) error {
				// The journal's create and remove, the base's rename.
				if op == step && strings.Contains(name, ".journal-") == (op != "rename") {
					return errCrash
				}
				return nil
			}
			c.Splits["c"] = done("c") // in the new base only
			if err := s.compact(c); !errors.Is(err, errCrash) {
				t.Fatalf("compaction stopped at %s: %v", step, err)
			}
			fs.fail = nil
			want := "a,b"
			if step == "remove" {
				want = "a,b,c" // the new base was in place
			}
			l, err := testStore(dir, fs).load()
			if err != nil {
				t.Fatalf("load after a compaction stopped at %s: %v", step, err)
			}
			if got := doneIDs(l); got != want {
				t.Errorf("after a compaction stopped at %s: done %s, want %s", step, got, want)
			}
			// The next run compacts again: one journal is left, of the
			// base's generation.
			s2 := testStore(dir, fs)
			l, _ = s2.load()
			if err := s2.compact(l.Checkpoint); err != nil {
				t.Fatal(err)
			}
			m, _ := filepath.Glob(filepath.Join(dir, "checkpoint.json.journal-*"))
			if len(m) != 1 || !strings.HasSuffix(m[0], s2.journalPath(s2.gen)[len(dir):]) {
				t.Errorf("journals after the next compaction: %v, want only generation %d's", m, s2.gen)
			}
		})
	}
}

// TestAppendFailureStopsTheJournal: after an append fails (the journal
// may end in part of a record), no record is appended behind it until a
// compaction has written a new base and journal.
func TestAppendFailureStopsTheJournal(t *testing.T) {
	dir := t.TempDir()
	fs := &failFS{}
	s := testStore(dir, fs)
	c := &Checkpoint{Fingerprint: "fp", Splits: map[string]*SplitStats{}}
	if err := s.compact(c); err != nil {
		t.Fatal(err)
	}
	fs.fail = func(op, _ string) error {
		if op == "append" {
			return errCrash
		}
		return nil
	}
	if err := s.record(done("a"), nil); !errors.Is(err, errCrash) {
		t.Fatalf("append failing: %v", err)
	}
	fs.fail = nil
	if err := s.record(done("b"), nil); err == nil {
		t.Fatal("an append behind a failed one: no error")
	}
	c.Splits["a"], c.Splits["b"] = done("a"), done("b")
	if err := s.compact(c); err != nil {
		t.Fatal(err)
	}
	if err := s.record(done("d"), nil); err != nil {
		t.Fatalf("append after the compaction: %v", err)
	}
	l, err := testStore(dir, fs).load()
	if err != nil {
		t.Fatal(err)
	}
	if got := doneIDs(l); got != "a,b,d" {
		t.Errorf("done after the compaction and an append: %s, want a,b,d", got)
	}
}

// TestCompactionMidRun: with compactions after every few records, a run
// rewrites its base several times as its journal grows, and a resume from
// a run stopped between them still skips every split done and keeps the
// sketch.
func TestCompactionMidRun(t *testing.T) {
	defer func(n int64) { compactMinBytes = n }(compactMinBytes)
	compactMinBytes = 1
	j, err := job.Load("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j.Run.Checkpoint = filepath.Join(dir, "checkpoint.json")
	j.BadKeys.File = ""
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var gens []int64
	var r *Run
	n := 0
	cs := &countingSink{after: func() {
		gens = append(gens, r.ckpt.gen)
		if n++; n == 12 {
			cancel()
		}
	}}
	r, err = Prepare(ctx, j, Options{Sink: cs, Workers: 1, SplitBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run: %v", err)
	}
	if gens[len(gens)-1] < 4 {
		t.Errorf("journal generations seen at the commits: %v; want a compaction every few splits", gens)
	}
	r2, err := Prepare(context.Background(), j, Options{Sink: DryRun{}, Workers: 1, SplitBytes: 8 << 10, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := r2.Plan(); p.Todo != p.Splits-12 {
		t.Errorf("after 12 splits and compactions: %d of %d to do", p.Todo, p.Splits)
	}
	if err := r2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum, err := r2.Wait(); err != nil || !sum.Finished {
		t.Fatalf("resumed run: %v", err)
	}
	// Every cell of the demo snapshot (31413 in HBase's dump of it,
	// testdata/snapshots/demo_events.cells) is in the sketch once.
	f, err := os.Open(filepath.Join(dir, "entities.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sk, err := entity.ReadSketch(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, cells, _ := sk.Totals(); cells != 31413 {
		t.Errorf("the resumed run's sketch counts %d cells, want 31413", cells)
	}
}

// countingSink is a dry run that calls after once each split committed
// (its record is written after: the generation seen is the one before).
type countingSink struct {
	DryRun
	after func()
}

func (c *countingSink) Begin(ctx context.Context, i sink.SplitInfo) (sink.SplitSink, error) {
	in, err := c.DryRun.Begin(ctx, i)
	return &countingSplit{in, c}, err
}

type countingSplit struct {
	sink.SplitSink
	c *countingSink
}

func (x *countingSplit) Commit(ctx context.Context) (sink.Ack, error) {
	a, err := x.SplitSink.Commit(ctx)
	x.c.after()
	return a, err
}
