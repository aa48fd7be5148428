package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/pipeline/sink"
	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/vfs"
)

// Errors a caller maps to exit codes.
var (
	// ErrInterrupted: the run stopped early (ctx ended); the checkpoint
	// holds what finished, and Resume goes on from there.
	ErrInterrupted = errors.New("pipeline: interrupted; the checkpoint holds the finished splits (run again with --resume)")
	// ErrCheckpointExists: a checkpoint is there and neither Resume nor
	// Fresh was asked for.
	ErrCheckpointExists = errors.New("pipeline: a checkpoint of an earlier run exists (pass --resume to go on from it, or --fresh to start over)")
	// ErrCheckpointMismatch: the checkpoint belongs to another job or
	// snapshot.
	ErrCheckpointMismatch = errors.New("pipeline: the checkpoint is of another job or snapshot")
	// ErrBadKeyFatal: a key did not fit and the job says bad_keys: fail.
	ErrBadKeyFatal = errors.New("pipeline: a key does not fit the layout and the job says bad_keys: fail")
)

// work is one split to read, maybe clipped to a row range.
type work struct {
	id          string
	split       snapshot.Split
	start, stop []byte
	bytes       int64
}

type runner struct {
	cfg      Config
	j        *job.Job
	snap     *snapshot.Snapshot
	sink     sink.Sink
	ctl      *Control
	scan     snapshot.ScanOptions
	ckpt     *checkpointStore
	rejects  *rejectDir
	now      func() time.Time
	logf     func(string, ...any)
	collide  bool
	maxTrack int
	closers  []func() error
	seed     uint64

	mu       sync.Mutex
	state    *Checkpoint
	sketch   *entity.Sketch
	examples []string
	warnings []string

	// live counters, for progress
	read, written, rejected, collided, failed atomic.Int64
	bytesRead                                 atomic.Int64
	running, doneSplits                       atomic.Int64
	totalBytes, doneBytes                     int64
}

// Run executes a job: see the package doc. It returns a summary also when
// it fails or is interrupted (then with ErrInterrupted), so the caller can
// report what was done.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	start := time.Now()
	r, err := newRunner(ctx, cfg)
	if err != nil {
		if cfg.Sink != nil {
			cfg.Sink.Close()
		}
		return nil, err
	}
	defer r.close()
	sum, err := r.run(ctx)
	sum.Seconds = time.Since(start).Seconds()
	if sum.Seconds > 0 {
		sum.CellsPerSec = float64(sum.Written) / sum.Seconds
		sum.MBPerSec = float64(sum.BytesRead) / 1e6 / sum.Seconds
	}
	sum.PeakRSS = peakRSS()
	sum.Interrupted = errors.Is(err, ErrInterrupted)
	if err != nil && !sum.Interrupted {
		sum.Error = err.Error()
	}
	return sum, err
}

