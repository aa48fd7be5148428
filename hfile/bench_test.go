package hfile

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// benchCells is a typical wide-ish table: 20k cells, ~10 columns per row,
// 40-byte values, mvcc and empty tags as region-server flushes write them.
func benchCells(n int) []cell.Cell {
	cells := make([]cell.Cell, 0, n)
	for i := 0; len(cells) < n; i++ {
		row := []byte(fmt.Sprintf("user%08d|2024-05-%02d", i/3, i%28))
		for q := 0; q < 10 && len(cells) < n; q++ {
			cells = append(cells, cell.Cell{
				Row: row, Family: []byte("d"), Qualifier: []byte(fmt.Sprintf("col%02d", q)),
				Timestamp: 1717000000000 + int64(i), Type: cell.Put,
				Value: []byte(fmt.Sprintf("value-%010d-%020d", i, q*7919)),
				SeqID: uint64(1000 + i),
			})
		}
	}
	return cells
}

func scanAll(it *Iterator) int {
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// BenchmarkScan measures full-file iteration per encoding and codec, with
// one iterator reused across runs (the steady state: 0 allocs/op).
func BenchmarkScan(b *testing.B) {
	cells := benchCells(20000)
	for _, enc := range allEncodings {
		for _, cc := range allCodecs {
			if cc.plain {
				continue
			}
			b.Run(fmt.Sprintf("%s/%s", enc, cc.name), func(b *testing.B) {
				o := writeOpts{enc: enc, codec: cc.codec, tags: true, mvcc: true}
				data := writeTestHFile(b, cells, o)
				r, err := Open(bytes.NewReader(data), int64(len(data)), "bench")
				if err != nil {
					b.Fatal(err)
				}
				it := r.NewIterator()
				var raw int64
				for i := range cells {
					raw += int64(cell.KeyLen(&cells[i]) + len(cells[i].Value))
				}
				scanAll(it) // warm the buffers
				b.SetBytes(raw)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if n := scanAll(it); n != len(cells) || it.Err() != nil {
						b.Fatalf("scanned %d cells: %v", n, it.Err())
					}
				}
				b.ReportMetric(float64(len(cells))*float64(b.N)/b.Elapsed().Seconds(), "cells/s")
			})
		}
	}
}

// BenchmarkSeek measures random SeekGE on a 3-level index.
func BenchmarkSeek(b *testing.B) {
	cells := benchCells(20000)
	data := writeTestHFile(b, cells, writeOpts{enc: EncodingFastDiff, codec: CodecSnappy, blockSize: 4096, leafEntries: 8, rootEntries: 8, mvcc: true})
	r, err := Open(bytes.NewReader(data), int64(len(data)), "bench")
	if err != nil {
		b.Fatal(err)
	}
	it := r.NewIterator()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := &cells[(i*7919)%len(cells)]
		if !it.SeekGE(k) {
			b.Fatal(it.Err())
		}
	}
}

// TestSteadyStateAllocs pins the no-allocation promise: rescanning a file
// with a warmed-up iterator allocates nothing, for every encoding and codec.
func TestSteadyStateAllocs(t *testing.T) {
	cells := benchCells(3000)
	for _, enc := range allEncodings {
		for _, cc := range allCodecs {
			o := writeOpts{enc: enc, codec: cc.codec, zstdPlain: cc.plain, tags: true, mvcc: true, blockSize: 4096}
			data := writeTestHFile(t, cells, o)
			r, err := openBytes(t, "allocs", data)
			if err != nil {
				t.Fatal(err)
			}
			it := r.NewIterator()
			scanAll(it)
			allocs := testing.AllocsPerRun(3, func() { scanAll(it) })
			// The deflate decoder (klauspost/compress/flate) now and then
			// grows a Huffman link table for a block with an unusual code;
			// that is rare per block and never per cell.
			limit := 0.0
			if cc.codec == CodecGZ {
				limit = 2
			}
			if allocs > limit {
				t.Errorf("%s/%s: %.0f allocations per full scan of %d cells", enc, cc.name, allocs, len(cells))
			}
		}
	}
}
