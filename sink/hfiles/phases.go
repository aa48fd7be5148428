package hfiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// Phase is one phase of a job run in phases over a shared staging folder.
type Phase string

// The phases. PhaseAll is the whole job in one process.
const (
	PhaseAll   Phase = ""
	PhaseSpill Phase = "spill"
	PhaseMerge Phase = "merge"
	PhaseLoad  Phase = "load"
)

// ErrNotReady is matched by the error of a phase task started before the
// phase it depends on finished: a merge part before every spill shard
// committed, the load before every merge part wrote its HFiles. Running
// it again changes nothing until the earlier phase is done, so a
// scheduler must not retry it blindly.
var ErrNotReady = errors.New("hfiles: the phase before this task's has not finished")

// ErrLoadBegan is matched by the error of a spill or merge task started in
// a staging folder whose load has begun: it would write again the runs or
// HFiles the load loads from its own state.
var ErrLoadBegan = errors.New("hfiles: the load has begun")

// refuseAfterLoad refuses a spill or merge task once the load has sent
// files (RefuseAfterLoad), here as the sink opens, in case the load began
// after the run checked before taking its leases.
func (s *Sink) refuseAfterLoad() error {
	return RefuseAfterLoad(s.fs, s.root, s.task)
}

// RefuseAfterLoad returns an ErrLoadBegan error for a spill or merge task
// of the staging folder at root once the load has sent files, nil
// otherwise. The load works from its own state, made from the merge
// parts' when it began: a merge run again replaced HFiles under it with
// others of new file ids, so a region whose load went unanswered (its
// files landed) was loaded again from the new ones, its cells twice
// (found by TestWholeSchedules, seed 1796684002966320982); a spill run
// again took its shard's lease, so the load waited for it for good. The
// run checks it before it takes any lease.
func RefuseAfterLoad(fsys vfs.FS, root string, t Task) error {
	if t.Phase != PhaseSpill && t.Phase != PhaseMerge {
		return nil
	}
	var st finishState
	found, err := readLoadState(fsys, root, &st)
	if err != nil || !found || len(st.Loaded)+len(st.Sent) == 0 {
		return err
	}
	return fmt.Errorf("%w in %s (%d regions loaded, %d sent): %s %d/%d would write again what the load loads; finish the load (rekey load), or stage the job into a fresh folder",
		ErrLoadBegan, root, len(st.Loaded), len(st.Sent), t.Phase, t.Index, t.Count)
}

// Task is one task of a job in phases: spill shard Index of Count, merge
// part Index of Count, or the load (Index and Count zero).
type Task struct {
	Phase        Phase
	Index, Count int
}

// String names the task: "spill 3/8", "merge 0/2", "load", or "one process".
func (t Task) String() string {
	switch t.Phase {
	case PhaseAll:
		return "one process"
	case PhaseLoad:
		return "load"
	}
	return fmt.Sprintf("%s %d/%d", t.Phase, t.Index, t.Count)
}

func (t Task) check() error {
	switch t.Phase {
	case PhaseAll, PhaseLoad:
		if t.Index != 0 || t.Count != 0 {
			return fmt.Errorf("hfiles: task %s takes no index", t)
		}
	case PhaseSpill, PhaseMerge:
		if t.Count < 1 || t.Index < 0 || t.Index >= t.Count {
			return fmt.Errorf("hfiles: task %s: the index must be in [0, %d)", t, t.Count)
		}
	default:
		return fmt.Errorf("hfiles: unknown phase %q", t.Phase)
	}
	return nil
}

// spills reports whether the task reads splits.
func (t Task) spills() bool { return t.Phase == PhaseAll || t.Phase == PhaseSpill }

// Dir is the task's own folder, relative to the staging folder: where its
// files and its lease live ("" for the whole job in one process).
func (t Task) Dir() string {
	switch t.Phase {
	case PhaseSpill:
		return path.Join(spillRoot, fmt.Sprintf("shard-%04d-of-%04d", t.Index, t.Count))
	case PhaseMerge:
		return path.Join(partsRoot, fmt.Sprintf("part-%04d-of-%04d", t.Index, t.Count))
	case PhaseLoad:
		return loadRoot
	}
	return ""
}

