package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

// concurrency is a dry-run sink that records how many splits were open in
// it at once.
type concurrency struct {
	sink.DryRun
	mu         sync.Mutex
	open, most int
}

func (c *concurrency) Begin(ctx context.Context, s sink.SplitInfo) (sink.SplitSink, error) {
	c.mu.Lock()
	c.open++
	c.most = max(c.most, c.open)
	c.mu.Unlock()
	inner, err := c.DryRun.Begin(ctx, s)
	return &closingSplit{SplitSink: inner, c: c}, err
}

type closingSplit struct {
	sink.SplitSink
	c *concurrency
}

func (s *closingSplit) Commit(ctx context.Context) (sink.Ack, error) {
	s.c.mu.Lock()
	s.c.open--
	s.c.mu.Unlock()
	return s.SplitSink.Commit(ctx)
}

// TestDefaultWorkersFollowGOMAXPROCS: with no workers in the job or the
// options, a run reads as many splits at once as GOMAXPROCS allows, and
// sizes every per-worker share of its budget for that many. (The CLI once
// sized the sink for $GOMAXPROCS workers while the pool ran NumCPU.)
func TestDefaultWorkersFollowGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	j := demoJob(t)
	j.Run.Workers = 0
	c := &concurrency{}
	r, err := pipeline.Prepare(context.Background(), j, pipeline.Options{Sink: c})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Outline()
	if p.Workers != 1 || p.Budget.Workers != 1 {
		t.Errorf("GOMAXPROCS=1: plan has %d workers, budget for %d; want 1 and 1", p.Workers, p.Budget.Workers)
	}
	if p.Budget.SinkPerWorker() != p.Budget.Sink {
		t.Errorf("one worker's sink share is %d of %d: sized for more than one", p.Budget.SinkPerWorker(), p.Budget.Sink)
	}
	if p.Splits < 2 {
		t.Fatalf("the demo snapshot has %d splits; the test needs several to see the pool's size", p.Splits)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum, err := r.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if c.most != 1 || sum.Workers != 1 {
		t.Errorf("splits open at once: %d, summary workers %d; want 1 and 1", c.most, sum.Workers)
	}
}

