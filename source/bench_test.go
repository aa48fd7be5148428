package source_test

import (
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/source"
)

// benchSnapshot opens the bundled demo snapshot both ways.
func benchSnapshot(b *testing.B) (*source.Snapshot, *snapshot.Snapshot) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	root := filepath.Join(repo, "testdata", "snapshots", "demo_events")
	src, err := source.OpenSnapshot(b.Context(), root, "demo_events", snapshot.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { src.Close() })
	snap, err := snapshot.Open(b.Context(), root, "demo_events", snapshot.OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { snap.Close() })
	return src, snap
}

// BenchmarkScanDirect reads the demo snapshot with the snapshot's own
// scanners, the calls the run made per cell before sources: the yardstick
// for BenchmarkScanSource.
func BenchmarkScanDirect(b *testing.B) {
	_, snap := benchSnapshot(b)
	splits, err := snap.Splits(snapshot.SplitOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for b.Loop() {
		for _, sp := range splits {
			sc, err := snap.NewScanner(b.Context(), sp, snapshot.ScanOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var gen uint64
			for sc.Next() {
				n += int64(len(sc.Cell().Row))
				gen += sc.RowGen()
			}
			if err := sc.Close(); err != nil {
				b.Fatal(err)
			}
			n += int64(gen & 1)
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "rowbytes/op")
}

// BenchmarkScanSource reads the same cells through the Source and its
// Scanner interface, the calls the run makes per cell now (Next, Cell
// and RowGen through an interface).
func BenchmarkScanSource(b *testing.B) {
	src, _ := benchSnapshot(b)
	splits, err := src.Splits(source.CutOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for b.Loop() {
		for _, sp := range splits {
			sc, err := src.Open(b.Context(), sp, source.ScanOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var gen uint64
			for sc.Next() {
				n += int64(len(sc.Cell().Row))
				gen += sc.RowGen()
			}
			if err := sc.Close(); err != nil {
				b.Fatal(err)
			}
			n += int64(gen & 1)
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "rowbytes/op")
}
