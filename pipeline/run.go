package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/source"
	"github.com/rekeyhq/rekey/state"
)

// Errors a caller maps to exit codes.
var (
	// ErrInterrupted: the run stopped early (ctx ended); the checkpoint
	// holds what finished, and Resume goes on from there.
	ErrInterrupted = errors.New("pipeline: interrupted; the checkpoint holds the finished splits (run again with --resume)")
	// ErrCheckpointExists: a checkpoint is there and neither Resume nor
	// Fresh was asked for.
	ErrCheckpointExists = errors.New("pipeline: a checkpoint of an earlier run exists (pass --resume to go on from it, or --fresh to start over)")
	// ErrCheckpointMismatch: the checkpoint belongs to another job or
	// snapshot.
	ErrCheckpointMismatch = errors.New("pipeline: the checkpoint is of another job or snapshot")
	// ErrBadKeyFatal: a key did not fit and the job says bad_keys: fail.
	ErrBadKeyFatal = errors.New("pipeline: a key does not fit the layout and the job says bad_keys: fail")
)

// Run is one run of a job, assembled by Prepare: the source open, the
// splits chosen, the checkpoint checked, the sink built and its target
// ready. Start sets the workers going; Wait returns the summary and
// releases everything. A Run that is never started must be closed.
type Run struct {
	j      *job.Job
	o      Options
	budget job.Budget
	src    source.Source
	// catchup is src when the run is a catch-up (Options.Since).
	catchup    *source.Catchup
	mfs        *meteredFS
	sink       sink.Sink
	ctl        *Control
	scan       source.ScanOptions
	ckpt       *state.CheckpointStore
	leases     *state.Leases
	rejects    *rejectDir
	now        func() time.Time
	logf       func(string, ...any)
	collide    bool
	inRow      bool // the splits may cut inside rows (cellLevel)
	greedyCut  bool // in-row cuts by the earlier rule, for a checkpoint cut so
	defaultCut bool // the split size is the snapshot's default, not the job's
	maxTrack   int
	closers    []func() error
	seed       uint64
	// all is every split of the job's cut, in the order they are dealt;
	// items this run's share of them.
	all     []work
	items   []work
	resumed bool
	// cut0 is the cut this build chose before any record or checkpoint
	// changed it.
	cut0 struct {
		size                      int64
		inRow, greedy, defaultCut bool
	}
	// ckptGiven says Options.Checkpoint was given, not derived from the
	// job.
	ckptGiven bool
	// reachedBase is the checkpoint the reached record lies beside (see
	// reachedBase); sinceLast says Options.Since was "last", resolved
	// from that record.
	reachedBase string
	sinceLast   bool
	// sinceCreated is the creation time (ms) of the snapshot a catch-up
	// starts from, for the record a staged catch-up leaves its load.
	sinceCreated int64
	// jobs is where the job record lives (nil for a redo of some key
	// ranges); job the record the run is a task of, once found or
	// published; recordKept says it was found, so its cut is the run's.
	jobs       *jobState
	job        *state.Job
	recordKept bool

	cluster, controlAddr, metricsAddr string
	prepared                          time.Time
	// ttlRecordErr is why the job record's TTL time cannot be the job's
	// (settleTTLTime), returned once the record is known to be this job's.
	ttlRecordErr error

	started, closed bool
	done            chan struct{}
	sum             *Summary
	err             error

	mu       sync.Mutex
	state    *Checkpoint
	sketch   *entity.Sketch
	examples []string
	warnings []string
	held     map[string]heldSplit // done splits the sink holds in memory only

	// live counters, for progress
	read, written, rejected, collided, failed atomic.Int64
	bytesRead                                 atomic.Int64
	running, doneSplits                       atomic.Int64
	totalBytes, doneBytes                     int64
}

