package job

import "runtime"

// The defaults of a job's run and verify sections, owned here so that the
// CLI, pipeline, the staged-HFiles sink and verify all mean the same thing
// by "the default".
const (
	// DefaultMemory is run.memory when the job gives none: 1 GiB.
	DefaultMemory = 1 << 30
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

// Budget is the one division of a run's memory budget (run.memory) between
// the parts that hold memory in proportion to the data: half for the
// sink's buffers, a quarter for the snapshot's read-ahead, a quarter for
// the collision sets. Everything else a run holds (block caches of open
// files, counters) is small and fixed.
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
}

// NewBudget divides total bytes for workers workers (at least 1).
func NewBudget(total int64, workers int) Budget {
	workers = max(workers, 1)
	return Budget{Total: total, Workers: workers, Sink: total / 2, ReadAhead: total / 4, Collisions: total / 4}
}

// Budget is the run section's budget for its workers.
func (r Run) Budget() Budget { return NewBudget(r.MemoryOrDefault(), r.WorkersOrDefault()) }

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
