package pipeline

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// The job record (package state) holds the tasks of one job to one cut.
// A run that is a task of a job (every run but a redo of some key ranges,
// --only) finds the record before it reads a cell: when there is one it
// takes the record's split size and cut rule, checks that it cuts the
// same splits, and reads the splits the record deals to its shard; when
// there is none it publishes its own, after its checkpoint is checked (a
// resume may keep an earlier build's cut, which the record then holds).
// A spill task's record is the staging folder's job.json, which the merge
// and the load prove coverage against; any other run's lies beside the
// job's checkpoint, and each shard commits its splits there once they are
// durable, the last one proving coverage.

// ErrJobMismatch is matched by the error of a task whose job differs
// from the job record in its state folder (state.ErrMismatch): another
// snapshot, layout, scan, sink, shard count or an explicit split size.
var ErrJobMismatch = state.ErrMismatch

// ErrCoverage is matched by the error of a job whose committed splits are
// not the job record's, each exactly once (state.ErrCoverage).
var ErrCoverage = state.ErrCoverage

// jobState is where a run's job record and its shards' commits live.
type jobState struct {
	loc *vfs.Location
	fs  vfs.WriteFS
	// file is the record; commits the folder of the shards' commits
	// (unused for a spill task, whose commits are the stage's).
	file, commits string
}

// jobStatePath is the URL of the run's job record, "" for a run that is
// no task of a job's cut (a redo of some key ranges).
func (r *Run) jobStatePath() string {
	if len(r.o.Only) > 0 {
		return ""
	}
	if r.o.Phase == hfiles.PhaseSpill {
		return strings.TrimSuffix(r.j.StagingPath(), "/") + "/" + hfiles.JobRecordFile
	}
	base := r.o.Checkpoint
	if !r.ckptGiven {
		// Beside the job's checkpoint, which every shard's sits beside.
		base = sinceSuffix(checkpointPath(r.j, Shard{}, nil), r.o.Since)
	}
	return state.RecordBeside(base)
}

// openJobState opens the run's job state; nil when the run has none.
func (r *Run) openJobState() (*jobState, error) {
	where := r.jobStatePath()
	if where == "" {
		return nil, nil
	}
	loc, err := vfs.OpenWith(where, vfs.Options{Kerberos: r.o.Kerberos})
	if err != nil {
		return nil, fmt.Errorf("job record: %w", err)
	}
	r.closers = append(r.closers, loc.Close)
	wfs, ok := loc.FS.(vfs.WriteFS)
	if !ok {
		return nil, fmt.Errorf("job record %s: file system is read-only", where)
	}
	if err := wfs.MkdirAll(path.Dir(loc.Path)); err != nil {
		return nil, fmt.Errorf("job record %s: %w", where, err)
	}
	return &jobState{loc: loc, fs: wfs, file: loc.Path, commits: state.CommitsBeside(loc.Path)}, nil
}

// identity is the run's job identity for the record: what decides which
// cells it writes where, apart from the cut and the shard (fingerprint's
// parts, each named so a refusal can say which differs).
func (r *Run) identity(sinkName string) []state.Field {
	j := r.j
	scan := r.fpScan()
	tr := scan.TimeRange
	scan.TimeRange.Min, scan.TimeRange.Max = 0, 0
	scanJSON, _ := json.Marshal(scan)
	bound := func(ms int64) string {
		if ms == 0 {
			return "none"
		}
		return fmt.Sprintf("%d (%s)", ms, time.UnixMilli(ms).UTC().Format(time.RFC3339))
	}
	var out []state.Field
	for _, f := range r.src.Describe().Fields() {
		out = append(out, state.Field{Name: f.Name, Value: f.Value})
	}
	// What the job writes under which keys, as its staging folder records
	// it too (job.OutputIdentity); the source names itself above.
	for _, f := range j.OutputIdentity() {
		if f.Name != "source snapshot" {
			out = append(out, state.Field{Name: f.Name, Value: f.Value})
		}
	}
	return append(out, []state.Field{
		{Name: "time range", Value: "from " + bound(tr.Min) + " to " + bound(tr.Max)},
		{Name: "scan options", Value: string(scanJSON)},
		{Name: "set_timestamp", Value: fmt.Sprint(r.o.SetTimestamp)},
		{Name: "sink", Value: sinkName},
	}...)
}

