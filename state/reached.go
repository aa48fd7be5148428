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

// StagedReachedFile is the file in a staging folder that holds the
// reached record a run staged without loading (sink.no_load) leaves for
// the load: the target reaches the run's snapshot only once the staged
// HFiles are loaded, so the run cannot write the record itself, and the
// load (`rekey load`) knows neither the snapshot nor the TTL time it was
// read at.
const StagedReachedFile = "reached-on-load.json"

// StagedReached is the content of StagedReachedFile: the record the load
// writes once every region is loaded, where it writes it, and, for a
// catch-up, the snapshot the staged difference starts from, which the
// load checks the target is at before it loads anything.
type StagedReached struct {
	// Format is the file's format version (ReachedFormat).
	Format int `json:"format"`
	// Record is what the load writes, its Written time set then.
	Record Reached `json:"record"`
	// Path is the URL of the job's reached record (ReachedBeside the
	// checkpoint the run's record lies beside).
	Path string `json:"path"`
	// Since and SinceCreated name the snapshot a catch-up started from
	// (its creation time in ms); empty for a whole run. AssumeAt says the
	// catch-up was told the target is there (--assume-at): the load then
	// checks nothing.
	Since        string `json:"since,omitempty"`
	SinceCreated int64  `json:"since_created_ms,omitempty"`
	AssumeAt     bool   `json:"assume_at,omitempty"`
}

// WriteStagedReached replaces the file at name whole (write, sync,
// rename).
func WriteStagedReached(fsys vfs.WriteFS, name string, s StagedReached) error {
	s.Format, s.Record.Format = ReachedFormat, ReachedFormat
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(fsys, name, b); err != nil {
		return fmt.Errorf("reached record for the load: write %s: %w", name, err)
	}
	return nil
}

// ReadStagedReached reads the file at name; found is false when there is
// none (a folder staged by a rekey that wrote none, or a run that loaded
// its files itself). A file that does not parse is an error: the load
// must not record a snapshot it cannot name.
func ReadStagedReached(fsys vfs.FS, name string) (_ *StagedReached, found bool, _ error) {
	b, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reached record for the load: read %s: %w", name, err)
	}
	var s StagedReached
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, false, fmt.Errorf("reached record for the load: %s is damaged: %v", name, err)
	}
	if s.Format > ReachedFormat {
		return nil, false, fmt.Errorf("reached record for the load: %s is of format %d, newer than this build's %d", name, s.Format, ReachedFormat)
	}
	if s.Record.Snapshot == "" || s.Record.Job == "" || s.Path == "" {
		return nil, false, fmt.Errorf("reached record for the load: %s is damaged: it names no snapshot, no job or no place for the record", name)
	}
	return &s, true, nil
}
