package hbase

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

// TestWriterHoldsWhatItCounts writes small cells of one row (they stay in
// the mutation being gathered, so nothing is sent) and holds the heap the
// Go runtime finds live after them, plus the cell block a call will
// encode them into, against what the Writer counts for the mutation: the
// count must cover it (MaxBufferedBytes bounds real memory), and not by
// more than half again (the budget is not wasted). Counting encoded bytes
// alone covered about a sixth.
func TestWriterHoldsWhatItCounts(t *testing.T) {
	w := (&Client{}).NewWriter([]byte("t"), WriterConfig{MaxCellsPerCall: 1 << 20, MaxBytesPerCall: 1 << 30})
	defer close(w.stop)
	const n = 20000
	cells := make([]cell.Cell, n)
	block := 0
	for i := range cells {
		cells[i] = cell.Cell{Row: []byte("s000007"), Family: []byte("d"), Qualifier: []byte(fmt.Sprintf("%08d", i)), Timestamp: 1767225600000 + int64(i), Type: cell.Put, Value: []byte("v-123")}
		block += rpc.CellBlockLen(&cells[i])
	}
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	for i := range cells {
		if err := w.Write(context.Background(), cells[i]); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC() // what Write left garbage (the variadic slices) goes
	runtime.ReadMemStats(&b)
	runtime.KeepAlive(cells)
	m := w.cur
	if m == nil || len(m.cells) != n {
		t.Fatalf("the mutation being gathered holds %v cells, want %d", m, n)
	}
	alloc := int(b.HeapAlloc) - int(a.HeapAlloc)
	want := alloc + block
	if got := heldBytes(m); got < want || got > want*3/2 {
		t.Errorf("counted %d bytes for %d cells; they hold %d (%d allocated and kept, %d encoded)", got, n, want, alloc, block)
	}
}
