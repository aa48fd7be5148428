package hfiles

import (
	"fmt"
	"path"
	"time"

	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// Task states in a Status.
const (
	TaskDone    = "done"    // its output is committed
	TaskRunning = "running" // a live lease holds its folder
	TaskFailed  = "failed"  // started, not done, and no live lease
	TaskLeft    = "left"    // not started
)

// Status is a job in phases as its staging folder shows it: no task needs
// to be asked.
type Status struct {
	Staging string    `json:"staging"`
	Table   string    `json:"table,omitempty"`
	Regions int       `json:"regions"`
	At      time.Time `json:"at"`
	// Spill, Merge and Load are the phases in order.
	Spill PhaseStatus `json:"spill"`
	Merge PhaseStatus `json:"merge"`
	Load  PhaseStatus `json:"load"`
	// ETASeconds estimates the time to the end of the merge (-1: nothing
	// to estimate from yet); ETABasis says from what.
	ETASeconds float64 `json:"eta_seconds"`
	ETABasis   string  `json:"eta_basis"`
}

// PhaseStatus counts one phase's tasks by state and its output so far.
type PhaseStatus struct {
	// Tasks is the phase's task count, as the task folders' names give it
	// (0: no task of the phase has started).
	Tasks   int `json:"tasks"`
	Done    int `json:"done"`
	Running int `json:"running"`
	Failed  int `json:"failed"`
	Left    int `json:"left"`
	// Cells and Bytes are, for the spill, the cells staged by committed
	// splits and their bytes; for the merge, the cells and bytes of HFiles
	// written; for the load, those of the HFiles of loaded regions.
	Cells int64        `json:"cells"`
	Bytes int64        `json:"bytes"`
	List  []TaskStatus `json:"task_list,omitempty"`
}

// TaskStatus is one task.
type TaskStatus struct {
	Index   int       `json:"index"`
	State   string    `json:"state"`
	Started time.Time `json:"started,omitzero"`
	// Spill: splits and their store file bytes, all and committed.
	Splits          int   `json:"splits,omitempty"`
	SplitsDone      int   `json:"splits_done,omitempty"`
	SourceBytes     int64 `json:"source_bytes,omitempty"`
	SourceBytesDone int64 `json:"source_bytes_done,omitempty"`
	// Merge: partitions dealt to the part, and those written.
	Partitions     int   `json:"partitions,omitempty"`
	PartitionsDone int   `json:"partitions_done,omitempty"`
	Cells          int64 `json:"cells"`
	Bytes          int64 `json:"bytes"`
}

func (p *PhaseStatus) add(t TaskStatus) {
	switch t.State {
	case TaskDone:
		p.Done++
	case TaskRunning:
		p.Running++
	case TaskFailed:
		p.Failed++
	default:
		p.Left++
	}
	p.Cells += t.Cells
	p.Bytes += t.Bytes
	p.List = append(p.List, t)
}

// ReadStatus reads the status of the job in phases staging into the
// folder staging. live says whether the lease file at a path (in the
// folder's file system) is held by a live task; now dates the ETA.
func ReadStatus(staging string, live func(fsys vfs.FS, lease string) bool, now time.Time) (*Status, error) {
	loc, err := vfs.Open(staging)
	if err != nil {
		return nil, fmt.Errorf("stage: staging folder: %w", err)
	}
	defer loc.Close()
	r := &statusReader{fs: loc.FS, root: loc.Path, live: live, now: now}
	st := &Status{Staging: loc.URL, At: now, ETASeconds: -1}
	found, err := readPlan(r.fs, path.Join(r.root, planFile), &r.plan)
	if err != nil {
		return nil, err
	}
	if found {
		st.Table, st.Regions = r.plan.Table, len(r.plan.Regions)
	}
	if err := r.spill(st); err != nil {
		return nil, err
	}
	if err := r.merge(st); err != nil {
		return nil, err
	}
	if err := r.load(st); err != nil {
		return nil, err
	}
	r.eta(st)
	return st, nil
}

type statusReader struct {
	fs   vfs.FS
	root string
	live func(vfs.FS, string) bool
	now  time.Time
	plan Plan // the folder's, empty when it has none yet

	// gathered for the ETA
	spillStart, mergeStart time.Time
	cellBytes              int64            // cell bytes of committed splits
	partBytes              map[string]int64 // cell bytes per partition, committed splits
	mergedBytes            int64            // cell bytes of partitions merged
}

// taskDirs lists the task folders under dir named by format (an index and
// a count), and returns the count they agree on (the largest, if not).
func (r *statusReader) taskDirs(dir, format string, want int) (map[int]bool, int, error) {
	ents, err := r.fs.ReadDir(path.Join(r.root, dir))
	if notExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("stage: list %s: %w", dir, err)
	}
	have, count := map[int]bool{}, 0
	for _, e := range ents {
		var i, n int
		if !e.IsDir() {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), format, &i, &n); err != nil || want > 0 && n != want {
			continue
		}
		have[i] = true
		count = max(count, n)
	}
	return have, count, nil
}

