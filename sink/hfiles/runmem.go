package hfiles

import "sync"

// The merge reads each partition's runs through cursors, each holding
// about one decoded batch and its compressed body (runReadCost). The
// partitions merging at once share the budget left once the kept splits'
// buffers and the pipes' batches are counted. An even share per worker
// made the heaviest partition, which has the most runs, merge in an
// extra pass (its runs written again and read back) while the light
// partitions beside it used a fraction of theirs: a region holding
// nearly half the cells had one run more than its share, and the pass
// its runs then took was a large part of the phase. So each partition takes what
// its runs need from a pool, leaving every other worker room for a
// two-way merge, and waits only when even that much is not free.

// runReadCost is the budget one open run costs the merge.
func (o *Options) runReadCost() int64 {
	return 2 * o.BatchBytes
}

// maxFanIn is the most runs one merge reads at once when held bytes of
// MergeMemory are taken and one merge runs alone: at least 2.
func (o *Options) maxFanIn(held int64) int {
	return max(int(max(o.mergeMemory()-held, 0)/o.runReadCost()), 2)
}

// runMemory is the pool of run cursors (counted in runs) that the
// partitions merging at once draw from.
type runMemory struct {
	mu      sync.Mutex
	changed *sync.Cond
	free    int
	// workers is how many merges run at once, active how many hold runs
	// from the pool now; a taker leaves two runs free for each of the
	// other workers' merges that does not.
	workers, active int
}

// newRunMemory returns a pool of maxFanIn(held) runs shared by workers
// merges.
func newRunMemory(o *Options, held int64, workers int) *runMemory {
	m := &runMemory{free: o.maxFanIn(held), workers: workers}
	m.changed = sync.NewCond(&m.mu)
	return m
}

// take returns how many runs a partition of runs runs may read at once
// (its fan-in), taking them from the pool until give: all of its runs
// when the pool holds them and still leaves two for each other worker
// holding none, else as many as that allows; at least two (or runs, if
// fewer). It waits while the pool holds less than that least. A
// partition without runs (kept buffers only) takes nothing.
func (m *runMemory) take(runs int) int {
	if runs == 0 {
		return 0
	}
	least := min(runs, 2)
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.free < least {
		m.changed.Wait()
	}
	spare := m.free - 2*max(m.workers-1-m.active, 0)
	n := max(min(runs, spare), least)
	m.free -= n
	m.active++
	return n
}

// give returns the n runs take returned to the pool.
func (m *runMemory) give(n int) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	m.free += n
	m.active--
	m.mu.Unlock()
	m.changed.Broadcast()
}
