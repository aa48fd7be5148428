package hfiles

import (
	"errors"
	"fmt"
	"github.com/rekeyhq/rekey/internal/human"
	"path"
	"strings"
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
	// OneProcess is the folder of a job staged in one process (no
	// phases): what its splits staged, its HFiles, and its load. Nil for
	// a job in phases; then Spill, Merge and Load say it.
	OneProcess *OneProcessStatus `json:"one_process,omitempty"`
}

// OneProcessStatus is a one-process staging folder as its records show
// it.
type OneProcessStatus struct {
	// Splits and Cells are the splits whose runs or HFiles are staged and
	// their cells (records removed once the HFiles are written count in
	// HFileCells instead).
	Splits int   `json:"splits_staged"`
	Cells  int64 `json:"cells_staged"`
	// Written says every partition's HFiles are written; HFiles,
	// HFileBytes and HFileCells count those written so far.
	Written    bool  `json:"hfiles_written"`
	HFiles     int   `json:"hfiles"`
	HFileBytes int64 `json:"hfile_bytes"`
	HFileCells int64 `json:"hfile_cells"`
	// Regions is the target regions of the region map, Loaded those whose files
	// are bulk loaded.
	Regions int `json:"regions"`
	Loaded  int `json:"regions_loaded"`
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
	// Superseded is set on a spill shard whose commit was made under a
	// lease generation that another attempt has since taken over: the
	// commit does not count (the merge ignores it too), the shard is
	// being redone.
	Superseded bool `json:"superseded,omitempty"`
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
// folder's file system) is held by a live task; holder names the token of
// the attempt that holds it (as the merge's Options.Holder), so that a
// spill commit made under a generation another attempt took over counts
// as the merge counts it: not done. now dates the ETA. vo opens the
// folder (a Kerberos login).
func ReadStatus(staging string, live func(fsys vfs.FS, lease string) bool, holder func(vfs.FS, string) (string, bool, error), now time.Time, vo vfs.Options) (*Status, error) {
	loc, err := vfs.OpenWith(staging, vo)
	if err != nil {
		return nil, fmt.Errorf("hfiles: staging folder: %w", err)
	}
	defer loc.Close()
	r := &statusReader{url: loc.URL, fs: loc.FS, root: loc.Path, live: live, holder: holder, now: now}
	st := &Status{Staging: loc.URL, At: now, ETASeconds: -1}
	found, err := readRegionMap(r.fs, path.Join(r.root, regionMapFile), &r.regions)
	if err != nil {
		return nil, err
	}
	if found {
		st.Table, st.Regions = r.regions.Table, len(r.regions.Regions)
	}
	kind, err := r.kind(found)
	if err != nil {
		return nil, err
	}
	if kind == kindOneProcess {
		st.OneProcess, err = r.oneProcess(st)
		if err != nil {
			return nil, err
		}
		st.ETABasis = "a one-process run: its progress is the run's own (rekey run shows it)"
		return st, nil
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

// ErrNoStaging is matched by ReadStatus's error for a folder that does not
// exist, or holds no staged job (no kind, region map, split record or task of
// rekey's): a wrong path, not a job that has not started.
var ErrNoStaging = errors.New("hfiles: no staged job in the folder")

// kind tells which kind of job the folder holds: its kind file, else (a
// folder staged before kind files) the files each kind writes. A folder
// that does not exist, or holds none of them, is ErrNoStaging. Nothing is
// created.
func (r *statusReader) kind(regionMapFound bool) (string, error) {
	if _, err := r.fs.Stat(r.root); err != nil {
		if notExist(err) {
			return "", fmt.Errorf("%w: %s does not exist", ErrNoStaging, r.url)
		}
		return "", fmt.Errorf("hfiles: staging folder %s: %w", r.url, err)
	}
	b, err := vfs.ReadFile(r.fs, path.Join(r.root, kindFile))
	switch {
	case err == nil:
		switch k := strings.TrimSpace(string(b)); k {
		case kindPhases, kindOneProcess:
			return k, nil
		}
	case !notExist(err):
		return "", fmt.Errorf("hfiles: staging folder %s: %w", r.url, err)
	}
	has := func(name string) bool {
		_, err := r.fs.Stat(path.Join(r.root, name))
		return err == nil
	}
	switch {
	case has(spillRoot) || has(partsRoot) || has(JobRecordFile):
		return kindPhases, nil
	case has(finishFile) || has(splitsDir) || has(runsDir):
		return kindOneProcess, nil
	case regionMapFound:
		return kindPhases, nil // a first spill task published its plan, nothing more yet
	}
	return "", fmt.Errorf("%w: %s holds no staged job of rekey's (no kind file, plan, split records or task folders)", ErrNoStaging, r.url)
}

// oneProcess reads a one-process folder's split records and finish.json.
func (r *statusReader) oneProcess(st *Status) (*OneProcessStatus, error) {
	op := &OneProcessStatus{Regions: st.Regions}
	recs, err := readSplits(r.fs, r.root)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		op.Splits++
		op.Cells += rec.Cells
	}
	var fin finishState
	if _, err := readJSON(r.fs, path.Join(r.root, finishFile), &fin); err != nil {
		return nil, err
	}
	op.Written = fin.Written
	for _, ps := range fin.Parts {
		for _, f := range ps.Files {
			op.HFiles++
			op.HFileBytes += f.Size
			op.HFileCells += f.Cells
		}
	}
	for _, loaded := range fin.Loaded {
		if loaded {
			op.Loaded++
		}
	}
	return op, nil
}

type statusReader struct {
	url     string
	fs      vfs.FS
	root    string
	live    func(vfs.FS, string) bool
	holder  func(vfs.FS, string) (string, bool, error)
	now     time.Time
	regions RegionMap // the folder's, empty when it has none yet

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
		return nil, 0, fmt.Errorf("hfiles: list %s: %w", dir, err)
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
	superseded := map[int]bool{}
	for _, c := range commits {
		if c.Count != n || (found && c.Record != rec.Digest()) {
			continue
		}
		if c.LeaseToken != "" && r.holder != nil {
			lease := path.Join(r.root, Task{PhaseSpill, c.Shard, c.Count}.Dir(), "_rekey.lease")
			tok, ok, err := r.holder(r.fs, lease)
			if err != nil {
				return fmt.Errorf("hfiles: spill shard %d/%d: reading its lease: %w", c.Shard, c.Count, err)
			}
			if ok && tok != c.LeaseToken {
				superseded[c.Shard] = true
				continue
			}
		}
		committed[c.Shard] = c
	}
	r.partBytes = map[string]int64{}
	st.Spill.Tasks = n
	for i := range n {
		t := TaskStatus{Index: i, State: TaskLeft, Superseded: superseded[i]}
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
	found, err := readLoadState(r.fs, r.root, &fs)
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
	p := &r.regions
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
	rate, basis := float64(r.cellBytes)/spillSecs, "taken as fast as the spill staged cell bytes"
	if ms := r.now.Sub(r.mergeStart).Seconds(); !r.mergeStart.IsZero() && r.mergedBytes > 0 && ms > 0 {
		rate, basis = float64(r.mergedBytes)/ms, "its own rate so far, "+human.ByteRate(float64(r.mergedBytes)/ms)
	}
	if st.Merge.Tasks > 0 && st.Merge.Done == st.Merge.Tasks {
		mergeLeft = 0
	}
	st.ETASeconds = spillLeft + max(mergeLeft, 0)/rate
	st.ETABasis = fmt.Sprintf("spill: %s of %s source bytes read at %s; merge: %s; the load is not included", human.Bytes(done), human.Bytes(total), human.ByteRate(float64(done)/spillSecs), basis)
	if spillLeft+max(mergeLeft, 0) > 0 && st.Spill.Running == 0 && st.Merge.Running == 0 {
		// Work is left and nothing runs: a time from the rates so far
		// would count down while nothing moves.
		st.ETASeconds = -1
		st.ETABasis = fmt.Sprintf("no task is running, and %d spill and %d merge tasks are not done: start or retry them", st.Spill.Tasks-st.Spill.Done, max(st.Merge.Tasks-st.Merge.Done, 0))
	}
}
