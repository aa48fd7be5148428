package state

// SplitStats counts one split's work: what a checkpoint records of each
// split (its base by ID, its journal one record per commit), and what a
// run's summary lists.
type SplitStats struct {
	ID     string `json:"id"`
	Region string `json:"region"`
	// Done says the sink acknowledged everything the split produced.
	Done bool `json:"done"`
	// Read is the cells read from the snapshot; Written the cells the sink
	// made durable; Rejected the cells whose key did not fit; Collided the
	// new cells that another old cell of the same split had already
	// produced; Failed the cells the sink gave up on.
	Read     int64 `json:"cells_read"`
	Mapped   int64 `json:"cells_mapped"`
	Written  int64 `json:"cells_written"`
	Rejected int64 `json:"cells_rejected"`
	Collided int64 `json:"cells_collided"`
	Failed   int64 `json:"cells_failed"`
	// Bytes is the KeyValue size (cell.Size) of the cells written.
	Bytes int64 `json:"bytes_written"`
	// FilesChecked counts the store files read whole whose cell count
	// matched the entry count in their trailer (files cut by a split bound
	// or a reference are not counted).
	FilesChecked int `json:"files_count_checked"`
	// FileBytes is the store file bytes the split covers.
	FileBytes int64   `json:"file_bytes"`
	Seconds   float64 `json:"seconds"`
	// Attempts counts the runs that worked on the split (1 + redos).
	Attempts int `json:"attempts"`
	// Error is why the split did not finish, if it did not.
	Error string `json:"error,omitempty"`
}
