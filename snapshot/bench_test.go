package snapshot_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

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