// recordSplits lists every split of the run's cut (all shards'), in the
// order they are dealt, with the shard each is dealt to.
func (r *Run) recordSplits() []state.Split {
	shards := max(1, r.o.Shard.Count)
	out := make([]state.Split, 0, len(r.all))
	dealt := map[string]int{}
	for i := range shards {
		for _, w := range shardOf(r.all, Shard{Index: i, Count: shards}) {
			dealt[w.id] = i
		}
	}
	for _, w := range r.all {
		sp := w.split
		s := state.Split{ID: w.id, Region: sp.Region, StartRow: sp.StartRow, StopRow: sp.EndRow, Bytes: w.bytes, Shard: dealt[w.id]}
		if c := sp.StartColumn; c != nil {
			s.StartColumn = &state.Column{Family: c.Family, Qualifier: c.Qualifier}
		}
		if c := sp.EndColumn; c != nil {
			s.EndColumn = &state.Column{Family: c.Family, Qualifier: c.Qualifier}
		}
		out = append(out, s)
	}
	return out
}

// findJob reads the job record, if any, and makes the run a task of it
// (matchJob). With Fresh, a record of another job, or of another cut, is
// removed, with its shards' commits: the task starts the job over.
func (r *Run) findJob() error {
	js, err := r.openJobState()
	if err != nil || js == nil {
		return err
	}
	r.jobs = js
	rec, found, err := state.ReadJob(js.fs, js.file)
	if err != nil {
		if !r.o.Fresh {
			return fmt.Errorf("%w (--fresh on every task starts the job over)", err)
		}
		r.logf("discarding the job record %s (--fresh): %v", js.loc.URL, err)
		return r.discardJob()
	}
	if !found {
		return nil
	}
	if r.o.Fresh && r.o.Phase != hfiles.PhaseSpill {
		// This shard starts over: its earlier commit no longer stands
		// for its splits (a spill shard's commit is the stage's, which
		// its attempt rewrites).
		if err := state.RemoveShard(js.fs, js.commits, max(0, r.o.Shard.Index), max(1, r.o.Shard.Count)); err != nil {
			return err
		}
	}
	if err := r.matchJob(rec); err != nil {
		if !r.o.Fresh {
			return err
		}
		r.logf("discarding the job record %s (--fresh): %v", js.loc.URL, err)
		if err := r.discardJob(); err != nil {
			return err
		}
		// Back to this build's own cut.
		r.o.SplitBytes, r.inRow, r.greedyCut, r.defaultCut = r.cut0.size, r.cut0.inRow, r.cut0.greedy, r.cut0.defaultCut
		return r.cutWork()
	}
	return r.ttlRecordErr
}

// discardJob removes the job record and the shards' commits.
func (r *Run) discardJob() error {
	js := r.jobs
	if err := state.RemoveJob(js.fs, js.file); err != nil {
		return err
	}
	if err := js.fs.RemoveAll(js.commits); err != nil {
		return fmt.Errorf("job record: remove %s: %w", js.commits, err)
	}
	return nil
}

// matchJob holds the run to the record: the same identity and shard
// count, the record's split size (an explicit other size is refused; a
// default that changed between builds is not, the record's is taken) and
// cut rule, then the same splits, of which the run keeps those the
// record deals to its shard.
func (r *Run) matchJob(rec *state.Job) error {
	name, err := r.sinkName()
	if err != nil {
		return err
	}
	way := "run this task with the job's options, or start the whole job over with --fresh on every task"
	if err := rec.CheckIdentity(r.identity(name)); err != nil {
		return fmt.Errorf("%w; %s", err, way)
	}
	if shards := max(1, r.o.Shard.Count); rec.Shards != shards {
		return fmt.Errorf("%w: the job record (%s) deals the splits to %d shards, this task is shard %d/%d; %s", ErrJobMismatch, r.jobs.loc.URL, rec.Shards, r.o.Shard.Index, shards, way)
	}
	rule, ok := cutRuleNamed(rec.CutRule)
	if !ok {
		return fmt.Errorf("%w: the job record (%s) cuts %q, a rule this build does not know; finish the job with the build that published it (%s)", ErrJobMismatch, r.jobs.loc.URL, rec.CutRule, rec.Build)
	}
	if rec.SplitBytes != r.o.SplitBytes && !r.defaultCut {
		return fmt.Errorf("%w: split size: the job record (%s) cuts at %d bytes, this task at %d (--split-bytes or run.split_bytes); every task of a job must cut alike: %s", ErrJobMismatch, r.jobs.loc.URL, rec.SplitBytes, r.o.SplitBytes, way)
	}
	if rec.SplitBytes != r.o.SplitBytes || rule != r.cutRule() {
		r.logf("the job record %s cuts at split size %d, %s; this task takes its cut (this build would cut at %d, %s)", r.jobs.loc.URL, rec.SplitBytes, rule, r.o.SplitBytes, r.cutRule())
		r.o.SplitBytes, r.inRow, r.greedyCut = rec.SplitBytes, rule != cutRows, rule == cutInRowGreedy
		if err := r.cutWork(); err != nil {
			return err
		}
	}
	if diff := rec.SameCut(r.recordSplits()); diff != "" {
		return fmt.Errorf("%w: this build cuts the snapshot otherwise than the build that published the job record %s (%s) with the same size and rule: %s; finish the job with that build, or start it over with --fresh on every task", ErrJobMismatch, r.jobs.loc.URL, rec.Build, diff)
	}
	byID := map[string]work{}
	for _, w := range r.all {
		byID[w.id] = w
	}
	var mine []work
	for _, id := range rec.ShardSplits(max(0, r.o.Shard.Index)) {
		mine = append(mine, byID[id])
	}
	r.items, r.job, r.recordKept = mine, rec, true
	return nil
}