// TestBudgetDividedOnce: the memory budget is divided once, by
// job.NewBudget, and what the run reports is that division.
func TestBudgetDividedOnce(t *testing.T) {
	j := demoJob(t)
	j.Run.Memory, j.Run.Workers = 64<<20, 4
	r, err := pipeline.Prepare(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := r.Outline().Budget
	// The soft limit: three quarters less 32 MiB, at least half (32 MiB
	// here); of it 7/16 to the sink, 3/16 to read-ahead, 2/16 to the
	// collision sets.
	want := job.Budget{Total: 64 << 20, Workers: 4, Sink: 14 << 20, ReadAhead: 6 << 20, Collisions: 4 << 20, SoftLimit: 32 << 20}
	if got != want {
		t.Errorf("budget %+v, want %+v", got, want)
	}
	if n := got.CollisionEntriesPerWorker(); n != (4<<20)/4/40 {
		t.Errorf("collision entries per worker %d, want %d", n, (4<<20)/4/40)
	}
	if b := job.NewBudget(1<<30, 2); b.SoftLimit != 736<<20 || b.Sink != 322<<20 || b.ReadAhead != 138<<20 || b.Collisions != 92<<20 {
		t.Errorf("1 GiB: %+v, want a soft limit of 736 MiB: 322 MiB to the sink, 138 MiB to read-ahead, 92 MiB to the collision sets", b)
	}
}

// TestPrepareTouchesNothingOnError: the job record and the checkpoint of
// an earlier run stop Prepare before the sink is built (no cluster is
// looked for), and a given sink is closed.
func TestPrepareTouchesNothingOnError(t *testing.T) {
	j := demoJob(t)
	if _, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REKEY_ZK", "")
	t.Setenv("HBASE_CONF_DIR", "")
	j.Sink.Kind = job.SinkPuts // would need a cluster, if Prepare got that far
	_, err := pipeline.Prepare(context.Background(), j, pipeline.Options{})
	if !errors.Is(err, pipeline.ErrJobMismatch) || !strings.Contains(err.Error(), "sink is dry-run in the job record") {
		t.Fatalf("second run, of another sink, without --fresh: %v, want ErrJobMismatch naming the sink", err)
	}
	j.Sink.Kind = job.SinkDryRun
	_, err = pipeline.Prepare(context.Background(), j, pipeline.Options{})
	if !errors.Is(err, pipeline.ErrCheckpointExists) {
		t.Fatalf("second run without --resume: %v, want ErrCheckpointExists", err)
	}
	j.Sink.Kind = job.SinkPuts
	_, err = pipeline.Prepare(context.Background(), j, pipeline.Options{Fresh: true})
	if !errors.Is(err, hbase.ErrNoCluster) {
		t.Fatalf("puts with no cluster named: %v, want hbase.ErrNoCluster", err)
	}
	closed := &closeCounter{}
	j.Run.Checkpoint = filepath.Join(t.TempDir(), "c.json")
	if _, err := pipeline.Prepare(context.Background(), j, pipeline.Options{Sink: closed, Shard: pipeline.Shard{Index: 3, Count: 2}}); !errors.Is(err, pipeline.ErrInvalid) {
		t.Fatalf("shard 3/2: %v, want ErrInvalid", err)
	}
	if closed.n != 1 {
		t.Errorf("the given sink was closed %d times after Prepare failed, want 1", closed.n)
	}
}

type closeCounter struct {
	sink.DryRun
	n int
}

func (c *closeCounter) Close() error { c.n++; return nil }

// TestRunStartsOnce: Start twice, or Wait before Start, is an error, not a
// second set of workers on the same checkpoint.
func TestRunStartsOnce(t *testing.T) {
	r, err := pipeline.Prepare(context.Background(), demoJob(t), pipeline.Options{Sink: sink.DryRun{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(); err == nil {
		t.Error("Wait before Start: no error")
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err == nil {
		t.Error("second Start: no error")
	}
	sum, err := r.Wait()
	if err != nil || !sum.Finished {
		t.Fatalf("run: %v (finished %v)", err, sum != nil && sum.Finished)
	}
	var n int64
	for _, sp := range sum.PerSplit {
		n += sp.Written
	}
	if n != sum.Written || n == 0 {
		t.Errorf("per-split written %d, summary %d", n, sum.Written)
	}
}

// journalRemover is a dry-run sink whose first commit removes the
// checkpoint's journal, as another run's compaction does after it took
// the state over.
type journalRemover struct {
	sink.DryRun
	dir  string
	once sync.Once
}

func (s *journalRemover) Begin(ctx context.Context, sp sink.SplitInfo) (sink.SplitSink, error) {
	inner, err := s.DryRun.Begin(ctx, sp)
	return &removingSplit{SplitSink: inner, s: s}, err
}

type removingSplit struct {
	sink.SplitSink
	s *journalRemover
}

func (r *removingSplit) Commit(ctx context.Context) (sink.Ack, error) {
	r.s.once.Do(func() {
		js, _ := filepath.Glob(filepath.Join(r.s.dir, "checkpoint.json.journal-*"))
		for _, j := range js {
			os.Remove(j)
		}
	})
	return r.SplitSink.Commit(ctx)
}

// TestJournalGoneIsALostLease: when the journal a run appends to is gone
// (another run compacted the checkpoint after taking the state over), the
// run stops with ErrLeaseLost and does not write a base of its own over
// the other run's.
func TestJournalGoneIsALostLease(t *testing.T) {
	j := demoJob(t)
	dir := filepath.Dir(j.Run.Checkpoint)
	_, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: &journalRemover{dir: dir}, Workers: 1})
	if !errors.Is(err, pipeline.ErrLeaseLost) {
		t.Fatalf("run with its journal removed: %v, want ErrLeaseLost", err)
	}
	if js, _ := filepath.Glob(filepath.Join(dir, "checkpoint.json.journal-*")); len(js) != 0 {
		t.Errorf("the run started a journal of its own over the removed one: %v", js)
	}
}