// Outline is the run as Prepare settled it, before any cell is read:
// which sink, how many workers and splits, what is left to do, where it
// can be watched. (Not a plan of the target's regions: that is the
// hfiles sink's RegionMap, nor of its split keys: transform.Planner.)
type Outline struct {
	// Sink is the sink's name: puts, hfiles, dry-run or a given sink's.
	Sink string `json:"sink"`
	// Workers is how many splits are read at once; the sink's buffers are
	// sized for as many.
	Workers int `json:"workers"`
	// Budget is how the run's memory is divided.
	Budget job.Budget `json:"memory_budget"`
	// Splits counts this run's splits (after Only and the shard); Todo
	// those an earlier run did not finish; TodoBytes their store file bytes.
	Splits    int   `json:"splits"`
	Todo      int   `json:"splits_todo"`
	TodoBytes int64 `json:"todo_bytes"`
	// Resumed says the run goes on from an earlier run's checkpoint.
	Resumed    bool   `json:"resumed"`
	Checkpoint string `json:"checkpoint"`
	// Cluster is the target cluster and where it was found ("" when the
	// run talks to none).
	Cluster string `json:"cluster,omitempty"`
	// ControlAddr is where the control endpoint listens ("" when off).
	ControlAddr string `json:"control_addr,omitempty"`
	// MetricsAddr is where the read-only metrics endpoint listens (""
	// when off).
	MetricsAddr string `json:"metrics_addr,omitempty"`
}

// Outline returns what the run will do; asked while it runs, Todo counts
// the splits not done yet.
func (r *Run) Outline() Outline {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Outline{
		Sink: r.sink.Name(), Workers: r.o.Workers, Budget: r.budget, Splits: len(r.items),
		Resumed: r.resumed, Checkpoint: r.o.Checkpoint, Cluster: r.cluster, ControlAddr: r.controlAddr,
		MetricsAddr: r.metricsAddr,
	}
	for _, w := range r.items {
		if !r.doneBefore(w) {
			p.Todo++
			p.TodoBytes += w.bytes
		}
	}
	return p
}

// doneBefore says the checkpoint records w done (before Start: by an
// earlier run, so this run skips it). The caller holds r.mu once the
// workers run.
func (r *Run) doneBefore(w work) bool {
	st := r.state.Splits[w.id]
	return st != nil && st.Done
}

// Control is the run's control: caps, pause and resume while it goes on.
func (r *Run) Control() *Control { return r.ctl }

// Start sets the workers going on the splits left to do; ctx bounds the
// work: when it ends, the workers stop between cells, the splits in
// flight are aborted and Wait returns ErrInterrupted.
func (r *Run) Start(ctx context.Context) error {
	if r.started || r.closed {
		return errors.New("pipeline: a Run starts once")
	}
	r.started = true
	r.done = make(chan struct{})
	ctx = r.leases.Bind(ctx) // a lost lease stops the run
	// Reads from here on are the run's (the plan's sample, if any, is not).
	r.mfs.ctx = ctx
	r.bytesRead.Store(0)
	go func() {
		defer close(r.done)
		r.sum, r.err = r.execute(ctx)
	}()
	return nil
}

// Wait waits for a started run to end, releases what it holds and returns
// its summary; the summary is there also when the run failed or was
// interrupted, so the caller can report what was done.
func (r *Run) Wait() (*Summary, error) {
	if !r.started {
		return nil, errors.New("pipeline: Wait before Start")
	}
	<-r.done
	err := r.leases.Confirm(r.err) // before close gives the leases back
	r.close()
	return r.sum, r.leases.Explain(err)
}

// Close releases a run that was never started (or ends one that was, by
// waiting for it); it is safe to call more than once.
func (r *Run) Close() error {
	if r.started {
		r.Wait()
	}
	r.close()
	return nil
}

// Execute prepares and runs a job in one call: Prepare, Start, Wait.
func Execute(ctx context.Context, j *job.Job, o Options) (*Summary, error) {
	r, err := Prepare(ctx, j, o)
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		r.Close()
		return nil, err
	}
	return r.Wait()
}