// cutRuleNamed is the cut rule a record names.
func cutRuleNamed(s string) (cutRule, bool) {
	for _, c := range []cutRule{cutRows, cutInRowGreedy, cutInRowEven} {
		if c.String() == s {
			return c, true
		}
	}
	return 0, false
}

// publishJob publishes the run's job record when none was found, after
// the checkpoint settled the cut. Of two first tasks the loser takes the
// winner's record, which must then match the cut it already settled.
func (r *Run) publishJob() error {
	if r.jobs == nil || r.job != nil {
		return nil
	}
	name, err := r.sinkName()
	if err != nil {
		return err
	}
	shards := max(1, r.o.Shard.Count)
	task := fmt.Sprintf("%s shard %d/%d", name, max(0, r.o.Shard.Index), shards)
	if r.o.Phase == hfiles.PhaseSpill {
		task = fmt.Sprintf("spill shard %d/%d", max(0, r.o.Shard.Index), shards)
	}
	mine := &state.Job{
		JobFile: r.j.Path, Build: state.Build(), Task: task, Published: time.Now().UTC(),
		Identity: r.identity(name), SplitBytes: r.o.SplitBytes, DefaultSize: r.defaultCut, CutRule: r.cutRule().String(),
		Shards: shards, Splits: r.recordSplits(),
	}
	if r.ttlAtNow() {
		mine.TTLTime = r.scan.Now.UnixMilli()
	}
	rec, won, err := state.PublishJob(r.jobs.fs, r.jobs.file, mine)
	if err != nil {
		return err
	}
	if s, ok := r.sink.(sink.Recording); ok {
		s.SetJobRecord(rec.Digest())
	}
	if won {
		// Commits left by an earlier record of this folder (removed, or
		// discarded by --fresh) are no task's of this one; a damaged one
		// would stop the job for good.
		if err := r.jobs.fs.RemoveAll(r.jobs.commits); err != nil {
			return fmt.Errorf("job record: remove %s: %w", r.jobs.commits, err)
		}
		r.job = rec
		return nil
	}
	size, rule := r.o.SplitBytes, r.cutRule()
	if err := r.matchJob(rec); err != nil {
		return err
	}
	// Another task published first, while this one started: nothing is
	// read yet, so its TTL time is still this run's to take. A catch-up,
	// whose plan read B's TTLs already, runs in one process only.
	if err := r.adoptTTLTime(rec, r.src.Describe().Created); err != nil {
		return err
	}
	if r.o.SplitBytes != size || r.cutRule() != rule {
		return fmt.Errorf("%w: another task published the job record %s (%s) with another cut while this one started; run this task again", ErrJobMismatch, r.jobs.loc.URL, rec.Task)
	}
	return nil
}

// JobCoverage is what a task of a job in one process knows of the job's
// coverage when it ends.
type JobCoverage struct {
	// Record is the job record's URL.
	Record string `json:"record"`
	// Shards is the job's shard count; Committed how many have committed
	// their splits (this one included).
	Shards    int `json:"shards"`
	Committed int `json:"shards_committed"`
	// Proven says every shard committed and the commits hold every split
	// of the record exactly once.
	Proven bool `json:"proven"`
}

