package hfiles

import (
	"context"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// TaskOptions configure the sink of a merge or load task.
type TaskOptions struct {
	// Workers is how many partitions the merge writes at once; Memory
	// bounds its buffers (the budget's sink and merge shares).
	Workers int
	Memory  int64
	// Kerberos is who to log in as where the staging folder or the
	// target cluster needs it.
	Kerberos *krb.Identity
	// Logf hears of the target cluster client's retries (nil: nobody).
	Logf func(format string, args ...any)
	// Target, when set, is the target cluster to use instead of
	// connecting to the job's; the caller closes it.
	Target Cluster
}

// OpenTask opens the job's staging folder for task, a merge part or the
// load: it refuses a folder of the other kind of job, leases the task's
// own folder through ls, which the caller made with its lease options and
// releases after the task (the load also the whole folder, whose lease a
// one-process run holds, so it never loads beside a live run; no task of
// a job in phases takes it), and opens the sink whose Finish runs the
// task, with the target cluster unless the job is offline (a merge may
// be; the caller refuses an offline load). The caller closes the sink,
// then the client (closeClient).
func OpenTask(ctx context.Context, j *job.Job, task Task, o TaskOptions, ls *state.Leases) (_ *Sink, closeClient func() error, err error) {
	st := j.StagingPath()
	if err := CheckKind(st, task, vfs.Options{Kerberos: o.Kerberos}); err != nil {
		return nil, nil, err
	}
	if err := checkRecordedIdentity(st, j, vfs.Options{Kerberos: o.Kerberos}); err != nil {
		return nil, nil, err
	}
	if err := ls.Take(LeasePath(st, task), "staging folder "+st+" ("+task.String()+")"); err != nil {
		return nil, nil, err
	}
	if task.Phase == PhaseLoad {
		if err := ls.Take(LeasePath(st, Task{}), "staging folder "+st); err != nil {
			return nil, nil, err
		}
	}
	budget := job.NewBudget(o.Memory, o.Workers)
	so := Options{
		Staging: st, Table: j.Target.Table, Task: task, Workers: o.Workers,
		Memory: budget.Sink, MergeMemory: budget.Merge(), MaxStagingBytes: j.Sink.MaxStagingBytes,
		Fence: ls.Check, Lease: ls.Stamp(LeasePath(st, task)), Holder: state.LeaseHolder, Superseded: ls.Superseded(LeasePath(st, task)),
		// The spill tasks mapped by the job's layouts (a program of one's
		// own runs in one process); their merge judges by them too.
		OneToOne: j.Program != nil && j.Run.SetTimestamp == 0 && !j.Program.MayCollide(),
		Kerberos: o.Kerberos,
	}
	closeClient = func() error { return nil }
	switch {
	case o.Target != nil:
		so.Client = o.Target
	case !j.Sink.Offline:
		c, _, err := sink.ConnectTarget(j, o.Kerberos, ", or sink.offline for the merge", o.Logf)
		if err != nil {
			return nil, nil, err
		}
		so.Client, closeClient = c, c.Close
	}
	s, err := New(ctx, so)
	if err != nil {
		closeClient()
		return nil, nil, err
	}
	return s, closeClient, nil
}
