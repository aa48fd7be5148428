package hfiles

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/rekeyhq/rekey/cell"
)

// A partition's merge does two kinds of work per cell: reading it (the
// runs' blocks decompressed and decoded, the heap of cursors) and writing
// it (the HFile's block encoding, compression, checksums and stream). For
// most partitions one goroutine does both, and the workers' partitions
// keep the cores busy. A partition larger than a worker's share of the
// merge would end the phase alone on one core while the others idle (at
// SIZE=large one region holds 45% of the cells), so for it the reading
// and the writing run in two goroutines, handing over batches of copied
// cells.

const (
	pipeBatchCells = 4096
	pipeBatchBytes = 1 << 20 // at most; a small budget gets smaller batches
	pipeBatches    = 4       // in flight: one filled, one drained, two waiting
	minPipeBatch   = 1 << 10 // below it a budget is too small to pipe
)

// pipeBatchSize is the bytes of a pipe's batch when the merge's workers
// share spare bytes of the budget: a sixteenth of a worker's share over
// its pipeBatches batches, up to pipeBatchBytes. The pipes then hold at
// most a sixteenth of the budget (a cell larger than a batch excepted).
func pipeBatchSize(spare int64, workers int) int {
	return int(min(max(spare, 0)/int64(16*pipeBatches*max(workers, 1)), pipeBatchBytes))
}

// cellBatch is a batch of cells copied out of the merge, their bytes in
// buf.
type cellBatch struct {
	cells []cell.Cell
	buf   []byte
}

// add copies c into the batch, or reports false when the batch has no
// room left for it (an empty batch always takes it, growing buf).
func (b *cellBatch) add(c *cell.Cell) bool {
	need := len(c.Row) + len(c.Family) + len(c.Qualifier) + len(c.Value) + len(c.Tags)
	if len(b.cells) >= pipeBatchCells || len(b.buf)+need > cap(b.buf) {
		if len(b.cells) > 0 {
			return false
		}
		if need > cap(b.buf) {
			b.buf = make([]byte, 0, need)
		}
	}
	cp := cell.Cell{Timestamp: c.Timestamp, Type: c.Type, SeqID: c.SeqID}
	// Cells of a wide row share one copy of the row, and the partition's
	// cells all have one family.
	if n := len(b.cells); n > 0 && bytes.Equal(b.cells[n-1].Row, c.Row) {
		cp.Row = b.cells[n-1].Row
	} else {
		cp.Row = b.copy(c.Row)
	}
	if n := len(b.cells); n > 0 && bytes.Equal(b.cells[n-1].Family, c.Family) {
		cp.Family = b.cells[n-1].Family
	} else {
		cp.Family = b.copy(c.Family)
	}
	cp.Qualifier = b.copy(c.Qualifier)
	cp.Value = b.copy(c.Value)
	if c.Tags != nil {
		cp.Tags = b.copy(c.Tags)
	}
	b.cells = append(b.cells, cp)
	return true
}

// copy appends p to buf, which has room for it, and returns the copy.
func (b *cellBatch) copy(p []byte) []byte {
	o := len(b.buf)
	b.buf = append(b.buf, p...)
	return b.buf[o:len(b.buf):len(b.buf)]
}

// errPipeStopped ends the reading side when the writing side failed.
var errPipeStopped = errors.New("hfiles: merge pipe stopped")

// pipeCells calls fn with every cell of m in order, as m.each does, but
// reads the merge on another goroutine, ahead of fn by up to pipeBatches
// batches of batchBytes. It returns the first error of either side.
func pipeCells(ctx context.Context, m *merger, batchBytes int, fn func(c *cell.Cell) error) error {
	free := make(chan *cellBatch, pipeBatches)
	full := make(chan *cellBatch, pipeBatches)
	for range pipeBatches {
		free <- &cellBatch{buf: make([]byte, 0, batchBytes)}
	}
	stop := make(chan struct{})
	var readErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(full)
		b := <-free
		send := func() error {
			select {
			case full <- b:
			case <-stop:
				return errPipeStopped
			}
			select {
			case b = <-free:
			case <-stop:
				return errPipeStopped
			}
			b.cells, b.buf = b.cells[:0], b.buf[:0]
			if cap(b.buf) > batchBytes {
				b.buf = make([]byte, 0, batchBytes) // grown for one large cell
			}
			return nil
		}
		readErr = m.each(func(c *cell.Cell) error {
			if b.add(c) {
				return nil
			}
			if err := send(); err != nil {
				return err
			}
			b.add(c)
			return nil
		})
		if readErr == nil && len(b.cells) > 0 {
			select {
			case full <- b:
			case <-stop:
			}
		}
	}()
	var writeErr error
	for b := range full {
		if writeErr == nil {
			for i := range b.cells {
				if writeErr = fn(&b.cells[i]); writeErr != nil {
					close(stop)
					break
				}
			}
		}
		if writeErr == nil {
			free <- b
		}
	}
	wg.Wait()
	if writeErr != nil {
		return writeErr
	}
	if readErr != nil {
		return readErr
	}
	return ctx.Err()
}
