package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/source"
)

// The schedule test plays the protocol between the tasks of one job
// (issue 49): a job's shards run as separate attempts over one state
// folder, in an order a seed draws, with the perturbations a scheduler
// and an operator bring: attempts killed after a number of splits,
// retried with and without resume, a duplicate attempt started while
// another holds the shard, a retried attempt given another split size or
// shard count, a build with another default cut, the job record removed,
// a shard's commit damaged. After every attempt it checks that the
// outcome is a success or a refusal of a known kind, that no cell outside
// the job's result reached the target, and that a job reported complete
// (its coverage proven) holds exactly the one-process run's cells: never
// a silent difference. Each schedule is replayable from its seed
// (-schedule.seed), and a seed that ever failed is kept in
// scheduleRegressions.
//
// The target is a set of cells, as an HBase table is for the puts of a
// job that keeps timestamps: a cell written twice is there once. So a
// split read twice is invisible here (the record's coverage refuses it
// before), while a split never read is a difference.

var (
	scheduleCount = flag.Int("schedule.n", 0, "schedules TestSchedules plays [REKEY_SCHEDULES, else 1000]")
	scheduleSeed  = flag.Uint64("schedule.seed", 0, "play only this schedule")
)

// scheduleRegressions are seeds that found bugs, played first.
var scheduleRegressions = []uint64{
	// A shard commit of a removed record, damaged, stopped the job for
	// good, --fresh included (TestStaleDamagedCommitIgnored).
	1796612970887613640,
}

// simReference is the one-process run's cells, computed once.
var simReference struct {
	once  sync.Once
	cells map[uint64]bool
	err   error
}

// cellHash identifies a cell by everything that makes it one.
func cellHash(c *cell.Cell) uint64 {
	h := fnv.New64a()
	for _, b := range [][]byte{c.Row, c.Family, c.Qualifier, c.Value} {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b))
		h.Write(n[:])
		h.Write(b)
	}
	var ts [9]byte
	binary.BigEndian.PutUint64(ts[:8], uint64(c.Timestamp))
	ts[8] = byte(c.Type)
	h.Write(ts[:])
	return h.Sum64()
}

// simTarget is the target table of a schedule.
type simTarget struct {
	mu      sync.Mutex
	cells   map[uint64]bool
	foreign int
}

func (t *simTarget) put(hs []uint64, ref map[uint64]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range hs {
		if ref != nil && !ref[h] {
			t.foreign++
		}
		t.cells[h] = true
	}
}

// simSink writes into a simTarget; onCommit, when set, runs before each
// split is acknowledged (a kill or a duplicate attempt goes there).
type simSink struct {
	target   *simTarget
	ref      map[uint64]bool
	onCommit func()
}

func (s *simSink) Name() string { return "sim-puts" }
func (s *simSink) Begin(context.Context, sink.SplitInfo) (sink.SplitSink, error) {
	return &simSplit{s: s}, nil
}
func (s *simSink) Finish(context.Context, sink.Reporter) error { return nil }
func (s *simSink) Close() error                                { return nil }

type simSplit struct {
	s  *simSink
	hs []uint64
}

func (p *simSplit) Write(_ context.Context, c *cell.Cell) error {
	p.hs = append(p.hs, cellHash(c))
	return nil
}

func (p *simSplit) Commit(ctx context.Context) (sink.Ack, error) {
	if f := p.s.onCommit; f != nil {
		f()
	}
	if err := ctx.Err(); err != nil {
		return sink.Ack{}, err
	}
	p.s.target.put(p.hs, p.s.ref)
	return sink.Ack{Cells: int64(len(p.hs))}, nil
}

func (p *simSplit) Abort() {}

// simJob is the demo job, parsed once.
var simJob struct {
	once sync.Once
	j    *job.Job
	err  error
}

func demoJobForSim(t *testing.T) job.Job {
	simJob.once.Do(func() { simJob.j, simJob.err = job.Load("../configs/demo.yaml") })
	if simJob.err != nil {
		t.Fatal(simJob.err)
	}
	return *simJob.j
}

// reference is the one-process run's cells.
func reference(t *testing.T) map[uint64]bool {
	simReference.once.Do(func() {
		j := demoJobForSim(t)
		dir, err := os.MkdirTemp("", "rekey-sim-ref")
		if err != nil {
			simReference.err = err
			return
		}
		defer os.RemoveAll(dir)
		j.Run.Checkpoint = filepath.Join(dir, "c.json")
		j.BadKeys.File = filepath.Join(dir, "rejects.tsv")
		tgt := &simTarget{cells: map[uint64]bool{}}
		if _, err := Execute(context.Background(), &j, Options{Sink: &simSink{target: tgt}, Workers: 1}); err != nil {
			simReference.err = err
			return
		}
		simReference.cells = tgt.cells
	})
	if simReference.err != nil {
		t.Fatal(simReference.err)
	}
	return simReference.cells
}

// attempt is one try at one shard, as a schedule draws it.
type attempt struct {
	shard, count int
	splitBytes   int64 // as the job file says (0: the build's default)
	otherBuild   bool  // a build with another default split size and cut rule
	fresh        bool
	killAfter    int // acknowledged splits before a kill; <0: none
	duplicateAt  int // a duplicate attempt starts at this split; <0: none
}

