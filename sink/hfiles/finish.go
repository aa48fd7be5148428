package hfiles

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
	"golang.org/x/sync/errgroup"
)

// Finish implements sink.Sink. In one process (Task.Phase PhaseAll) it
// merges every partition's runs into HFiles under
// STAGING/hfiles/REGION/FAMILY/ (skipping HFiles a previous Finish
// recorded), removes the runs, and bulk loads region by region (skipping
// regions already loaded) unless the sink is offline or NoLoad; then it
// says how to load the files later. A phase task does its phase's part
// instead: a spill task commits its shard, a merge task merges its part's
// partitions, the load task loads every part's HFiles (phases.go).
func (s *Sink) Finish(ctx context.Context, rep sink.Reporter) error {
	switch s.task.Phase {
	case PhaseSpill:
		return s.commitSpill(rep)
	case PhaseMerge:
		return s.mergePart(ctx, rep)
	case PhaseLoad:
		return s.loadPhase(ctx, rep)
	}
	recs, err := readSplits(s.fs, s.root)
	if err != nil {
		return err
	}
	st, found, err := s.readFinish()
	if err != nil {
		return err
	}
	var late []LostSplit
	if !st.Written {
		// A record that landed late from an attempt that lost the folder
		// stages nothing; checkStaged fails the merge if the run counts
		// its split done, and the next run redoes it.
		if recs, late, err = s.currentRecords(recs, s.root, false); err != nil {
			return err
		}
		for _, l := range late {
			rep.Printf("hfiles: split %s: %s", l.ID, l.Why)
		}
		// A record whose runs are not here (Lost, and not redone) stages
		// nothing; checkStaged fails the merge if the run counts it done.
		recs, _ = s.dropLost(recs)
	}
	// The kept splits count as the records they get once their HFiles are
	// written, so a Finish that dies first leaves finish.json of other
	// splits than the resumed run's (those splits are redone).
	kept := s.takeKept()
	recs = keptRecords(recs, kept)
	if st, err = s.settleFinish(st, found, recs); err != nil {
		return err
	}
	err = s.mergeAll(ctx, rep, recs, kept, st)
	s.releaseKept()
	if errors.Is(err, ErrSplitsMissing) && len(late) > 0 {
		err = fmt.Errorf("%w (an attempt that lost this folder wrote split records late, over this run's; run again with --resume, without --fresh: it redoes those splits)", err)
	}
	if err != nil {
		return err
	}
	if s.o.Client == nil || s.o.NoLoad {
		s.printLoadLater(rep, st)
		return nil
	}
	return s.timedLoad(ctx, rep, st)
}

