package puts

import (
	"context"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
)

// The puts sink is built from the job's sink section (sink.type: puts,
// the default) by the run that writes through it.
func init() {
	sink.Register(job.SinkPuts, sink.Kind{Build: build, SplitFloor: Floor, Spread: true, Deletes: true})
}

// Floor is the smallest piece the run's default cut makes for the puts
// sink in a source of total bytes, given the floor it takes for the
// other sinks: that floor, but at most a quarter of the source. A puts
// piece's time is the region servers' work on its cells, and its fixed
// cost small (its writer's last calls and a checkpoint record), so the
// floor that spares a staged piece its own files left a small table's
// heavy region whole, one split far longer than the rest that the other
// workers waited on at the end. A table of four floors or more is cut as
// for the other sinks.
func Floor(total, floor int64) int64 {
	return max(1, min(floor, total/4))
}

// maxBufferBytes caps what one worker's puts writer holds unacknowledged
// (hbase.WriterConfig.MaxBufferedBytes, in memory held): enough for the
// calls in flight to a dozen region servers (a 5,000-cell call of small
// cells holds about 1.1 MB, 219 bytes a cell in TestWriterHoldsWhatItCounts,
// and each server has a few in flight and one filling), while more only
// queues cells behind a busy server, which speeds nothing and, at 1 GiB
// with 2 workers, pushed the live heap to the budget and the GC into
// thrashing (issue 28).
const maxBufferBytes = 64 << 20

// build connects to the target cluster, readies the table and returns
// the sink writing into it.
func build(ctx context.Context, e sink.Env) (sink.Sink, error) {
	j := e.Job
	c, err := e.Connect(ctx, "")
	if err != nil {
		return nil, err
	}
	if err := e.ReadyTarget(ctx, c); err != nil {
		return nil, err
	}
	return New(c, j.Target.Table, Options{
		BatchCells: j.Sink.BatchCells, BatchBytes: j.Sink.BatchBytes,
		CallsPerServer: j.Run.MaxCallsPerServer, Workers: e.Workers,
		BufferBytes: min(e.Budget.SinkPerWorker(), maxBufferBytes),
	}), nil
}
