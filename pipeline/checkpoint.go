package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"path"
	"sort"
	"time"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"
)

// checkpointVersion is the checkpoint file's format version.
const checkpointVersion = 1

// Checkpoint records which splits of a run are done. It is rewritten whole
// (temp file, sync, rename) after every split, so it is never torn.
type Checkpoint struct {
	Version int `json:"version"`
	// Fingerprint hashes what makes two runs the same work: the snapshot
	// (name, table, creation time), the layouts, family mapping and entity,
	// the target, the scan options, the split size and the timestamp
	// override. A checkpoint with another fingerprint is refused.
	Fingerprint string    `json:"fingerprint"`
	Job         string    `json:"job"`
	Snapshot    string    `json:"snapshot"`
	Updated     time.Time `json:"updated"`
	// Splits holds every split worked on, done or not, by ID.
	Splits map[string]*SplitStats `json:"splits"`
	// SinkFinished says the sink's Finish completed (for hfiles: loaded).
	SinkFinished bool `json:"sink_finished"`
	// Entities is the entity sketch of the done splits.
	Entities json.RawMessage `json:"entities,omitempty"`
}

// checkpointStore reads and writes a checkpoint file.
type checkpointStore struct {
	loc *vfs.Location
	url string
}

func openCheckpoint(where string) (*checkpointStore, error) {
	loc, err := vfs.Open(where)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", where, err)
	}
	return &checkpointStore{loc: loc, url: where}, nil
}

// load returns the checkpoint, or nil when there is none.
func (s *checkpointStore) load() (*Checkpoint, error) {
	b, err := vfs.ReadFile(s.loc.FS, s.loc.Path)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", s.url, err)
	}
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("checkpoint %s is damaged (not the JSON rekey writes): %w", s.url, err)
	}
	if c.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint %s has format version %d; this rekey writes %d", s.url, c.Version, checkpointVersion)
	}
	if c.Splits == nil {
		c.Splits = map[string]*SplitStats{}
	}
	return &c, nil
}

func (s *checkpointStore) save(c *Checkpoint) error {
	b, err := json.Marshal(c) // compact: rewritten after every split
	if err != nil {
		return err
	}
	if err := s.loc.FS.MkdirAll(path.Dir(s.loc.Path)); err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.url, err)
	}
	if err := vfs.WriteFileAtomic(s.loc.FS, s.loc.Path, b); err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.url, err)
	}
	return nil
}

func (s *checkpointStore) remove() error {
	err := s.loc.FS.Remove(s.loc.Path)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	return err
}

func (s *checkpointStore) close() error { return s.loc.Close() }

// fingerprint hashes the parts of a run that decide which cells it writes
// where; anything else (workers, limits, progress) may change between a run
// and its resume.
func fingerprint(j *job.Job, info snapshot.Info, scan snapshot.ScanOptions, splitBytes, setTS int64, sink string, only []KeyRange, shard Shard) string {
	oldKey, newKey := j.Program.Describe()
	fams := make([]string, 0, len(j.Spec.Families))
	for o, n := range j.Spec.Families {
		fams = append(fams, o+"->"+n)
	}
	sort.Strings(fams)
	doc := struct {
		Snapshot, Table string
		Created         int64
		OldKey, NewKey  string
		Families        []string
		Entity          []string
		Target          string
		Scan            snapshot.ScanOptions
		SplitBytes      int64
		SetTimestamp    int64
		Sink            string
		Only            []KeyRange
		Shard           Shard
	}{info.Name, info.Table, info.CreationTime.UnixMilli(), oldKey, newKey, fams, j.Spec.Entity, j.Target.Table, scan, splitBytes, setTS, sink, only, shard}
	b, _ := json.Marshal(doc)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