// spillDir is the folder of the task's runs/ and splits/.
func (t Task) spillDir() string {
	if t.Phase == PhaseSpill {
		return t.Dir()
	}
	return ""
}

// stateFile is the task's merge or load state.
func (t Task) stateFile() string {
	if t.Phase == PhaseAll {
		return finishFile
	}
	return path.Join(t.Dir(), stateName)
}

// spillCommit is spill/shard-IIII-of-NNNN.json: a spill shard's committed
// output, written once every split of the shard is durable. Only the runs
// its split records name are merged; a redone attempt rewrites it whole.
type spillCommit struct {
	Shard int `json:"shard"`
	Count int `json:"count"`
	// RegionMap is the digest of the region map (plan.json) the shard
	// partitioned by.
	RegionMap string `json:"plan"`
	// Record is the Digest of the job record the shard ran under (empty
	// for a shard of a build before job records).
	Record      string         `json:"record,omitempty"`
	Splits      []*splitRecord `json:"splits"`
	Cells       int64          `json:"cells"`
	Bytes       int64          `json:"bytes"`
	SourceBytes int64          `json:"source_bytes"`
	Committed   time.Time      `json:"committed"`
	// LeaseToken and LeaseGeneration are the shard's lease as its attempt
	// held it when it committed (Options.Lease; empty on a local folder).
	// HDFS has no conditional write, so a commit that passed the fence
	// can still land after another attempt took the shard over; readers
	// then know it by its token (Options.Holder).
	LeaseToken      string `json:"lease_token,omitempty"`
	LeaseGeneration int64  `json:"lease_generation,omitempty"`
}

// taskRecord is TASK/task.json: what an attempt of a task set out to do,
// written when it starts, for `rekey status`.
type taskRecord struct {
	Phase Phase `json:"phase"`
	Index int   `json:"index"`
	Count int   `json:"count"`
	// Spill: the shard's splits and their store file bytes.
	Splits      int   `json:"splits,omitempty"`
	SourceBytes int64 `json:"source_bytes,omitempty"`
	// Merge: the part's partitions and their cell bytes.
	Partitions int       `json:"partitions,omitempty"`
	Bytes      int64     `json:"bytes,omitempty"`
	Started    time.Time `json:"started"`
}

func (s *Sink) recordTask(rec taskRecord) error {
	rec.Phase, rec.Index, rec.Count, rec.Started = s.task.Phase, s.task.Index, s.task.Count, time.Now().UTC()
	dir := path.Join(s.root, s.task.Dir())
	if err := s.fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("hfiles: create %s: %w", dir, err)
	}
	return s.record(path.Join(dir, taskFile), &rec)
}

func (s *Sink) recordSpillTask() error {
	return s.recordTask(taskRecord{Splits: s.o.Splits, SourceBytes: s.o.SourceBytes})
}

// SetJobRecord names the job record (its state.Job.Digest) a spill task
// runs under, for its commit, when the record is published after the sink
// was built (Options.JobRecord).
func (s *Sink) SetJobRecord(digest string) { s.o.JobRecord = digest }

// digest identifies a region map: every spill shard records the digest of the
// region map it partitioned by.
func (p *RegionMap) digest() (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16]), nil
}

// publishRegionMap records p as the folder's region map unless another
// task recorded one first, and returns the region map recorded. The file
// is created exclusively (no two tasks can both create it), so every
// shard partitions by the first region map; a reader that finds the file
// still being written waits for it.
func publishRegionMap(fsys vfs.WriteFS, name string, p *RegionMap) (*RegionMap, error) {
	ex, ok := fsys.(vfs.ExclusiveFS)
	if !ok {
		return nil, fmt.Errorf("hfiles: %s cannot create a file exclusively, so spill shards cannot agree on one plan", fsys)
	}
	b, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return nil, err
	}
	won, err := vfs.WriteExclusive(ex, name, b)
	if err != nil {
		return nil, fmt.Errorf("hfiles: record %s: %w", name, err)
	}
	if won {
		return p, nil
	}
	return readPublishedRegionMap(fsys, name, p.Table)
}

