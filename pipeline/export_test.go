package pipeline

import "github.com/rekeyhq/rekey/state"

// Internals the external tests reach.

// SetCompactMinBytes sets the journal size below which no compaction runs
// mid-run, and returns a function that restores it.
func SetCompactMinBytes(n int64) (restore func()) {
	old := state.CompactMinBytes
	state.CompactMinBytes = n
	return func() { state.CompactMinBytes = old }
}

// JournalGeneration is the generation of the journal r appends to.
func JournalGeneration(r *Run) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ckpt.Generation()
}
