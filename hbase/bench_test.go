package hbase

import (
	"context"
	"encoding/binary"
	"fmt"
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
