package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink/hfiles"
)

// A job in phases (hfiles.Phase): N spill tasks (Prepare and Start with
// Options.Phase hfiles.PhaseSpill and a Shard) read the snapshot and stage
// sorted runs into one shared staging folder; R merge tasks (RunTask with
// hfiles.PhaseMerge) each merge the partitions dealt to them into HFiles;
// one load task (RunTask with hfiles.PhaseLoad) bulk loads them. Each task
// leases its own folder inside the staging folder, so tasks of one phase
// run side by side while a second attempt of one task is refused.

// spillTask is the stage task of a run: a spill shard, or the whole job.
func (o Options) spillTask() hfiles.Task {
	if o.Phase != hfiles.PhaseSpill {
		return hfiles.Task{}
	}
	t := hfiles.Task{Phase: hfiles.PhaseSpill, Index: o.Shard.Index, Count: o.Shard.Count}
	if t.Count < 1 {
		t.Index, t.Count = 0, 1
	}
	return t
}

// checkPhase refuses a phase a run cannot be: the merge and load read no
// snapshot (RunTask runs them), and only staged HFiles come in phases
// (with puts, shards write the target directly).
func checkPhase(j *job.Job, o Options) error {
	switch o.Phase {
	case hfiles.PhaseAll:
		return nil
	case hfiles.PhaseSpill:
	default:
		return fmt.Errorf("%w: phase %q: a run is the spill phase or the whole job; the merge and the load are tasks of their own", ErrInvalid, o.Phase)
	}
	if o.Sink != nil || j.Sink.Kind != job.SinkHFiles {
		return fmt.Errorf("%w: phases need the hfiles sink (sink.type: hfiles); with puts, shards write the target directly (--shard I/N without --phase)", ErrInvalid)
	}
	return nil
}

// TaskOptions configure a merge or load task of a job in phases.
type TaskOptions struct {
	// Phase is hfiles.PhaseMerge or hfiles.PhaseLoad.
	Phase hfiles.Phase
	// Part is the merge part: Index of Count.
	Part Shard
	// Workers is how many partitions the merge writes at once
	// [run.workers, else job.DefaultWorkers]; Memory bounds its buffers
	// [run.memory, else job.DefaultMemory].
	Workers int
	Memory  int64
	// ForceTakeover and LeaseTTL are as in Options, for the task's lease.
	ForceTakeover bool
	LeaseTTL      time.Duration
	// Logf receives progress and notable events (nil = discard).
	Logf func(format string, args ...any)
}

// TaskSummary is what a merge or load task did.
type TaskSummary struct {
	Job     string `json:"job"`
	Table   string `json:"target_table"`
	Staging string `json:"staging"`
	// Task names it: "merge 0/2" or "load".
	Task    string       `json:"task"`
	Stats   hfiles.Stats `json:"sink_stats"`
	Seconds float64      `json:"seconds"`
	// Interrupted says the task stopped early; run it again to go on.
	Interrupted bool   `json:"interrupted"`
	Error       string `json:"error,omitempty"`
}