// readPublishedRegionMap reads the region map another task published, waiting a
// little for one still being written.
func readPublishedRegionMap(fsys vfs.FS, name, table string) (*RegionMap, error) {
	var q RegionMap
	found, err := readRegionMap(fsys, name, &q)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("hfiles: %s was created by another spill task and then removed; rerun the shards", name)
	}
	if q.Table != table {
		return nil, fmt.Errorf("hfiles: %s is the plan of table %s, not %s; use another staging folder", name, q.Table, table)
	}
	if err := q.check(); err != nil {
		return nil, err
	}
	return &q, nil
}

// readRegionMap reads the folder's region map into p; found is false when
// there is none. The first spill task writes the file in place after
// creating it exclusively (on HDFS and a local disk the name exists
// before its bytes do), so another task or `rekey status` can find it
// short. A region map that does not parse is read again for up to
// regionMapWait before it is called damaged.
func readRegionMap(fsys vfs.FS, name string, p *RegionMap) (found bool, err error) {
	deadline := time.Now().Add(regionMapWait)
	for {
		found, err = readJSON(fsys, name, p)
		var bad *badRecordError
		if !errors.As(err, &bad) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if bad := (*badRecordError)(nil); errors.As(err, &bad) {
		return false, fmt.Errorf("%w; it did not become whole in %s: if the spill task that began the folder died while writing it, remove the file and rerun the shards", err, regionMapWait)
	}
	return found, err
}

// regionMapWait bounds how long a reader waits for a region map still
// being written: the file is a few kilobytes, written and synced at once.
var regionMapWait = 10 * time.Second

// openLater opens the folder for a merge or load task: the region map must be
// there, recorded by the spill.
func (s *Sink) openLater(ctx context.Context) error {
	var p RegionMap
	found, err := readRegionMap(s.fs, path.Join(s.root, regionMapFile), &p)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %s holds no plan.json: no spill shard has started there", ErrNotReady, s.loc.URL)
	}
	if p.Table != s.o.Table {
		return fmt.Errorf("hfiles: staging folder %s holds files for table %s, not %s; use another folder", s.loc.URL, p.Table, s.o.Table)
	}
	if err := p.check(); err != nil {
		return err
	}
	if err := s.useRegionMap(&p); err != nil {
		return err
	}
	if dir := path.Join(s.root, s.task.Dir()); s.task.Phase != PhaseAll {
		if err := s.fs.MkdirAll(dir); err != nil {
			return fmt.Errorf("hfiles: create %s: %w", dir, err)
		}
	}
	return s.readFamilies(ctx)
}

// commitSpill is a spill task's Finish: every split of the shard is
// committed, so the shard's output is recorded as one file, atomically.
func (s *Sink) commitSpill(rep sink.Reporter) error {
	// Checked again as the commit is written; first so that a task that
	// lost its lease says so rather than what its records lack.
	if err := s.fenced("committing spill shard " + s.task.String()); err != nil {
		return err
	}
	recs, err := readSplits(s.fs, path.Join(s.root, s.spill))
	if err != nil {
		return err
	}
	recs, late, err := s.currentRecords(recs, path.Join(s.root, s.spill), false)
	if err != nil {
		return err
	}
	for _, l := range late {
		rep.Printf("hfiles: spill shard %s: split %s: %s", s.task, l.ID, l.Why)
	}
	if recs, err = s.taskRecords(recs); err != nil {
		if len(late) > 0 {
			err = fmt.Errorf("%w (an attempt that lost this shard wrote a record late, over this attempt's; run the shard again, without --fresh: it redoes those splits)", err)
		}
		return err
	}
	c := spillCommit{Shard: s.task.Index, Count: s.task.Count, RegionMap: s.regionsDigest, Record: s.o.JobRecord, Splits: recs, Committed: time.Now().UTC()}
	if s.o.Lease != nil {
		c.LeaseToken, c.LeaseGeneration = s.o.Lease()
	}
	if c.Splits == nil {
		c.Splits = []*splitRecord{}
	}
	for _, r := range recs {
		c.Cells += r.Cells
		c.Bytes += r.Bytes
		c.SourceBytes += r.SourceBytes
	}
	if err := s.record(path.Join(s.root, s.spill+".json"), &c); err != nil {
		return s.full(err, "committing spill shard "+s.task.String())
	}
	s.account(recs, &finishState{})
	rep.Printf("hfiles: spill shard %d/%d committed: %d splits, %d cells in %s; once every shard is committed, merge with --phase merge --part J/R", s.task.Index, s.task.Count, len(recs), c.Cells, s.url(path.Join(s.root, s.spill)))
	return nil
}