func newRunner(ctx context.Context, cfg Config) (*runner, error) {
	j := cfg.Job
	if j == nil || cfg.Sink == nil {
		return nil, errors.New("pipeline: Config needs a Job and a Sink")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = j.Run.Workers
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.NumCPU()
	}
	if cfg.SplitBytes <= 0 {
		cfg.SplitBytes = j.Run.SplitBytes
	}
	if cfg.Shard.Count > 1 && (cfg.Shard.Index < 0 || cfg.Shard.Index >= cfg.Shard.Count) {
		return nil, fmt.Errorf("pipeline: shard %s: the index must be in [0, %d)", cfg.Shard, cfg.Shard.Count)
	}
	if cfg.Checkpoint == "" {
		cfg.Checkpoint = j.CheckpointPath()
		if cfg.Shard.Count > 1 {
			// One checkpoint per shard, side by side.
			cfg.Checkpoint = strings.TrimSuffix(cfg.Checkpoint, ".json") + fmt.Sprintf(".shard-%d-of-%d.json", cfg.Shard.Index, cfg.Shard.Count)
		}
		if len(cfg.Only) > 0 {
			// A redo of some ranges keeps its own checkpoint, named after
			// the ranges, beside the whole run's, which it must not touch.
			cfg.Checkpoint = strings.TrimSuffix(cfg.Checkpoint, ".json") + ".only-" + onlyID(cfg.Only) + ".json"
		}
	}
	if cfg.Memory <= 0 {
		cfg.Memory = j.Run.Memory
	}
	if cfg.Memory <= 0 {
		cfg.Memory = DefaultMemory
	}
	if cfg.HeavyHitters <= 0 {
		cfg.HeavyHitters = max(j.Run.HeavyHitters, 0)
	}
	if cfg.HeavyHitters <= 0 {
		cfg.HeavyHitters = DefaultHeavyHitters
	}
	if cfg.SampleEntities <= 0 {
		cfg.SampleEntities = j.Run.SampleEntities
	}
	if cfg.SampleEntities <= 0 {
		cfg.SampleEntities = DefaultSampleEntities
	}
	if cfg.SetTimestamp == 0 {
		cfg.SetTimestamp = j.Run.SetTimestamp
	}
	if cfg.Limits.CellsPerSec == 0 {
		cfg.Limits.CellsPerSec = j.Run.MaxCellsPerSec
	}
	if cfg.Limits.ReadBytesPerSec == 0 {
		cfg.Limits.ReadBytesPerSec = j.Run.MaxReadMBPerSec * 1e6
	}
	if cfg.Control == nil {
		cfg.Control = NewControl(cfg.Limits)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if cfg.NewMapper == nil {
		p := j.Program
		cfg.NewMapper = func() transform.Mapper { return p.New() }
	}
	r := &runner{cfg: cfg, j: j, sink: cfg.Sink, ctl: cfg.Control, now: cfg.Now, logf: logf}

	// The snapshot's file system, metered for the read cap and progress.
	var fsys vfs.FS
	root := j.Source.Root
	var closeFS func() error
	if cfg.Open.FS != nil {
		fsys = cfg.Open.FS
	} else {
		loc, err := vfs.Open(root)
		if err != nil {
			return nil, fmt.Errorf("source root: %w", err)
		}
		fsys, root, closeFS = loc.FS, loc.Path, loc.Close
	}
	mfs := &meteredFS{FS: fsys, read: &r.bytesRead, lim: r.ctl.read, ctx: ctx}
	// Read-ahead buffers come out of the memory budget: a quarter of it,
	// shared by every scan of the run.
	ra := cfg.Open.ReadAhead
	if ra.Budget == nil {
		ra.Budget = vfs.NewBudget(cfg.Memory / 4)
	}
	snap, err := snapshot.Open(ctx, root, j.Source.Name, snapshot.OpenOptions{FS: mfs, MaxOpenFiles: cfg.Open.MaxOpenFiles, ReadAhead: ra})
	if err != nil {
		if closeFS != nil {
			closeFS()
		}
		return nil, err
	}
	r.snap = snap
	if closeFS != nil {
		r.closers = append(r.closers, closeFS)
	}
	r.scan = ScanOptions(j, snap.Info())

	ck, err := openCheckpoint(cfg.Checkpoint)
	if err != nil {
		r.close()
		return nil, err
	}
	r.ckpt = ck
	r.closers = append(r.closers, ck.close)
	wfs, ok := ck.loc.FS.(vfs.WriteFS)
	if !ok {
		r.close()
		return nil, fmt.Errorf("checkpoint %s: file system is read-only", cfg.Checkpoint)
	}
	r.rejects = &rejectDir{fs: wfs, dir: path.Join(path.Dir(ck.loc.Path), "rejects")}

	if p := j.Program; p != nil && cfg.SetTimestamp == 0 {
		r.collide = p.MayCollide()
	} else {
		r.collide = true
	}
	// Collision sets may take a quarter of the budget, shared by the
	// workers; an entry costs about 40 bytes in a Go map.
	r.maxTrack = int(cfg.Memory / 4 / int64(cfg.Workers) / 40)
	return r, nil
}

func (r *runner) close() {
	if r.snap != nil {
		r.snap.Close()
	}
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.sink.Close()
}

func (r *runner) run(ctx context.Context) (*Summary, error) {
	j, cfg := r.j, r.cfg
	sum := &Summary{Job: j.Path, Snapshot: j.Source.Name, Table: j.Target.Table, Sink: r.sink.Name(), Checkpoint: cfg.Checkpoint}
	if cfg.SetTimestamp != 0 {
		r.warn("every cell's timestamp is replaced by %d (set_timestamp): a rerun or resume adds versions instead of rewriting the same ones, and newer values the application wrote may be hidden", cfg.SetTimestamp)
	}
	if r.collide {
		sum.CollisionScope = "split"
		if p := j.Program; p != nil {
			if d := p.DroppedFields(); len(d) > 0 {
				r.warn("the new key drops %s: old cells that differ only there become one new cell; collisions are counted within each split (across splits only the hfiles sink can see them)", strings.Join(d, ", "))
			}
			if m := p.MergedFamilies(); len(m) > 0 {
				r.warn("several old families become %s: cells with the same key in them collide", strings.Join(m, ", "))
			}
		}
	} else {
		sum.CollisionScope = "none"
	}

	// The work: splits, clipped to --only ranges, largest first.
	splits, err := r.snap.Splits(snapshot.SplitOptions{TargetBytes: cfg.SplitBytes})
	if err != nil {
		return sum, err
	}
	items := clip(splits, cfg.Only)
	sort.SliceStable(items, func(a, b int) bool {
		if items[a].bytes != items[b].bytes {
			return items[a].bytes > items[b].bytes
		}
		return items[a].id < items[b].id
	})
	if cfg.Shard.Count > 1 {
		items = shardOf(items, cfg.Shard)
	}
	sum.Splits = len(items)

	// The checkpoint.
	fpScan := r.scan
	if !j.Source.Scan.TTLAtSnapshot && j.Source.Scan.TTLAt.IsZero() {
		fpScan.Now = time.Time{} // "now" differs between a run and its resume
	}
	fp := fingerprint(j, r.snap.Info(), fpScan, cfg.SplitBytes, cfg.SetTimestamp, r.sink.Name(), cfg.Only, cfg.Shard)
	prev, err := r.ckpt.load()
	if err != nil {
		return sum, err
	}
	switch {
	case prev == nil || cfg.Fresh:
		if prev != nil {
			r.logf("discarding the checkpoint %s (--fresh)", cfg.Checkpoint)
		}
		prev = nil
	case !cfg.Resume:
		return sum, fmt.Errorf("%w: %s", ErrCheckpointExists, cfg.Checkpoint)
	case prev.Fingerprint != fp:
		return sum, fmt.Errorf("%w: %s was written by a run of %s on snapshot %s with other layouts, scan options, split size or sink (fingerprint %s, this run %s); use another --checkpoint or --fresh", ErrCheckpointMismatch, cfg.Checkpoint, prev.Job, prev.Snapshot, prev.Fingerprint, fp)
	}
	// The sketch's seed leaves the shard and --only out, so the sketches of
	// a job's shards sample the same hashes and merge exactly.
	seedFP := fingerprint(j, r.snap.Info(), fpScan, cfg.SplitBytes, cfg.SetTimestamp, r.sink.Name(), nil, Shard{})
	r.seed = binary.BigEndian.Uint64([]byte(seedFP[:16]))
	r.state = &Checkpoint{Version: checkpointVersion, Fingerprint: fp, Job: j.Path, Snapshot: j.Source.Name, Splits: map[string]*SplitStats{}}
	r.sketch = entity.NewSketch(cfg.HeavyHitters, cfg.SampleEntities, r.seed)
	if prev != nil {
		r.state = prev
		if len(prev.Entities) > 0 {
			if s, err := entity.ReadSketch(bytes.NewReader(prev.Entities)); err == nil {
				r.sketch = s
			} else {
				r.warn("the checkpoint's entity sketch is unreadable (%v); heaviest entities cover this run's splits only", err)
			}
		}
	}
	if p := j.Program; p != nil {
		r.sketch.SetNamer(p.FormatEntity)
	}
	var todo []work
	for _, w := range items {
		r.totalBytes += w.bytes
		if st := r.state.Splits[w.id]; st != nil && st.Done {
			sum.Skipped++
			r.doneSplits.Add(1)
			r.doneBytes += w.bytes
			continue
		}
		todo = append(todo, w)
	}
	if prev != nil {
		r.logf("resuming: %d of %d splits done by earlier runs, %d to do", sum.Skipped, len(items), len(todo))
	}
	if err := r.ckpt.save(r.state); err != nil {
		return sum, err
	}

	// Progress, push-back and the workers.
	stopAux := r.startAux(ctx, len(items))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Workers)
	for i, w := range todo {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return r.runSplit(gctx, w) })
		// g.Go returned: a worker took w. The next split's store files
		// open while the workers read, so whichever takes it next starts
		// reading at once.
		if i+1 < len(todo) && todo[i+1].split.Region.EncodedName != w.split.Region.EncodedName {
			r.snap.Prepare(todo[i+1].split, r.scan)
		}
	}
	werr := g.Wait()
	stopAux()

	interrupted := ctx.Err() != nil
	r.fill(sum, items)
	if werr == nil && !interrupted && sum.Done == sum.Splits && sum.Failed == 0 {
		if !r.state.SinkFinished {
			if err := r.sink.Finish(ctx, reporterFunc(r.logf)); err != nil {
				werr = fmt.Errorf("%s sink: %w", r.sink.Name(), err)
				interrupted = ctx.Err() != nil
			} else {
				r.mu.Lock()
				r.state.SinkFinished = true
				err := r.saveLocked()
				r.mu.Unlock()
				if err != nil {
					werr = err
				}
			}
		}
		sum.Finished = werr == nil
	}
	r.finishFiles(sum, items)
	if ss, ok := r.sink.(interface{ SinkStats() any }); ok {
		sum.SinkStats = ss.SinkStats()
	}
	switch {
	case interrupted:
		return sum, ErrInterrupted
	case werr != nil:
		return sum, werr
	}
	return sum, nil
}

