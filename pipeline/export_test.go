package pipeline

// Internals the external tests reach.

// SetCompactMinBytes sets the journal size below which no compaction runs
// mid-run, and returns a function that restores it.
func SetCompactMinBytes(n int64) (restore func()) {
	old := compactMinBytes
	compactMinBytes = n
	return func() { compactMinBytes = old }
}

// JournalGeneration is the generation of the journal r appends to.
func JournalGeneration(r *Run) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ckpt.gen
}
