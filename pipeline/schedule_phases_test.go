package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/source"
)

// phaseRegressions are seeds that found bugs, played first.
var phaseRegressions = []uint64{
	// Commits of an earlier shard count in the staging folder made
	// every merge fail, --fresh on every spill shard included
	// (TestPhasesFreshStartsOver in cmd/rekey).
	1796613070626419815, 1796613070626419834,
	// A spill commit that lost a split's record and the job record
	// removed: the merge staged 30,057 of 31,413 cells and succeeded
	// (TestMergeRefusesWithoutTheJobRecord).
	1796672995949900733,
}

// TestPhaseSchedules plays seeded schedules of a job in phases, offline
// (spill shards, merge parts over one staging folder on a local disk),
// as TestSchedules plays a job in one process: spill attempts killed
// after some splits and retried, retried with another split size, shard
// count or build, the job record removed, a spill commit damaged, merge
// parts run too early. A schedule ends when every merge part succeeded:
// the HFiles must then hold exactly the one-process run's cells. Any
// attempt may instead be refused, by a refusal of a known kind.
// REKEY_PHASE_SCHEDULES sets how many [30]; make soak plays more.
func TestPhaseSchedules(t *testing.T) {
	n := 30
	if v := os.Getenv("REKEY_PHASE_SCHEDULES"); v != "" {
		fmt.Sscan(v, &n)
	}
	base := uint64(time.Now().UnixNano())
	if v := os.Getenv("REKEY_SCHEDULE_BASE"); v != "" {
		fmt.Sscan(v, &base)
	}
	seeds := append([]uint64(nil), phaseRegressions...)
	for i := range n {
		seeds = append(seeds, base+uint64(i))
	}
	if *scheduleSeed != 0 {
		seeds = []uint64{*scheduleSeed}
	}
	ref := reference(t)
	began := time.Now()
	failed := 0
	for _, seed := range seeds {
		if problem, log := playPhaseSchedule(t, seed, ref); problem != "" {
			failed++
			t.Errorf("phase schedule %d: %s\n  replay: go test ./pipeline -run TestPhaseSchedules -schedule.seed %d\n  %s", seed, problem, seed, strings.Join(log, "\n  "))
			if failed == 3 {
				break
			}
		}
	}
	t.Logf("%d phase schedules (seeds %d..%d) in %s; %d failed", len(seeds), base, base+uint64(n)-1, time.Since(began).Round(time.Millisecond), failed)
}

// phaseRefusal reports whether err is a refusal a phase task may meet.
func phaseRefusal(err error) bool {
	return refusal(err) || errors.Is(err, ErrNotReady) || errors.Is(err, ErrLoadBegan) || strings.Contains(err.Error(), "another job record")
}