// state is a started task's state when it is not done.
func (r *statusReader) state(dir string) string {
	if r.live(r.fs, path.Join(r.root, dir, "_rekey.lease")) {
		return TaskRunning
	}
	return TaskFailed
}

func (r *statusReader) task(dir string) (taskRecord, bool) {
	var rec taskRecord
	found, err := readJSON(r.fs, path.Join(r.root, dir, taskFile), &rec)
	return rec, found && err == nil
}

func (r *statusReader) earliest(t *time.Time, at time.Time) {
	if !at.IsZero() && (t.IsZero() || at.Before(*t)) {
		*t = at
	}
}

func (r *statusReader) spill(st *Status) error {
	// With a job record, the job's shards are the record's: a folder or
	// commit of another count (a task the record refused, an earlier job
	// in the folder) is none of them.
	rec, found, err := state.ReadJob(r.fs, path.Join(r.root, JobRecordFile))
	if err != nil {
		return err
	}
	want := 0
	if found {
		want = rec.Shards
	}
	have, n, err := r.taskDirs(spillRoot, "shard-%04d-of-%04d", want)
	if err != nil {
		return err
	}
	if found {
		n = rec.Shards
	}
	commits, err := readSpillCommits(r.fs, r.root)
	if err != nil {
		return err
	}
	committed := map[int]*spillCommit{}
	for _, c := range commits {
		if c.Count == n && (!found || c.Record == rec.Digest()) {
			committed[c.Shard] = c
		}
	}
	r.partBytes = map[string]int64{}
	st.Spill.Tasks = n
	for i := range n {
		t := TaskStatus{Index: i, State: TaskLeft}
		dir := Task{PhaseSpill, i, n}.Dir()
		if rec, ok := r.task(dir); ok {
			t.Started, t.Splits, t.SourceBytes = rec.Started, rec.Splits, rec.SourceBytes
			r.earliest(&r.spillStart, rec.Started)
		}
		var recs []*splitRecord
		switch c := committed[i]; {
		case c != nil:
			t.State, recs = TaskDone, c.Splits
		case have[i]:
			t.State = r.state(dir)
			if recs, err = readSplits(r.fs, path.Join(r.root, dir)); err != nil {
				return err
			}
		}
		for _, rec := range recs {
			t.SplitsDone++
			t.SourceBytesDone += rec.SourceBytes
			t.Cells += rec.Cells
			t.Bytes += rec.Bytes
			for _, f := range rec.Runs {
				for _, p := range f.Parts {
					r.cellBytes += p.Bytes
					r.partBytes[partKey(p.Region, p.Family)] += p.Bytes
				}
			}
		}
		st.Spill.add(t)
	}
	return nil
}

