package sink

import (
	"context"

	"github.com/rekeyhq/rekey/cell"
)

// DryRun is the sink that writes nothing: a run through it reads, maps and
// counts every cell, rejects and collisions included, so a job can be
// tried on the whole snapshot before it touches a cluster.
type DryRun struct{}

// Name implements Sink.
func (DryRun) Name() string { return "dry-run" }

// Begin implements Sink.
func (DryRun) Begin(context.Context, SplitInfo) (SplitSink, error) {
	return &dryRunSplit{}, nil
}

// Finish implements Sink.
func (DryRun) Finish(context.Context, Reporter) error { return nil }

// Close implements Sink.
func (DryRun) Close() error { return nil }

type dryRunSplit struct{ cells, bytes int64 }

func (d *dryRunSplit) Write(_ context.Context, c *cell.Cell) error {
	d.cells++
	d.bytes += cell.Size(c)
	return nil
}

func (d *dryRunSplit) Commit(context.Context) (Ack, error) {
	return Ack{Cells: d.cells, Bytes: d.bytes}, nil
}

func (d *dryRunSplit) Abort() {}
