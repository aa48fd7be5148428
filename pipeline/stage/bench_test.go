package stage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/pipeline"
)

// BenchmarkStage stages 400k cells (about 55 MB of cell bytes) from 4 splits into a
// local folder and writes the HFiles (no load): cells/s of the spill
// (sort + Arrow runs) and of the merge (k-way merge + hfile.Writer),
// measured apart.
func BenchmarkStage(b *testing.B) {
	ctx := context.Background()
	const splits, per = 4, 100000
	cells := make([][]cell.Cell, splits)
	var data int64
	for sp := range cells {
		cells[sp] = genCells(int64(sp), per)
		for i := range cells[sp] {
			cells[sp][i].Qualifier = fmt.Appendf(cells[sp][i].Qualifier, "-%d", sp)
			data += cellBytes(&cells[sp][i])
		}
	}
	var spill, merge time.Duration
	for b.Loop() {
		s, err := New(ctx, Options{Staging: b.TempDir(), Table: "t", SplitKeys: [][]byte{[]byte("h"), []byte("p")}, Memory: 64 << 20, Workers: 1})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for sp := range cells {
			w, err := s.Begin(ctx, pipeline.SplitInfo{ID: fmt.Sprint(sp)})
			if err != nil {
				b.Fatal(err)
			}
			for i := range cells[sp] {
				if err := w.Write(ctx, &cells[sp][i]); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := w.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		if err := s.Finish(ctx, reporterFunc(func(string, ...any) {})); err != nil {
			b.Fatal(err)
		}
		spill += t1.Sub(t0)
		merge += time.Since(t1)
		s.Close()
	}
	n := float64(b.N * splits * per)
	b.ReportMetric(n/spill.Seconds(), "spill-cells/s")
	b.ReportMetric(n/merge.Seconds(), "merge-cells/s")
	b.ReportMetric(float64(int64(b.N)*data)/1e6/(spill+merge).Seconds(), "MB/s")
}