// taskRecords keeps the records of the task's own splits (Options.
// SplitIDs), each of which must be there.
func (s *Sink) taskRecords(recs []*splitRecord) ([]*splitRecord, error) {
	if s.o.SplitIDs == nil {
		return recs, nil
	}
	byID := map[string]*splitRecord{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	out := make([]*splitRecord, 0, len(s.o.SplitIDs))
	for _, id := range s.o.SplitIDs {
		r := byID[id]
		if r == nil {
			return nil, fmt.Errorf("hfiles: spill shard %s: split %s is done in the checkpoint but has no record in %s; rerun the shard with --fresh", s.task, id, s.url(path.Join(s.root, s.spill)))
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// committedSpills reads every committed spill shard of the folder. All N
// shards of one count must be there, each partitioned by the folder's
// region map (digest); a split recorded by two shards is an error, not two
// copies. When the folder holds a job record (every folder a spill of
// this build began), N is the record's shard count, and the shards'
// splits must be the record's, each exactly once (state.Job.Cover): a
// shard that cut the snapshot otherwise is refused, not merged.
//
// A commit stamped with a lease token other than the one its shard's
// lease folder names now (holder, nil to trust every commit) is left
// out, as if not committed: another attempt took the shard over after
// that commit's attempt wrote it, or before, and it landed late; either
// way the holder redoes the shard and commits it again.
func committedSpills(fsys vfs.FS, root, digest string, holder func(vfs.FS, string) (string, bool, error)) ([]*splitRecord, int, error) {
	rec, found, err := state.ReadJob(fsys, path.Join(root, JobRecordFile))
	if err != nil {
		return nil, 0, err
	}
	all, err := readSpillCommits(fsys, root)
	if err != nil {
		return nil, 0, err
	}
	if !found {
		// A spill commit names the record it ran under; a folder whose
		// record is gone (removed by hand, lost with a partial copy)
		// cannot show that the commits cover the snapshot, and merging
		// them could stage fewer cells than the snapshot holds. Commits
		// of a build from before job records name none, and are checked
		// as that build checked them.
		for _, c := range all {
			if c.Record != "" {
				return nil, 0, fmt.Errorf("%w: staging folder %s holds no job record (%s), but spill shard %d/%d committed under record %s: the shards' coverage of the snapshot cannot be proven without it; run every spill shard again with --fresh", state.ErrCoverage, root, JobRecordFile, c.Shard, c.Count, c.Record)
			}
		}
	}
	var shards []*spillCommit
	var superseded []string
	for _, c := range all {
		// With a job record, commits of another count or record are an
		// earlier job's in this folder (the record removed, or
		// discarded by --fresh): none of them counts, and the shards of
		// this record that have not committed under it are not done.
		if found && (c.Count != rec.Shards || c.Record != rec.Digest()) {
			continue
		}
		if c.LeaseToken != "" && holder != nil {
			lease := path.Join(root, Task{PhaseSpill, c.Shard, c.Count}.Dir(), "_rekey.lease")
			tok, ok, err := holder(fsys, lease)
			if err != nil {
				return nil, 0, fmt.Errorf("hfiles: spill shard %d/%d: reading its lease: %w", c.Shard, c.Count, err)
			}
			if ok && tok != c.LeaseToken {
				superseded = append(superseded, fmt.Sprintf("%d (its commit is of lease generation %d, which another attempt took over)", c.Shard, c.LeaseGeneration))
				continue
			}
		}
		shards = append(shards, c)
	}
	if len(superseded) > 0 && len(shards) == 0 {
		return nil, 0, fmt.Errorf("%w: spill shards %s are being redone", ErrNotReady, strings.Join(superseded, ", "))
	}
	if len(shards) == 0 {
		return nil, 0, fmt.Errorf("%w: no spill shard is committed in %s", ErrNotReady, root)
	}
	n := shards[0].Count
	have := map[int]*spillCommit{}
	for _, c := range shards {
		if c.Count != n {
			return nil, 0, fmt.Errorf("hfiles: %s holds spill shards of %d and of %d; the shards of a job must agree on the count (rerun with one, into a fresh folder)", root, n, c.Count)
		}
		if c.RegionMap != digest {
			return nil, 0, fmt.Errorf("hfiles: spill shard %d/%d partitioned by plan %s, the folder's plan.json is %s; rerun that shard with --fresh", c.Shard, c.Count, c.RegionMap, digest)
		}
		have[c.Shard] = c
	}
	var missing []string
	for i := range n {
		if have[i] == nil {
			missing = append(missing, fmt.Sprint(i))
		}
	}
	if len(missing) > 0 {
		why := ""
		if len(superseded) > 0 {
			why = "; ignored: " + strings.Join(superseded, ", ")
		}
		return nil, n, fmt.Errorf("%w: spill shards %s of %d are not committed yet%s", ErrNotReady, strings.Join(missing, ", "), n, why)
	}
	if found {
		commits := make([]state.Commit, 0, n)
		for i := range n {
			c := state.Commit{Task: fmt.Sprintf("spill shard %d/%d", i, n)}
			for _, r := range have[i].Splits {
				c.Splits = append(c.Splits, r.ID)
			}
			commits = append(commits, c)
		}
		if err := rec.Cover(commits); err != nil {
			return nil, n, fmt.Errorf("staging folder %s: %w", root, err)
		}
	}
	var recs []*splitRecord
	seen := map[string]int{}
	for i := range n {
		for _, r := range have[i].Splits {
			if j, ok := seen[r.ID]; ok {
				return nil, n, fmt.Errorf("hfiles: split %s is committed by spill shards %d and %d; the staging folder is damaged", r.ID, j, i)
			}
			seen[r.ID] = i
			recs = append(recs, r)
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].ID < recs[j].ID })
	return recs, n, nil
}

// readSpillCommits reads spill/shard-*.json, in shard order.
func readSpillCommits(fsys vfs.FS, root string) ([]*spillCommit, error) {
	dir := path.Join(root, spillRoot)
	ents, err := fsys.ReadDir(dir)
	if notExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hfiles: list %s: %w", dir, err)
	}
	var out []*spillCommit
	for _, e := range ents {
		var i, n int
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "shard-%04d-of-%04d.json", &i, &n); err != nil {
			continue
		}
		var c spillCommit
		if _, err := readJSON(fsys, path.Join(dir, e.Name()), &c); err != nil {
			return nil, err
		}
		if c.Shard != i || c.Count != n {
			return nil, fmt.Errorf("hfiles: %s records shard %d/%d; the staging folder is damaged", path.Join(dir, e.Name()), c.Shard, c.Count)
		}
		out = append(out, &c)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Shard < out[b].Shard })
	return out, nil
}

