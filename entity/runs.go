package entity

import "bytes"

// Runs folds consecutive cells of one entity into one Sketch.Add, so a
// caller that sees cells in key order (a worker reading a split) pays the
// sketch's cost once per entity run rather than once per cell. Not safe for
// concurrent use; Flush before reading or merging the sketch.
type Runs struct {
	s            *Sketch
	key          []byte
	cells, bytes int64
	have         bool
}

// NewRuns returns a Runs adding to s.
func NewRuns(s *Sketch) *Runs { return &Runs{s: s} }

// Add counts one cell of bytes bytes for the entity key (copied when it
// starts a run).
func (r *Runs) Add(key []byte, bytes_ int64) {
	if !r.have || !bytes.Equal(key, r.key) {
		r.Flush()
		r.key = append(r.key[:0], key...)
		r.have = true
	}
	r.cells++
	r.bytes += bytes_
}

// Flush adds the current run to the sketch.
func (r *Runs) Flush() {
	if r.have && r.cells > 0 {
		r.s.Add(r.key, r.cells, r.bytes)
	}
	r.cells, r.bytes, r.have = 0, 0, false
}
