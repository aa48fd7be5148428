package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"path"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/vfs"
)

// A checkpoint is a run's progress, which splits are done, kept so that
// a run stopped at any point goes on where it stopped. It is two files
// side by side (see journal.go for the second):
//
//   - the base, at the checkpoint's path: the whole state as of its writing,
//     rewritten (temp file, sync, rename) only at a compaction, which is
//     when the run starts, when its journal has grown as large as the base,
//     and when the sink has finished;
//   - the journal of the base's generation, <base>.journal-<G>: one
//     checksummed record per split finished since, appended and synced
//     when the split is recorded.
//
// A finished split so costs one record, whatever the number of splits
// before it; the base's rewrites add at most as much again, since each
// follows as many journal bytes as it writes.
//
// The base is JSON: {"version": 2, "crc32c": "<hex>", "state": {...}},
// the checksum over the state's compacted bytes. Version 1, the single
// file earlier rekeys rewrote after every split, is still read; the first
// compaction replaces it.
//
// Under a remote lease (SetLease) the base, the journal's header and each
// record carry the lease they were written under, the header keeps a copy
// of its base's state, and the journal is numbered from the lease's
// generation (journalSpan). A base that an attempt another took the lease
// from renames into place late is then left out on load in favour of that
// copy, and its late records are left out too: HDFS can refuse neither.

// Checkpoint format versions: CheckpointV1, one file rewritten after
// every split (read, never written); CheckpointVersion, a base and a
// journal. The run tells them apart when it adopts an older base's
// sketch.
const (
	CheckpointV1      = 1
	CheckpointVersion = 2
)

// ErrCheckpointDamaged: the checkpoint's base or journal is not what rekey
// writes (a checksum that does not match, a truncated or unknown record, a
// missing journal, a version this rekey does not read). The run refuses it
// rather than guess which splits are done; the message says how to go on.
var ErrCheckpointDamaged = errors.New("state: the checkpoint is damaged")

// Checkpoint is the state of a run: which splits are done, whether the
// sink finished, and the entity sketch of the done splits.
type Checkpoint struct {
	Version int `json:"version,omitempty"`
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
	// Entities is the entity sketch of the done splits, as of the base's
	// writing; the journal's records add each later split's own.
	Entities json.RawMessage `json:"entities,omitempty"`
	// Journal is the generation of the journal that goes with the base.
	Journal int64 `json:"journal,omitempty"`
	// Lease is the lease the base was written under (none on a local
	// path). A base that an attempt another took the lease from renamed
	// into place late, over the new holder's, is left out on load in
	// favour of the holder's own copy (see Load).
	Lease Stamp `json:"lease,omitzero"`
}