// dealPartitions deals the partitions to count parts, balanced by bytes:
// the largest first, each to the part with the fewest bytes so far (the
// lowest index on a tie). It depends only on the partitions, so every
// merge task, and `rekey status`, deals the same way.
func dealPartitions(parts []*partition, count int) [][]*partition {
	ps := append([]*partition(nil), parts...)
	bySize(ps)
	out := make([][]*partition, count)
	load := make([]int64, count)
	for _, p := range ps {
		best := 0
		for i := 1; i < count; i++ {
			if load[i] < load[best] {
				best = i
			}
		}
		out[best] = append(out[best], p)
		load[best] += p.bytes
	}
	return out
}

// mergePart is a merge task's Finish: the partitions dealt to its part,
// merged from every committed spill shard's runs. A part that crashed
// resumes with its state: finished partitions are kept, the rest redone.
func (s *Sink) mergePart(ctx context.Context, rep sink.Reporter) error {
	recs, _, err := committedSpills(s.fs, s.root, s.regionsDigest, s.o.Holder)
	if err != nil {
		return err
	}
	st, err := s.finishState(recs)
	if err != nil {
		return err
	}
	all, err := s.partitions(recs, nil)
	if err != nil {
		return err
	}
	mine := dealPartitions(all, s.task.Count)[s.task.Index]
	var bytes int64
	for _, p := range mine {
		bytes += p.bytes
	}
	if err := s.recordTask(taskRecord{Partitions: len(mine), Bytes: bytes}); err != nil {
		return err
	}
	if err := s.mergeAll(ctx, rep, recs, nil, st); err != nil {
		return err
	}
	// A part's state counts only under the lease of the part's last
	// attempt (mergedParts leaves out one an attempt whose lease was
	// superseded saved). A part an earlier attempt merged is not merged
	// again, so this attempt, which holds the lease now, saves its state
	// again under its own; else the part would stay not done, for good.
	if s.o.Lease != nil {
		if tok, _ := s.o.Lease(); tok != st.LeaseToken {
			if err := s.saveFinish(st); err != nil {
				return err
			}
		}
	}
	rep.Printf("hfiles: merge part %d/%d done: %d partitions, %d HFiles; once every part is done, load with rekey load", s.task.Index, s.task.Count, len(mine), len(allFiles(st)))
	return nil
}

