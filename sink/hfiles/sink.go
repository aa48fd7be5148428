package hfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// ErrStagingFull is matched by the error of a split or merge that would
// take the staging folder past Options.MaxStagingBytes, or that found its
// file system full (a *FullError).
var ErrStagingFull = errors.New("hfiles: staging folder over its size bound")

// Sink is the hfiles sink: it partitions every split's cells by target
// region and family, sorts them in memory within a budget, spills sorted
// runs to the staging folder, and in Finish merges each partition's runs
// into HFiles and bulk loads them region by region.
type Sink struct {
	o       Options
	loc     *vfs.Location
	fs      vfs.WriteFS
	root    string
	regions *RegionMap
	// whole is set when fs writes whole objects (vfs.WritesWhole: S3,
	// GCS, Azure): runs and HFiles are then written under their final
	// names, which appear whole at Close or not at all, instead of a
	// temporary name and a rename that would copy every byte again.
	whole bool

	// task is the phase task this sink is (Options.Task); spill is the
	// folder of its runs/ and splits/, and state its merge or load state
	// file, both relative to root (see layout.go).
	task          Task
	spill         string
	state         string
	regionsDigest string

	// local is the local run folder of a one-process run (Options.
	// LocalRuns), nil when runs go to the staging folder; lost are the
	// splits whose records named runs that are not in it.
	local *localRuns
	lost  []LostSplit

	held, peak atomic.Int64 // sort buffer bytes held by all splits
	staged     atomic.Int64 // bytes in the staging folder
	openHFiles atomic.Int64 // bytes in HFiles still being written (not in staged)
	peakStaged atomic.Int64
	attempts   atomic.Uint64

	mu    sync.Mutex
	stats Stats

	// finMu guards finish.json's state while partitions merge in parallel:
	// every partState change and every save of the file.
	finMu sync.Mutex
	// loadedUnsaved says a region was marked loaded in the load state
	// (recordLoaded) since finish.json was last saved; under finMu.
	loadedUnsaved bool
	// prunedGen is the lease generation whose save last removed the
	// older load states (pruneLoadStates); under finMu.
	prunedGen int64

	// Splits committed into memory (held.go): kept sorted in their
	// buffers until the memory fills or Finish writes them.
	heldMu sync.Mutex
	kept   []*splitSink
	// freeing is the memory of kept splits being spilled outside heldMu,
	// and freed is signalled (with heldMu) when such a spill ends.
	freeing   int64
	freed     *sync.Cond
	keptBytes atomic.Int64
	onDurable func(ids []string) error
	// written holds the splits whose cells are in HFiles recorded Written
	// (noteWritten): a redo of one only counts its cells.
	written map[string]*splitRecord

	closeOnce sync.Once
	closeErr  error
}

var _ sink.Sink = (*Sink)(nil)

