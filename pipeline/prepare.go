package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/source"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/vfs"
)

// ErrInvalid marks a job or options that cannot run as given (a shard
// outside its count, an unknown sink, a control address that is not
// loopback): the caller's to fix, not the data's.
var ErrInvalid = errors.New("pipeline: invalid job or options")

// Prepare assembles one run of a job, in the order that touches nothing
// before it must: the defaults settled (workers, memory and its one
// division, job.NewBudget), the run's state leased (lease.go), the
// source snapshot opened once, its splits
// cut, clipped to Only, ordered largest first and dealt to the Shard, the
// checkpoint checked against Resume and Fresh, then the sink built from
// the job's sink section (unless Options.Sink gives one): for puts and
// staged HFiles the cluster is found with hbase.Locate and the target
// table checked or created, pre-split from a sample of the snapshot when
// the job gives no split keys. Nothing is written to the target before
// Start. An error leaves nothing open.
func Prepare(ctx context.Context, j *job.Job, o Options) (_ *Run, err error) {
	if j == nil {
		return nil, fmt.Errorf("%w: no job", ErrInvalid)
	}
	r := &Run{j: j, prepared: time.Now()}
	defer func() {
		if err != nil {
			if r.sink == nil && o.Sink != nil {
				r.sink = o.Sink // the run owns a given sink, also when it fails
			}
			r.close()
		}
	}()
	o.Kerberos = Identity(j, o.Kerberos)
	if err := r.settle(o); err != nil {
		return nil, err
	}
	if err := r.takeLeases(); err != nil {
		return nil, err
	}
	if err := r.openSource(ctx); err != nil {
		return nil, err
	}
	if err := r.chooseWork(); err != nil {
		return nil, err
	}
	if err := r.findJob(); err != nil {
		return nil, err
	}
	if err := r.checkCheckpoint(); err != nil {
		return nil, err
	}
	if err := r.checkOutputs(); err != nil {
		return nil, err
	}
	if r.sink = o.Sink; r.sink == nil {
		if r.sink, err = r.buildSink(ctx); err != nil {
			return nil, err
		}
	}
	// Published once the sink is ready (the cluster found, the target
	// checked), so that a first attempt that fails there (a cluster out
	// of reach, a table name mistyped) leaves no record to hold the
	// mended job to; still before any cell is read.
	if err := r.publishJob(); err != nil {
		return nil, err
	}
	if err := r.serveControl(ctx); err != nil {
		return nil, err
	}
	r.warnings0()
	return r, nil
}