// mergeAll merges the partitions of recs and of the kept splits this sink
// merges (all of them in one process, its part's in a merge task) unless
// st records them written, then accounts the job's figures.
func (s *Sink) mergeAll(ctx context.Context, rep sink.Reporter, recs []*splitRecord, kept []*splitSink, st *finishState) error {
	if !st.Written {
		if err := s.checkStaged(recs); err != nil {
			return err
		}
		began := time.Now()
		err := s.writeAll(ctx, rep, recs, kept, st)
		s.mu.Lock()
		s.stats.MergeSeconds = time.Since(began).Seconds()
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	s.account(recs, st)
	return s.checkRepeats()
}

// ErrRepeatedCells is matched by the error of a merge or load that found
// equal cells under a job that maps old cells one to one
// (Options.OneToOne).
var ErrRepeatedCells = errors.New("hfiles: cells staged twice")

// checkRepeats fails a one-to-one job whose merge collapsed cells: no two
// old cells become one new cell, and the snapshot reader yields each old
// cell once, so an equal pair is one cell staged twice, which hides a
// split read twice or in another cut, and perhaps one never read.
func (s *Sink) checkRepeats() error {
	s.mu.Lock()
	dups, colls := s.stats.Duplicates, s.stats.Collisions
	s.mu.Unlock()
	if !s.o.OneToOne || dups+colls == 0 {
		return nil
	}
	return fmt.Errorf("%w: the merge met %d duplicate and %d colliding cells in %s, but the job maps every old cell to a new cell of its own (no field dropped, no families merged, no timestamp set), so each is a cell staged twice: splits of the snapshot were staged more than once or in different cuts; stage the job again with --fresh on every task", ErrRepeatedCells, dups, colls, s.loc.URL)
}

// checkStaged makes sure, in one process, that every split of the run
// (Options.SplitIDs, when given) has a record or is kept: the run calls
// Finish only once it counts every split done, and a done split whose
// record is gone (a staging folder emptied under a kept checkpoint, runs
// lost with their local folder) would otherwise be merged as if it had no
// cells.
func (s *Sink) checkStaged(recs []*splitRecord) error {
	if s.task.Phase != PhaseAll || s.o.SplitIDs == nil {
		return nil
	}
	have := make(map[string]bool, len(recs))
	for _, r := range recs {
		have[r.ID] = true
	}
	var missing []string
	for _, id := range s.o.SplitIDs {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of the run's %d splits have no record in %s (first: %s), though the run counts them done: their runs are gone; stage again into a fresh folder, or run with --fresh", ErrSplitsMissing, len(missing), len(s.o.SplitIDs), s.loc.URL, missing[0])
}

// ErrSplitsMissing is matched by the error of a merge that finds splits
// the run counts done without a record in the staging folder.
var ErrSplitsMissing = errors.New("hfiles: splits missing from the staging folder")

// account sets the spill and merge figures of Stats from the records (a
// resumed process staged only part of the job itself).
func (s *Sink) account(recs []*splitRecord, st *finishState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Runs, s.stats.RunBytes, s.stats.CellsStaged, s.stats.Direct = 0, 0, 0, 0
	for _, r := range recs {
		s.stats.Runs += int64(len(r.Runs))
		for _, f := range r.Runs {
			s.stats.RunBytes += f.Size
		}
		s.stats.CellsStaged += r.Cells
		s.stats.Direct += int64(len(r.Segments))
	}
	s.stats.Cells, s.stats.HFiles, s.stats.HFileBytes = 0, 0, 0
	s.stats.Duplicates, s.stats.Collisions = 0, 0
	for _, ps := range st.Parts {
		for _, f := range ps.Files {
			s.stats.Cells += f.Cells
			s.stats.HFiles++
			s.stats.HFileBytes += f.Size
		}
		s.stats.Duplicates += ps.Duplicates
		s.stats.Collisions += ps.Collisions
	}
}

// printLoadLater says how to load the HFiles later: rekey load (Options.
// LoadCommand), or HBase's own tool.
func (s *Sink) printLoadLater(rep sink.Reporter, st *finishState) {
	tool := fmt.Sprintf("hbase org.apache.hadoop.hbase.tool.BulkLoadHFilesTool -Dcreate.table=no %s %s -loadTable", s.url(path.Join(s.root, hfilesDir)), s.o.Table)
	cmd := tool
	if s.o.LoadCommand != "" {
		cmd = s.o.LoadCommand
	}
	s.mu.Lock()
	s.stats.LoadCommand = cmd
	s.mu.Unlock()
	where := ""
	if !strings.HasPrefix(s.loc.URL, "hdfs://") {
		where = " after copying the folder to the cluster's HDFS (and naming it there)"
	}
	also := ""
	if cmd != tool {
		also = "\nor with HBase's own tool (it re-splits files whose region split since):\n  " + tool
	}
	rep.Printf("hfiles: %d HFiles in %s, not loaded; to load them into %s%s:\n  %s%s", len(allFiles(st)), s.url(path.Join(s.root, hfilesDir)), s.o.Table, where, cmd, also)
}

// timedLoad bulk loads st's HFiles, timing the load.
func (s *Sink) timedLoad(ctx context.Context, rep sink.Reporter, st *finishState) error {
	began := time.Now()
	err := s.loadAll(ctx, rep, st)
	s.mu.Lock()
	s.stats.LoadSeconds = time.Since(began).Seconds()
	s.mu.Unlock()
	return err
}

func allFiles(st *finishState) []hfileInfo {
	var out []hfileInfo
	for _, ps := range st.Parts {
		out = append(out, ps.Files...)
	}
	return out
}

// finishState reads finish.json, or starts a new one when there is none or
// when the committed splits changed since it was written.
func (s *Sink) finishState(recs []*splitRecord) (*finishState, error) {
	st, found, err := s.readFinish()
	if err != nil {
		return nil, err
	}
	return s.settleFinish(st, found, recs)
}

// settleFinish is finishState for st, finish.json as read (found says it
// was there): kept when it was merged from recs, else dropped with its
// HFiles (dropStale) and started anew.
func (s *Sink) settleFinish(st *finishState, found bool, recs []*splitRecord) (*finishState, error) {
	fp := fingerprint(recs)
	if found && st.Splits != fp {
		// Segments an earlier merge adopted are still sources of this one.
		if err := s.restoreSegments(recordedSegments(recs)); err != nil {
			return nil, err
		}
		if err := s.dropStale(st); err != nil {
			return nil, err
		}
		found = false
	}
	if !found {
		st = &finishState{Splits: fp}
	}
	if st.Parts == nil {
		st.Parts = map[string]*partState{}
	}
	if st.Loaded == nil {
		st.Loaded = map[string]bool{}
	}
	return st, nil
}

// dropStale removes the HFiles of st, merged from an earlier set of runs,
// so the merge starts over. In one process that is every HFile, and only
// before any is written in full or loaded. A merge part removes only the
// files its own state names: the other parts' files are theirs, and a
// part redone after a shard was spilled again merges afresh (the load
// refuses to mix what it already loaded with new files).
func (s *Sink) dropStale(st *finishState) error {
	if err := s.fenced("removing stale HFiles"); err != nil {
		return err
	}
	if s.task.Phase == PhaseMerge {
		for _, f := range allFiles(st) {
			if err := s.fs.Remove(path.Join(s.root, f.Name)); err != nil && !notExist(err) {
				return fmt.Errorf("hfiles: remove stale HFile %s: %w", f.Name, err)
			}
		}
		return nil
	}
	if len(st.Loaded) > 0 || len(st.Sent) > 0 || st.Written {
		return fmt.Errorf("hfiles: staging folder %s: splits were staged again after their HFiles were written or loaded; stage into a fresh folder", s.loc.URL)
	}
	// HFiles of an earlier set of runs are stale: start the merge over.
	if err := s.fs.RemoveAll(path.Join(s.root, hfilesDir)); err != nil {
		return fmt.Errorf("hfiles: remove stale HFiles: %w", err)
	}
	return nil
}

// readFinish reads finish.json as it is: a zero state, not found, when
// there is none.
func (s *Sink) readFinish() (*finishState, bool, error) {
	var st finishState
	found, err := readJSON(s.fs, path.Join(s.root, s.state), &st)
	if err != nil {
		return nil, false, err
	}
	return &st, found, nil
}

// saveFinish saves the merge's or load's state. A load under a lease saves
// it under its generation's name (loadStateName, which says why) and then,
// once, removes the older generations' states, which its own carries on.
func (s *Sink) saveFinish(st *finishState) error {
	if s.o.Lease != nil {
		st.LeaseToken, st.LeaseGeneration = s.o.Lease()
	}
	name := s.state
	perGeneration := s.state == (Task{Phase: PhaseLoad}).stateFile() && st.LeaseGeneration > 0
	if perGeneration {
		name = loadStateName(st.LeaseGeneration)
	}
	if err := s.record(path.Join(s.root, name), st); err != nil {
		return err
	}
	s.loadedUnsaved = false // every save carries the loaded marks
	if perGeneration && s.prunedGen != st.LeaseGeneration {
		s.pruneLoadStates(st.LeaseGeneration)
	}
	return nil
}

// pruneLoadStates removes the load states older than generation gen (and
// load/state.json), now that gen's state, which carries theirs on, is
// saved. Only older ones: an attempt that lost the load removes nothing
// its successor saved. A failed removal is left for the next generation:
// readers take the newest state whatever else is there.
func (s *Sink) pruneLoadStates(gen int64) {
	_, older, err := loadStateFiles(s.fs, s.root)
	if err != nil {
		return
	}
	older = append(older, Task{Phase: PhaseLoad}.stateFile())
	for _, name := range older {
		if g, ok := loadStateGen(path.Base(name)); ok && g >= gen {
			continue
		}
		if err := s.fs.Remove(path.Join(s.root, name)); err != nil && !notExist(err) {
			return
		}
	}
	s.prunedGen = gen
}

// partition is one region and family of the region map, with the runs and the
// kept splits' buffers that hold its cells, and their bytes.
type partition struct {
	region int
	family string
	bytes  int64
	runs   []partRun
	kept   []keptPart
	segs   []partSeg
	// pipe says the partition is heavy enough to merge on two goroutines.
	pipe bool
}

// partitions gathers every partition of the committed runs and the kept
// splits, in the order the records name them.
func (s *Sink) partitions(recs []*splitRecord, kept []*splitSink) ([]*partition, error) {
	type pk struct {
		region int
		family string
	}
	byKey := map[pk]*partition{}
	var out []*partition
	get := func(region int, family string) *partition {
		k := pk{region, family}
		pt := byKey[k]
		if pt == nil {
			pt = &partition{region: region, family: family}
			byKey[k] = pt
			out = append(out, pt)
		}
		return pt
	}
	for _, r := range recs {
		for i, f := range r.Runs {
			for _, p := range f.Parts {
				if p.Region < 0 || p.Region >= len(s.regions.Regions) {
					return nil, fmt.Errorf("hfiles: run %s names region %d, but the plan has %d", f.Name, p.Region, len(s.regions.Regions))
				}
				pt := get(p.Region, p.Family)
				fsys, name := s.runFS(&r.Runs[i])
				if fsys == nil {
					return nil, fmt.Errorf("hfiles: split %s: run %s is in another local run folder (ID %s) than this process's", r.ID, f.Name, f.Local)
				}
				pt.runs = append(pt.runs, partRun{fs: fsys, name: name, size: f.Size, part: p, order: fmt.Sprintf("%s\x00%06d", r.ID, i)})
				pt.bytes += p.Bytes
			}
		}
	}
	for _, r := range recs {
		for i := range r.Segments {
			seg := &r.Segments[i]
			if seg.Region < 0 || seg.Region >= len(s.regions.Regions) {
				return nil, fmt.Errorf("hfiles: segment %s names region %d, but the plan has %d", seg.Name, seg.Region, len(s.regions.Regions))
			}
			pt := get(seg.Region, seg.Family)
			pt.segs = append(pt.segs, partSeg{seg: seg, order: fmt.Sprintf("%s\x00s%06d", r.ID, i)})
			pt.bytes += seg.CellBytes
		}
	}
	for _, w := range kept {
		for _, r := range w.ranges {
			pt := get(r.region, r.family)
			pt.kept = append(pt.kept, keptPart{mp: r.mp, order: w.info.ID})
			pt.bytes += r.bytes
		}
	}
	return out, nil
}

// bySize orders partitions largest first, then by region and family.
func bySize(ps []*partition) {
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.bytes != b.bytes {
			return a.bytes > b.bytes
		}
		if a.region != b.region {
			return a.region < b.region
		}
		return a.family < b.family
	})
}

