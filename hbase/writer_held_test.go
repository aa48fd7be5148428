package hbase

import (
	"context"
	"fmt"
	"runtime"
	"testing"

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
	const n = 20000
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
	if counted < alloc || counted > alloc*3/2 {
		t.Errorf("counted %d bytes for %d cells; they hold %d", counted, n, alloc)
	}
}