func (a attempt) String() string {
	s := fmt.Sprintf("shard %d/%d split_bytes=%d", a.shard, a.count, a.splitBytes)
	if a.otherBuild {
		s += " other-build"
	}
	if a.fresh {
		s += " fresh"
	}
	if a.killAfter >= 0 {
		s += fmt.Sprintf(" kill@%d", a.killAfter)
	}
	if a.duplicateAt >= 0 {
		s += fmt.Sprintf(" dup@%d", a.duplicateAt)
	}
	return s
}

// simWorld is one schedule's state folder and target.
type simWorld struct {
	t      *testing.T
	dir    string
	ref    map[uint64]bool
	target *simTarget
	log    []string
}

// allowed are the refusals a schedule may meet: each says what is wrong
// and what to do, and writes nothing.
var allowed = []error{ErrJobMismatch, ErrCoverage, ErrLeased, ErrInterrupted, ErrCheckpointMismatch, ErrCheckpointDamaged, ErrCheckpointExists}

func refusal(err error) bool {
	for _, a := range allowed {
		if errors.Is(err, a) {
			return true
		}
	}
	// A damaged commit or record is refused by name.
	return strings.Contains(err.Error(), "damaged")
}

// run plays one attempt and checks the invariants after it. It returns
// the summary (nil when refused) and the error.
func (w *simWorld) run(a attempt) (*Summary, error) {
	j := demoJobForSim(w.t)
	j.Run.Checkpoint = filepath.Join(w.dir, "c.json")
	j.BadKeys.File = filepath.Join(w.dir, "rejects.tsv")
	j.Run.SplitBytes = a.splitBytes
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acks := 0
	var dupErr error
	s := &simSink{target: w.target, ref: w.ref}
	s.onCommit = func() {
		if acks == a.duplicateAt {
			d := a
			d.duplicateAt, d.killAfter = -1, -1
			_, dupErr = w.runPlain(d)
			if dupErr == nil || !errors.Is(dupErr, ErrLeased) {
				w.t.Errorf("a duplicate of a live attempt (%s) was not refused by its lease: %v", d, dupErr)
			}
		}
		if acks == a.killAfter {
			cancel()
		}
		acks++
	}
	o := Options{Sink: s, Workers: 1, Shard: Shard{Index: a.shard, Count: a.count}, Resume: !a.fresh, Fresh: a.fresh}
	if a.otherBuild {
		o.build = &buildChoices{splitBytes: func(source.Source, int64) int64 { return 24 << 10 }, greedyInRow: true}
	}
	sum, err := Execute(ctx, &j, o)
	w.log = append(w.log, fmt.Sprintf("%s -> %v", a, errText(err)))
	return sum, err
}

// runPlain plays an attempt with no hooks (a duplicate's).
func (w *simWorld) runPlain(a attempt) (*Summary, error) {
	j := demoJobForSim(w.t)
	j.Run.Checkpoint = filepath.Join(w.dir, "c.json")
	j.BadKeys.File = filepath.Join(w.dir, "rejects.tsv")
	j.Run.SplitBytes = a.splitBytes
	return Execute(context.Background(), &j, Options{Sink: &simSink{target: w.target, ref: w.ref}, Workers: 1, Shard: Shard{Index: a.shard, Count: a.count}, Resume: true})
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// check holds the world to the invariants after an attempt. The job
// says it is complete when a shard reports its coverage proven, or, for
// a run that reports no coverage (a build before job records), when
// every shard has succeeded (succeeded).
func (w *simWorld) check(sum *Summary, err error, succeeded []bool) (proven bool, problem string) {
	w.target.mu.Lock()
	foreign, have := w.target.foreign, len(w.target.cells)
	w.target.mu.Unlock()
	if foreign > 0 {
		return false, fmt.Sprintf("%d cells outside the one-process run's result reached the target", foreign)
	}
	if err != nil && !refusal(err) {
		return false, fmt.Sprintf("an attempt failed with an error that is no refusal: %v", err)
	}
	all := true
	for _, s := range succeeded {
		all = all && s
	}
	if err == nil && sum != nil && (sum.Coverage != nil && sum.Coverage.Proven || sum.Coverage == nil && all) {
		if have != len(w.ref) {
			return true, fmt.Sprintf("the job reported itself complete with %d of the one-process run's %d cells in the target: a silent loss", have, len(w.ref))
		}
		return true, ""
	}
	return false, ""
}

// playSchedule plays the schedule of seed and returns what went wrong, or
// "".
func playSchedule(t *testing.T, seed uint64) (problem string, w *simWorld) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	dir, err := os.MkdirTemp(simTmp(), "rekey-sim")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w = &simWorld{t: t, dir: dir, ref: reference(t), target: &simTarget{cells: map[uint64]bool{}}}
	n := 1 + rng.IntN(3)
	sizes := []int64{0, 16 << 10, 40000, -1}
	size := sizes[rng.IntN(len(sizes))]
	done := make([]bool, n)
	// Damage is done at most once, and then the job must be started
	// over with --fresh on every shard to end.
	damaged := false
	for step := 0; step < 4*n+4; step++ {
		a := attempt{shard: rng.IntN(n), count: n, splitBytes: size, killAfter: -1, duplicateAt: -1}
		switch r := rng.IntN(100); {
		case r < 15:
			a.killAfter = rng.IntN(4)
		case r < 22:
			a.duplicateAt = rng.IntN(3)
		case r < 30:
			a.splitBytes = sizes[rng.IntN(len(sizes))]
		case r < 35:
			a.count = n + 1 + rng.IntN(2)
			a.shard = rng.IntN(a.count)
		case r < 42:
			a.otherBuild, a.splitBytes = true, 0
		case r < 45:
			os.Remove(filepath.Join(dir, "c.job.json"))
			w.log = append(w.log, "the job record removed")
			continue
		case r < 48:
			if damageCommit(dir, rng) {
				damaged = true
				w.log = append(w.log, "a shard commit damaged")
			}
			continue
		}
		sum, err := w.run(a)
		if err == nil && a.count == n {
			done[a.shard] = true
		}
		proven, problem := w.check(sum, err, done)
		if problem != "" {
			return problem, w
		}
		if proven && !damaged {
			// (A damaged commit must still be refused, and the job
			// started over, before the schedule ends.)
			return "", w
		}
	}
	// Finish the job as an operator would: every shard run again with
	// the job's options; if that does not prove it, --fresh on every
	// shard, which must.
	for _, fresh := range []bool{false, true} {
		var last *Summary
		var lastErr error
		for i := range n {
			last, lastErr = w.run(attempt{shard: i, count: n, splitBytes: size, fresh: fresh, killAfter: -1, duplicateAt: -1})
			if lastErr == nil {
				done[i] = true
			}
			proven, problem := w.check(last, lastErr, done)
			if problem != "" {
				return problem, w
			}
			if proven {
				return "", w
			}
		}
		if fresh {
			return fmt.Sprintf("the job started over with --fresh on every shard did not end proven: %v", errText(lastErr)), w
		}
	}
	return "", w
}