// shardOf deals the items, largest first, each to the shard with the
// fewest bytes so far (ties to the lower index), and returns this shard's:
// every process computes the same deal from the same snapshot.
func shardOf(items []work, sh Shard) []work {
	load := make([]int64, sh.Count)
	var mine []work
	for _, w := range items {
		best := 0
		for i := 1; i < sh.Count; i++ {
			if load[i] < load[best] {
				best = i
			}
		}
		load[best] += max(w.bytes, 1)
		if best == sh.Index {
			mine = append(mine, w)
		}
	}
	return mine
}

// clip turns splits into work items, cut to the --only ranges.
func clip(splits []snapshot.Split, only []KeyRange) []work {
	var out []work
	for _, sp := range splits {
		if len(only) == 0 {
			out = append(out, work{id: sp.ID, split: sp, bytes: sp.Bytes})
			continue
		}
		for i, kr := range only {
			start, stop := sp.StartRow, sp.EndRow
			if bytes.Compare(kr.Start, start) > 0 {
				start = kr.Start
			}
			if len(kr.Stop) > 0 && (len(stop) == 0 || bytes.Compare(kr.Stop, stop) < 0) {
				stop = kr.Stop
			}
			if len(stop) > 0 && bytes.Compare(start, stop) >= 0 {
				continue
			}
			out = append(out, work{id: fmt.Sprintf("%s#%d", sp.ID, i), split: sp, start: start, stop: stop, bytes: sp.Bytes})
		}
	}
	return out
}