// commitToJob records the run's splits as the job's shard's, once all
// are durable and the sink finished, and proves the job's coverage when
// every shard has committed.
func (r *Run) commitToJob(sum *Summary) error {
	js, rec := r.jobs, r.job
	if js == nil || rec == nil || r.o.Phase == hfiles.PhaseSpill {
		return nil // a spill task's coverage is the merge's to prove
	}
	ids := make([]string, 0, len(r.items))
	for _, w := range r.items {
		ids = append(ids, w.id)
	}
	shard := max(0, r.o.Shard.Index)
	c := state.ShardCommit{Shard: shard, Count: rec.Shards, Record: rec.Digest(), Splits: ids, Committed: time.Now().UTC()}
	// Stamped with the shard's lease (its checkpoint's), so that a commit
	// landing after another attempt took the shard over is left out.
	lp := checkpointLeasePath(r.o.Checkpoint)
	if c.Lease = state.Stamped(r.leases.Stamp(lp)); c.Lease.Token != "" {
		c.LeaseFile = lp
	}
	// The fence, as for every durable write of the run's state.
	if err := r.leases.Check(); err != nil {
		return err
	}
	if err := state.CommitShard(js.fs, js.commits, c); err != nil {
		return err
	}
	commits, ignored, err := readShardCommits(js.fs, js.commits, rec, r.o.Kerberos)
	if err != nil {
		return err
	}
	for _, why := range ignored {
		r.logf("job %s: %s", js.loc.URL, why)
	}
	cov := &JobCoverage{Record: js.loc.URL, Shards: rec.Shards, Committed: len(commits)}
	sum.Coverage = cov
	if len(commits) < rec.Shards {
		r.logf("shard %d/%d committed; %d of %d shards have; the last to finish proves the job's coverage", shard, rec.Shards, len(commits), rec.Shards)
		return nil
	}
	if err := rec.Cover(state.Commits(commits)); err != nil {
		return fmt.Errorf("job %s: %w", js.loc.URL, err)
	}
	cov.Proven = true
	r.logf("job complete: %d shards committed, and their %d splits are the job record's, each exactly once", rec.Shards, len(rec.Splits))
	return nil
}

// JobStatus is what a job's record and its tasks' commits say of the job,
// for `rekey status`.
type JobStatus struct {
	// Record is the job record's URL.
	Record    string    `json:"record"`
	Published time.Time `json:"published"`
	// PublishedBy names the task (and build) that published it.
	PublishedBy string `json:"published_by"`
	Shards      int    `json:"shards"`
	Splits      int    `json:"splits"`
	SplitBytes  int64  `json:"split_bytes"`
	CutRule     string `json:"cut_rule"`
	// Committed counts the shards that committed their splits under the
	// record.
	Committed int `json:"shards_committed"`
	// Proven says every shard committed and their splits are the
	// record's, each once; Problem says why not, when all committed.
	Proven  bool   `json:"proven"`
	Problem string `json:"problem,omitempty"`
}

// ReadJobStatus reads the job's record and its shards' commits: a job in
// phases' from its staging folder (staging, or the job's), any other's
// from beside its checkpoint. It returns nil when no task of the job has
// published a record.
func ReadJobStatus(j *job.Job, staging string) (*JobStatus, error) {
	if staging == "" {
		staging = j.StagingPath()
	}
	if kind, ok := sink.Lookup(j.Sink.Kind); ok && kind.Coverage != nil {
		c, found, err := kind.Coverage(staging, vfs.Options{Kerberos: Identity(j, nil)})
		if err != nil {
			return nil, err
		}
		if found {
			return jobStatus(c.URL, c.Record, c.Committed, c.Covered), nil
		}
	}
	where := state.RecordBeside(checkpointPath(j, Shard{}, nil))
	loc, err := vfs.OpenWith(where, vfs.Options{Kerberos: Identity(j, nil)})
	if err != nil {
		return nil, fmt.Errorf("job record: %w", err)
	}
	defer loc.Close()
	rec, found, err := state.ReadJob(loc.FS, loc.Path)
	if err != nil || !found {
		return nil, err
	}
	commits, _, err := readShardCommits(loc.FS, state.CommitsBeside(loc.Path), rec, Identity(j, nil))
	if err != nil {
		return nil, err
	}
	var coverage error
	if len(commits) >= rec.Shards {
		coverage = rec.Cover(state.Commits(commits))
	}
	return jobStatus(loc.URL, rec, len(commits), coverage), nil
}