func (r *Run) close() {
	if r.closed {
		return
	}
	r.closed = true
	if r.sink != nil {
		r.sink.Close()
	}
	if r.src != nil {
		r.src.Close()
	}
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// adoptCheckpoint takes the earlier run's state (nil: a fresh start) and
// seeds this run's entity sketch: the base's, with the journal's per-split
// sketches merged in the order the earlier run merged them, so a resumed
// run's sketch misses nothing the earlier run counted.
func (r *Run) adoptCheckpoint(prev *state.LoadedCheckpoint, fp, seedFP string) error {
	j, o := r.j, r.o
	r.seed = binary.BigEndian.Uint64([]byte(seedFP[:16]))
	r.state = &Checkpoint{Version: state.CheckpointVersion, Fingerprint: fp, Job: j.Path, Snapshot: j.Source.Name, Splits: map[string]*SplitStats{}}
	r.sketch = entity.NewSketch(o.HeavyHitters, o.SampleEntities, r.seed)
	if prev != nil {
		r.state, r.resumed = prev.Checkpoint, true
		if prev.Torn != "" {
			r.logf("checkpoint %s: %s", o.Checkpoint, prev.Torn)
		}
		for _, why := range prev.Ignored {
			r.logf("%s", why)
		}
		if err := r.adoptSketch(prev); err != nil {
			return err
		}
	}
	if p := j.Program; p != nil {
		r.sketch.SetNamer(p.FormatEntity)
	}
	return nil
}

// adoptSketch loads the earlier run's sketch and merges the journal's
// deltas into it. Its sizes win over this run's options: sketches of other
// sizes do not merge.
func (r *Run) adoptSketch(prev *state.LoadedCheckpoint) error {
	if len(prev.Entities) > 0 {
		s, err := entity.ReadSketch(bytes.NewReader(prev.Entities))
		if err != nil {
			if prev.Version == state.CheckpointV1 {
				r.warn("the checkpoint's entity sketch is unreadable (%v); heaviest entities cover this run's splits only", err)
				return nil
			}
			return r.ckpt.Damaged(fmt.Sprintf("the base's entity sketch: %v", err))
		}
		if s.Seed() != r.seed {
			return r.ckpt.Damaged(fmt.Sprintf("the base's entity sketch has seed %d, the fingerprint gives %d", s.Seed(), r.seed))
		}
		r.sketch = s
	}
	if k, n := r.sketch.K(), r.sketch.N(); k != r.o.HeavyHitters || n != r.o.SampleEntities {
		r.logf("the checkpoint's entity sketch keeps %d heaviest and %d sampled entities; this run goes on with those sizes (asked: %d and %d)", k, n, r.o.HeavyHitters, r.o.SampleEntities)
		r.o.HeavyHitters, r.o.SampleEntities = k, n
	}
	for i, d := range prev.Deltas {
		s, err := entity.ReadSketch(bytes.NewReader(d))
		if err == nil && (s.K() != r.sketch.K() || s.N() != r.sketch.N() || s.Seed() != r.sketch.Seed()) {
			err = fmt.Errorf("sizes k=%d n=%d seed %d, the base's k=%d n=%d seed %d", s.K(), s.N(), s.Seed(), r.sketch.K(), r.sketch.N(), r.sketch.Seed())
		}
		if err != nil {
			return r.ckpt.Damaged(fmt.Sprintf("the journal's entity sketch %d: %v", i+1, err))
		}
		r.sketch.Merge(s)
	}
	return nil
}

// execute reads the splits left to do with the workers, then finishes the
// sink once every split is done.
func (r *Run) execute(ctx context.Context) (*Summary, error) {
	sum, err := r.work(ctx)
	sum.Seconds = time.Since(r.prepared).Seconds()
	if sum.Seconds > 0 {
		sum.CellsPerSec = float64(sum.Written) / sum.Seconds
		sum.MBPerSec = float64(sum.BytesRead) / 1e6 / sum.Seconds
	}
	sum.PeakRSS = peakRSS()
	sum.Interrupted = errors.Is(err, ErrInterrupted)
	if err != nil && !sum.Interrupted {
		sum.Error = err.Error()
	}
	return sum, err
}

func (r *Run) work(ctx context.Context) (*Summary, error) {
	j, o, items := r.j, r.o, r.items
	sum := &Summary{
		Job: j.Path, Snapshot: j.Source.Name, Table: j.Target.Table, Sink: r.sink.Name(),
		Checkpoint: o.Checkpoint, Splits: len(items), Workers: o.Workers, Budget: r.budget, SplitBytes: o.SplitBytes,
		CollisionScope: map[bool]string{true: "split", false: "none"}[r.collide],
		SplitInRow:     r.inRow,
	}
	var todo []work
	for _, w := range items {
		r.totalBytes += w.bytes
		if r.doneBefore(w) {
			sum.Skipped++
			r.doneSplits.Add(1)
			r.doneBytes += w.bytes
			continue
		}
		todo = append(todo, w)
	}
	if r.resumed {
		r.logf("resuming: %d of %d splits done by earlier runs, %d to do", sum.Skipped, len(items), len(todo))
	}
	// A new base and journal: a resumed run never appends to a journal an
	// earlier process left (on HDFS, maybe still open under its lease).
	r.mu.Lock()
	err := r.compactLocked()
	r.mu.Unlock()
	if err != nil {
		return sum, err
	}

	r.deferDurability()
	// Progress, push-back and the workers.
	stopAux := r.startAux(ctx, len(items))
	g, gctx := errgroup.WithContext(ctx)
	kind, _ := r.kindOf(r.sink.Name(), nil)
	q := newQueue(todo, o.Workers, kind.Spread)
	for {
		w, ok := q.take(gctx)
		if !ok {
			break
		}
		g.Go(func() error {
			defer q.done(w)
			return r.runSplit(gctx, w)
		})
		// A worker took w. The split likely next has its store files
		// opened while the workers read, so whichever takes it starts
		// reading at once.
		if nx, ok := q.peek(); ok && nx.split.Region != w.split.Region {
			r.src.Prepare(nx.split, r.scan)
		}
	}
	werr := g.Wait()
	stopAux()

	interrupted := ctx.Err() != nil
	r.fill(sum, items)
	if werr == nil && !interrupted && sum.Done == sum.Splits && sum.Failed == 0 {
		werr = r.finishSink(ctx)
		interrupted = werr != nil && ctx.Err() != nil
		sum.Finished = werr == nil
		if werr == nil {
			werr = r.commitToJob(sum)
		}
		if werr == nil {
			werr = r.recordReached(sum)
		}
	}
	r.finishFiles(sum, items)
	r.fillCatchup(sum)
	if a, ok := r.sink.(sink.Accounted); ok {
		sum.SinkStats = a.Account()
	}
	switch {
	case interrupted:
		return sum, ErrInterrupted
	case werr != nil:
		return sum, werr
	}
	return sum, nil
}

// finishSink runs the sink's Finish (the merge and bulk load of staged
// files) unless an earlier run recorded it done, and records it. A spill
// task's Finish, its shard's commit, is made again by every attempt: the
// commit counts only under the lease of the shard's last attempt (the
// merge leaves out one stamped by an attempt whose lease was superseded),
// so an attempt that took the lease and left the commit as it was would
// leave the shard never committed, for good.
func (r *Run) finishSink(ctx context.Context) error {
	if r.state.SinkFinished && r.o.Phase != PhaseSpill {
		return nil
	}
	if err := r.sink.Finish(ctx, reporterFunc(r.logf)); err != nil {
		return fmt.Errorf("%s sink: %w", r.sink.Name(), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.held); n > 0 {
		// Recording the sink finished would skip these splits for good.
		return fmt.Errorf("%s sink: finished, but %d splits it held in memory were never reported durable", r.sink.Name(), n)
	}
	r.state.SinkFinished = true
	return r.compactLocked()
}

// Staged returns the hfiles sink's account of the run (runs, HFiles,
// collisions across splits, regions loaded), when the run staged HFiles.
func (s *Summary) Staged() (hfiles.Stats, bool) {
	st, ok := s.SinkStats.(hfiles.Stats)
	return st, ok
}

type reporterFunc func(string, ...any)

func (f reporterFunc) Printf(format string, args ...any) { f(format, args...) }