func (r *runner) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.warnings = append(r.warnings, msg)
	r.mu.Unlock()
	r.logf("warning: %s", msg)
}

func (r *runner) example(format string, args ...any) {
	r.mu.Lock()
	if len(r.examples) < 20 {
		r.examples = append(r.examples, fmt.Sprintf(format, args...))
	}
	r.mu.Unlock()
}

// runSplit reads one split, maps its cells into the sink and records it.
func (r *runner) runSplit(ctx context.Context, w work) error {
	start := r.now()
	st := &SplitStats{ID: w.id, Region: w.split.Region.EncodedName, FileBytes: w.bytes}
	r.mu.Lock()
	if prev := r.state.Splits[w.id]; prev != nil {
		st.Attempts = prev.Attempts
	}
	r.mu.Unlock()
	st.Attempts++
	r.running.Add(1)
	defer r.running.Add(-1)

	err := r.readSplit(ctx, w, st)
	st.Seconds = r.now().Sub(start).Seconds()
	if err != nil && ctx.Err() == nil {
		st.Error = err.Error()
	}
	r.mu.Lock()
	r.state.Splits[w.id] = st
	serr := r.saveLocked()
	r.mu.Unlock()
	if st.Done {
		r.doneSplits.Add(1)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("split %s (region %s): %w", w.id, st.Region, err)
	}
	return serr
}

