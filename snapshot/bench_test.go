package snapshot_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"golang.org/x/sync/errgroup"
)

// BenchmarkReadSnapshots reads every committed fixture snapshot whole,
// split by split, with 1 and 2 workers, and reports cells/s.
func BenchmarkReadSnapshots(b *testing.B) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(repo, "testdata", "snapshots")
	dumps, _ := filepath.Glob(filepath.Join(dir, "*.raw.cells"))
	if len(dumps) == 0 {
		b.Skip("no fixtures under testdata/snapshots")
	}
	type job struct {
		s  *snapshot.Snapshot
		sp snapshot.Split
	}
	var jobs []job
	for _, d := range dumps {
		name := strings.TrimSuffix(filepath.Base(d), ".raw.cells")
		s, err := snapshot.Open(context.Background(), filepath.Join(dir, name), name, snapshot.OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		// Cut regions into ~64 KiB pieces so two workers have work to share.
		splits, err := s.Splits(snapshot.SplitOptions{TargetBytes: 64 << 10})
		if err != nil {
			b.Fatal(err)
		}
		for _, sp := range splits {
			jobs = append(jobs, job{s, sp})
		}
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var cells atomic.Int64
			for i := 0; i < b.N; i++ {
				g, ctx := errgroup.WithContext(context.Background())
				g.SetLimit(workers)
				for _, j := range jobs {
					g.Go(func() error {
						sc, err := j.s.NewScanner(ctx, j.sp, snapshot.ScanOptions{})
						if err != nil {
							return err
						}
						var n int64
						for sc.Next() {
							n++
						}
						cells.Add(n)
						return sc.Close()
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cells.Load())/b.Elapsed().Seconds(), "cells/s")
		})
	}
}

// BenchmarkReadSnapshotEnv reads the snapshot REKEY_BENCH_SNAPSHOT names
// ("ROOT NAME", e.g. a local export made with `testenv/bin/oracle
// export-snapshot`), whole, one split after the other, all versions: the
// profile target for the merge (go test -bench ReadSnapshotEnv
// -cpuprofile cpu.out ./snapshot).
func BenchmarkReadSnapshotEnv(b *testing.B) {
	_, s, splits := envSnapshot(b)
	var cells int64
	b.ReportAllocs()
	for b.Loop() {
		for _, sp := range splits {
			err := s.ReadSplit(context.Background(), sp, snapshot.ScanOptions{MaxVersions: 1 << 30}, func(*cell.Cell) error { cells++; return nil })
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(cells)/b.Elapsed().Seconds(), "cells/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(cells), "ns/cell")
}

// BenchmarkMergeCostEnv reads the snapshot REKEY_BENCH_SNAPSHOT names
// ("ROOT NAME", a local export) in turn with the scanner and as bare store
// files (every HFile under ROOT/data and ROOT/archive with the HFile
// iterator alone), one after the other in each round, and reports the
// ratio of their times: the share of a snapshot read that is decoding. In
// one process and alternating, the ratio holds still on a machine whose
// speed drifts, where the two timed apart do not (make bench prints the
// same ratio from separate processes).
func BenchmarkMergeCostEnv(b *testing.B) {
	root, s, splits := envSnapshot(b)
	var paths []string
	for _, sub := range []string{"data", "archive"} {
		filepath.WalkDir(filepath.Join(root, sub), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") && !strings.Contains(p, "recovered.edits") {
				paths = append(paths, p)
			}
			return nil
		})
	}
	var bare, merged time.Duration
	var bareCells, mergedCells int64
	for b.Loop() {
		t0 := time.Now()
		for _, p := range paths {
			r, err := hfile.OpenFile(p)
			if err != nil {
				b.Fatal(err)
			}
			if err := cell.ForEach(r.NewIterator(), func(*cell.Cell) error { bareCells++; return nil }); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
		t1 := time.Now()
		for _, sp := range splits {
			err := s.ReadSplit(context.Background(), sp, snapshot.ScanOptions{MaxVersions: 1 << 30}, func(*cell.Cell) error { mergedCells++; return nil })
			if err != nil {
				b.Fatal(err)
			}
		}
		bare += t1.Sub(t0)
		merged += time.Since(t1)
	}
	// Every version of every cell, no deletes: both sides must have read
	// the same cells, or the ratio compares different work.
	if bareCells != mergedCells {
		b.Fatalf("the store files hold %d cells but the snapshot read returned %d: a ratio would compare different work", bareCells, mergedCells)
	}
	b.ReportMetric(float64(bare)/float64(merged), "bare/merged")
	b.ReportMetric(float64(merged.Nanoseconds())/float64(mergedCells), "merged-ns/cell")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(bareCells), "bare-ns/cell")
}

// envSnapshot opens the snapshot REKEY_BENCH_SNAPSHOT names ("ROOT NAME")
// and its splits, closed when the benchmark ends; it skips the benchmark
// when the variable is not set.
func envSnapshot(b *testing.B) (root string, s *snapshot.Snapshot, splits []snapshot.Split) {
	b.Helper()
	root, name, ok := strings.Cut(os.Getenv("REKEY_BENCH_SNAPSHOT"), " ")
	if !ok {
		b.Skip(`REKEY_BENCH_SNAPSHOT="ROOT NAME" is not set`)
	}
	s, err := snapshot.Open(context.Background(), root, name, snapshot.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	splits, err = s.Splits(snapshot.SplitOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return root, s, splits
}