// damageCommit truncates or edits one shard's commit, if one exists.
func damageCommit(dir string, rng *rand.Rand) bool {
	ents, _ := os.ReadDir(filepath.Join(dir, "c.shards"))
	var files []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			files = append(files, filepath.Join(dir, "c.shards", e.Name()))
		}
	}
	if len(files) == 0 {
		return false
	}
	f := files[rng.IntN(len(files))]
	b, err := os.ReadFile(f)
	if err != nil || len(b) < 10 {
		return false
	}
	if rng.IntN(2) == 0 {
		os.WriteFile(f, b[:len(b)/2], 0o644)
	} else {
		// Drop the first split's ID: what a shard that cut otherwise
		// commits.
		s := string(b)
		i := strings.Index(s, "\"splits\": [")
		if i < 0 {
			return false
		}
		j := strings.IndexAny(s[i+11:], ",]")
		if j < 0 || s[i+11+j] != ',' {
			return false
		}
		os.WriteFile(f, []byte(s[:i+11]+s[i+11+j+1:]), 0o644)
	}
	return true
}

// simTmp is where schedules keep their state folders: a memory file
// system when there is one, since a run syncs its checkpoint at every
// compaction and the schedules are many.
func simTmp() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// TestSchedules plays seeded schedules of one job's tasks (see the top of
// this file). REKEY_SCHEDULES or -schedule.n sets how many (make soak
// plays many more); -schedule.seed replays one.
func TestSchedules(t *testing.T) {
	n := 1000
	if v := os.Getenv("REKEY_SCHEDULES"); v != "" {
		fmt.Sscan(v, &n)
	}
	if *scheduleCount > 0 {
		n = *scheduleCount
	}
	seeds := append([]uint64(nil), scheduleRegressions...)
	base := uint64(time.Now().UnixNano())
	if v := os.Getenv("REKEY_SCHEDULE_BASE"); v != "" {
		fmt.Sscan(v, &base)
	}
	for i := range n {
		seeds = append(seeds, base+uint64(i))
	}
	if *scheduleSeed != 0 {
		seeds = []uint64{*scheduleSeed}
	}
	reference(t)
	began := time.Now()
	var mu sync.Mutex
	var failed []uint64
	work := make(chan uint64)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range work {
				problem, w := playSchedule(t, seed)
				if problem != "" {
					mu.Lock()
					failed = append(failed, seed)
					t.Errorf("schedule %d: %s\n  replay: go test ./pipeline -run TestSchedules -schedule.seed %d\n  %s", seed, problem, seed, strings.Join(w.log, "\n  "))
					mu.Unlock()
				}
			}
		}()
	}
	for _, s := range seeds {
		if t.Failed() && len(failed) >= 3 {
			break
		}
		work <- s
	}
	close(work)
	wg.Wait()
	t.Logf("%d schedules (seeds %d..%d and %d regressions) in %s; %d failed", len(seeds), base, base+uint64(n)-1, len(scheduleRegressions), time.Since(began).Round(time.Millisecond), len(failed))
}
