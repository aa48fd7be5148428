package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/rekeyhq/rekey/vfs"
)

// The journal: <base>.journal-<G>, where G is the generation the base
// names. It starts with journalMagic, then records, each framed as
//
//	length  uint32, big-endian: the payload's bytes
//	crc     uint32, big-endian: CRC32C (Castagnoli) of the payload
//	hcrc    uint32, big-endian: CRC32C of the eight bytes before it
//	payload JSON: {"type": ..., ...}
//
// The first record is the header (type "header": the format version, the
// generation and the fingerprint, which must match the base's, and whether
// that base records nothing done; under a remote lease also the lease and
// a copy of the base's state, see checkpoint.go); each later
// one a split (type "split": its SplitStats, and for a done split the
// split's own entity sketch, which the loader merges in record order, as
// the run did).
//
// Each record is one append, synced (closed, on HDFS) before the split
// counts as recorded. A crash during an append leaves a prefix of the
// record, or (on some local file systems) a tail of zeros, and only at the
// end: a last record that is incomplete, all zeros, or whose payload does
// not match its checksum is left out and its split redone. Anything else
// that does not check (a record header whose checksum fails, a payload
// checksum in the middle, an unknown type) is damage: the run refuses it.
const journalMagic = "rekey checkpoint journal\n"

// frameHeader is the bytes before a record's payload.
const frameHeader = 12

// maxRecord bounds a record's payload: far above a split's stats and
// sketch, low enough that a damaged length is not read as a huge record.
const maxRecord = 256 << 20

