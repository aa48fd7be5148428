package hbase

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
)

// BenchmarkWriterPut measures cells/s through the batched writer into a
// two-region table (small cells: 8-byte row, 2-byte qualifier, 8-byte
// value), the shape of the oracle's bench-put.
func BenchmarkWriterPut(b *testing.B) {
	c, _ := testClient(b)
	ctx := context.Background()
	table := tempTable(b, c, "benchput", nil, []byte(fmt.Sprintf("r%07d", 125000)))
	b.ResetTimer()
	start := time.Now()
	w := c.NewWriter([]byte(table), WriterConfig{})
	for i := 0; i < b.N; i++ {
		if err := w.Write(ctx, faultCell(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cells/s")
}

// BenchmarkScan measures cells/s of a full-table scan.
func BenchmarkScan(b *testing.B) {
	c, _ := testClient(b)
	ctx := context.Background()
	n := 500_000
	table := tempTable(b, c, "benchscan", nil, []byte(fmt.Sprintf("r%07d", n/4/2)))
	w := c.NewWriter([]byte(table), WriterConfig{})
	for i := 0; i < n; i++ {
		if err := w.Write(ctx, faultCell(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if err := c.Flush(ctx, table); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	total := 0
	for i := 0; i < b.N; i++ {
		sc := c.Scan(ctx, []byte(table), &Scan{Caching: 5000, MaxResultSize: 8 << 20})
		for sc.Next() {
			total++
		}
		if err := sc.Err(); err != nil {
			b.Fatal(err)
		}
		sc.Close()
	}
	if total != n*b.N {
		b.Fatalf("scanned %d cells, want %d", total, n*b.N)
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "cells/s")
}

// BenchmarkWriterPutOracleShape writes the cells of the oracle's bench-put
// (testenv/bin/oracle bench-put TABLE N BATCH): four regions split at 0x40,
// 0x80, 0xC0, a hashed 9-byte row, one 32-byte cell per row; compare the
// two numbers side by side.
func BenchmarkWriterPutOracleShape(b *testing.B) {
	c, _ := testClient(b)
	ctx := context.Background()
	table := tempTable(b, c, "benchputj", nil, []byte{0x40}, []byte{0x80}, []byte{0xC0})
	v := make([]byte, 32)
	b.ResetTimer()
	start := time.Now()
	w := c.NewWriter([]byte(table), WriterConfig{})
	for i := 0; i < b.N; i++ {
		row := make([]byte, 9)
		row[0] = byte(uint64(i) * 0x9E3779B97F4A7C15 >> 56)
		binary.BigEndian.PutUint64(row[1:], uint64(i))
		cl := cell.Cell{Row: row, Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 1767225600000, Type: cell.Put, Value: v}
		if err := w.Write(ctx, cl); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cells/s")
}

// BenchmarkWriterCells measures what the batched writer costs per cell on
// the client side: allocations per cell (runtime.MemStats) and CPU per cell
// (the process's user + system time from getrusage, so the writer's
// background and sending goroutines and the garbage collector count too),
// besides cells/s. Its shapes: "wide", the target of the wide -> bucketed
// bench (a 20-byte row of 60 cells, 4-byte qualifier, 10-byte value), and
// "tall", one cell per row (the oracle's bench-put). One op is one cell:
// run with -benchtime=Nx for a fixed count.
func BenchmarkWriterCells(b *testing.B) {
	c, _ := testClient(b)
	ctx := context.Background()
	shapes := []struct {
		name    string
		perRow  int
		rowLen  int
		valLen  int
		regions [][]byte
	}{
		{"wide", 60, 20, 10, [][]byte{{0x40}, {0x80}, {0xC0}}},
		{"tall", 1, 9, 32, [][]byte{{0x40}, {0x80}, {0xC0}}},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			table := tempTable(b, c, "benchcells", nil, sh.regions...)
			row := make([]byte, sh.rowLen)
			q := make([]byte, 4)
			v := make([]byte, sh.valLen)
			cl := cell.Cell{Family: []byte("f"), Qualifier: q, Type: cell.Put, Value: v}
			w := c.NewWriter([]byte(table), WriterConfig{})
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			cpu0 := processCPU(b)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				r := uint64(i / sh.perRow)
				// Rows spread over the regions as a hashed key would.
				row[0] = byte(r * 0x9E3779B97F4A7C15 >> 56)
				binary.BigEndian.PutUint64(row[1:], r)
				binary.BigEndian.PutUint32(q, uint32(i%sh.perRow))
				binary.BigEndian.PutUint64(v, uint64(i))
				cl.Row = row
				cl.Timestamp = 1767225600000 + int64(i%7)
				if err := w.WriteCell(ctx, &cl); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			el := time.Since(start)
			b.StopTimer()
			cpu := processCPU(b) - cpu0
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "allocs/cell")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/cell")
			b.ReportMetric(float64(b.N)/el.Seconds(), "cells/s")
		})
	}
}

// processCPU is the process's user + system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
