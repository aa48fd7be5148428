package pipeline

import (
	"context"
	"fmt"
	"path"
	"time"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
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
	var staged *state.StagedReached
	if task.Phase == hfiles.PhaseLoad {
		if staged, err = checkStagedReached(j, o.Kerberos); err != nil {
			return nil, err
		}
	}
	s, closeClient, err := hfiles.OpenTask(ctx, j, task, hfiles.TaskOptions{Workers: workers, Memory: mem, Kerberos: o.Kerberos, Logf: o.Logf, Target: o.target}, ls)
	if err != nil {
		return nil, err
	}
	defer closeClient()
	defer s.Close()
	ctx = ls.Bind(ctx)
	err = s.Finish(ctx, reporterFunc(o.Logf))
	if err == nil && staged != nil {
		err = writeStagedReached(staged, o.Kerberos, o.Logf)
	}
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

// checkStagedReached reads the reached record a run staged without
// loading left in the job's staging folder (state.StagedReachedFile; nil
// when there is none) and, before anything is loaded, refuses a load
// that would leave the target wrong: a staged catch-up from A into a
// target the job's reached record does not put at A (or already at the
// catch-up's snapshot, a load run again), and a staged whole run into a
// target the record puts at a later snapshot. (Without --assume-at: a
// catch-up told the target was at A checks nothing.)
func checkStagedReached(j *job.Job, who *krb.Identity) (*state.StagedReached, error) {
	st := j.StagingPath()
	loc, err := vfs.OpenWith(st, vfs.Options{Kerberos: who})
	if err != nil {
		return nil, fmt.Errorf("staging folder: %w", err)
	}
	defer loc.Close()
	sr, found, err := state.ReadStagedReached(loc.FS, path.Join(loc.Path, state.StagedReachedFile))
	if err != nil || !found {
		return nil, err
	}
	rloc, err := vfs.OpenWith(sr.Path, vfs.Options{Kerberos: who})
	if err != nil {
		return nil, fmt.Errorf("reached record: %w", err)
	}
	defer rloc.Close()
	at, found, err := state.ReadReached(rloc.FS, rloc.Path)
	if err != nil {
		return nil, err
	}
	want := sr.Record
	same := func(snap string, created int64) bool {
		return found && at.Snapshot == snap && at.Created == created && at.Job == want.Job
	}
	switch {
	case same(want.Snapshot, want.Created):
		return sr, nil // loaded before: the load sends nothing again
	case sr.Since != "" && !sr.AssumeAt && !same(sr.Since, sr.SinceCreated):
		now := "there is no record"
		if found {
			now = fmt.Sprintf("it says %s (created %d)", at.Snapshot, at.Created)
			if at.Job != want.Job {
				now += ", by another job"
			}
		}
		return nil, fmt.Errorf("%w: %s holds a catch-up from %s to %s, only right for a target at %s (created %d), but the reached record %s is not there: %s; nothing loaded (stage the catch-up again from the snapshot the target is at)",
			ErrNotAt, loc.URL, sr.Since, want.Snapshot, sr.Since, sr.SinceCreated, sr.Path, now)
	case sr.Since == "" && found && at.Created > want.Created:
		return nil, fmt.Errorf("%w: %s holds a whole run of %s (created %d), but the reached record %s says the target is at a later snapshot, %s (created %d): loading it would put back cells removed since; nothing loaded (run the job from the later snapshot instead)",
			ErrNotAt, loc.URL, want.Snapshot, want.Created, sr.Path, at.Snapshot, at.Created)
	}
	return sr, nil
}

// writeStagedReached writes the record a staged run left for its load,
// once the load succeeded: the target holds the run's snapshot now.
func writeStagedReached(sr *state.StagedReached, who *krb.Identity, logf func(string, ...any)) error {
	loc, err := vfs.OpenWith(sr.Path, vfs.Options{Kerberos: who})
	if err != nil {
		return fmt.Errorf("reached record: %w", err)
	}
	defer loc.Close()
	wfs, ok := loc.FS.(vfs.WriteFS)
	if !ok {
		return fmt.Errorf("reached record %s: file system is read-only", sr.Path)
	}
	if err := wfs.MkdirAll(path.Dir(loc.Path)); err != nil {
		return fmt.Errorf("reached record %s: %w", sr.Path, err)
	}
	rec := sr.Record
	rec.Written = time.Now().UTC()
	if err := state.WriteReached(wfs, loc.Path, rec); err != nil {
		return err
	}
	logf("the target reached snapshot %s (recorded in %s)", rec.Snapshot, sr.Path)
	return nil
}