// journalRecord is one record's payload.
type journalRecord struct {
	Type string `json:"type"`
	// header
	Version     int    `json:"version,omitempty"`
	Generation  int64  `json:"generation,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	// BaseEmpty says the base written with this journal records no split
	// and no finished sink, so that losing it loses no progress: a journal
	// whose base never got written (a crash in a run's first compaction)
	// can then be told from one whose base went missing.
	BaseEmpty bool `json:"base_empty,omitempty"`
	// State is, in a stamped journal's header, the state of the base
	// written with it (see Compact): the copy Load goes on from when a
	// late rename replaced that base.
	State json.RawMessage `json:"state,omitempty"`
	// Lease is the lease the record was written under (none on a local
	// path): a record of an attempt that lost the lease, appended late, is
	// left out.
	Lease Stamp `json:"lease,omitzero"`
	// split
	Split    *SplitStats     `json:"split,omitempty"`
	Entities json.RawMessage `json:"entities,omitempty"`
}

// frame renders a record's payload with its length and checksums.
func frame(payload []byte) []byte {
	b := make([]byte, frameHeader+len(payload))
	binary.BigEndian.PutUint32(b[0:], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(payload, castagnoli))
	binary.BigEndian.PutUint32(b[8:], crc32.Checksum(b[:8], castagnoli))
	copy(b[frameHeader:], payload)
	return b
}

// journalPath is the journal of generation gen.
func (s *CheckpointStore) journalPath(gen int64) string {
	return fmt.Sprintf("%s.journal-%d", s.loc.Path, gen)
}

// journals lists the generations of the journals beside the base, lowest
// first.
func (s *CheckpointStore) journals() ([]int64, error) {
	dir, prefix := path.Dir(s.loc.Path), path.Base(s.loc.Path)+".journal-"
	infos, err := s.loc.FS.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var gens []int64
	for _, fi := range infos {
		rest, ok := strings.CutPrefix(fi.Name(), prefix)
		if !ok || fi.IsDir() {
			continue
		}
		if g, err := strconv.ParseInt(rest, 10, 64); err == nil && g > 0 {
			gens = append(gens, g)
		}
	}
	for i := 1; i < len(gens); i++ { // few: insertion sort
		for k := i; k > 0 && gens[k] < gens[k-1]; k-- {
			gens[k], gens[k-1] = gens[k-1], gens[k]
		}
	}
	return gens, nil
}

// createJournal writes generation gen's journal holding its header, and
// returns its size. It is written whole (temp file, sync, rename): a crash
// leaves the journal with its header or no journal, never a part of one,
// so a journal without its base always says what that base held.
func (s *CheckpointStore) createJournal(gen int64, fp string, baseEmpty bool, lease Stamp, state []byte) (int64, error) {
	p := s.journalPath(gen)
	hdr, err := json.Marshal(journalRecord{Type: "header", Version: CheckpointVersion, Generation: gen, Fingerprint: fp, BaseEmpty: baseEmpty, State: state, Lease: lease})
	if err != nil {
		return 0, err
	}
	b := append([]byte(journalMagic), frame(hdr)...)
	if err := vfs.WriteFileAtomic(s.loc.FS, p, b); err != nil {
		return 0, fmt.Errorf("checkpoint journal %s: %w", p, err)
	}
	return int64(len(b)), nil
}

// Record appends a split's record (sketch: the split's own entity sketch
// as JSON, for a done split) to the journal, durably. It is the one write
// of each split's commit: one append, no rewrite of the base.
func (s *CheckpointStore) Record(st *SplitStats, sketch []byte) error {
	p := s.journalPath(s.gen)
	if s.broken {
		return fmt.Errorf("checkpoint journal %s: an earlier append failed", p)
	}
	payload, err := json.Marshal(journalRecord{Type: "split", Split: st, Entities: sketch, Lease: Stamped(s.stamp)})
	if err != nil {
		return err
	}
	app, ok := s.loc.FS.(vfs.Appender)
	if !ok {
		return fmt.Errorf("checkpoint journal %s: %s cannot append to a file", p, s.loc.FS)
	}
	b := frame(payload)
	s.broken = true // until the record is known whole
	f, err := app.Append(p)
	if err != nil {
		return fmt.Errorf("checkpoint journal %s: %w", p, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint journal %s: %w", p, err)
	}
	// An Appender's Close makes the record durable and visible.
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoint journal %s: %w", p, err)
	}
	s.broken = false
	s.journalBytes += int64(len(b))
	return nil
}

// readJournal applies the journal of the base's generation to l, but for
// the records of attempts sup supersedes other than the base's own
// writer (whose records the base's holder read with it).
func (s *CheckpointStore) readJournal(l *LoadedCheckpoint, sup Superseded) error {
	p := s.journalPath(s.gen)
	b, err := vfs.ReadFile(s.loc.FS, p)
	if errors.Is(err, iofs.ErrNotExist) {
		return s.Damaged(fmt.Sprintf("the base names journal %s, which is missing", path.Base(p)))
	}
	if err != nil {
		return fmt.Errorf("checkpoint journal %s: %w", p, err)
	}
	s.journalBytes = int64(len(b))
	bad := func(what string) error { return s.Damaged(fmt.Sprintf("journal %s: %s", path.Base(p), what)) }
	if !bytes.HasPrefix(b, []byte(journalMagic)) {
		return bad("it does not start as a rekey journal does")
	}
	off := len(journalMagic)
	for n := 0; off < len(b); n++ {
		payload, next, torn, err := nextRecord(b, off)
		if err != nil {
			return bad(fmt.Sprintf("record %d at offset %d: %v", n, off, err))
		}
		if torn != "" {
			if n == 0 {
				return bad("its header record is incomplete: " + torn)
			}
			l.Torn = fmt.Sprintf("journal %s: the last record (at offset %d) is %s, left by a crash while it was written; its split is redone", path.Base(p), off, torn)
			return nil
		}
		if err := s.apply(l, n, payload, sup); err != nil {
			return bad(fmt.Sprintf("record %d at offset %d: %v", n, off, err))
		}
		off = next
	}
	return nil
}

// nextRecord reads the record at off: its payload and the offset after
// it; or, for a torn last record, why it counts as torn.
func nextRecord(b []byte, off int) (payload []byte, next int, torn string, err error) {
	rest := b[off:]
	if len(rest) < frameHeader {
		return nil, 0, "incomplete (its header is cut short)", nil
	}
	n := int64(binary.BigEndian.Uint32(rest[0:]))
	sum := binary.BigEndian.Uint32(rest[4:])
	if got := crc32.Checksum(rest[:8], castagnoli); got != binary.BigEndian.Uint32(rest[8:]) {
		if allZero(rest) {
			return nil, 0, "all zeros", nil
		}
		return nil, 0, "", fmt.Errorf("the record header's checksum does not match (damaged length or checksum)")
	}
	if n > maxRecord {
		return nil, 0, "", fmt.Errorf("length %d is beyond any record rekey writes", n)
	}
	if int64(len(rest)-frameHeader) < n {
		return nil, 0, fmt.Sprintf("incomplete (%d of its %d bytes)", len(rest)-frameHeader, n), nil
	}
	payload = rest[frameHeader : frameHeader+n]
	next = off + frameHeader + int(n)
	if got := crc32.Checksum(payload, castagnoli); got != sum {
		if next == len(b) {
			return nil, 0, fmt.Sprintf("not what was written (CRC32C %08x, recorded %08x)", got, sum), nil
		}
		return nil, 0, "", fmt.Errorf("CRC32C %08x does not match the recorded %08x, and records follow (damage, not a torn write)", got, sum)
	}
	return payload, next, "", nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeRecord parses a record's payload, refusing fields rekey does not
// write.
func decodeRecord(payload []byte) (journalRecord, error) {
	var r journalRecord
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("does not parse: %v", err)
	}
	return r, nil
}

// apply adds record n's payload to l: the header must be first and match
// the base, splits follow.
func (s *CheckpointStore) apply(l *LoadedCheckpoint, n int, payload []byte, sup Superseded) error {
	r, err := decodeRecord(payload)
	if err != nil {
		return err
	}
	if r.Type == "header" {
		// The base's copy is not journal bytes the next compaction weighs.
		s.journalBytes -= int64(len(r.State))
	}
	if r.Type == "split" && r.Lease.Token != l.Lease.Token && sup.Of(r.Lease) {
		id := "?"
		if r.Split != nil {
			id = r.Split.ID
		}
		l.Ignored = append(l.Ignored, fmt.Sprintf("checkpoint %s: left out journal %s's record of split %s, since %s; the split is redone unless recorded again",
			s.url, path.Base(s.journalPath(s.gen)), id, sup.Why(r.Lease)))
		return nil
	}
	switch {
	case n == 0 && r.Type != "header":
		return fmt.Errorf("type %q where the header must be", r.Type)
	case r.Type == "header" && n > 0:
		return errors.New("a second header")
	case r.Type == "header":
		if r.Version != CheckpointVersion || r.Generation != s.gen || r.Fingerprint != l.Fingerprint {
			return fmt.Errorf("the header (version %d, generation %d, fingerprint %s) is not of this base (version %d, generation %d, fingerprint %s)", r.Version, r.Generation, r.Fingerprint, CheckpointVersion, s.gen, l.Fingerprint)
		}
	case r.Type == "split":
		if r.Split == nil || r.Split.ID == "" {
			return errors.New("a split record without a split")
		}
		if len(r.Entities) > 0 && !r.Split.Done {
			return fmt.Errorf("split %s is not done but carries entities", r.Split.ID)
		}
		l.Splits[r.Split.ID] = r.Split
		l.Records++
		if len(r.Entities) > 0 {
			l.Deltas = append(l.Deltas, r.Entities)
		}
	default:
		return fmt.Errorf("type %q, which this rekey does not know (written by a newer rekey?)", r.Type)
	}
	return nil
}