func playPhaseSchedule(t *testing.T, seed uint64, ref map[uint64]bool) (string, []string) {
	rng := rand.New(rand.NewPCG(seed, 0xfa5e))
	dir, err := os.MkdirTemp(simTmp(), "rekey-phases")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	staging := filepath.Join(dir, "staging")
	var log []string
	n, parts := 1+rng.IntN(3), 1+rng.IntN(2)
	sizes := []int64{0, 16 << 10, 40000, -1}
	size := sizes[rng.IntN(len(sizes))]
	newJob := func(splitBytes int64) *job.Job {
		j := demoJobForSim(t)
		j.Run.Checkpoint = filepath.Join(dir, "c.json")
		j.BadKeys.File = filepath.Join(dir, "rejects.tsv")
		j.Run.SplitBytes = splitBytes
		j.Sink = job.Sink{Kind: job.SinkHFiles, Offline: true, Staging: staging}
		return &j
	}
	spill := func(shard, count int, splitBytes int64, otherBuild, fresh bool, killAfter int) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := 0
		o := Options{Phase: PhaseSpill, Shard: Shard{Index: shard, Count: count}, Workers: 1, Resume: !fresh, Fresh: fresh}
		o.afterDone = func() {
			if done == killAfter {
				cancel()
			}
			done++
		}
		if otherBuild {
			o.build = &buildChoices{splitBytes: func(source.Source, int64) int64 { return 24 << 10 }, greedyInRow: true}
		}
		_, err := Execute(ctx, newJob(splitBytes), o)
		log = append(log, fmt.Sprintf("spill %d/%d split_bytes=%d other-build=%v fresh=%v kill@%d -> %s", shard, count, splitBytes, otherBuild, fresh, killAfter, errText(err)))
		return err
	}
	merge := func(part int) error {
		_, err := RunTask(context.Background(), newJob(size), TaskOptions{Phase: PhaseMerge, Part: Shard{Index: part, Count: parts}, Workers: 1})
		log = append(log, fmt.Sprintf("merge %d/%d -> %s", part, parts, errText(err)))
		return err
	}
	check := func(err error) string {
		if err != nil && !phaseRefusal(err) {
			return fmt.Sprintf("an attempt failed with an error that is no refusal: %v", err)
		}
		return ""
	}
	merged := make([]bool, parts)
	finish := func() (bool, string) {
		for i := range parts {
			err := merge(i)
			if p := check(err); p != "" {
				return false, p
			}
			merged[i] = merged[i] || err == nil
		}
		for _, m := range merged {
			if !m {
				return false, ""
			}
		}
		if p := compareStaged(staging, ref); p != "" {
			return true, "every merge part succeeded, but " + p
		}
		return true, ""
	}
	for step := 0; step < 3*n+3; step++ {
		shard, count, sb, other, kill := rng.IntN(n), n, size, false, -1
		switch r := rng.IntN(100); {
		case r < 20:
			kill = rng.IntN(3)
		case r < 28:
			sb = sizes[rng.IntN(len(sizes))]
		case r < 33:
			count = n + 1
			shard = rng.IntN(count)
		case r < 40:
			other, sb = true, 0
		case r < 43:
			os.Remove(filepath.Join(staging, "job.json"))
			log = append(log, "the job record removed")
			continue
		case r < 46:
			if damageSpillCommit(staging, rng) {
				log = append(log, "a spill commit damaged")
			}
			continue
		case r < 55:
			err := merge(rng.IntN(parts))
			if p := check(err); p != "" {
				return p, log
			}
			continue
		}
		if p := check(spill(shard, count, sb, other, false, kill)); p != "" {
			return p, log
		}
	}
	// Finish as an operator would: every spill shard again, then the
	// merge; if that is refused, the spill started over with --fresh on
	// every shard, and the merge, which must then succeed.
	for _, fresh := range []bool{false, true} {
		for i := range n {
			if p := check(spill(i, n, size, false, fresh, -1)); p != "" {
				return p, log
			}
		}
		if fresh {
			merged = make([]bool, parts)
		}
		ended, p := finish()
		if p != "" {
			return p, log
		}
		if ended {
			return "", log
		}
	}
	return "the job, its spill started over with --fresh on every shard, did not merge", log
}

// compareStaged compares the cells of every HFile under staging/hfiles
// with the reference; "" when they are the same set with no cell twice.
func compareStaged(staging string, ref map[uint64]bool) string {
	seen := map[uint64]bool{}
	twice, foreign := 0, 0
	err := filepath.WalkDir(filepath.Join(staging, "hfiles"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "_") {
			return err
		}
		rd, err := hfile.OpenFile(p)
		if err != nil {
			return err
		}
		defer rd.Close()
		it := rd.NewIterator()
		for ok := it.First(); ok; ok = it.Next() {
			h := cellHash(it.Cell())
			if seen[h] {
				twice++
			}
			if !ref[h] {
				foreign++
			}
			seen[h] = true
		}
		return it.Close()
	})
	switch {
	case err != nil:
		return fmt.Sprintf("reading the HFiles: %v", err)
	case twice > 0 || foreign > 0 || len(seen) != len(ref):
		return fmt.Sprintf("the HFiles hold %d of the one-process run's %d cells, %d twice and %d foreign: a silent difference", len(seen), len(ref), twice, foreign)
	}
	return ""
}

// damageSpillCommit drops a split from a committed spill shard, if any.
func damageSpillCommit(staging string, rng *rand.Rand) bool {
	files, _ := filepath.Glob(filepath.Join(staging, "spill", "shard-*.json"))
	if len(files) == 0 {
		return false
	}
	f := files[rng.IntN(len(files))]
	b, err := os.ReadFile(f)
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.Index(s, "\"splits\": [")
	if i < 0 {
		return false
	}
	// Cut the first split's record: from its "{" to the next record's.
	j := strings.Index(s[i:], "\n  },")
	if j < 0 {
		return false
	}
	k := strings.Index(s[i:], "{")
	os.WriteFile(f, []byte(s[:i+k]+s[i+j+len("\n  },"):]), 0o644)
	return true
}
