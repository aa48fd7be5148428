package job

import (
	"fmt"
	"runtime"
)

// The defaults of a job's run and verify sections, owned here so that the
// CLI, pipeline, the staged-HFiles sink and verify all mean the same thing
// by "the default".
const (
	// DefaultMemory is run.memory when the job gives none: 1 GiB.
	DefaultMemory = 1 << 30
	// MinMemory is the smallest run.memory accepted: 1 MiB, which the
	// tests use to make the staged sink spill; below it the budget's
	// shares round to nothing.
	MinMemory = 1 << 20
	// DefaultHeavyHitters is how many heaviest entities a run's sketch
	// keeps and verify checks (run.heavy_hitters, verify.heaviest).
	DefaultHeavyHitters = 100
	// DefaultSampleEntities is how many sampled entities a run's sketch
	// keeps and verify checks (run.sample_entities, verify.sample).
	DefaultSampleEntities = 1000
)

// DefaultWorkers is run.workers when neither the job nor a flag gives it:
// the Go scheduler's GOMAXPROCS, which follows $GOMAXPROCS and the CPU
// quota of a container, not the host's core count.
func DefaultWorkers() int { return runtime.GOMAXPROCS(0) }

// WorkersOrDefault is the number of splits a run reads at once: run.workers, else
// DefaultWorkers.
func (r Run) WorkersOrDefault() int {
	if r.Workers > 0 {
		return r.Workers
	}
	return DefaultWorkers()
}

// MemoryOrDefault is the run's memory budget in bytes: run.memory, else
// DefaultMemory.
func (r Run) MemoryOrDefault() int64 {
	if r.Memory > 0 {
		return r.Memory
	}
	return DefaultMemory
}

// Budget is the one division of a run's memory budget (run.memory): the
// whole process, its peak RSS, is to stay within Total. The Go runtime's
// soft limit (SoftLimit: three quarters of Total less 32 MiB, at least
// half of Total) bounds what the runtime manages; what it does not (the
// binary's pages, about 36 MB of this one's RSS) and the soft limit's
// overshoot while a collection runs on a busy machine take the rest.
// Of the soft limit, 7/16 go to the sink's buffers, 3/16 to the
// snapshot's read-ahead and 2/16 to the collision sets, the parts that
// hold memory in proportion to the data; the last quarter is the
// collector's room for what they turn over and for what no share counts
// (the merge's run readers, the HFile writers' blocks, stacks), so it
// need not collect all the time. With the shares summing to the whole
// budget and the soft limit at Total, a staged job's heap rose to the
// limit between collections and its RSS to nearly the whole budget:
// garbage the collector was allowed to keep, not a leak
// (docs/performance.md, "The memory budget").
type Budget struct {
	// Total is the whole budget in bytes.
	Total int64 `json:"total"`
	// Workers is how many splits are read at once; per-worker shares divide
	// by it.
	Workers int `json:"workers"`
	// Sink is what the sink may hold over all workers: the puts sink's
	// unacknowledged mutations, or the hfiles sink's sort buffers (and,
	// after the splits, its merge).
	Sink int64 `json:"sink"`
	// ReadAhead is what the read-ahead chunks of every scan may hold.
	ReadAhead int64 `json:"read_ahead"`
	// Collisions is what the collision sets of every worker may hold.
	Collisions int64 `json:"collisions"`
	// SoftLimit is the Go runtime's soft memory limit for the run
	// (debug.SetMemoryLimit), unless $GOMEMLIMIT sets one.
	SoftLimit int64 `json:"soft_limit"`
}

// softLimitReserve is what the soft limit leaves below three quarters of
// the budget for memory the Go runtime does not count, the binary's pages
// above all: with the soft limit at exactly three quarters, a staged
// job's RSS at a small budget went past the limit by about this much
// while its heap stayed within the collector's goal.
const softLimitReserve = 32 << 20

// ErrMemoryTooSmall refuses a memory budget under MinMemory.
var ErrMemoryTooSmall = fmt.Errorf("a memory budget under %d bytes (1 MiB) leaves the workers and the sink nothing; 1 MiB is the least rekey runs with, 256 MiB or more is what a real job wants", MinMemory)

// NewBudget divides total bytes for workers workers (at least 1).
func NewBudget(total int64, workers int) Budget {
	workers = max(workers, 1)
	soft := max(total/4*3-softLimitReserve, total/2)
	// Read-ahead keeps a sixteenth more than the collision sets: at
	// --memory 256MiB an eighth (20 MiB) left most HDFS streams reading
	// positionally, and the staged job took half again the CPU.
	return Budget{Total: total, Workers: workers, Sink: soft / 16 * 7, ReadAhead: soft / 16 * 3, Collisions: soft / 8, SoftLimit: soft}
}

// Budget is the run section's budget for its workers.
func (r Run) Budget() Budget { return NewBudget(r.MemoryOrDefault(), r.WorkersOrDefault()) }

// Merge is what a staged job's merge may hold: the sink's share and the
// readers' (read-ahead and collision sets), which no split uses any more
// once the merge begins.
func (b Budget) Merge() int64 { return b.Sink + b.ReadAhead + b.Collisions }

// SinkPerWorker is one worker's share of the sink buffers.
func (b Budget) SinkPerWorker() int64 { return b.Sink / int64(max(b.Workers, 1)) }

// collisionEntryBytes is what one entry of a collision set costs in a Go
// map of two uint64s, buckets and overhead included (measured: about 40).
const collisionEntryBytes = 40

// CollisionEntriesPerWorker is how many new-cell keys one worker's
// collision set may remember before it stops checking.
func (b Budget) CollisionEntriesPerWorker() int {
	return int(b.Collisions / int64(max(b.Workers, 1)) / collisionEntryBytes)
}