// RunTask runs one merge or load task of a job in phases over the job's
// staging folder: it leases the task's folder, merges the partitions
// dealt to its part (or loads every part's HFiles), and records its
// progress there, so a task run again after a crash redoes only what it
// had not recorded. A task whose earlier phase has not finished fails
// with an error matching hfiles.ErrNotReady.
func RunTask(ctx context.Context, j *job.Job, o TaskOptions) (*TaskSummary, error) {
	task, err := o.task()
	if err != nil {
		return nil, err
	}
	if j.Sink.Kind != job.SinkHFiles {
		return nil, fmt.Errorf("%w: the %s phase needs the hfiles sink (sink.type: hfiles)", ErrInvalid, o.Phase)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	began := time.Now()
	sum := &TaskSummary{Job: j.Path, Table: j.Target.Table, Staging: j.StagingPath(), Task: task.String()}
	ls := newLeases()
	defer ls.release()
	ttl := o.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	st := j.StagingPath()
	if err := hfiles.CheckKind(st, task); err != nil {
		return nil, err
	}
	lopts := leaseOptions{ttl: ttl, force: o.ForceTakeover, logf: o.Logf}
	if err := ls.take(stagingLeasePath(st, task), "staging folder "+st+" ("+task.String()+")", lopts); err != nil {
		return nil, err
	}
	// The load also loads a one-process run's folder, whose run leases
	// the whole folder: the load holds that lease too, so it never loads
	// beside a live run (no task of a job in phases takes it).
	if task.Phase == hfiles.PhaseLoad {
		if err := ls.take(stagingLeasePath(st, hfiles.Task{}), "staging folder "+st, lopts); err != nil {
			return nil, err
		}
	}
	s, closeClient, err := o.openSink(ctx, j, task, ls)
	if err != nil {
		return nil, err
	}
	defer closeClient()
	defer s.Close()
	ctx = ls.bind(ctx)
	err = s.Finish(ctx, reporterFunc(o.Logf))
	sum.Stats, sum.Seconds = s.Stats(), time.Since(began).Seconds()
	if err != nil && ctx.Err() != nil {
		sum.Interrupted = true
		err = fmt.Errorf("%w: %v", ErrInterrupted, err)
	}
	err = ls.explain(err)
	if err != nil {
		sum.Error = err.Error()
	}
	return sum, err
}

// task checks the options and names the task.
func (o TaskOptions) task() (hfiles.Task, error) {
	switch o.Phase {
	case hfiles.PhaseMerge:
		if o.Part.Count < 1 || o.Part.Index < 0 || o.Part.Index >= o.Part.Count {
			return hfiles.Task{}, fmt.Errorf("%w: merge part %s: the index must be in [0, %d)", ErrInvalid, o.Part, o.Part.Count)
		}
		return hfiles.Task{Phase: hfiles.PhaseMerge, Index: o.Part.Index, Count: o.Part.Count}, nil
	case hfiles.PhaseLoad:
		return hfiles.Task{Phase: hfiles.PhaseLoad}, nil
	}
	return hfiles.Task{}, fmt.Errorf("%w: phase %q is not a task of its own (merge or load)", ErrInvalid, o.Phase)
}

// openSink opens the staging folder for the task, with the target
// cluster unless the job is offline (a merge may be; the load may not).
// The caller closes the sink, then the client (closeClient). ls are the
// task's leases: their check is the fence of every record the sink
// writes, and the task's staging lease stamps its state.
func (o TaskOptions) openSink(ctx context.Context, j *job.Job, task hfiles.Task, ls *leases) (_ *hfiles.Sink, closeClient func() error, err error) {
	workers := o.Workers
	if workers <= 0 {
		workers = j.Run.WorkersOrDefault()
	}
	mem := o.Memory
	if mem <= 0 {
		mem = j.Run.MemoryOrDefault()
	}
	budget := job.NewBudget(mem, workers)
	so := hfiles.Options{
		Staging: j.StagingPath(), Table: j.Target.Table, Task: task, Workers: workers,
		Memory: budget.Sink, MergeMemory: budget.Merge(), MaxStagingBytes: j.Sink.MaxStagingBytes,
		Fence: ls.check, Lease: ls.stamp(stagingLeasePath(j.StagingPath(), task)), Holder: leaseHolder,
	}
	closeClient = func() error { return nil }
	if j.Sink.Offline {
		if task.Phase == hfiles.PhaseLoad {
			return nil, nil, fmt.Errorf("%w: the job is offline (sink.offline); the load needs the target cluster", ErrInvalid)
		}
	} else {
		c, _, err := connectTarget(j, ", or sink.offline for the merge")
		if err != nil {
			return nil, nil, err
		}
		so.Client, closeClient = c, c.Close
	}
	s, err := hfiles.New(ctx, so)
	if err != nil {
		closeClient()
		return nil, nil, err
	}
	return s, closeClient, nil
}

// Phase is a phase of a job in phases (hfiles.Phase), named here so that
// callers of pipeline need not reach into the sink.
type Phase = hfiles.Phase

// The phases: PhaseAll is the whole job in one process.
const (
	PhaseAll   = hfiles.PhaseAll
	PhaseSpill = hfiles.PhaseSpill
	PhaseMerge = hfiles.PhaseMerge
	PhaseLoad  = hfiles.PhaseLoad
)

// ErrNotReady is matched by the error of a phase task started before the
// phase it depends on finished (hfiles.ErrNotReady): a merge part before
// every spill shard committed, the load before every merge part finished.
var ErrNotReady = hfiles.ErrNotReady

// ErrOtherKind is matched by the error of a run or task on a staging
// folder that holds the other kind of job (hfiles.ErrOtherKind): a spill
// or merge task on a one-process run's folder, or the reverse.
var ErrOtherKind = hfiles.ErrOtherKind
