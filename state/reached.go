package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/vfs"
)

// Reached records the snapshot a job's target last reached: written after
// a run's last put or load succeeded, read by a catch-up (`rekey run JOB
// --since A`) to check that the target holds the job's result for A
// before only the difference from A is written into it.
type Reached struct {
	// Format is the record's format version (ReachedFormat).
	Format int `json:"format"`
	// Snapshot and Table name the snapshot the target holds the job's
	// result for; Created is its creation time (ms since the epoch).
	Snapshot string `json:"snapshot"`
	Table    string `json:"table"`
	Created  int64  `json:"created_ms"`
	// TTLTime is the time TTLs expired at when that snapshot was read
	// (ms): a catch-up from it reads it again as of then.
	TTLTime int64 `json:"ttl_time_ms"`
	// Job is the job's fingerprint without its source snapshot (layouts,
	// families, scan, target): a catch-up of another job is refused.
	Job string `json:"job"`
	// Written is when the record was written, for people.
	Written time.Time `json:"written"`
}

// ReachedFormat is the format this build writes.
const ReachedFormat = 1

// ReachedBeside is where the record of the snapshot a job's target reached
// lies, beside the job's checkpoint.
func ReachedBeside(checkpoint string) string {
	return strings.TrimSuffix(checkpoint, ".json") + ".reached.json"
}

// WriteReached replaces the record at name whole (write, sync, rename).
func WriteReached(fsys vfs.WriteFS, name string, r Reached) error {
	r.Format = ReachedFormat
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(fsys, name, b); err != nil {
		return fmt.Errorf("reached record: write %s: %w", name, err)
	}
	return nil
}

// ReadReached reads the record at name; found is false when there is none.
// A record that does not parse is an error: a catch-up must not guess
// where its target is.
func ReadReached(fsys vfs.FS, name string) (_ *Reached, found bool, _ error) {
	b, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reached record: read %s: %w", name, err)
	}
	var r Reached
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, false, fmt.Errorf("reached record: %s is damaged: %v", name, err)
	}
	if r.Format > ReachedFormat {
		return nil, false, fmt.Errorf("reached record: %s is of format %d, newer than this build's %d", name, r.Format, ReachedFormat)
	}
	if r.Snapshot == "" || r.Job == "" {
		return nil, false, fmt.Errorf("reached record: %s is damaged: it names no snapshot or no job", name)
	}
	return &r, true, nil
}