// New opens (or resumes) the staging folder o.Staging. A folder that holds
// a region map keeps it, so a resumed run partitions like the first one; a new
// folder gets the region map from o.SplitKeys or the live table. Runs left by
// splits that never committed are removed.
func New(ctx context.Context, o Options) (*Sink, error) {
	o.fill()
	if o.Staging == "" {
		return nil, errors.New("hfiles: no staging folder given")
	}
	if o.Table == "" {
		return nil, errors.New("hfiles: no target table given")
	}
	loc, err := vfs.OpenWith(o.Staging, vfs.Options{Kerberos: o.Kerberos})
	if err != nil {
		return nil, fmt.Errorf("hfiles: staging folder: %w", err)
	}
	if err := o.Task.check(); err != nil {
		loc.Close()
		return nil, err
	}
	s := &Sink{o: o, loc: loc, fs: loc.FS, root: loc.Path, task: o.Task, whole: vfs.WritesWhole(loc.FS)}
	s.freed = sync.NewCond(&s.heldMu)
	s.spill, s.state = o.Task.spillDir(), o.Task.stateFile()
	if o.LocalRuns != "" {
		if o.Task.Phase != PhaseAll {
			loc.Close()
			return nil, fmt.Errorf("hfiles: a %s task keeps its runs in the staging folder, which every task reads; a local run folder is for one process", o.Task)
		}
		if s.local, err = openLocalRuns(o.LocalRuns); err != nil {
			loc.Close()
			return nil, err
		}
		s.stats.LocalRuns = s.local.root
	}
	if err := s.open(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sink) open(ctx context.Context) error {
	if err := s.checkKind(); err != nil {
		return err
	}
	if err := s.refuseAfterLoad(); err != nil {
		return err
	}
	if !s.task.spills() {
		return s.openLater(ctx)
	}
	for _, d := range []string{s.root, path.Join(s.root, s.spill, runsDir), path.Join(s.root, s.spill, splitsDir)} {
		if err := s.fs.MkdirAll(d); err != nil {
			return fmt.Errorf("hfiles: create %s: %w", d, err)
		}
	}
	if err := s.chooseRegionMap(ctx); err != nil {
		return err
	}
	if err := s.readFamilies(ctx); err != nil {
		return err
	}
	recs, err := readSplits(s.fs, path.Join(s.root, s.spill))
	if err != nil {
		return err
	}
	st, _, err := s.readFinish()
	if err != nil {
		return err
	}
	if !st.Written {
		// A record of an attempt that lost the task, but for the one this
		// task took it from, does not stage its split; nor, once the
		// HFiles are written the runs are removed and no longer needed,
		// before that, does a record whose local runs are not here.
		var late, lost []LostSplit
		if recs, late, err = s.currentRecords(recs, path.Join(s.root, s.spill), true); err != nil {
			return err
		}
		recs, lost = s.dropLost(recs)
		s.lost = append(late, lost...)
	}
	kept, err := removeStrayRuns(s.fs, s.root, s.spill, recs)
	if err != nil {
		return err
	}
	segs, err := removeStraySegments(s.fs, s.root, s.spill, recs)
	if err != nil {
		return err
	}
	kept += segs
	if s.local != nil {
		n, err := s.removeStrayLocal(recs)
		if err != nil {
			return err
		}
		s.local.held.Store(n)
	}
	for _, ps := range st.Parts {
		for _, f := range ps.Files {
			kept += f.Size
		}
	}
	s.addStaged(kept)
	s.noteWritten(recs, st)
	if s.task.Phase == PhaseSpill {
		return s.recordSpillTask()
	}
	return nil
}

// ErrOtherKind is matched by the error of a sink opened on a staging
// folder that holds the other kind of job: a one-process run's folder
// under a spill or merge task, or a job in phases' folder under a
// one-process run. Each kind leases other files of the folder (the whole
// folder, or each task's own), so neither lease would keep the other out.
var ErrOtherKind = errors.New("hfiles: the staging folder holds another kind of job")

// CheckKind opens the staging folder and refuses it (ErrOtherKind) if it
// holds the other kind of job than task's; a folder not there yet holds
// none. The run calls it before it leases anything in the folder, so a
// refused task leaves no lease behind that would make the folder look
// like its kind.
// vo opens the folder (a Kerberos login).
func CheckKind(staging string, task Task, vo vfs.Options) error {
	loc, err := vfs.OpenWith(staging, vo)
	if err != nil {
		return fmt.Errorf("hfiles: staging folder: %w", err)
	}
	defer loc.Close()
	s := &Sink{loc: loc, fs: loc.FS, root: loc.Path, task: task, whole: vfs.WritesWhole(loc.FS)}
	if err := s.checkKind(); err != nil {
		return err
	}
	// Before any lease too: a spill task that took its shard's lease
	// would leave the shard's commit superseded, for the load to wait on.
	return s.refuseAfterLoad()
}

// checkKind refuses a folder that holds the other kind of job, and claims
// an unclaimed one for the task's kind. The load task loads either kind (a
// one-process --no-load run's folder too), so its folder (load/) says
// nothing of the kind and it claims nothing.
//
// Looking for the other kind's files and then writing one's own would let
// two tasks of different kinds that start together both find the folder
// empty; the claim is an exclusive create of the kind file, which only one
// of them can win. The look for the other kind's files stays, for folders
// staged before the kind file existed.
func (s *Sink) checkKind() error {
	var theirs []string
	var mine, how string
	switch s.task.Phase {
	case PhaseAll:
		theirs = []string{spillRoot, partsRoot}
		mine = kindOneProcess
		how = "holds a job in phases: run its tasks with --phase, or stage this run into a fresh folder"
	case PhaseSpill, PhaseMerge:
		theirs = []string{finishFile, splitsDir, runsDir}
		mine = kindPhases
		how = "holds a one-process run: finish it with rekey run without --phase (or rekey load), or stage the phases into a fresh folder"
	default:
		return nil
	}
	claimed, err := claimKind(s.fs, s.root, mine)
	if err != nil {
		return fmt.Errorf("hfiles: staging folder %s: %w", s.loc.URL, err)
	}
	if claimed != mine {
		return fmt.Errorf("%w: %s %s (%s says %q)", ErrOtherKind, s.loc.URL, how, kindFile, claimed)
	}
	for _, name := range theirs {
		_, err := s.fs.Stat(path.Join(s.root, name))
		if err == nil {
			return fmt.Errorf("%w: %s %s (found %s)", ErrOtherKind, s.loc.URL, how, name)
		}
		if !notExist(err) {
			return fmt.Errorf("hfiles: staging folder %s: %w", s.loc.URL, err)
		}
	}
	return nil
}

// kindWait bounds how long claimKind waits for a kind file another task
// has created but not yet written (on a local disk and HDFS the name
// exists before its bytes do).
var kindWait = 10 * time.Second

// claimKind creates the folder's kind file holding kind unless a task
// created it first, and returns the kind the folder is claimed for.
func claimKind(fsys vfs.WriteFS, root, kind string) (string, error) {
	ex, ok := fsys.(vfs.ExclusiveFS)
	if !ok {
		return "", fmt.Errorf("%s cannot create a file exclusively, so tasks cannot agree on the folder's kind", fsys)
	}
	if err := fsys.MkdirAll(root); err != nil {
		return "", err
	}
	name := path.Join(root, kindFile)
	won, err := vfs.WriteExclusive(ex, name, []byte(kind+"\n"))
	if err != nil {
		return "", fmt.Errorf("claim %s: %w", name, err)
	}
	if won {
		return kind, nil
	}
	deadline := time.Now().Add(kindWait)
	for {
		b, err := vfs.ReadFile(fsys, name)
		if notExist(err) {
			return "", fmt.Errorf("%s was created by another task and then removed; run this task again", name)
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", name, err)
		}
		switch got := strings.TrimSpace(string(b)); got {
		case kindPhases, kindOneProcess:
			return got, nil
		case "":
			// Created, not yet written.
		default:
			return "", fmt.Errorf("%s holds %q, not a kind of job rekey stages (%s or %s): the folder was written by something else", name, got, kindPhases, kindOneProcess)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s is still empty after %s: the task that created it died before writing it; remove the file and run again", name, kindWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chooseRegionMap keeps the folder's region map, or makes one (from
// o.SplitKeys or the live table) and records it. A spill task publishes
// its region map only if no other task did first, and then partitions by
// the one published.
func (s *Sink) chooseRegionMap(ctx context.Context) error {
	var p RegionMap
	found, err := readRegionMap(s.fs, path.Join(s.root, regionMapFile), &p)
	if err != nil {
		return err
	}
	switch {
	case found:
		if p.Table != s.o.Table {
			return fmt.Errorf("hfiles: staging folder %s holds files for table %s, not %s; use another folder", s.loc.URL, p.Table, s.o.Table)
		}
		if err := p.check(); err != nil {
			return err
		}
	case len(s.o.SplitKeys) > 0 || s.o.Client == nil:
		pp, err := RegionMapFromSplitKeys(s.o.Table, s.o.SplitKeys)
		if err != nil {
			return err
		}
		p = *pp
	default:
		pp, err := RegionMapFromTable(ctx, s.o.Client, s.o.Table)
		if err != nil {
			return err
		}
		p = *pp
	}
	switch {
	case found:
	case s.task.Phase == PhaseSpill:
		pub, err := publishRegionMap(s.fs, path.Join(s.root, regionMapFile), &p)
		if err != nil {
			return err
		}
		p = *pub
	default:
		if err := s.record(path.Join(s.root, regionMapFile), &p); err != nil {
			return err
		}
	}
	return s.useRegionMap(&p)
}

// useRegionMap makes p the sink's region map and notes its digest, which a spill
// task records so the merge can check every shard used the same region map.
func (s *Sink) useRegionMap(p *RegionMap) error {
	d, err := p.digest()
	if err != nil {
		return err
	}
	s.regions, s.regionsDigest = p, d
	return nil
}

// readFamilies takes the HFile options of each family from the live
// table, unless o.Families gives them or the sink is offline.
func (s *Sink) readFamilies(ctx context.Context) error {
	if s.o.Client == nil || s.o.Families != nil {
		return nil
	}
	fams, err := tableFamilies(ctx, s.o.Client, s.o.Table)
	if err != nil {
		return err
	}
	s.o.Families = fams
	return nil
}

// RegionMap is the target regions the sink partitions by.
func (s *Sink) RegionMap() *RegionMap { return s.regions }

// Name implements sink.Sink.
func (s *Sink) Name() string { return "hfiles" }

// Stats returns what the sink did so far.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Examples = slices.Clone(st.Examples)
	st.PeakMemory = s.peak.Load()
	st.PeakStaging = s.peakStaged.Load()
	return st
}

// Account implements sink.Accounted: the run's summary carries Stats.
func (s *Sink) Account() any { return s.Stats() }

// Close releases the staging folder's file system; closing again is a
// no-op.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.loc.Close()
		if s.local != nil {
			if err := s.local.close(); s.closeErr == nil {
				s.closeErr = err
			}
		}
	})
	return s.closeErr
}