// writeAll merges every partition not yet done (in a merge task: every
// partition of its part), Workers of them at once; in one process it then
// removes the runs. Partitions are independent (each writes its own
// region and family folder), so the merge phase scales with the workers
// like the spill phase; the biggest partitions start first so one large
// partition does not run alone at the end.
func (s *Sink) writeAll(ctx context.Context, rep sink.Reporter, recs []*splitRecord, kept []*splitSink, st *finishState) error {
	all, err := s.partitions(recs, kept)
	if err != nil {
		return err
	}
	if s.task.Phase == PhaseMerge {
		all = dealPartitions(all, s.task.Count)[s.task.Index]
	}
	if err := s.mergePartitions(ctx, rep, all, st); err != nil {
		return err
	}
	// The kept splits' records go before Written: a record without
	// Written is redone (its split is not in the run's checkpoint), but
	// Written without the records would be HFiles of splits the folder
	// does not know.
	if err := s.writeKept(kept); err != nil {
		return s.full(err, "recording the splits written from memory")
	}
	st.Written = true
	if err := s.saveFinish(st); err != nil {
		return s.full(err, "recording the merged HFiles")
	}
	if err := s.keptDurable(kept); err != nil {
		return err
	}
	if s.task.Phase != PhaseAll {
		return nil // other parts still read the runs; the load removes them
	}
	// The runs are merged into HFiles; free their space.
	var freed int64
	for _, r := range recs {
		for _, f := range r.Runs {
			if f.Local == "" {
				freed += f.Size
			}
		}
	}
	if err := s.fenced("removing merged runs"); err != nil {
		return err
	}
	if err := s.fs.RemoveAll(path.Join(s.root, runsDir)); err != nil {
		return fmt.Errorf("hfiles: remove merged runs: %w", err)
	}
	// What is left of the segments was merged again (the adopted ones
	// were moved out).
	for _, r := range recs {
		for _, seg := range r.Segments {
			if _, err := s.fs.Stat(path.Join(s.root, seg.Name)); err == nil {
				freed += seg.Size
			}
		}
	}
	if err := s.fs.RemoveAll(path.Join(s.root, segmentsDir)); err != nil {
		return fmt.Errorf("hfiles: remove merged segments: %w", err)
	}
	if s.local != nil {
		if err := s.local.fs.RemoveAll(path.Join(s.local.root, runsDir)); err != nil {
			return fmt.Errorf("hfiles: remove merged runs: %w", err)
		}
		s.local.held.Store(0)
	}
	s.staged.Add(-freed)
	return nil
}