// settle fills the options from the job file, then the defaults.
func (r *Run) settle(o Options) error {
	j := r.j
	if o.Workers <= 0 {
		o.Workers = j.Run.WorkersOrDefault()
	}
	if o.SplitBytes == 0 {
		o.SplitBytes = j.Run.SplitBytes // 0 still: chooseWork takes the snapshot's default
	}
	if o.Shard.Count > 1 && (o.Shard.Index < 0 || o.Shard.Index >= o.Shard.Count) {
		return fmt.Errorf("%w: shard %s: the index must be in [0, %d)", ErrInvalid, o.Shard, o.Shard.Count)
	}
	if err := checkPhase(j, o); err != nil {
		return err
	}
	r.ckptGiven = o.Checkpoint != ""
	r.reachedBase = reachedBase(j, o.Checkpoint)
	if err := r.resolveSinceLast(&o); err != nil {
		return err
	}
	if o.Checkpoint == "" {
		o.Checkpoint = checkpointPath(j, o.Shard, o.Only)
	}
	// A catch-up keeps its own checkpoint beside the given or the job's
	// one, which holds the whole run's and must not be refused or
	// replaced by it.
	o.Checkpoint = sinceSuffix(o.Checkpoint, o.Since)
	if o.AssumeAt && o.Since == "" {
		return fmt.Errorf("%w: --assume-at needs the snapshot the catch-up starts from", ErrInvalid)
	}
	r.stageCatchup(&o)
	if o.Memory <= 0 {
		o.Memory = j.Run.MemoryOrDefault()
	}
	if o.HeavyHitters <= 0 {
		o.HeavyHitters = j.Run.HeavyHitters
	}
	if o.HeavyHitters <= 0 {
		o.HeavyHitters = job.DefaultHeavyHitters
	}
	if o.SampleEntities <= 0 {
		o.SampleEntities = j.Run.SampleEntities
	}
	if o.SampleEntities <= 0 {
		o.SampleEntities = job.DefaultSampleEntities
	}
	if o.SetTimestamp == 0 {
		o.SetTimestamp = j.Run.SetTimestamp
	}
	if o.Limits.CellsPerSec == 0 {
		o.Limits.CellsPerSec = j.Run.MaxCellsPerSec
	}
	if o.Limits.ReadBytesPerSec == 0 {
		o.Limits.ReadBytesPerSec = j.Run.MaxReadMBPerSec * 1e6
	}
	if o.Control == nil {
		o.Control = NewControl(o.Limits)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.NewMapper == nil {
		p := j.Program
		o.NewMapper = func() transform.Mapper { return p.New() }
	} else {
		o.ownMapper = true
	}
	r.o, r.ctl, r.now, r.logf = o, o.Control, o.Now, o.Logf
	r.budget = job.NewBudget(o.Memory, o.Workers)
	if p := j.Program; p != nil && o.SetTimestamp == 0 {
		r.collide = p.MayCollide()
	} else {
		r.collide = true
	}
	r.maxTrack = r.budget.CollisionEntriesPerWorker()
	return nil
}

// checkpointPath is where a run keeps its checkpoint when the options name
// none: the job's, or beside it for a shard or a redo of some ranges.
func checkpointPath(j *job.Job, sh Shard, only []KeyRange) string {
	p := j.CheckpointPath()
	if sh.Count > 1 {
		// One checkpoint per shard, side by side.
		p = strings.TrimSuffix(p, ".json") + fmt.Sprintf(".shard-%d-of-%d.json", sh.Index, sh.Count)
	}
	if len(only) > 0 {
		// A redo of some ranges keeps its own checkpoint, named after the
		// ranges, beside the whole run's, which it must not touch.
		p = strings.TrimSuffix(p, ".json") + ".only-" + onlyID(only) + ".json"
	}
	return p
}

// openSource opens the run's source, the job's snapshot, through a
// metered file system (bytes read feed the progress and the read cap)
// with the read-ahead share of the budget, once for the whole run. It is
// the one place the run knows what its source is: everything after reads
// it as a source.Source.
func (r *Run) openSource(ctx context.Context) error {
	j, o := r.j, r.o
	fsys, root := o.Open.FS, j.Source.Root
	if fsys == nil {
		// A NameNode that does not answer yet is waited for as long as
		// the target cluster is (target.timeout, --timeout), then it is
		// ErrNameNodeUnavailable: exit 4, a retry for a scheduler.
		loc, err := vfs.OpenWith(root, vfs.Options{Kerberos: o.Kerberos, Logf: r.logf, Wait: j.Target.Timeout})
		if err != nil {
			return fmt.Errorf("source root: %w", err)
		}
		fsys, root = loc.FS, loc.Path
		r.closers = append(r.closers, loc.Close)
	}
	r.mfs = &meteredFS{FS: fsys, read: &r.bytesRead, lim: r.ctl.read, ctx: ctx}
	ra := o.Open.ReadAhead
	if ra.Budget == nil {
		ra.Budget = vfs.NewBudget(r.budget.ReadAhead)
	}
	if o.Since != "" {
		if err := r.checkCatchupSink(); err != nil {
			return err
		}
		return r.openCatchup(ctx, root, snapshot.OpenOptions{FS: r.mfs, MaxOpenFiles: o.Open.MaxOpenFiles, ReadAhead: ra})
	}
	src, err := source.OpenSnapshot(ctx, root, j.Source.Name, snapshot.OpenOptions{FS: r.mfs, MaxOpenFiles: o.Open.MaxOpenFiles, ReadAhead: ra})
	if err != nil {
		return fmt.Errorf("source snapshot: %w", err)
	}
	r.src = src
	r.scan = scanOptions(j, src.Describe().Created)
	return r.settleTTLTime(src.Describe().Created)
}

// chooseWork settles the split size, cuts the splits, clips them to Only,
// orders them largest first and keeps this shard's.
func (r *Run) chooseWork() error {
	switch {
	case r.o.SplitBytes == 0:
		// Settled before the checkpoint's fingerprint is taken, from the
		// source and the sink alone, so a resume and every shard cut
		// alike.
		r.defaultCut = true
		floor := int64(snapshot.MinDefaultSplitBytes)
		if kind, ok := r.kindOf(r.sinkName()); ok && kind.SplitFloor != nil {
			floor = kind.SplitFloor(r.src.Bytes(), floor)
		}
		r.o.SplitBytes = r.choices().splitBytes(r.src, floor)
	case r.o.SplitBytes < 0:
		r.o.SplitBytes = 0 // off: one split per region
	}
	r.inRow = r.o.SplitBytes > 0 && r.cellLevel()
	r.greedyCut = r.inRow && r.choices().greedyInRow
	r.cut0.size, r.cut0.inRow, r.cut0.greedy, r.cut0.defaultCut = r.o.SplitBytes, r.inRow, r.greedyCut, r.defaultCut
	return r.cutWork()
}

// buildChoices are the choices a build makes where the job makes none:
// the default split size and the in-row cut rule. Another build may make
// others, which is why the job record holds the ones a job was started
// with; the schedule test plays such builds (Options.build).
type buildChoices struct {
	splitBytes  func(src source.Source, floor int64) int64
	greedyInRow bool
}

// thisBuild are this build's choices.
var thisBuild = buildChoices{splitBytes: source.Source.DefaultSplitBytes}

// choices are the build choices the run makes.
func (r *Run) choices() buildChoices {
	if b := r.o.build; b != nil {
		return *b
	}
	return thisBuild
}

// cutWork cuts the splits by the settled size, r.inRow and r.greedyCut,
// clips them to Only, orders them largest first and keeps this shard's.
func (r *Run) cutWork() error {
	splits, err := r.src.Splits(source.CutOptions{TargetBytes: r.o.SplitBytes, InRow: r.inRow, GreedyInRow: r.greedyCut})
	if err != nil {
		return err
	}
	items := clip(splits, r.o.Only)
	sort.SliceStable(items, func(a, b int) bool {
		if items[a].bytes != items[b].bytes {
			return items[a].bytes > items[b].bytes
		}
		return items[a].id < items[b].id
	})
	r.all = items
	if r.o.Shard.Count > 1 {
		items = shardOf(items, r.o.Shard)
	}
	r.items = items
	return nil
}

// keepEarlierCut looks for the cut an earlier build made where its
// checkpoint's fingerprint (prevFP) is not this run's: in-row pieces by
// the greedy rule, whole-row pieces, or, when the job sets no split size,
// the default size the puts sink took before its floor was lowered for
// small tables. A resume after an upgrade then goes on with the
// checkpoint's own splits (their IDs name their key ranges only under the
// rule that cut them) instead of being refused. fpOf gives the
// fingerprint of a size and rule; the one that matched is returned, with
// the run's splits cut again by it, or "" when none did (the caller
// refuses the checkpoint).
func (r *Run) keepEarlierCut(prevFP string, fpOf func(int64, cutRule) string) (string, error) {
	sizes := []int64{r.o.SplitBytes}
	if r.defaultCut {
		if old := r.src.DefaultSplitBytes(snapshot.MinDefaultSplitBytes); old != r.o.SplitBytes {
			sizes = append(sizes, old)
		}
	}
	for _, size := range sizes {
		rules := []cutRule{cutRows}
		if size > 0 && r.cellLevel() {
			rules = []cutRule{cutInRowEven, cutInRowGreedy, cutRows}
		}
		for _, rule := range rules {
			fp := fpOf(size, rule)
			if fp != prevFP {
				continue
			}
			r.logf("the checkpoint %s was cut by an earlier rule (split size %d, %s); this run keeps its splits", r.o.Checkpoint, size, rule)
			r.o.SplitBytes, r.inRow, r.greedyCut = size, rule != cutRows, rule == cutInRowGreedy
			return fp, r.cutWork()
		}
	}
	return "", nil
}

// cutRule is the rule the run's splits are cut by, for its fingerprint.
func (r *Run) cutRule() cutRule {
	switch {
	case !r.inRow:
		return cutRows
	case r.greedyCut:
		return cutInRowGreedy
	default:
		return cutInRowEven
	}
}

// cellLevel reports whether the run's work holds nothing across the
// cells of a row, so that a heavy region may be cut inside a huge row (at
// a column; snapshot.SplitOptions.InRow): not for a row-level transform
// (a transform.Flusher needs whole rows), and not when two old cells of
// different columns may become one new cell (the job's layouts drop a
// field or merge families, or the run has no Program to ask), since the
// collision check looks within one split and would miss such a pair cut
// apart. The versions of one column never part, so --set-timestamp alone
// does not prevent it.
func (r *Run) cellLevel() bool {
	if _, ok := r.o.NewMapper().(transform.Flusher); ok {
		return false
	}
	p := r.j.Program
	return p != nil && !p.MayCollide()
}

// sinkName is the name of the sink the run writes through, before it is
// built: the checkpoint's fingerprint holds it.
func (r *Run) sinkName() (string, error) {
	if r.o.Sink != nil {
		return r.o.Sink.Name(), nil
	}
	k := r.j.Sink.Kind
	if k == "" {
		k = job.SinkPuts
	}
	if _, ok := sink.Lookup(k); !ok {
		return "", fmt.Errorf("%w: sink %q is not available in this build (it has %s)", ErrInvalid, k, sink.KindList())
	}
	return string(k), nil
}

// sinkKind is how the job's sink is built (sink.Register).
func (r *Run) sinkKind() (sink.Kind, error) {
	name, err := r.sinkName()
	if err != nil {
		return sink.Kind{}, err
	}
	kind, _ := sink.Lookup(job.SinkKind(name))
	return kind, nil
}

// kindOf is the registered kind of the sink named name (a job's sink
// kind, or a given sink's Name), and false when no kind has that name (a
// caller's own sink) or err is not nil. The run asks it what the sink
// does instead of naming sinks.
func (r *Run) kindOf(name string, err error) (sink.Kind, bool) {
	if err != nil {
		return sink.Kind{}, false
	}
	return sink.Lookup(job.SinkKind(name))
}

// checkCheckpoint loads an existing checkpoint and holds it to Resume,
// Fresh and the job's fingerprint, before anything is written.
func (r *Run) checkCheckpoint() error {
	j, o := r.j, r.o
	name, err := r.sinkName()
	if err != nil {
		return err
	}
	ck, err := state.OpenCheckpoint(o.Checkpoint, vfs.Options{Kerberos: o.Kerberos})
	if err != nil {
		return err
	}
	r.ckpt = ck
	r.closers = append(r.closers, ck.Close)
	// Stamped with the run's lease on it; the records of an attempt that
	// lost that lease, landed late, are left out when it is loaded.
	lp := checkpointLeasePath(o.Checkpoint)
	ck.SetLease(r.leases.Stamp(lp), r.leases.Superseded(lp))
	if n := ck.SweepTemps(); n > 0 {
		r.logf("removed %d temporary files an earlier run left beside the checkpoint %s", n, o.Checkpoint)
	}
	loc := ck.Location()
	wfs, ok := loc.FS.(vfs.WriteFS)
	if !ok {
		return fmt.Errorf("checkpoint %s: file system is read-only", o.Checkpoint)
	}
	r.rejects = &rejectDir{fs: wfs, dir: path.Join(path.Dir(loc.Path), "rejects"), kerberos: o.Kerberos}

	fpScan := r.fpScan()
	if o.Phase != hfiles.PhaseAll {
		// A spill task's checkpoint is not a one-process shard's: their
		// runs live in different folders.
		name += "/" + string(o.Phase)
	}
	fp := fingerprint(j, r.src.Describe(), fpScan, o.SplitBytes, r.cutRule(), o.SetTimestamp, name, o.Only, o.Shard)
	var prev *state.LoadedCheckpoint
	if o.Fresh {
		// Not read: --fresh is also the way out of a damaged checkpoint.
		if ok, _ := vfs.Exists(loc.FS, loc.Path); ok {
			r.logf("discarding the checkpoint %s (--fresh)", o.Checkpoint)
		}
	} else if prev, err = ck.Load(); err != nil {
		return err
	}
	if prev != nil && prev.Fingerprint != fp && !r.recordKept {
		// (With a job record the cut is the record's: a checkpoint cut
		// otherwise is of another job.)
		matched, err := r.keepEarlierCut(prev.Fingerprint, func(splitBytes int64, cut cutRule) string {
			return fingerprint(j, r.src.Describe(), fpScan, splitBytes, cut, o.SetTimestamp, name, o.Only, o.Shard)
		})
		if err != nil {
			return err
		}
		if matched != "" {
			fp, o.SplitBytes = matched, r.o.SplitBytes
		}
	}
	switch {
	case prev == nil:
	case !o.Resume:
		return fmt.Errorf("%w: %s", ErrCheckpointExists, o.Checkpoint)
	case prev.Fingerprint != fp:
		return fmt.Errorf("%w: %s was written by a run of %s on snapshot %s with other layouts, scan options, split size or sink (fingerprint %s, this run %s); use another --checkpoint or --fresh", ErrCheckpointMismatch, o.Checkpoint, prev.Job, prev.Snapshot, prev.Fingerprint, fp)
	}
	// The sketch's seed leaves the shard and --only out, so the sketches of
	// a job's shards sample the same hashes and merge exactly.
	seedFP := fingerprint(j, r.src.Describe(), fpScan, o.SplitBytes, r.cutRule(), o.SetTimestamp, name, nil, Shard{})
	return r.adoptCheckpoint(prev, fp, seedFP)
}

// fpScan is the run's scan as fingerprints and the job record hold it:
// without "now" unless the job fixes the TTL time, since "now" differs
// between a run and its resume.
func (r *Run) fpScan() source.ScanOptions {
	s := r.scan
	if !r.j.Source.Scan.TTLAtSnapshot && r.j.Source.Scan.TTLAt.IsZero() {
		s.Now = time.Time{}
	}
	return s
}

// buildSink builds the sink the job's sink section describes, through
// the builder its package registered, and readies its target.
func (r *Run) buildSink(ctx context.Context) (sink.Sink, error) {
	kind, err := r.sinkKind()
	if err != nil {
		return nil, err
	}
	e := r.sinkEnv()
	e.Splits = make([]sink.SplitInfo, 0, len(r.items)) // a shard may have none
	for _, w := range r.items {
		e.Splits = append(e.Splits, sink.SplitInfo{ID: w.id, Bytes: w.bytes})
	}
	if r.job != nil {
		e.JobRecord = r.job.Digest()
	}
	if r.src != nil {
		e.Families = sinkFamilies(r.j, r.src.Table())
	}
	s, err := kind.Build(ctx, e)
	if errors.Is(err, sink.ErrTarget) {
		// The job's mistake (exit 2), found before any write.
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err != nil {
		return nil, err
	}
	if err := r.checkLost(s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// sinkEnv is what the run gives a sink's builder (sink.Env); buildSink
// adds the splits, the job record and the source's families once they
// are known (the leases are taken before the source is open).
func (r *Run) sinkEnv() sink.Env {
	return sink.Env{
		Job: r.j, Workers: r.o.Workers, Budget: r.budget,
		Phase: string(r.o.Phase), Index: r.o.Shard.Index, Count: r.o.Shard.Count,
		Checkpoint: r.o.Checkpoint, Since: r.o.Since, LoadCommand: r.o.LoadCommand, Logf: r.logf,
		Connect: r.connect, ReadyTarget: r.readyTarget, PlanSplitKeys: r.planSplitKeys, WarnStaging: r.warnStaging,
		Fence: r.leases.Check, Stamp: r.leases.Stamp, Holder: state.LeaseHolder, Superseded: r.leases.Superseded,
		Kerberos: r.o.Kerberos, OneToOne: !r.collide && !r.o.ownMapper,
		Warn: r.warn,
	}
}

// checkLost refuses to go on when the sink dropped the output of a split
// this run's checkpoint counts done (the hfiles sink: its runs are not in
// the local spill folder, another machine's, or removed): the run would
// skip the split and the sink miss its cells. A dropped split the
// checkpoint does not count done is simply redone.
func (r *Run) checkLost(s sink.Sink) error {
	f, ok := s.(sink.Forgetful)
	if !ok {
		return nil
	}
	var done []sink.Lost
	for _, l := range f.Lost() {
		if l.Superseded {
			// Staged by an attempt that lost the lease: redone, whatever
			// the checkpoint says (the next compaction records it so).
			delete(r.state.Splits, l.ID)
			r.logf("split %s is redone: %s", l.ID, l.Why)
			continue
		}
		if st := r.state.Splits[l.ID]; st != nil && st.Done {
			done = append(done, l)
		} else {
			r.logf("split %s is redone: %s", l.ID, l.Why)
		}
	}
	if len(done) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s records %d splits done whose output the %s sink did not find in %s (split %s: %s); resume on the machine that wrote them, or start over with --fresh", ErrCheckpointDamaged, r.o.Checkpoint, len(done), s.Name(), done[0].Where, done[0].ID, done[0].Why)
}

// connect opens a client to the target cluster, found the one way every
// subcommand finds it (hbase.Locate); the run closes it. hint ends the
// message when no cluster is named.
func (r *Run) connect(ctx context.Context, hint string) (*hbase.Client, error) {
	c, where, err := sink.ConnectTarget(r.j, r.o.Kerberos, hint, r.logf)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, c.Close)
	r.cluster = where
	return c, nil
}

// readyTarget checks the target table, or creates it when the job says
// target.create, pre-split at the job's split keys or at keys planned from
// a sample of the snapshot.
func (r *Run) readyTarget(ctx context.Context, c *hbase.Client) error {
	j := r.j
	if r.catchup != nil {
		// A catch-up writes the difference into the target a run brought
		// to the snapshot it starts from: a missing target is not there.
		exists, err := c.TableExists(ctx, j.Target.Table)
		if err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("%w: the target table %s does not exist; a catch-up does not create it (run the job whole)", ErrNotAt, j.Target.Table)
		}
		_, err = prepareTarget(ctx, c, j, r.src.Table(), nil)
		return err
	}
	keys := j.Target.Create.SplitKeys
	if j.Target.Create.Enabled && len(keys) == 0 {
		exists, err := c.TableExists(ctx, j.Target.Table)
		if err != nil {
			return err
		}
		if !exists {
			if keys, err = r.planSplitKeys(ctx); err != nil {
				return err
			}
		}
	}
	created, err := prepareTarget(ctx, c, j, r.src.Table(), keys)
	if err != nil {
		return err
	}
	if created {
		r.logf("created table %s with %d regions", j.Target.Table, len(keys)+1)
	}
	return nil
}

// planSplitKeys samples the run's source and returns the plan's split
// keys for target.create.regions regions (default: as many as the source
// has). The sample's reads are not the run's: Start counts bytes afresh.
func (r *Run) planSplitKeys(ctx context.Context) ([][]byte, error) {
	keys, err := planSplitKeys(ctx, r.j, r.src)
	if err != nil {
		return nil, fmt.Errorf("planning split keys: %w", err)
	}
	return keys, nil
}

// warnings0 says, before the first cell, what the job's own choices cost.
func (r *Run) warnings0() {
	j := r.j
	if ts := r.o.SetTimestamp; ts != 0 {
		r.warn("every cell's timestamp is replaced by %d (set_timestamp): a rerun or resume adds versions instead of rewriting the same ones, and newer values the application wrote may be hidden", ts)
	}
	if !r.collide {
		return
	}
	if p := j.Program; p != nil {
		if d := p.DroppedFields(); len(d) > 0 {
			r.warn("the new key drops %s: old cells that differ only there become one new cell; collisions are counted within each split (across splits only the hfiles sink can see them)", strings.Join(d, ", "))
		}
		if m := p.MergedFamilies(); len(m) > 0 {
			r.warn("several old families become %s: cells with the same key in them collide", strings.Join(m, ", "))
		}
	}
}
