// Package sink is the contract between a run and where it writes: the
// runner in package pipeline drives a Sink split by split, and the sinks
// implement it: DryRun here, each other sink in a package of its own
// under this one (sink/puts, sink/hfiles, sink/bigtable), or a
// caller's own given to the run as pipeline.Options.Sink. The sinks are
// peers of the run, not parts of it: they import neither the run nor the
// snapshot, and what a builder needs of the run comes in an Env.
//
// Each sink package registers how it is built from the job's sink
// section (Register, from its init), with what the run may ask of the
// kind instead of naming it (Kind: the smallest piece it wants, whether
// it writes a catch-up's delete markers, whether its run reaches the
// target, where it keeps a job's record, its checks for `rekey plan`);
// the run builds the sink a job names through Lookup. Package pipeline is the one that imports every sink
// (pipeline/sinks.go), so that cmd/rekey and verify import none, and a
// new sink touches the job's list of kinds (job.SinkKinds), its own
// package and that one line.
package sink

import (
	"context"

	"github.com/rekeyhq/rekey/cell"
)

// Sink receives the mapped cells of every split of a run. The runner calls
// Begin from each split's worker, writes that split's cells to the
// returned SplitSink from that one goroutine, and records the split done in
// the checkpoint only after Commit returned nil.
type Sink interface {
	// Name is the sink's name in reports: "puts", "dry-run", "hfiles".
	Name() string
	// Begin opens the output of one split.
	Begin(ctx context.Context, s SplitInfo) (SplitSink, error)
	// Finish runs once after every split of the run has been committed (for
	// hfiles: merge the runs, write HFiles, bulk load). It is not called
	// when the run stops early; a later --resume calls it again, so it must
	// skip work a previous Finish completed.
	Finish(ctx context.Context, rep Reporter) error
	// Close releases connections and files.
	Close() error
}

// Accounted is a Sink that keeps its own account of what it did (the
// hfiles sink: runs, HFiles, collisions across splits, regions loaded);
// the run puts it in its summary as Summary.SinkStats.
type Accounted interface {
	Sink
	// Account returns the account so far, as a value that encodes to JSON.
	Account() any
}

// Retrier is a Sink whose writes meet push-back from the cluster (busy
// region servers, full queues, throttling): Retries counts the writes it
// had to retry so far. The run halves its write rate while the count
// grows and recovers step by step once it stops.
type Retrier interface {
	Sink
	// Retries returns the retries so far of every split's writes.
	Retries() uint64
}

// SplitSink is one split's output.
type SplitSink interface {
	// Write takes one target cell; its slices are valid only during the
	// call, so a SplitSink that keeps the cell copies it.
	Write(ctx context.Context, c *cell.Cell) error
	// Commit returns nil only when everything the split wrote is durable
	// (puts acknowledged by HBase; run files synced and renamed), or, with
	// Ack.Held, kept by the sink until it reports the split durable
	// (Deferring).
	Commit(ctx context.Context) (Ack, error)
	// Abort drops what the split wrote that is not durable, after an error
	// or an interrupt. It must be safe to call after a failed Commit.
	Abort()
}

// SplitInfo names a split for a sink. ID is stable across runs of the same
// job on the same snapshot: checkpoints and staged runs key on it.
type SplitInfo struct {
	ID string
	// Region is the encoded name of the source region.
	Region string
	// Bytes is the store file bytes the split reads, for progress and order.
	Bytes int64
}

// Ack is what a committed split's sink reports.
type Ack struct {
	// Cells and Bytes were made durable.
	Cells, Bytes int64
	// Failed counts cells the sink could not write; they are reported, with
	// examples, never dropped silently.
	Failed int64
	// FailedExamples describes a few of the failed cells and why.
	FailedExamples []string
	// Held says the cells are accepted but only in the sink's memory (a
	// Deferring sink): the split is not durable, and the run must not
	// record it done until the sink reports it so. A split whose process
	// dies before that is redone.
	Held bool
}

// Deferring is a Sink whose Commit may hold a split's cells in memory
// (Ack.Held) and make them durable later: when its memory fills, or in
// Finish once the files holding them are written. The run gives it, before
// the first Begin, the function it calls with the IDs of held splits that
// became durable; an error from it (the run could not record them) fails
// what the sink was doing.
type Deferring interface {
	Sink
	// OnDurable sets the function told of held splits made durable.
	OnDurable(func(ids []string) error)
}

// Reporter receives progress lines during a sink's Finish.
type Reporter interface {
	Printf(format string, args ...any)
}

// Recording is a Sink that stamps what it commits with the job record the
// run runs under (the hfiles sink's spill commits) and learns it only
// after it was built, once the run published the record.
type Recording interface {
	Sink
	// SetJobRecord names the record by its digest (state.Job.Digest).
	SetJobRecord(digest string)
}