// addStaged accounts n more bytes in the staging folder and reports
// whether that stays within the bound.
func (s *Sink) addStaged(n int64) error {
	v := s.staged.Add(n)
	for {
		p := s.peakStaged.Load()
		if v <= p || s.peakStaged.CompareAndSwap(p, v) {
			break
		}
	}
	if s.o.MaxStagingBytes > 0 && v > s.o.MaxStagingBytes {
		return fmt.Errorf("%w: %s would hold %d bytes, bound %d", ErrStagingFull, s.loc.URL, v, s.o.MaxStagingBytes)
	}
	return nil
}

func (s *Sink) hold(n int64) {
	v := s.held.Add(n)
	for {
		p := s.peak.Load()
		if v <= p || s.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// url gives the file system URL of a path in the staging folder, as the
// region servers must be told it for a bulk load: the staging URL's scheme
// and authority (the NameNode, the bucket, CONTAINER@ACCOUNT) with the
// path, so a folder on S3 is loaded from s3a://BUCKET/... (the scheme the
// user gave, which names the region servers' Hadoop file system), and a
// local folder from file://. The path goes in as it is, unescaped: Hadoop's
// Path parses the string that way (it would take %20 for three characters).
func (s *Sink) url(p string) string {
	if u, err := url.Parse(s.loc.URL); err == nil && strings.Contains(s.loc.URL, "://") && u.Scheme != "file" {
		auth := u.Host
		if u.User != nil {
			auth = u.User.String() + "@" + auth
		}
		return u.Scheme + "://" + auth + p
	}
	return "file://" + p
}

// Begin implements sink.Sink.
func (s *Sink) Begin(ctx context.Context, si sink.SplitInfo) (sink.SplitSink, error) {
	if !s.task.spills() {
		return nil, fmt.Errorf("hfiles: split %s: a %s task reads no splits", si.ID, s.task)
	}
	if rec := s.written[si.ID]; rec != nil {
		return &writtenSplit{rec: rec}, nil
	}
	key := splitKey(si.ID)
	fsys, dir := s.fs, path.Join(s.root, s.spill, runsDir, key)
	if s.local != nil {
		fsys, dir = s.local.fs, path.Join(s.local.root, runsDir, key)
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, s.full(fmt.Errorf("hfiles: split %s: create %s: %w", si.ID, dir, err), "spilling split "+si.ID)
	}
	attempt := fmt.Sprintf("%x%04x", time.Now().UnixNano(), s.attempts.Add(1)&0xffff)
	return &splitSink{s: s, info: si, key: key, dir: dir, attempt: attempt, budget: s.o.splitBudget(),
		inOrder: s.mayWriteDirect()}, nil
}

// entry is one buffered cell: its target region, its key fields and
// where its bytes lie in the arena: the row at rowOff, then family,
// qualifier, value and tags back to back at off, in the same chunk. It
// holds no pointers, and is 40 bytes where an entry holding a cell.Cell
// took 152 (five slice headers among them): a split of a million cells
// doubles, sorts and is scanned by the garbage collector as a plain block
// of memory (measured on the heavy split's shape, BenchmarkStageHeavySplit:
// growing and sorting a slice of full cells cost more than the rest of the
// spill together).
//
// A cell in the row of the cell written before it, in the same chunk,
// shares that cell's row bytes (rowOff) instead of copying them: a wide
// row's cells all do, and the row is often half of a cell's bytes. The
// sort then knows two such rows equal without comparing them.
type entry struct {
	ts          int64
	off, rowOff uint32 // offsets of the cell's bytes after the row and of its row
	qual, val   uint32 // qualifier and value lengths
	region      int32
	chunk       uint16 // arena chunk (at most maxChunks)
	row, tags   uint16 // row and tags lengths (HBase bounds both below 64 KiB)
	fam         uint8  // family length (at most 127 in HBase)
	typ         cell.Type
}

// maxChunks bounds a split's arena chunks by what entry.chunk holds; the
// chunk size (an eighth of the split's share at least) keeps a split far
// below it.
const maxChunks = math.MaxUint16

const entrySize = int64(unsafe.Sizeof(entry{}))

// arenaChunk is the unit the sort buffer copies cell bytes into; entries
// point into their chunk by offset, so chunks are never reallocated.
const arenaChunk = 256 << 10

// splitSink buffers one split's cells, spilling sorted runs.
type splitSink struct {
	s       *Sink
	info    sink.SplitInfo
	key     string
	dir     string
	attempt string
	budget  int64

	ents   []entry
	chunks [][]byte
	cur    int   // the chunk Write appends to (later ones are kept empty for reuse)
	held   int64 // bytes accounted in s.held

	runs   []runFile   // spilled, still named .tmp
	sorted bool        // ents are in sort order (a kept split's)
	ranges []keptRange // a kept split's partitions in ents
	cells  int64
	bytes  int64
	done   bool

	// Writing straight into HFiles (direct.go).
	inOrder  bool        // every cell so far came after its partition's last
	tails    []orderTail // each partition's last entry, while inOrder
	lastTail int
	direct   bool // cells go straight to outs
	outs     []*directOut
	lastOut  *directOut
	segs     []segmentFile // files finished
	directN  int
}

// view points c's byte fields at e's bytes in the arena.
func (w *splitSink) view(e *entry, c *cell.Cell) {
	ch := w.chunks[e.chunk]
	n := uint32(e.row)
	c.Row = ch[e.rowOff : e.rowOff+n : e.rowOff+n]
	b := ch[e.off:]
	n = uint32(e.fam)
	c.Family = b[:n:n]
	b = b[n:]
	c.Qualifier = b[:e.qual:e.qual]
	b = b[e.qual:]
	c.Value = b[:e.val:e.val]
	b = b[e.val:]
	if e.tags > 0 {
		n = uint32(e.tags)
		c.Tags = b[:n:n]
	} else {
		c.Tags = nil
	}
	c.Timestamp, c.Type = e.ts, e.typ
}

// sharedRow says whether c can share the row bytes of the entry written
// last (sharing, the row is not copied): the same row, and room for the
// rest of c (rest bytes) in that entry's chunk, the current one.
func (w *splitSink) sharedRow(c *cell.Cell, rest int) bool {
	if len(w.ents) == 0 {
		return false
	}
	p := &w.ents[len(w.ents)-1]
	if int(p.chunk) != w.cur || int(p.row) != len(c.Row) {
		return false
	}
	ch := w.chunks[w.cur]
	return cap(ch)-len(ch) >= rest && bytes.Equal(ch[p.rowOff:p.rowOff+uint32(p.row)], c.Row)
}

// Write implements sink.SplitSink: it copies c into the sort buffer
// and spills a run when the split's share of the memory budget is full.
func (w *splitSink) Write(ctx context.Context, c *cell.Cell) error {
	if w.done {
		return fmt.Errorf("hfiles: split %s: Write after Commit or Abort", w.info.ID)
	}
	if len(c.Row) > math.MaxUint16 || len(c.Family) > math.MaxUint8 || len(c.Tags) > math.MaxUint16 || int64(len(c.Qualifier)) > math.MaxUint32 || int64(len(c.Value)) > math.MaxUint32 {
		return fmt.Errorf("hfiles: split %s: cell %s: row %d, family %d, qualifier %d, value %d or tags %d bytes: more than an HFile cell can hold", w.info.ID, c, len(c.Row), len(c.Family), len(c.Qualifier), len(c.Value), len(c.Tags))
	}
	if w.direct {
		ok, err := w.writeDirect(ctx, c)
		if err != nil {
			return w.s.full(err, "writing split "+w.info.ID)
		}
		if ok {
			w.cells++
			w.bytes += cell.Size(c)
			return nil
		}
		// Out of order: the files written stay as the split's segments,
		// and its other cells go through the sort buffer.
		if err := w.endDirect(); err != nil {
			return w.s.full(err, "writing split "+w.info.ID)
		}
	}
	rest := len(c.Family) + len(c.Qualifier) + len(c.Value) + len(c.Tags)
	shared := w.sharedRow(c, rest)
	n := rest
	if !shared {
		n += len(c.Row)
	}
	// Spill before taking memory that would go past the split's share, so
	// the share is a bound, not a trigger (a single cell bigger than the
	// share is the one exception: it is held alone).
	chunk, next, grow := w.needs(n)
	if w.held+int64(chunk)+grow > w.budget && len(w.ents) > 0 {
		if w.inOrder {
			// In order so far: write into HFiles instead of a run.
			if err := w.goDirect(ctx); err != nil {
				return w.s.full(err, "writing split "+w.info.ID)
			}
			if w.direct {
				return w.Write(ctx, c)
			}
		}
		if err := w.spill(ctx); err != nil {
			return err
		}
		// The spill emptied the buffer: nothing is left to share.
		shared, n = false, rest+len(c.Row)
		chunk, next, grow = w.needs(n)
	}
	if w.held+int64(chunk)+grow > w.budget && len(w.ents) == 0 && w.held > 0 {
		// The buffer kept from the last run is the wrong shape for this
		// cell (a bigger cell than its chunks, or entries to grow past the
		// share): give it back and start from nothing, as a fresh split does.
		w.release()
		chunk, next, grow = w.needs(n)
	}
	if chunk > 0 && len(w.chunks) >= maxChunks {
		return fmt.Errorf("hfiles: split %s: more than %d arena chunks (the split's share of the memory budget is too small for its cells)", w.info.ID, maxChunks)
	}
	// The memory is taken here, as one reservation (reserve), so that the
	// buffers of all splits, kept ones included, stay within the budget.
	if err := w.s.reserve(ctx, int64(chunk)+grow); err != nil {
		return err
	}
	switch {
	case chunk > 0:
		w.chunks = append(w.chunks, make([]byte, 0, chunk))
		w.cur = len(w.chunks) - 1
	case next:
		w.cur++
	}
	if grow > 0 {
		// make, not append or slices.Grow: the capacity is exactly what
		// was accounted.
		ents := make([]entry, len(w.ents), cap(w.ents)+int(grow/entrySize))
		copy(ents, w.ents)
		w.held -= int64(cap(w.ents)) * entrySize
		grow = int64(cap(ents)) * entrySize
		w.ents = ents
	}
	cost := int64(chunk) + grow
	ci := w.cur
	buf := w.chunks[ci]
	var rowOff int
	if shared {
		rowOff = int(w.ents[len(w.ents)-1].rowOff)
	} else {
		rowOff = len(buf)
		buf = append(buf, c.Row...)
	}
	off := len(buf)
	buf = append(buf, c.Family...)
	buf = append(buf, c.Qualifier...)
	buf = append(buf, c.Value...)
	buf = append(buf, c.Tags...)
	w.chunks[ci] = buf
	w.ents = append(w.ents, entry{
		ts: c.Timestamp, chunk: uint16(ci), off: uint32(off), rowOff: uint32(rowOff),
		qual: uint32(len(c.Qualifier)), val: uint32(len(c.Value)),
		region: int32(w.s.regions.locate(c.Row)),
		row:    uint16(len(c.Row)), tags: uint16(len(c.Tags)), fam: uint8(len(c.Family)), typ: c.Type,
	})
	w.held += cost // reserved above: chunk + grow is cost less the old entries
	w.cells++
	w.bytes += cell.Size(c)
	if w.inOrder {
		w.trackOrder()
		if w.inOrder && w.held >= directAfter {
			// In order long enough to expect the rest in order too.
			return w.s.full(w.goDirect(ctx), "writing split "+w.info.ID)
		}
	}
	return nil
}

// needs returns the bytes Write must allocate to hold a cell of n bytes:
// a new arena chunk, and room for more entries (the slice doubles). next
// says the cell goes into the kept chunk after the current one instead,
// which costs nothing.
func (w *splitSink) needs(n int) (chunk int, next bool, grow int64) {
	if len(w.chunks) == 0 || cap(w.chunks[w.cur])-len(w.chunks[w.cur]) < n {
		if w.cur+1 < len(w.chunks) && cap(w.chunks[w.cur+1]) >= n {
			next = true
		} else {
			chunk = max(min(arenaChunk, int(w.budget/8)), n)
		}
	}
	if cap(w.ents) == len(w.ents) {
		// Bounded so that doubling a large slice cannot by itself pass the
		// share.
		more := max(min(cap(w.ents), int((w.budget/2)/entrySize)), 64)
		grow = int64(more) * entrySize
	}
	return chunk, next, grow
}

// reuse empties the buffer after a run is spilled but keeps its memory,
// still reserved: the split's next run fills the same entries and
// chunks, where allocating them again would double the entries from 64
// and fault in fresh chunks for every run (on the heavy split's shape,
// growing the entries was two fifths of Write).
func (w *splitSink) reuse() {
	w.ents = w.ents[:0]
	for i := range w.chunks {
		w.chunks[i] = w.chunks[i][:0]
	}
	w.cur = 0
	w.sorted = false
	w.ranges = nil
}

// release gives the sort buffer's memory back.
func (w *splitSink) release() {
	w.s.hold(-w.held)
	w.held = 0
	w.ents = nil
	w.chunks = nil
	w.cur = 0
	w.sorted = false
	w.ranges = nil
}

// spill sorts the buffer and writes it as one run file.
func (w *splitSink) spill(ctx context.Context) error {
	return w.s.full(w.spillRun(ctx), "spilling split "+w.info.ID)
}

func (w *splitSink) spillRun(ctx context.Context) error {
	if len(w.ents) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !w.sorted {
		w.sort()
	}
	rf := runFile{Name: path.Join(w.s.spill, runsDir, w.key, fmt.Sprintf("%s-%04d%s", w.attempt, len(w.runs), runSuffix))}
	if w.s.local != nil {
		rf.Local = w.s.local.id
	}
	fsys, final := w.s.runFS(&rf)
	name := w.s.writeName(final, tmpSuffix)
	if rf.Local != "" {
		name = final + tmpSuffix // a local disk renames in place
	}
	if rf.Local == "" {
		if err := w.s.fenced("creating run " + final); err != nil {
			return err
		}
	}
	f, err := fsys.Create(name)
	if err != nil {
		return fmt.Errorf("hfiles: split %s: create run %s: %w", w.info.ID, name, err)
	}
	rw, err := newRunWriter(f, w.s.o.RunCompression, w.s.o.BatchBytes)
	if err != nil {
		vfs.Abort(f)
		fsys.Remove(name)
		return err
	}
	if rf.Local == "" {
		rw.publish = func() error { return w.s.publish(f, "writing run "+final) }
	}
	var c cell.Cell
	for i := range w.ents {
		w.view(&w.ents[i], &c)
		if err := rw.add(int(w.ents[i].region), &c); err != nil {
			rw.abort()
			fsys.Remove(name)
			return fmt.Errorf("hfiles: split %s: %w", w.info.ID, err)
		}
	}
	parts, size, err := rw.close()
	if err != nil {
		fsys.Remove(name)
		return fmt.Errorf("hfiles: split %s: %w", w.info.ID, err)
	}
	rf.Size, rf.Parts = size, parts
	w.runs = append(w.runs, rf)
	w.reuse()
	if rf.Local != "" {
		w.s.local.held.Add(size)
		return nil
	}
	if err := w.s.addStaged(size); err != nil {
		return fmt.Errorf("hfiles: split %s: after spilling %s: %w", w.info.ID, rf.Name, err)
	}
	return nil
}

// sort orders the buffer by (region, family, cell.Compare).
func (w *splitSink) sort() {
	slices.SortFunc(w.ents, func(a, b entry) int { return w.compare(&a, &b) })
	w.sorted = true
}

// compare orders entries a and b by (region, family, cell.Compare),
// reading their bytes in the arena in place: the sort calls it n log n
// times, and building two cells a call cost more than the comparisons.
func (w *splitSink) compare(a, b *entry) int {
	if a.region != b.region {
		return int(a.region) - int(b.region)
	}
	ca, cb := w.chunks[a.chunk], w.chunks[b.chunk]
	fa, fb := ca[a.off:a.off+uint32(a.fam)], cb[b.off:b.off+uint32(b.fam)]
	if c := bytes.Compare(fa, fb); c != 0 {
		return c
	}
	if a.fam == 0 {
		// cell.Compare's rule for the empty family (a row's last-key
		// marker) is its own; such a cell is never staged, but the order
		// stays cell.Compare's whatever the input.
		var x, y cell.Cell
		w.view(a, &x)
		w.view(b, &y)
		return cell.Compare(&x, &y)
	}
	// Entries sharing their row bytes have the same row, uncompared.
	if a.chunk != b.chunk || a.rowOff != b.rowOff {
		if c := bytes.Compare(ca[a.rowOff:a.rowOff+uint32(a.row)], cb[b.rowOff:b.rowOff+uint32(b.row)]); c != 0 {
			return c
		}
	}
	qa := a.off + uint32(a.fam)
	qb := b.off + uint32(b.fam)
	if c := bytes.Compare(ca[qa:qa+a.qual], cb[qb:qb+b.qual]); c != 0 {
		return c
	}
	switch {
	case a.ts > b.ts:
		return -1
	case a.ts < b.ts:
		return 1
	}
	return int(b.typ) - int(a.typ)
}

// Commit implements sink.SplitSink: it spills what is buffered,
// renames the split's runs from .tmp, and records them in
// splits/SPLIT.json. A split committed before (a redo) has its record
// replaced and its old runs removed. A split that spilled nothing and
// fits in the sink's memory is kept there instead (keep, held.go): its
// Ack says Held, and it is recorded once its cells are on disk.
func (w *splitSink) Commit(ctx context.Context) (sink.Ack, error) {
	ack, err := w.commit(ctx)
	return ack, w.s.full(err, "spilling split "+w.info.ID)
}

func (w *splitSink) commit(ctx context.Context) (sink.Ack, error) {
	if w.done {
		return sink.Ack{}, fmt.Errorf("hfiles: split %s: Commit after Commit or Abort", w.info.ID)
	}
	if w.direct || (w.inOrder && len(w.ents) > 0) {
		// In order to the end: the rest goes into the split's HFiles too.
		if !w.direct {
			if err := w.goDirect(ctx); err != nil {
				return sink.Ack{}, err
			}
		}
		if err := w.endDirect(); err != nil {
			return sink.Ack{}, err
		}
	}
	if w.s.mayKeep(w) {
		return w.keep()
	}
	if err := w.spill(ctx); err != nil {
		return sink.Ack{}, err
	}
	w.release()
	if err := w.record(); err != nil {
		return sink.Ack{}, err
	}
	return sink.Ack{Cells: w.cells, Bytes: w.bytes}, nil
}

// record renames the split's runs from .tmp (on an object store they were
// written under their final names: nothing to rename) and writes its
// record, replacing (and removing the runs of) an earlier attempt's. It
// runs only after every run's Close returned: a run the record names is
// whole.
func (w *splitSink) record() error {
	for i := range w.runs {
		r := &w.runs[i]
		if w.s.whole && r.Local == "" {
			continue
		}
		fsys, final := w.s.runFS(r)
		if err := fsys.Rename(final+tmpSuffix, final); err != nil {
			return fmt.Errorf("hfiles: split %s: rename run %s: %w", w.info.ID, final, err)
		}
	}
	recName := w.recordName()
	var old splitRecord
	hadOld, err := readJSON(w.s.fs, recName, &old)
	if err != nil {
		return err
	}
	rec := splitRecord{ID: w.info.ID, Attempt: w.attempt, Runs: w.runs, Segments: w.segs, Cells: w.cells, Bytes: w.bytes, SourceBytes: w.info.Bytes, Lease: state.Stamped(w.s.o.Lease)}
	if rec.Runs == nil {
		rec.Runs = []runFile{}
	}
	if err := w.s.record(recName, &rec); err != nil {
		return fmt.Errorf("hfiles: split %s: %w", w.info.ID, err)
	}
	w.done = true
	if hadOld && old.Attempt != w.attempt {
		w.s.removeRuns(&old)
	}
	w.s.mu.Lock()
	w.s.stats.Runs += int64(len(w.runs))
	for _, r := range w.runs {
		w.s.stats.RunBytes += r.Size
	}
	w.s.stats.CellsStaged += w.cells
	w.s.stats.Direct += int64(len(w.segs))
	w.s.mu.Unlock()
	return nil
}

// recordName is the split's record, splits/SPLIT.json.
func (w *splitSink) recordName() string {
	return path.Join(w.s.root, w.s.spill, splitsDir, w.key+".json")
}

// removeRuns removes the runs of rec, an attempt no longer part of the
// job. Failing to remove one is harmless: the next New removes strays.
func (s *Sink) removeRuns(rec *splitRecord) {
	s.removeSegments(rec)
	for i := range rec.Runs {
		r := &rec.Runs[i]
		fsys, p := s.runFS(r)
		if fsys != nil && fsys.Remove(p) == nil {
			s.unstage(r)
		}
	}
}

// unstage takes the run r, removed, out of the bytes its folder holds.
func (s *Sink) unstage(r *runFile) {
	if r.Local != "" && s.local != nil {
		s.local.held.Add(-r.Size)
		return
	}
	s.staged.Add(-r.Size)
}

// Abort implements sink.SplitSink: it drops the buffer and removes
// the split's runs of this attempt (a committed earlier attempt stays).
func (w *splitSink) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.release()
	w.abortDirect()
	for i := range w.runs {
		r := &w.runs[i]
		fsys, p := w.s.runFS(r)
		fsys.Remove(p + tmpSuffix)
		fsys.Remove(p)
		w.s.unstage(r)
	}
	w.runs = nil
}

// writeName is the name a file whose final name is final is written
// under: final itself on an object store (whole), else the temporary
// name tmp makes of it (a suffix, or a prefix of the base name), renamed
// to final once closed.
func (s *Sink) writeName(final, tmp string) string {
	if s.whole {
		return final
	}
	if strings.HasPrefix(tmp, "_") {
		return path.Join(path.Dir(final), tmp+path.Base(final))
	}
	return final + tmp
}