// mergePartitions merges the partitions of parts that st does not record
// done into HFiles, Workers at once, the largest first.
func (s *Sink) mergePartitions(ctx context.Context, rep sink.Reporter, parts []*partition, st *finishState) error {
	// Every partition's state exists before the workers start: they only
	// change their own partState, under finMu, never the map.
	var todo []*partition
	for _, p := range parts {
		ps := st.Parts[partKey(p.region, p.family)]
		if ps == nil {
			ps = &partState{Region: p.region, Family: p.family}
			st.Parts[partKey(p.region, p.family)] = ps
		}
		if !ps.Done {
			todo = append(todo, p)
		}
	}
	// A partition of segments that do not overlap keeps them as they are.
	merge := todo[:0]
	adopted, adoptedFiles := 0, 0
	for _, p := range todo {
		if !s.adoptable(p) {
			merge = append(merge, p)
			continue
		}
		ps := st.Parts[partKey(p.region, p.family)]
		if err := s.adopt(ps, p); err != nil {
			return s.full(err, fmt.Sprintf("moving the HFiles of region %s family %s", s.regions.Regions[p.region].Dir, p.family))
		}
		adopted++
		adoptedFiles += len(ps.Files)
	}
	if adopted > 0 {
		// One line for all of them: a line per region and family was
		// dozens of lines nobody acts on.
		rep.Printf("hfiles: %d of %d partitions (region and family) keep the %d HFiles their splits wrote, unmerged", adopted, len(todo), adoptedFiles)
	}
	todo = merge
	if len(todo) == 0 {
		return ctx.Err()
	}
	bySize(todo)
	workers := max(min(s.o.Workers, len(todo)), 1)
	// The merge's memory bound holds over all workers together, the
	// pipes' batches included (a budget too small to spare them merges
	// every partition on one goroutine).
	held := s.keptBytes.Load()
	batch := pipeBatchSize(s.o.mergeMemory()-held, workers)
	piped := 0
	if batch >= minPipeBatch {
		piped = markHeavy(todo, s.o.Workers)
	}
	held += int64(piped * pipeBatches * batch)
	pool := newRunMemory(&s.o, held, workers)
	s.mu.Lock()
	s.stats.MergePiped += int64(piped)
	s.mu.Unlock()
	doneBefore := len(parts) - len(todo)
	var finished int
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, p := range todo {
		if gctx.Err() != nil {
			break
		}
		ps := st.Parts[partKey(p.region, p.family)]
		g.Go(func() error {
			fan := pool.take(len(p.runs))
			defer pool.give(fan)
			if err := gctx.Err(); err != nil {
				return err
			}
			if err := s.writePartition(gctx, st, ps, p, max(fan, 2), batch); err != nil {
				return s.full(err, fmt.Sprintf("merging region %s family %s", s.regions.Regions[p.region].Dir, p.family))
			}
			s.finMu.Lock()
			defer s.finMu.Unlock()
			finished++
			rep.Printf("hfiles: region %s family %s: %d HFiles (%d of %d partitions)", s.regions.Regions[p.region].Dir, p.family, len(ps.Files), doneBefore+finished, len(parts))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// markHeavy marks the partitions to merge on two goroutines: with more
// than one worker, those holding more than half a worker's share of the
// bytes. Largest first, such a partition would still be merging on one
// core after the other workers ran out of partitions; the second
// goroutine costs a copy of each cell, so light partitions do without.
// It returns how many it marked.
func markHeavy(ps []*partition, workers int) int {
	if workers < 2 {
		return 0
	}
	var total int64
	for _, p := range ps {
		total += p.bytes
	}
	n := 0
	for _, p := range ps {
		if p.pipe = p.bytes*int64(2*workers) > total; p.pipe {
			n++
		}
	}
	return n
}

// familyOptions is the HFile writer configuration of a family.
func (s *Sink) familyOptions(family string) hfile.WriterOptions {
	o, ok := s.o.Families[family]
	if !ok {
		o = s.o.HFile
	}
	// Cells may carry tags; a file without a tags section would have to
	// refuse them. HFileOutputFormat2 writes the section too.
	o.Tags = true
	return o
}

// newHFileName returns a fresh HFile name: 32 hex digits, the form HBase's
// own store files have, which the bulk load tool accepts.
func newHFileName() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// FileIDKey is the file info key under which every staged HFile carries
// its unique id (hfileInfo.ID): random, so no two files of any run share
// it. HBase keeps a bulk-loaded file's file info as it is, under the new
// name it gives the file in the store.
const FileIDKey = "REKEY_FILE_ID"

// newFileID returns a new file id: 16 random bytes in hex.
func newFileID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// hfileOut is one HFile being written: first to _NAME (the bulk load tool
// skips names starting with '_'), renamed to NAME when closed and synced;
// on an object store to NAME directly, which appears whole at Close or not
// at all (Sink.whole), so tmp is final.
type hfileOut struct {
	rel, tmp, final string
	id              string
	f               vfs.WriteFile
	cw              *countingWriter
	bw              *bufio.Writer
	w               *hfile.Writer
	cells, bytes    int64
}

func (s *Sink) createHFile(dir string, opts hfile.WriterOptions) (*hfileOut, error) {
	name := newHFileName()
	rel := path.Join(dir, name)
	out := &hfileOut{rel: rel, final: path.Join(s.root, rel)}
	out.tmp = s.writeName(out.final, "_")
	if err := s.fenced("creating HFile " + out.final); err != nil {
		return nil, err
	}
	f, err := s.fs.Create(out.tmp)
	if err != nil {
		return nil, fmt.Errorf("hfiles: create HFile %s: %w", out.tmp, err)
	}
	out.f = f
	out.cw = &countingWriter{w: f, total: &s.openHFiles}
	out.bw = bufio.NewWriterSize(out.cw, 64<<10)
	opts.Name = s.url(out.final)
	out.id = newFileID()
	// A copy: opts is the family's, shared by every file of the family.
	fi := make(map[string][]byte, len(opts.FileInfo)+1)
	for k, v := range opts.FileInfo {
		fi[k] = v
	}
	fi[FileIDKey] = []byte(out.id)
	opts.FileInfo = fi
	w, err := hfile.NewWriter(out.bw, opts)
	if err != nil {
		f.Close()
		s.fs.Remove(out.tmp)
		return nil, fmt.Errorf("hfiles: HFile %s: %w", out.final, err)
	}
	out.w = w
	return out, nil
}

func (o *hfileOut) append(c *cell.Cell) error {
	o.cells++
	o.bytes += cell.Size(c)
	return o.w.Append(c)
}

// finish closes, syncs and renames the file and describes it.
func (s *Sink) finishHFile(o *hfileOut) (hfileInfo, error) {
	st := o.w.Stats()
	err := o.w.Close()
	if err == nil {
		err = o.bw.Flush()
	}
	if err == nil {
		err = o.f.Sync()
	}
	if err != nil {
		vfs.Abort(o.f)
	} else {
		err = s.publish(o.f, "writing HFile "+o.final)
	}
	o.cw.closed() // the caller counts the finished file as staged
	if err == nil && o.tmp != o.final {
		// The final name may be one another attempt of this task wrote:
		// only the holder replaces it.
		if err = s.fenced("naming HFile " + o.final); err == nil {
			err = s.fs.Rename(o.tmp, o.final)
		}
	}
	if err != nil {
		s.fs.Remove(o.tmp)
		return hfileInfo{}, fmt.Errorf("hfiles: write HFile %s: %w", o.final, err)
	}
	size := o.w.Stats().Written
	return hfileInfo{Name: o.rel, Size: size, Cells: st.Entries, FirstRow: st.FirstRow, LastRow: st.LastRow, ID: o.id}, nil
}

func (o *hfileOut) abort(s *Sink) {
	vfs.Abort(o.f)
	o.cw.closed()
	s.fs.Remove(o.tmp)
}

func (s *Sink) example(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stats.Examples) < s.o.Examples {
		s.stats.Examples = append(s.stats.Examples, e)
	}
}

func notExist(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist)
}