// readShardCommits reads the shards' commits under rec in dir, but those
// of attempts that lost their shard's lease (state.LeaveOutSuperseded),
// with a line for each left out. Each lease folder is opened as id.
func readShardCommits(fsys vfs.FS, dir string, rec *state.Job, id *krb.Identity) ([]state.ShardCommit, []string, error) {
	commits, err := state.ReadShardCommits(fsys, dir, rec.Digest(), rec.Shards)
	if err != nil {
		return nil, nil, err
	}
	return state.LeaveOutSuperseded(commits, func(lease string) (state.Superseded, error) {
		loc, err := vfs.OpenWith(lease, vfs.Options{Kerberos: id})
		if err != nil {
			return state.Superseded{}, err
		}
		defer loc.Close()
		return state.ReadSuperseded(loc.FS, loc.Path)
	})
}

func jobStatus(url string, rec *state.Job, committed int, coverage error) *JobStatus {
	st := &JobStatus{
		Record: url, Published: rec.Published, PublishedBy: rec.Task, Shards: rec.Shards, Splits: len(rec.Splits),
		SplitBytes: rec.SplitBytes, CutRule: rec.CutRule, Committed: committed,
	}
	if rec.Build != "" {
		st.PublishedBy += ", rekey " + rec.Build
	}
	if committed >= rec.Shards {
		st.Proven = coverage == nil
		if coverage != nil {
			st.Problem = coverage.Error()
		}
	}
	return st
}

// ttlAtNow reports whether the job measures TTLs from "now" (no
// scan.ttl_at): then the time is the job's, settled by settleTTLTime.
func (r *Run) ttlAtNow() bool {
	s := r.j.Source.Scan
	return !s.TTLAtSnapshot && s.TTLAt.IsZero()
}

// settleTTLTime fixes the time a job that measures TTLs from "now" reads
// them as of, before anything is read: the job record's, when an earlier
// task or attempt of the job published one with it, else this run's start
// (to the millisecond, as the record and HBase's TTL check keep it), which
// publishJob then records for the others. Without it every task and every
// resumed attempt read as of its own start: a cell that expired between
// two of them was written by the splits read before and left out by those
// read after, in a target whose family may not expire it.
func (r *Run) settleTTLTime(created time.Time) error {
	if !r.ttlAtNow() {
		return nil
	}
	r.scan.Now = time.UnixMilli(r.prepared.UnixMilli())
	where := r.jobStatePath()
	if where == "" || r.o.Fresh {
		return nil
	}
	loc, err := vfs.OpenWith(where, vfs.Options{Kerberos: r.o.Kerberos})
	if err != nil {
		return fmt.Errorf("job record: %w", err)
	}
	defer loc.Close()
	rec, found, err := state.ReadJob(loc.FS, loc.Path)
	if err != nil || !found {
		// A damaged record is findJob's to refuse, with its advice.
		return nil
	}
	// A time that cannot be the job's is refused by findJob once the
	// record is known to be this job's (another job's record is refused
	// for what differs, not as damaged).
	r.ttlRecordErr = r.adoptTTLTime(rec, created)
	return nil
}

// ttlSkew is how far ahead of this machine's clock a job record's TTL
// time may be: another machine's clock, not a damaged record.
const ttlSkew = time.Hour

// adoptTTLTime takes the job record's TTL time, when it has one, in place
// of this run's, with a line saying so when they differ. The time is a
// task's start, so it cannot come before the snapshot was created
// (created) nor much after now: a record that says so is damaged, and
// reading by it would expire cells that are not expired (or keep ones
// that are), so it is refused.
func (r *Run) adoptTTLTime(rec *state.Job, created time.Time) error {
	if !r.ttlAtNow() || rec.TTLTime == 0 || rec.TTLTime == r.scan.Now.UnixMilli() {
		return nil
	}
	t := time.UnixMilli(rec.TTLTime)
	if t.Before(created.Truncate(time.Millisecond)) || t.After(r.prepared.Add(ttlSkew)) {
		return fmt.Errorf("%w: the job record (%s) says its first task started at %s (ttl_time_ms %d), before the snapshot was created (%s) or after this machine's clock (%s): the record is damaged; start the job over with --fresh on every task",
			ErrJobMismatch, rec.Task, t.UTC().Format(time.RFC3339Nano), rec.TTLTime, created.UTC().Format(time.RFC3339), r.prepared.UTC().Format(time.RFC3339))
	}
	r.logf("TTLs are measured as of %s, when the job's first task started (its record %s), as every task and attempt of the job measures them", t.UTC().Format(time.RFC3339Nano), rec.Task)
	r.scan.Now = t
	return nil
}