// loadPhase is the load task's Finish: every merge part's HFiles (or the
// HFiles of a one-process run that did not load), bulk loaded region by
// region, resumable like the one-process load.
func (s *Sink) loadPhase(ctx context.Context, rep sink.Reporter) error {
	if s.o.Client == nil {
		return errors.New("hfiles: the load needs the target cluster")
	}
	recs, st, err := s.loadState()
	if err != nil {
		return err
	}
	if err := s.recordTask(taskRecord{}); err != nil {
		return err
	}
	s.account(recs, st)
	if err := s.checkRepeats(); err != nil {
		return err
	}
	if err := s.timedLoad(ctx, rep, st); err != nil {
		return err
	}
	if s.state != finishFile {
		s.removeSpilledRuns()
	}
	return nil
}

// loadState finds what the load loads: a one-process run's finish.json, or
// the load's own state, made from every merge part's on the first load.
func (s *Sink) loadState() ([]*splitRecord, *finishState, error) {
	var one finishState
	if found, err := readJSON(s.fs, path.Join(s.root, finishFile), &one); err != nil {
		return nil, nil, err
	} else if found {
		if !one.Written {
			return nil, nil, fmt.Errorf("%w: the run staging into %s has not written its HFiles yet", ErrNotReady, s.loc.URL)
		}
		recs, err := readSplits(s.fs, s.root)
		if err != nil {
			return nil, nil, err
		}
		s.state = finishFile
		st, err := s.finishState(recs)
		return recs, st, err
	}
	recs, _, err := committedSpills(s.fs, s.root, s.regionsDigest, s.o.Holder)
	if err != nil {
		return nil, nil, err
	}
	fp := fingerprint(recs)
	var st finishState
	found, err := readLoadState(s.fs, s.root, &st)
	if err != nil {
		return nil, nil, err
	}
	if found && st.Splits == fp {
		if st.Loaded == nil {
			st.Loaded = map[string]bool{}
		}
		return recs, &st, nil
	}
	if found && (len(st.Loaded) > 0 || len(st.Sent) > 0) {
		return nil, nil, fmt.Errorf("hfiles: staging folder %s: splits were spilled again after the load began; stage into a fresh folder", s.loc.URL)
	}
	merged, err := s.mergedParts(fp)
	if err != nil {
		return nil, nil, err
	}
	if err := s.saveFinish(merged); err != nil {
		return nil, nil, err
	}
	return recs, merged, nil
}

