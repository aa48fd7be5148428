package hfiles

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/sink"
)

// BenchmarkStage stages 400k cells (about 55 MB of cell bytes) from 4 splits into a
// local folder and writes the HFiles (no load): cells/s of the spill
// (sort + run files) and of the merge (k-way merge + hfile.Writer),
// measured apart.
func BenchmarkStage(b *testing.B) {
	const splits, per = 4, 100000
	cells := make([][]cell.Cell, splits)
	for sp := range cells {
		cells[sp] = genCells(int64(sp), per)
		for i := range cells[sp] {
			cells[sp][i].Qualifier = fmt.Appendf(cells[sp][i].Qualifier, "-%d", sp)
		}
	}
	benchStage(b, Options{Table: "t", SplitKeys: [][]byte{[]byte("h"), []byte("p")}, Memory: 64 << 20, Workers: 1}, cells)
}

// BenchmarkStageHeavySplit stages one split of 1.1M small cells of one
// entity, the shape of the end-to-end bench's heaviest region (a sensor
// with 1M readings re-keyed to hourly rows: long shared row prefixes, an
// 8-byte qualifier, a short value, two versions a reading), in the order
// the snapshot hands them over (the wide row's columns by time), which the
// re-key keeps: spill-cells/s is the cost of holding, sorting and spilling
// one big buffer, the heavy split's share of a staged job.
func BenchmarkStageHeavySplit(b *testing.B) {
	const n = 1_100_000
	cells := make([]cell.Cell, n)
	for i := range cells {
		// Readings a second apart, two versions each (newest first).
		at := int64(1_767_225_600_000) + int64(i/2)*1000
		hour := time.UnixMilli(at).UTC().Format("2006-01-02T15")
		var q [8]byte
		binary.BigEndian.PutUint64(q[:], uint64(at%3_600_000))
		ts := at + int64(1-i%2)
		cells[i] = cell.Cell{Row: append([]byte("s000007\x00"), hour...), Family: []byte("d"), Qualifier: q[:],
			Timestamp: ts, Type: cell.Put, Value: fmt.Appendf(nil, "%020d%012d", i, ts)}
	}
	benchStage(b, Options{Table: "t", SplitKeys: [][]byte{[]byte("s000005"), []byte("s000009")}, Memory: 512 << 20, Workers: 1}, [][]cell.Cell{cells})
}

// benchStage stages each of splits as one split into a fresh folder per
// iteration and writes the HFiles, timing the spill (Write and Commit)
// and the merge (Finish) apart.
func benchStage(b *testing.B, o Options, splits [][]cell.Cell) {
	ctx := context.Background()
	var cells int
	var data int64
	for _, sp := range splits {
		cells += len(sp)
		for i := range sp {
			data += cell.Size(&sp[i])
		}
	}
	var spill, merge time.Duration
	for b.Loop() {
		o.Staging = b.TempDir()
		s, err := New(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for id, sp := range splits {
			w, err := s.Begin(ctx, sink.SplitInfo{ID: fmt.Sprint(id)})
			if err != nil {
				b.Fatal(err)
			}
			for i := range sp {
				if err := w.Write(ctx, &sp[i]); err != nil {
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
	n := float64(b.N * cells)
	b.ReportMetric(n/spill.Seconds(), "spill-cells/s")
	b.ReportMetric(n/merge.Seconds(), "merge-cells/s")
	b.ReportMetric(float64(int64(b.N)*data)/1e6/(spill+merge).Seconds(), "MB/s")
}
