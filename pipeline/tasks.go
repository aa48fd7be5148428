package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/state"
)

// A job in phases (hfiles.Phase): N spill tasks (Prepare and Start with
// Options.Phase hfiles.PhaseSpill and a Shard) read the snapshot and stage
// sorted runs into one shared staging folder; R merge tasks (RunTask with
// hfiles.PhaseMerge) each merge the partitions dealt to them into HFiles;
// one load task (RunTask with hfiles.PhaseLoad) bulk loads them. Each task
// leases its own folder inside the staging folder, so tasks of one phase
// run side by side while a second attempt of one task is refused. The
// protocol (which folders, which leases, what a task waits for) is the
// hfiles sink's (sink/hfiles/phases.go, hfiles.OpenTask), over leases
// package state keeps; the run makes a task's leases with its options
// and runs the task to its end.

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
	if kind, ok := sink.Lookup(j.Sink.Kind); o.Sink != nil || !ok || !kind.Phases {
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
	// Kerberos is as in Options: nil logs in as the job's security
	// section says.
	Kerberos *krb.Identity

	// target, set by tests, is the target cluster the task uses instead
	// of connecting to the job's (a fake bulk loader).
	target hfiles.Cluster
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
	if kind, ok := sink.Lookup(j.Sink.Kind); !ok || !kind.Phases {
		return nil, fmt.Errorf("%w: the %s phase needs the hfiles sink (sink.type: hfiles)", ErrInvalid, o.Phase)
	}
	if j.Sink.Offline && task.Phase == hfiles.PhaseLoad {
		return nil, fmt.Errorf("%w: the job is offline (sink.offline); the load needs the target cluster", ErrInvalid)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	began := time.Now()
	sum := &TaskSummary{Job: j.Path, Table: j.Target.Table, Staging: j.StagingPath(), Task: task.String()}
	o.Kerberos = Identity(j, o.Kerberos)
	ls := state.NewLeases(leaseOptions(o.LeaseTTL, o.ForceTakeover, o.Logf, o.Kerberos))
	defer ls.Release()
	workers := o.Workers
	if workers <= 0 {
		workers = j.Run.WorkersOrDefault()
	}
	mem := o.Memory
	if mem <= 0 {
		mem = j.Run.MemoryOrDefault()
	}
	s, closeClient, err := hfiles.OpenTask(ctx, j, task, hfiles.TaskOptions{Workers: workers, Memory: mem, Kerberos: o.Kerberos, Logf: o.Logf, Target: o.target}, ls)
	if err != nil {
		return nil, err
	}
	defer closeClient()
	defer s.Close()
	ctx = ls.Bind(ctx)
	err = s.Finish(ctx, reporterFunc(o.Logf))
	sum.Stats, sum.Seconds = s.Stats(), time.Since(began).Seconds()
	if err != nil && ctx.Err() != nil {
		sum.Interrupted = true
		err = fmt.Errorf("%w: %v", ErrInterrupted, err)
	}
	err = ls.Explain(err)
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

// ErrLoadBegan is matched by the error of a spill or merge task started
// once the job's load has sent files (hfiles.ErrLoadBegan): it would write
// again what the load loads.
var ErrLoadBegan = hfiles.ErrLoadBegan

// ErrOtherKind is matched by the error of a run or task on a staging
// folder that holds the other kind of job (hfiles.ErrOtherKind): a spill
// or merge task on a one-process run's folder, or the reverse.
var ErrOtherKind = hfiles.ErrOtherKind