// baseFile is the base's outer form: the state with its checksum.
type baseFile struct {
	Version int             `json:"version"`
	CRC32C  string          `json:"crc32c,omitempty"`
	State   json.RawMessage `json:"state,omitempty"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CheckpointStore reads and writes a checkpoint's base and journal. The
// run owns one and serializes its calls (under its own lock), so the
// store keeps no lock of its own on the path of each split's record.
type CheckpointStore struct {
	loc *vfs.Location
	url string

	// Set by load and compact: the journal generation in use, the bytes
	// the base holds and the journal has gained since it was written.
	gen                     int64
	baseBytes, journalBytes int64
	// broken says an append failed: the journal may end in a torn record,
	// so nothing more is appended until the next compaction.
	broken bool

	// stamp reads the lease the run holds on the checkpoint, which its
	// writes are stamped with; superseded reads the attempts that lost
	// it. Both nil for a local lock (SetLease).
	stamp      func() (string, int64)
	superseded func() (Superseded, error)
}

// SetLease gives the store the run's remote lease on the checkpoint:
// stamp (Leases.Stamp) is what every base, journal header and journal
// record is stamped with from now on, and superseded (Leases.Superseded)
// reads which attempts lost the lease to a takeover, whose late writes
// Load leaves out. HDFS has no conditional rename or append, so an
// attempt that passed its last fence check before the takeover can still
// rename a base or append a record after it. Without a call (a local
// lock, which the kernel holds for the process's life) nothing is
// stamped and nothing left out.
func (s *CheckpointStore) SetLease(stamp func() (string, int64), superseded func() (Superseded, error)) {
	s.stamp, s.superseded = stamp, superseded
}

// CompactMinBytes is the journal size below which no compaction runs
// mid-run: a small job's base is rewritten at its start and end only.
// (A variable so a test can compact often.)
var CompactMinBytes int64 = 1 << 20

// OpenCheckpoint opens the checkpoint at where (a local path or a URL)
// through vo (a Kerberos login), refusing a file system that cannot
// append, since each split's record is an append to the journal.
func OpenCheckpoint(where string, vo vfs.Options) (*CheckpointStore, error) {
	loc, err := vfs.OpenWith(where, vo)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", where, err)
	}
	if _, ok := loc.FS.(vfs.Appender); !ok {
		loc.Close()
		return nil, fmt.Errorf("checkpoint %s: %s cannot append to a file, which the checkpoint's journal needs", where, loc.FS)
	}
	return &CheckpointStore{loc: loc, url: where}, nil
}

// SweepTemps removes the temporaries an earlier process left beside the
// checkpoint when it died between writing one and renaming it into place
// (vfs.WriteFileAtomic's NAME.tmp-PID-...: of the base and its journals).
// The run holds the checkpoint's lease when it calls this, so no live
// writer of this checkpoint owns them. Errors are left to the writes
// that follow: a temporary left over is clutter, not state.
func (s *CheckpointStore) SweepTemps() (removed int) {
	wfs, ok := s.loc.FS.(vfs.WriteFS)
	if !ok {
		return 0
	}
	dir, base := path.Dir(s.loc.Path), path.Base(s.loc.Path)
	ents, err := wfs.ReadDir(dir)
	if err != nil {
		return 0
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasPrefix(n, base+".") || !strings.Contains(n, ".tmp-") {
			continue
		}
		if wfs.Remove(path.Join(dir, n)) == nil {
			removed++
		}
	}
	return removed
}

// LoadedCheckpoint is an earlier run's state: the base with its journal's
// splits applied, and the journal's sketch deltas, in the order the run
// merged them.
type LoadedCheckpoint struct {
	*Checkpoint
	// Deltas are the done splits' own entity sketches (JSON), in record
	// order: the run merges them into the base's sketch as the earlier
	// run did.
	Deltas [][]byte
	// Torn describes a torn last journal record that was left out (""
	// if none): a crash while it was written, so its split is redone.
	Torn string
	// Records counts the journal's split records applied, so a test can
	// tell how many writes a run made, not only which splits they name.
	Records int
	// Ignored says, one line each, what was left out because an attempt
	// that lost the lease wrote it (see SetLease); the run logs them.
	Ignored []string
}

// Load returns the earlier run's state, or nil when there is none. A base
// or journal that is not what rekey writes is ErrCheckpointDamaged.
func (s *CheckpointStore) Load() (*LoadedCheckpoint, error) {
	b, err := vfs.ReadFile(s.loc.FS, s.loc.Path)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, s.orphanJournals()
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", s.url, err)
	}
	c, err := s.decodeBase(b)
	if err != nil {
		return nil, err
	}
	s.baseBytes = int64(len(b))
	l := &LoadedCheckpoint{Checkpoint: c}
	if c.Version == CheckpointV1 {
		return l, nil
	}
	sup, err := s.readSuperseded()
	if err != nil {
		return nil, err
	}
	if sup.Of(c.Lease) {
		// Renamed into place by an attempt that lost the lease: late, over
		// the holder's base, if the holder has written one since (its
		// journal's header keeps a copy). Otherwise it is the newest state
		// there is, and the holder goes on from it, as on any takeover.
		newer, gen, err := s.newerState(sup, c)
		if err != nil {
			return nil, err
		}
		if newer != nil {
			l.Ignored = append(l.Ignored, fmt.Sprintf("checkpoint %s: left out the base, since %s; went on from the copy of the base in journal %s, written under lease generation %d",
				s.url, sup.Why(c.Lease), path.Base(s.journalPath(gen)), newer.Lease.Generation))
			l.Checkpoint, c = newer, newer
		}
	}
	s.gen = c.Journal
	if err := s.readJournal(l, sup); err != nil {
		return nil, err
	}
	return l, nil
}

// readSuperseded reads which attempts lost the checkpoint's lease (none
// without a remote lease).
func (s *CheckpointStore) readSuperseded() (Superseded, error) {
	if s.superseded == nil {
		return Superseded{}, nil
	}
	sup, err := s.superseded()
	if err != nil {
		return sup, fmt.Errorf("checkpoint %s: %w", s.url, err)
	}
	return sup, nil
}

// newerState finds the newest copy of a base written under a later lease
// generation than c (the base on disk) by an attempt not superseded: the
// state a journal's header carries (see Compact). It returns nil when
// there is none. Journals that do not read whole are skipped here: only
// the journal a base names must be whole, and the one chosen is read
// again, checked, by readJournal.
func (s *CheckpointStore) newerState(sup Superseded, c *Checkpoint) (*Checkpoint, int64, error) {
	gens, err := s.journals()
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoint %s: %w", s.url, err)
	}
	for i := len(gens) - 1; i >= 0; i-- {
		b, err := vfs.ReadFile(s.loc.FS, s.journalPath(gens[i]))
		if err != nil || !bytes.HasPrefix(b, []byte(journalMagic)) {
			continue
		}
		payload, _, torn, err := nextRecord(b, len(journalMagic))
		if err != nil || torn != "" {
			continue
		}
		r, err := decodeRecord(payload)
		if err != nil || r.Type != "header" || r.Generation != gens[i] || len(r.State) == 0 ||
			r.Lease.Token == "" || sup.Of(r.Lease) || r.Lease.Generation <= c.Lease.Generation {
			continue
		}
		var nc Checkpoint
		dec := json.NewDecoder(bytes.NewReader(r.State))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&nc); err != nil {
			return nil, 0, s.Damaged(fmt.Sprintf("journal %s: the base its header keeps does not parse: %v", path.Base(s.journalPath(gens[i])), err))
		}
		if nc.Journal != gens[i] || nc.Lease != r.Lease || nc.Fingerprint != r.Fingerprint {
			return nil, 0, s.Damaged(fmt.Sprintf("journal %s: the base its header keeps is not of that journal", path.Base(s.journalPath(gens[i]))))
		}
		if nc.Splits == nil {
			nc.Splits = map[string]*SplitStats{}
		}
		nc.Version = CheckpointVersion
		s.baseBytes = int64(len(r.State))
		return &nc, gens[i], nil
	}
	return nil, 0, nil
}

// orphanJournals looks at the journals beside a missing base. Journals
// that hold only a header saying their base recorded nothing done are what
// a crash in a run's first compaction leaves (the journal is written before
// the base that names it): nothing was recorded, so there is no checkpoint,
// and the next compaction removes them. Any other journal is refused: the
// splits it or its lost base record must not read as nothing done.
func (s *CheckpointStore) orphanJournals() error {
	gens, err := s.journals()
	if err != nil || len(gens) == 0 {
		return nil
	}
	for _, g := range gens {
		p := s.journalPath(g)
		if why := s.onlyEmptyBaseHeader(p, g); why != "" {
			return s.Damaged(fmt.Sprintf("the base %s is missing, but its journal %s is there (%s)", s.loc.Path, path.Base(p), why))
		}
	}
	return nil
}

// onlyEmptyBaseHeader says why the journal at p is not a whole journal
// holding only its header for an empty base of generation gen ("" if it is).
func (s *CheckpointStore) onlyEmptyBaseHeader(p string, gen int64) string {
	b, err := vfs.ReadFile(s.loc.FS, p)
	if err != nil {
		return fmt.Sprintf("unreadable: %v", err)
	}
	if !bytes.HasPrefix(b, []byte(journalMagic)) {
		return "it does not start as a rekey journal does"
	}
	payload, next, torn, err := nextRecord(b, len(journalMagic))
	switch {
	case err != nil || torn != "":
		return "its header does not check"
	case next != len(b):
		return "it records splits"
	}
	r, err := decodeRecord(payload)
	if err != nil || r.Type != "header" || r.Generation != gen || r.Version != CheckpointVersion {
		return "its header is not one rekey writes"
	}
	if !r.BaseEmpty {
		return "its base recorded splits"
	}
	return ""
}

// decodeBase parses a base of version 1 or 2.
func (s *CheckpointStore) decodeBase(b []byte) (*Checkpoint, error) {
	var bf baseFile
	if err := json.Unmarshal(b, &bf); err != nil {
		return nil, s.Damaged(fmt.Sprintf("the base is not the JSON rekey writes (%d bytes; truncated or overwritten?): %v", len(b), err))
	}
	switch bf.Version {
	case CheckpointV1:
		var c Checkpoint
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, s.Damaged(fmt.Sprintf("the version 1 checkpoint does not parse: %v", err))
		}
		if c.Splits == nil {
			c.Splits = map[string]*SplitStats{}
		}
		return &c, nil
	case CheckpointVersion:
	default:
		return nil, s.Damaged(fmt.Sprintf("the base has format version %d; this rekey reads versions %d and %d (written by a newer rekey? run that one to go on)", bf.Version, CheckpointV1, CheckpointVersion))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, bf.State); err != nil || len(bf.State) == 0 {
		return nil, s.Damaged("the base has no state")
	}
	if got := fmt.Sprintf("%08x", crc32.Checksum(compact.Bytes(), castagnoli)); got != bf.CRC32C {
		return nil, s.Damaged(fmt.Sprintf("the base's state has CRC32C %s, but the base records %s", got, bf.CRC32C))
	}
	var c Checkpoint
	dec := json.NewDecoder(bytes.NewReader(bf.State))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, s.Damaged(fmt.Sprintf("the base's state does not parse: %v", err))
	}
	if c.Journal < 1 {
		return nil, s.Damaged(fmt.Sprintf("the base names journal generation %d", c.Journal))
	}
	if c.Splits == nil {
		c.Splits = map[string]*SplitStats{}
	}
	c.Version = CheckpointVersion
	return &c, nil
}

// Damaged is ErrCheckpointDamaged with what is wrong and how to go on;
// the run uses it too, for a sketch in the checkpoint it cannot read.
func (s *CheckpointStore) Damaged(what string) error {
	return fmt.Errorf("%w: checkpoint %s: %s. rekey will not guess which splits are done: run again with --fresh to start over (every split is redone, which writes the same cells again), or restore the checkpoint's files (%s and %s.journal-*) from a copy",
		ErrCheckpointDamaged, s.url, what, path.Base(s.loc.Path), path.Base(s.loc.Path))
}

// encodeBase renders the state c as a version 2 base.
func encodeBase(state []byte) ([]byte, error) {
	return json.Marshal(baseFile{
		Version: CheckpointVersion,
		CRC32C:  fmt.Sprintf("%08x", crc32.Checksum(state, castagnoli)),
		State:   state,
	})
}

// journalSpan is how far apart the journal generations of two lease
// generations lie: a stamped compaction numbers its journal at least its
// lease generation times this, so the journal of an attempt that took
// the lease over is numbered above any a late compaction of the attempt
// it took it from can pick without having listed it, and the two never
// share a file.
const journalSpan = 1 << 32

// Compact writes c as the base of a new journal generation: first the new
// journal (its header only), then the base naming it (each a temp file,
// synced and renamed), then the old journals are removed. A crash between
// any two steps leaves a base and the journal it names intact: before the
// rename the old pair, after it the new one; a journal no base names is a
// leftover the next compaction removes. In a run's first compaction there
// is no old pair: a crash before the base's rename leaves a journal alone,
// whose header says its base recorded nothing (see orphanJournals).
func (s *CheckpointStore) Compact(c *Checkpoint) error {
	wfs := s.loc.FS
	if err := wfs.MkdirAll(path.Dir(s.loc.Path)); err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.url, err)
	}
	old, err := s.journals()
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.url, err)
	}
	gen := s.gen + 1
	if len(old) > 0 {
		gen = max(gen, old[len(old)-1]+1)
	}
	c.Lease = Stamped(s.stamp)
	if c.Lease.Generation > 0 {
		gen = max(gen, c.Lease.Generation*journalSpan)
	}
	c.Version, c.Journal = CheckpointVersion, gen
	state, err := json.Marshal(c) // compact, as the checksum is over compacted bytes
	if err != nil {
		return err
	}
	// A stamped journal keeps a copy of its base in its header: an HDFS
	// rename cannot refuse, so a base renamed late by an attempt that lost
	// the lease can replace this one, and Load then goes on from the copy.
	var keep []byte
	if c.Lease.Token != "" {
		keep = state
	}
	n, err := s.createJournal(gen, c.Fingerprint, len(c.Splits) == 0 && !c.SinkFinished, c.Lease, keep)
	if err != nil {
		return err
	}
	b, err := encodeBase(state)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(wfs, s.loc.Path, b); err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.url, err)
	}
	s.gen, s.baseBytes, s.journalBytes, s.broken = gen, int64(len(b)), n-int64(len(keep)), false
	for _, g := range old {
		if err := wfs.Remove(s.journalPath(g)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("checkpoint %s: removing the old journal: %w", s.url, err)
		}
	}
	return nil
}

// CompactDue says the journal has grown as large as the base, so
// rewriting the base costs no more than the records already appended.
func (s *CheckpointStore) CompactDue() bool {
	return s.journalBytes >= max(CompactMinBytes, s.baseBytes)
}

// Close closes the checkpoint's file system.
func (s *CheckpointStore) Close() error { return s.loc.Close() }

// Location is where the checkpoint's base lies: the run keeps its other
// files (rejects, the entity sketch) beside it.
func (s *CheckpointStore) Location() *vfs.Location { return s.loc }

// Generation is the generation of the journal records are appended to.
func (s *CheckpointStore) Generation() int64 { return s.gen }
