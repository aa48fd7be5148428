// Package puts is the sink that writes a run's cells into a live table
// with batched Multi calls (hbase.Writer), the way an application writes
// them: each split's Commit waits for exactly its own mutations, so a split
// recorded done is in the table.
package puts

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/sink"
)

// Options tune the puts sink; zero fields take the client's defaults.
type Options struct {
	// BatchCells and BatchBytes bound one Multi call.
	BatchCells int
	BatchBytes int64
	// CallsPerServer caps the calls in flight to one region server for the
	// whole run: each of Workers writers gets an equal share, at least 1.
	CallsPerServer int
	Workers        int
	// BufferBytes bounds what each split's writer holds unacknowledged.
	BufferBytes int64
	// RetryTimeout is how long one mutation is retried before it is
	// reported failed.
	RetryTimeout time.Duration
}

// Sink writes cells into a live table with batched Multi calls, one
// hbase.Writer per split, so a split's Commit waits for exactly its own
// mutations.
type Sink struct {
	client  *hbase.Client
	table   []byte
	cfg     hbase.WriterConfig
	retries atomic.Uint64 // mutation retries of every split's writer
}

// New returns the puts sink for table.
func New(client *hbase.Client, table string, o Options) *Sink {
	cfg := hbase.WriterConfig{MaxCellsPerCall: o.BatchCells, MaxBytesPerCall: int(o.BatchBytes), RetryTimeout: o.RetryTimeout, MaxBufferedBytes: int(o.BufferBytes)}
	if o.CallsPerServer > 0 {
		cfg.InFlightPerServer = max(1, o.CallsPerServer/max(1, o.Workers))
	}
	return &Sink{client: client, table: []byte(table), cfg: cfg}
}

// Name implements sink.Sink.
func (p *Sink) Name() string { return "puts" }

// Begin implements sink.Sink.
func (p *Sink) Begin(_ context.Context, s sink.SplitInfo) (sink.SplitSink, error) {
	return &putsSplit{p: p, w: p.client.NewWriter(p.table, p.cfg), id: s.ID}, nil
}

// Finish implements sink.Sink: puts are durable at each split's Commit.
func (p *Sink) Finish(context.Context, sink.Reporter) error { return nil }

// Close implements sink.Sink. The client belongs to the caller.
func (p *Sink) Close() error { return nil }

// Retries implements sink.Retrier: the mutation retries so far of every
// split's writer, brought up to date every 1024 cells and at the end of a
// split.
func (p *Sink) Retries() uint64 { return p.retries.Load() }

type putsSplit struct {
	p       *Sink
	w       *hbase.Writer
	id      string
	cells   int64
	bytes   int64
	retries uint64 // already added to p.retries
	closed  bool
}

func (s *putsSplit) Write(ctx context.Context, c *cell.Cell) error {
	if err := s.w.WriteCell(ctx, c); err != nil {
		return err
	}
	s.cells++
	s.bytes += cell.Size(c)
	if s.cells&1023 == 0 {
		s.syncRetries()
	}
	return nil
}

func (s *putsSplit) syncRetries() {
	r := s.w.Stats().Retries
	if r > s.retries {
		s.p.retries.Add(r - s.retries)
		s.retries = r
	}
}

func (s *putsSplit) Commit(ctx context.Context) (sink.Ack, error) {
	err := s.w.Close(ctx)
	s.closed = true
	s.syncRetries()
	st := s.w.Stats()
	ack := sink.Ack{Cells: int64(st.Written), Bytes: s.bytes, Failed: int64(st.Failed)}
	var we *hbase.WriteError
	if errors.As(err, &we) {
		for i, f := range we.Failures {
			if i == 5 {
				break
			}
			ack.FailedExamples = append(ack.FailedExamples, fmt.Sprintf("row %q (%d cells): %v", f.Row, len(f.Cells), f.Err))
		}
		return ack, nil
	}
	if err != nil {
		return ack, fmt.Errorf("puts of split %s: %w", s.id, err)
	}
	if ack.Cells+ack.Failed != s.cells {
		// The writer must account for every cell it was given.
		return ack, fmt.Errorf("puts of split %s: %d cells written, %d acknowledged and %d failed", s.id, s.cells, ack.Cells, ack.Failed)
	}
	return ack, nil
}

// Abort closes the writer with a short deadline: what is in flight may land
// (harmless, timestamps are kept) and the split is redone on resume.
func (s *putsSplit) Abort() {
	if s.closed {
		return
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.w.Close(ctx)
	s.syncRetries()
}
