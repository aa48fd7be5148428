package hbase

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
)

// TestWriterHoldsWhatItCounts writes small cells of one row (they stay in
// the mutation being gathered, so nothing is sent) and holds the heap the
// Go runtime finds live after them against what the Writer counts for
// them (its arena chunks, and the mutation's structures outside them once
// admitted): the count must cover it (MaxBufferedBytes bounds real
// memory), and not by more than half again (the budget is not wasted).
// Counting encoded bytes alone covered about a sixth when every cell was
// a copy of its own.
func TestWriterHoldsWhatItCounts(t *testing.T) {
	w := (&Client{}).NewWriter([]byte("t"), WriterConfig{MaxCellsPerCall: 1 << 20, MaxBytesPerCall: 1 << 30})
	defer close(w.stop)
	const n = 200000
	cells := make([]cell.Cell, n)
	for i := range cells {
		cells[i] = cell.Cell{Row: []byte("s000007"), Family: []byte("d"), Qualifier: []byte(fmt.Sprintf("%08d", i)), Timestamp: 1767225600000 + int64(i), Type: cell.Put, Value: []byte("v-123")}
	}
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	for i := range cells {
		if err := w.Write(context.Background(), cells[i]); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC() // the chunks the row outgrew go
	runtime.ReadMemStats(&b)
	runtime.KeepAlive(cells)
	m := w.cur
	if m == nil || m.n != n {
		t.Fatalf("the mutation being gathered holds %v cells, want %d", m, n)
	}
	// The cells decode from the arena as they were written.
	got, err := m.cells()
	if err != nil || len(got) != n {
		t.Fatalf("the mutation's cells: %d, %v", len(got), err)
	}
	for i := range got {
		if cell.Compare(&got[i], &cells[i]) != 0 || string(got[i].Value) != string(cells[i].Value) {
			t.Fatalf("cell %d reads back as %s, written %s", i, &got[i], &cells[i])
		}
	}
	alloc := int(b.HeapAlloc) - int(a.HeapAlloc)
	counted := w.Stats().Buffered + heldMutation + len(m.row)
	// The runtime's own heap moves by tens of KB between two reads with
	// nothing written (measured: up to 40 KB); 64 KiB of it is forgiven.
	const noise = 64 << 10
	if counted < alloc-noise || counted > alloc*3/2 {
		t.Errorf("counted %d bytes for %d cells; they hold %d", counted, n, alloc)
	}
}

// TestWriteCellAllocatesNothing holds the Writer to no allocation of its
// own per cell, for a wide row and for rows of one cell each (which are
// routed to their region's batch; the calls are kept from going out by
// limits they never reach). The arena's chunks, the mutation slots and the
// batches' slices grow now and then; averaged over the cells that is less
// than one allocation per cell, and AllocsPerRun rounds it down to 0.
// Before the arena, a cell cost 2.4 allocations in a wide row and 20 in a
// row of its own (BenchmarkWriterCells).
func TestWriteCellAllocatesNothing(t *testing.T) {
	c := &Client{cache: regionCache{tables: map[string]*tableRegions{}}}
	c.cache.add(&Region{Table: "t", Name: []byte("t,,1.x."), Server: "127.0.0.1:1"})
	w := c.NewWriter([]byte("t"), WriterConfig{MaxCellsPerCall: 1 << 30, MaxBytesPerCall: 1 << 30, MaxBufferedBytes: 1 << 30, FlushInterval: time.Hour})
	defer close(w.stop)
	ctx := context.Background()
	row := []byte("s000007\x002026-01-01T05")
	q := make([]byte, 4)
	cl := cell.Cell{Row: row, Family: []byte("d"), Qualifier: q, Timestamp: 1767225600000, Type: cell.Put, Value: []byte("v-123456")}
	i := 0
	if got := testing.AllocsPerRun(20000, func() {
		i++
		binary.BigEndian.PutUint32(q, uint32(i))
		if err := w.WriteCell(ctx, &cl); err != nil {
			t.Fatal(err)
		}
	}); got != 0 {
		t.Errorf("a cell of a wide row: %v allocations, want 0", got)
	}
	if got := testing.AllocsPerRun(20000, func() {
		i++
		binary.BigEndian.PutUint32(row, uint32(i)) // a new row each cell
		if err := w.WriteCell(ctx, &cl); err != nil {
			t.Fatal(err)
		}
	}); got != 0 {
		t.Errorf("a row of one cell: %v allocations, want 0", got)
	}
}