// saveLocked writes the checkpoint; r.mu is held.
func (r *runner) saveLocked() error {
	var buf bytes.Buffer
	if err := r.sketch.WriteJSON(&buf); err == nil {
		r.state.Entities = buf.Bytes()
	}
	r.state.Updated = r.now().UTC()
	return r.ckpt.save(r.state)
}

// readSplit is the hot loop: scanner -> transform -> sink.
func (r *runner) readSplit(ctx context.Context, w work, st *SplitStats) (err error) {
	ss, err := r.sink.Begin(ctx, sink.SplitInfo{ID: w.id, Region: w.split.Region.EncodedName, Bytes: w.bytes})
	if err != nil {
		return err
	}
	rej := r.rejects.open(w.id)
	committed := false
	defer func() {
		if !committed {
			ss.Abort()
			rej.abort()
		}
	}()
	opts := r.scan
	opts.StartRow, opts.StopRow = w.start, w.stop
	sc, err := r.snap.NewScanner(ctx, w.split, opts)
	if err != nil {
		return err
	}
	defer sc.Close()

	mapper := r.cfg.NewMapper()
	rk, _ := mapper.(*transform.Rekey)
	var entRk *transform.Rekey // parses entities for custom mappers
	if rk == nil && r.j.Program != nil {
		entRk = r.j.Program.New()
	}
	sk := entity.NewSketch(r.cfg.HeavyHitters, r.cfg.SampleEntities, r.seed)
	var coll *collisionSet
	if r.collide {
		coll = newCollisionSet(r.maxTrack)
	}
	setTS := r.cfg.SetTimestamp
	var (
		src               *cell.Cell
		writeErr          error
		emitted, emittedB int64
		curEnt, ent       []byte
		entCells, entByte int64
		pending           int64 // cells written since the last limiter wait
		readShown         int64 // st.Read already added to r.read
	)
	flushEntity := func() {
		if entCells > 0 {
			sk.Add(curEnt, entCells, entByte)
		}
		entCells, entByte = 0, 0
	}
	emit := func(c cell.Cell) {
		if writeErr != nil {
			return
		}
		if setTS != 0 {
			c.Timestamp = setTS
		}
		if coll != nil && coll.add(&c, src) {
			st.Collided++
			r.collided.Add(1)
			r.example("collision: %s and another old cell both become %s", shortCell(src), shortCell(&c))
		}
		if writeErr = ss.Write(ctx, &c); writeErr != nil {
			return
		}
		emitted++
		pending++
		emittedB += cell.Size(&c)
	}
	for sc.Next() {
		src = sc.Cell()
		st.Read++
		before, beforeB := emitted, emittedB
		merr := mapper.Map(*src, emit)
		if writeErr != nil {
			return writeErr
		}
		if merr != nil {
			if !errors.Is(merr, transform.ErrBadKey) {
				return fmt.Errorf("transform: %w", merr)
			}
			if r.j.BadKeys.Action != job.Reject {
				return fmt.Errorf("%w: %v", ErrBadKeyFatal, merr)
			}
			st.Rejected++
			r.rejected.Add(1)
			r.example("rejected: %v", merr)
			if err := rej.add(src, merr); err != nil {
				return err
			}
			continue
		}
		st.Mapped += emitted - before
		if emitted > before {
			switch {
			case rk != nil:
				ent = rk.LastEntity(ent[:0])
			case entRk != nil:
				ent, _ = entRk.SourceEntity(ent[:0], src)
			}
			if !bytes.Equal(ent, curEnt) {
				flushEntity()
				curEnt = append(curEnt[:0], ent...)
			}
			entCells += emitted - before
			entByte += emittedB - beforeB
		}
		if pending >= 256 {
			// Shared counters move in steps, not per cell: workers on
			// other cores would otherwise fight over their cache line.
			r.read.Add(st.Read - readShown)
			readShown = st.Read
			r.written.Add(pending)
			if err := r.ctl.write.wait(ctx, float64(pending)); err != nil {
				return err
			}
			pending = 0
		}
		if st.Read&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	r.written.Add(pending)
	r.read.Add(st.Read - readShown)
	if err := sc.Err(); err != nil {
		return err
	}
	st.FilesChecked = sc.Stats().FilesCountChecked
	if ctx.Err() != nil {
		return ctx.Err()
	}
	flushEntity()
	if f, ok := mapper.(transform.Flusher); ok {
		if err := f.Flush(emit); err != nil {
			return fmt.Errorf("transform: %w", err)
		}
		if writeErr != nil {
			return writeErr
		}
	}
	if coll != nil && coll.full {
		r.warn("split %s: the collision check covered only its first %d new cells (memory budget)", w.id, coll.limit)
	}
	if err := rej.commit(); err != nil {
		return fmt.Errorf("reject file: %w", err)
	}
	ack, err := ss.Commit(ctx)
	committed = true
	if err != nil {
		ss.Abort()
		return err
	}
	st.Written, st.Bytes, st.Failed = ack.Cells, ack.Bytes, ack.Failed
	if ack.Failed > 0 {
		r.failed.Add(ack.Failed)
		for _, e := range ack.FailedExamples {
			r.example("failed: %s", e)
		}
		st.Error = fmt.Sprintf("%d cells failed after every retry (the split is redone by --resume)", ack.Failed)
		return nil
	}
	if ack.Cells != emitted {
		return fmt.Errorf("the %s sink acknowledged %d cells of the %d it was given", r.sink.Name(), ack.Cells, emitted)
	}
	st.Done = true
	r.mu.Lock()
	r.sketch.Merge(sk)
	r.mu.Unlock()
	return nil
}

// shortCell names a cell in messages, values left out.
func shortCell(c *cell.Cell) string {
	if c == nil {
		return "?"
	}
	return fmt.Sprintf("%s/%s:%s/%d", transform.AppendPrintable(nil, c.Row), c.Family, transform.AppendPrintable(nil, c.Qualifier), c.Timestamp)
}

// collisionSet remembers, per new cell key, which old cell produced it, by
// 64-bit hashes: two different old cells with the same new key collide.
// A false collision needs two 64-bit hashes to clash, about one in 10^10
// for a split of 10^5 cells.
type collisionSet struct {
	m     map[uint64]uint64
	limit int
	full  bool
}

func newCollisionSet(limit int) *collisionSet {
	return &collisionSet{m: map[uint64]uint64{}, limit: max(limit, 1024)}
}

func keyHash(c *cell.Cell) uint64 {
	h := fnv.New64a()
	var n [8]byte
	for _, b := range [][]byte{c.Row, c.Family, c.Qualifier} {
		binary.BigEndian.PutUint32(n[:4], uint32(len(b)))
		h.Write(n[:4])
		h.Write(b)
	}
	binary.BigEndian.PutUint64(n[:], uint64(c.Timestamp))
	h.Write(n[:])
	h.Write([]byte{byte(c.Type)})
	return h.Sum64()
}

// add records that src became c and reports a collision.
func (s *collisionSet) add(c, src *cell.Cell) bool {
	k, v := keyHash(c), keyHash(src)
	if old, ok := s.m[k]; ok {
		return old != v
	}
	if len(s.m) >= s.limit {
		s.full = true
		return false
	}
	s.m[k] = v
	return false
}

type reporterFunc func(string, ...any)

func (f reporterFunc) Printf(format string, args ...any) { f(format, args...) }

// onlyID names a set of ranges to redo: the first 8 bytes, in hex, of the
// SHA-256 of the ranges.
func onlyID(rs []KeyRange) string {
	h := sha256.New()
	for _, r := range rs {
		fmt.Fprintf(h, "%x-%x;", r.Start, r.Stop)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