func (r *statusReader) merge(st *Status) error {
	have, n, err := r.taskDirs(partsRoot, "part-%04d-of-%04d", 0)
	if err != nil {
		return err
	}
	st.Merge.Tasks = n
	for j := range n {
		t := TaskStatus{Index: j, State: TaskLeft}
		dir := Task{PhaseMerge, j, n}.Dir()
		if rec, ok := r.task(dir); ok {
			t.Started, t.Partitions = rec.Started, rec.Partitions
			r.earliest(&r.mergeStart, rec.Started)
		}
		var fs finishState
		if _, err := readJSON(r.fs, path.Join(r.root, dir, stateName), &fs); err != nil {
			return err
		}
		for k, ps := range fs.Parts {
			if ps.Done {
				t.PartitionsDone++
				r.mergedBytes += r.partBytes[k]
			}
			for _, f := range ps.Files {
				t.Cells += f.Cells
				t.Bytes += f.Size
			}
		}
		switch {
		case fs.Written:
			t.State = TaskDone
		case have[j]:
			t.State = r.state(dir)
		}
		st.Merge.add(t)
	}
	return nil
}

func (r *statusReader) load(st *Status) error {
	var fs finishState
	found, err := readJSON(r.fs, path.Join(r.root, loadRoot, stateName), &fs)
	if err != nil {
		return err
	}
	t := TaskStatus{State: TaskLeft}
	if rec, ok := r.task(loadRoot); ok {
		t.Started = rec.Started
	}
	regions := map[int]bool{}
	for _, ps := range fs.Parts {
		if len(ps.Files) > 0 {
			regions[ps.Region] = true
		}
	}
	p := &r.plan
	loaded := 0
	for i := range regions {
		if i < len(p.Regions) && fs.Loaded[p.Regions[i].Dir] {
			loaded++
			for _, ps := range fs.Parts {
				if ps.Region == i {
					for _, f := range ps.Files {
						t.Cells += f.Cells
						t.Bytes += f.Size
					}
				}
			}
		}
	}
	t.Partitions, t.PartitionsDone = len(regions), loaded
	switch {
	case found && len(regions) > 0 && loaded == len(regions):
		t.State = TaskDone
	case found || !t.Started.IsZero():
		t.State = r.state(loadRoot)
	}
	st.Load.Tasks = 1
	st.Load.add(t)
	return nil
}

// eta estimates the time left to the end of the merge: the spill's left
// store file bytes at the rate the spill has read them so far (over all
// its tasks together), then the merge's left cell bytes at the rate the
// merge has written them, or, before any partition is merged, at the
// spill's rate of cell bytes. The load (region servers adopting files) is
// not included.
func (r *statusReader) eta(st *Status) {
	var total, done, known int64
	var knownTasks int
	for _, t := range st.Spill.List {
		if t.SourceBytes > 0 {
			total += t.SourceBytes
			knownTasks++
			known += t.SourceBytes
		}
		done += t.SourceBytesDone
	}
	if knownTasks > 0 && knownTasks < st.Spill.Tasks {
		// Shards not started yet: as large as the mean of those that did.
		total += known / int64(knownTasks) * int64(st.Spill.Tasks-knownTasks)
	}
	spillSecs := r.now.Sub(r.spillStart).Seconds()
	if done == 0 || spillSecs <= 0 || total == 0 {
		st.ETABasis = "no split committed yet"
		return
	}
	spillLeft := float64(max(total-done, 0)) / (float64(done) / spillSecs)
	if st.Spill.Done == st.Spill.Tasks {
		spillLeft = 0
	}
	// The merge's whole input, projected from what the spill staged.
	mergeTotal := float64(r.cellBytes) * float64(total) / float64(done)
	mergeLeft := mergeTotal - float64(r.mergedBytes)
	rate, basis := float64(r.cellBytes)/spillSecs, "the merge taken as fast as the spill, in cell bytes per second"
	if ms := r.now.Sub(r.mergeStart).Seconds(); !r.mergeStart.IsZero() && r.mergedBytes > 0 && ms > 0 {
		rate, basis = float64(r.mergedBytes)/ms, "the merge's own rate so far"
	}
	if st.Merge.Tasks > 0 && st.Merge.Done == st.Merge.Tasks {
		mergeLeft = 0
	}
	st.ETASeconds = spillLeft + max(mergeLeft, 0)/rate
	st.ETABasis = fmt.Sprintf("spill: %d of %d source bytes read at %.0f bytes/s; merge: %s; the load is not included", done, total, float64(done)/spillSecs, basis)
}