// mergedParts gathers every merge part's state into one load state: all R
// parts of one count, each written from the spills fp names.
func (s *Sink) mergedParts(fp string) (*finishState, error) {
	dir := path.Join(s.root, partsRoot)
	ents, err := s.fs.ReadDir(dir)
	if err != nil && !notExist(err) {
		return nil, fmt.Errorf("hfiles: list %s: %w", dir, err)
	}
	out := &finishState{Splits: fp, Written: true, Parts: map[string]*partState{}, Loaded: map[string]bool{}}
	count, done := 0, map[int]bool{}
	var superseded []string
	for _, e := range ents {
		var j, r int
		if !e.IsDir() {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "part-%04d-of-%04d", &j, &r); err != nil {
			continue
		}
		if count != 0 && r != count {
			return nil, fmt.Errorf("hfiles: %s holds merge parts of %d and of %d; rerun the merge with one count", dir, count, r)
		}
		count = r
		var st finishState
		found, err := readJSON(s.fs, path.Join(dir, e.Name(), stateName), &st)
		if err != nil {
			return nil, err
		}
		if !found || !st.Written || st.Splits != fp {
			continue
		}
		if st.LeaseToken != "" && s.o.Holder != nil {
			// Saved by an attempt another took the part from (maybe
			// landing after the takeover): the holder merges it again.
			tok, ok, err := s.o.Holder(s.fs, path.Join(dir, e.Name(), "_rekey.lease"))
			if err != nil {
				return nil, fmt.Errorf("hfiles: merge part %d/%d: reading its lease: %w", j, r, err)
			}
			if ok && tok != st.LeaseToken {
				superseded = append(superseded, fmt.Sprintf("%d (its state is of lease generation %d, which another attempt took over)", j, st.LeaseGeneration))
				continue
			}
		}
		done[j] = true
		for k, ps := range st.Parts {
			if out.Parts[k] != nil {
				return nil, fmt.Errorf("hfiles: partition %s is merged by two parts; the staging folder is damaged", k)
			}
			out.Parts[k] = ps
		}
	}
	if count == 0 {
		return nil, fmt.Errorf("%w: no merge part has run in %s", ErrNotReady, s.loc.URL)
	}
	var missing []string
	for j := range count {
		if !done[j] {
			missing = append(missing, fmt.Sprint(j))
		}
	}
	if len(missing) > 0 {
		why := ""
		if len(superseded) > 0 {
			why = "; ignored: " + strings.Join(superseded, ", ")
		}
		return nil, fmt.Errorf("%w: merge parts %s of %d have not written their HFiles from the committed spills%s", ErrNotReady, strings.Join(missing, ", "), count, why)
	}
	return out, nil
}

// removeSpilledRuns frees the spill shards' runs once their HFiles are
// loaded; the shards' commit records stay (status reads them). Failing to
// remove one only leaves space taken.
func (s *Sink) removeSpilledRuns() {
	dir := path.Join(s.root, spillRoot)
	ents, err := s.fs.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			s.fs.RemoveAll(path.Join(dir, e.Name(), runsDir))
		}
	}
}

// SpillCoverage reads what the spill shards of the job in phases at
// staging committed under the folder's job record: how many shards did
// (of rec.Shards), and, once all did, whether their splits cover the
// record exactly once (nil) or not (the merge's refusal). rec is nil
// when the folder holds no job record.
// vo opens the folder (a Kerberos login).
func SpillCoverage(staging string, vo vfs.Options) (rec *state.Job, committed int, coverage error, err error) {
	loc, err := vfs.OpenWith(staging, vo)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("hfiles: staging folder: %w", err)
	}
	defer loc.Close()
	rec, found, err := state.ReadJob(loc.FS, path.Join(loc.Path, JobRecordFile))
	if err != nil || !found {
		return nil, 0, nil, err
	}
	shards, err := readSpillCommits(loc.FS, loc.Path)
	if err != nil {
		return rec, 0, nil, err
	}
	for _, c := range shards {
		if c.Count == rec.Shards && c.Record == rec.Digest() {
			committed++
		}
	}
	if committed < rec.Shards {
		return rec, committed, nil, nil
	}
	var p RegionMap
	if _, err := readRegionMap(loc.FS, path.Join(loc.Path, regionMapFile), &p); err != nil {
		return rec, committed, nil, err
	}
	digest, err := p.digest()
	if err != nil {
		return rec, committed, nil, err
	}
	_, _, coverage = committedSpills(loc.FS, loc.Path, digest, nil)
	return rec, committed, coverage, nil
}
