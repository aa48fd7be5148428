package hfiles

import (
	"context"
	"path"
	"strings"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// The hfiles sink is built from the job's sink section (sink.type:
// hfiles) by the run that writes through it, which leases its staging
// folder first (leases) and builds it after (build). It carries a
// catch-up's removed cells (Deletes): their version delete markers are
// cells of type cell.Delete like any other, staged, sorted by
// cell.Compare (a marker before a put of the same row, column and
// timestamp) and bulk loaded in the same HFiles as the catch-up's puts,
// as a raw copy's markers are.
func init() {
	sink.Register(job.SinkHFiles, sink.Kind{Build: build, State: leases, Phases: true, Deletes: true, Reaches: reaches, Coverage: coverage})
}

// reaches says a finished run brings the target to its snapshot only
// when it loads what it staged: with no_load or offline, the load that
// comes later does.
func reaches(j *job.Job) bool {
	return !j.Sink.NoLoad && !j.Sink.Offline
}

// coverage reads the job record a job in phases keeps in its staging
// folder, and its spill shards' commits (SpillCoverage).
func coverage(staging string, vo vfs.Options) (sink.JobCoverage, bool, error) {
	rec, committed, covered, err := SpillCoverage(staging, vo)
	if err != nil || rec == nil {
		return sink.JobCoverage{}, false, err
	}
	url := strings.TrimSuffix(staging, "/") + "/" + JobRecordFile
	return sink.JobCoverage{Record: rec, URL: url, Committed: committed, Covered: covered}, true, nil
}

// LeaseName is the lease file inside a staging folder; the underscore
// makes bulk load tools and OpenStaging pass over it, as they pass over
// Hadoop's _SUCCESS.
const LeaseName = "_rekey.lease"

// LeasePath is the lease file of a task's share of the staging folder
// st: the whole folder in one process, the task's own folder in a job in
// phases (each spill shard and merge part holds its own).
func LeasePath(st string, t Task) string {
	p := strings.TrimSuffix(st, "/")
	if d := t.Dir(); d != "" {
		p += "/" + d
	}
	return p + "/" + LeaseName
}

// spillTask is the task of a run: a spill shard, or the whole job.
func spillTask(e sink.Env) Task {
	if Phase(e.Phase) != PhaseSpill {
		return Task{}
	}
	t := Task{Phase: PhaseSpill, Index: e.Index, Count: e.Count}
	if t.Count < 1 {
		t.Index, t.Count = 0, 1
	}
	return t
}

// spillDir is the local folder the sink spills its runs to, "" for the
// staging folder (job.Job.SpillDirFor): a job in phases always keeps
// them in the staging folder, which every merge part reads.
func spillDir(e sink.Env) string {
	if spillTask(e).Phase != PhaseAll {
		return ""
	}
	return e.Job.SpillDirFor(e.Checkpoint)
}

// leases names the state a run of the hfiles sink writes: the task's
// share of the staging folder, and the local spill folder when there is
// one. It refuses a folder that holds the other kind of job.
func leases(e sink.Env) ([]sink.Lease, error) {
	st, t := e.Job.StagingPath(), spillTask(e)
	if err := CheckKind(st, t, vfs.Options{Kerberos: e.Kerberos}); err != nil {
		return nil, err
	}
	if err := checkIdentity(st, e.Job, e.Since, vfs.Options{Kerberos: e.Kerberos}); err != nil {
		return nil, err
	}
	l := sink.Lease{What: "staging folder", Where: st, File: LeasePath(st, t)}
	if e.Count > 1 && t.Phase == PhaseAll {
		l.Hint = "every shard of a job needs its own --staging folder"
	}
	out := []sink.Lease{l}
	if t.Phase != PhaseAll {
		if d := e.Job.Sink.SpillDir; d != "" && d != job.SpillStaging && e.Logf != nil {
			e.Logf("sink.spill_dir %s is for a run in one process: a %s task keeps its runs in the staging folder, which the merge parts read", d, t)
		}
	}
	if d := spillDir(e); d != "" {
		// Two jobs given one spill_dir would remove each other's runs
		// as strays.
		out = append(out, sink.Lease{What: "spill folder", Where: d, File: path.Join(d, LeaseName)})
	}
	return out, nil
}

// build builds the sink for a run: against the live table, or offline
// from split keys (the job's, or planned from a sample of the source).
func build(ctx context.Context, e sink.Env) (sink.Sink, error) {
	j := e.Job
	o := Options{
		Staging: j.StagingPath(), Table: j.Target.Table, NoLoad: j.Sink.NoLoad, LoadCommand: e.LoadCommand,
		Memory: e.Budget.Sink, MergeMemory: e.Budget.Merge(), Workers: e.Workers, MaxStagingBytes: j.Sink.MaxStagingBytes,
		Task: spillTask(e), Splits: len(e.Splits), NoDirect: j.Sink.NoDirect, JobRecord: e.JobRecord,
		Kerberos: e.Kerberos, OneToOne: e.OneToOne,
	}
	// A spill task commits exactly its splits; one process checks that
	// each has its record before it merges.
	o.SplitIDs = make([]string, 0, len(e.Splits)) // a shard may have none
	for _, s := range e.Splits {
		o.SourceBytes += s.Bytes // what a full staging folder's estimate scales to
		o.SplitIDs = append(o.SplitIDs, s.ID)
	}
	o.LocalRuns = spillDir(e)
	o.Fence = e.Fence // every record under the run's leases
	if e.Stamp != nil {
		o.Lease = e.Stamp(LeasePath(o.Staging, o.Task))
	}
	if e.Superseded != nil {
		o.Superseded = e.Superseded(LeasePath(o.Staging, o.Task))
	}
	o.Holder = e.Holder
	if j.Sink.Offline {
		keys := j.Target.Create.SplitKeys
		from := "target.create.split_keys"
		if len(keys) == 0 {
			var err error
			if keys, err = e.PlanSplitKeys(ctx); err != nil {
				return nil, err
			}
			from = "the plan's split keys"
		}
		o.SplitKeys = keys
		if e.Logf != nil {
			e.Logf("hfiles sink offline: %d target regions from %s; the staged files are not loaded", len(keys)+1, from)
		}
	} else {
		c, err := e.Connect(ctx, ", or --offline")
		if err != nil {
			return nil, err
		}
		if err := e.ReadyTarget(ctx, c); err != nil {
			return nil, err
		}
		o.Client = c
		if e.WarnStaging != nil {
			e.WarnStaging(o.Staging) // (an offline run names no cluster to compare with)
		}
	}
	// Not `return New(ctx, o)`: a nil *Sink in the sink.Sink interface is
	// not a nil interface, and the run would close it.
	s, err := New(ctx, o)
	if err != nil {
		return nil, err
	}
	return s, nil
}
