package hfiles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// The staging folder:
//
//	plan.json                       the target regions cells are partitioned by
//	runs/SPLIT/ATTEMPT-N.run        sorted runs of committed splits (.tmp while open),
//	                                unless they go to a local run folder (localruns.go)
//	splits/SPLIT.json               one per committed split: its runs and their partitions
//	merge/                          intermediate merge passes (removed when done)
//	hfiles/REGION/FAMILY/HEX32      the HFiles (_HEX32 while being written)
//	finish.json                     finished HFiles per partition, loaded regions
//
// A job in phases shares one folder between all its tasks, each under its
// own folder with its own lease (_rekey.lease):
//
//	plan.json                             published once, by the first spill shard
//	job.json                              the job record (package state), likewise
//	spill/shard-IIII-of-NNNN/             a spill shard: runs/, splits/ as above, task.json
//	spill/shard-IIII-of-NNNN.json         the shard's committed output (its split records)
//	parts/part-JJJJ-of-RRRR/state.json    a merge part's finished HFiles (as finish.json)
//	hfiles/REGION/FAMILY/HEX32            written by the one part the partition is dealt to
//	load/state-gNNNNNNNNNNNNNNNN.json     every part's HFiles and the regions loaded (loadstate.go)
//
// SPLIT is a hash of the split's ID (IDs may hold any character). Every
// JSON file is written with vfs.WriteFileAtomic, so a crash leaves either
// the old record or the new one. A run file is renamed from .tmp only after
// it is synced, and is part of the job only once splits/SPLIT.json names
// it; anything else under runs/ is left over from a crash and is removed
// when the folder is opened again.
const (
	regionMapFile = "plan.json"
	finishFile    = "finish.json"
	runsDir       = "runs"
	splitsDir     = "splits"
	mergeDir      = "merge"
	hfilesDir     = "hfiles"
	tmpSuffix     = ".tmp"
	runSuffix     = ".run"

	// A job in phases (phases.go) shares the folder between its tasks.
	spillRoot = "spill"
	// JobRecordFile is the job record (package state) of a job in
	// phases, published by its first spill task, proven against by the
	// merge and the load.
	JobRecordFile = "job.json"
	partsRoot     = "parts"
	loadRoot      = "load"
	taskFile      = "task.json"
	stateName     = "state.json"

	// kindFile claims the folder for one kind of job (kindPhases or
	// kindOneProcess), created exclusively by the first task of either
	// kind, so two tasks of different kinds that start together cannot
	// both find the folder empty and write into it.
	kindFile       = "kind"
	kindPhases     = "phases"
	kindOneProcess = "one-process"
)

// splitRecord is splits/SPLIT.json: what a committed split staged.
type splitRecord struct {
	ID      string    `json:"id"`
	Attempt string    `json:"attempt"`
	Runs    []runFile `json:"runs"`
	// Segments are the HFiles the split wrote straight from its cells
	// (direct.go).
	Segments []segmentFile `json:"segments,omitempty"`
	Cells    int64         `json:"cells"`
	Bytes    int64         `json:"bytes"`
	// SourceBytes is the store file bytes the split read (its
	// sink.SplitInfo.Bytes), for the estimate of a full folder's need.
	SourceBytes int64 `json:"source_bytes,omitempty"`
	// Lease is the task's lease as the record was written (Options.Lease;
	// none on a local folder): HDFS cannot refuse the record's rename, so
	// one of an attempt that lost the task can land late (currentRecords).
	Lease state.Stamp `json:"lease,omitzero"`
}

// runFile is one committed run file.
type runFile struct {
	// Name is the file's path relative to the staging folder, or to the
	// local run folder Local names.
	Name  string    `json:"name"`
	Size  int64     `json:"size"`
	Parts []RunPart `json:"parts"`
	// Local is the ID of the local run folder that holds the file
	// (localruns.go); empty for a run in the staging folder.
	Local string `json:"local,omitempty"`
}

// finishState is finish.json: progress of Finish, so a crash in the merge
// or the load resumes where it stopped.
type finishState struct {
	// Splits fingerprints the committed split records the HFiles were
	// merged from; if they change, the HFiles are stale.
	Splits string `json:"splits"`
	// Parts holds the finished HFiles of each partition, keyed by
	// partKey.
	Parts map[string]*partState `json:"parts"`
	// Written is set once every partition is written and the runs are
	// removed.
	Written bool `json:"written"`
	// Loaded lists the region dirs whose files are bulk loaded.
	Loaded map[string]bool `json:"loaded"`
	// Sent lists the region dirs whose files were sent to HBase in a
	// bulk load request at least once (recorded before the request).
	// Only there may a recorded file be missing: HBase moved it in.
	Sent map[string]bool `json:"sent,omitempty"`
	// Tokens lists, per region dir, the bulk tokens (HBase's staging
	// directories) of the loads sent for it, recorded before each load's
	// first request: a file missing from the folder may sit in one of them
	// (hbase.BulkStagedPath) when a load was cut short.
	Tokens map[string][]string `json:"bulk_tokens,omitempty"`
	Stats  Stats               `json:"stats"`
	// LeaseToken and LeaseGeneration are the task's lease as it was held
	// when the state was saved (Options.Lease; empty on a local folder):
	// the load leaves out a merge part's state whose part another
	// attempt holds now (mergedParts), as the merge leaves out a spill
	// commit (committedSpills).
	LeaseToken      string `json:"lease_token,omitempty"`
	LeaseGeneration int64  `json:"lease_generation,omitempty"`
}

// partState is the progress of one region+family.
type partState struct {
	Region     int         `json:"region"`
	Family     string      `json:"family"`
	Files      []hfileInfo `json:"files"`
	Done       bool        `json:"done"`
	Duplicates int64       `json:"duplicates"`
	Collisions int64       `json:"collisions"`
}

// hfileInfo is one finished HFile.
type hfileInfo struct {
	Name     string `json:"name"` // path relative to the staging folder
	Size     int64  `json:"size"`
	Cells    int64  `json:"cells"`
	FirstRow []byte `json:"first_row"`
	LastRow  []byte `json:"last_row"`
	// ID is the file's unique id, also written in its file info under
	// FileIDKey. A bulk load gives the file a new name in the region's
	// store but keeps its bytes, so the id is how a load that lost track
	// of a file finds out whether the region holds it (landedIDs). Empty
	// for files staged before ids were written.
	ID string `json:"id,omitempty"`
}

func partKey(region int, family string) string { return fmt.Sprintf("%d/%s", region, family) }

// splitKey names a split's files.
func splitKey(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:12])
}

// badRecordError is a record that exists but does not parse.
type badRecordError struct {
	name string
	err  error
}

func (e *badRecordError) Error() string {
	return fmt.Sprintf("hfiles: %s is not valid (%v); the staging folder is damaged", e.name, e.err)
}

func (e *badRecordError) Unwrap() error { return e.err }

func readJSON(fsys vfs.FS, name string, v any) (bool, error) {
	b, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("hfiles: read %s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, &badRecordError{name, err}
	}
	return true, nil
}

// record writes v to name as a durable record of the sink's state, if
// the fence (Options.Fence) says the task still holds its state.
func (s *Sink) record(name string, v any) error {
	if err := s.fenced("record " + name); err != nil {
		return err
	}
	return writeJSON(s.fs, name, v)
}

// publish closes f, a file of the staging folder just written. On an
// object store that Close is what makes the file appear under its final
// name, so it happens only while the fence holds; past it the file is
// dropped unpublished (vfs.Abort) and the fence's error returned. (On a
// local disk or HDFS the file was written under a temporary name, which
// a fenced rename makes final.)
func (s *Sink) publish(f vfs.WriteFile, what string) error {
	if s.whole {
		if err := s.fenced(what); err != nil {
			vfs.Abort(f)
			return err
		}
	}
	return f.Close()
}

// fenced checks the fence (Options.Fence) before what, a durable change
// of the staging folder.
func (s *Sink) fenced(what string) error {
	if s.o.Fence == nil {
		return nil
	}
	if err := s.o.Fence(); err != nil {
		return fmt.Errorf("hfiles: %s refused: %w", what, err)
	}
	return nil
}

func writeJSON(fsys vfs.WriteFS, name string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(fsys, name, b); err != nil {
		return fmt.Errorf("hfiles: record %s: %w", name, err)
	}
	return nil
}

// readSplits reads every committed split record, sorted by split ID.
func readSplits(fsys vfs.FS, root string) ([]*splitRecord, error) {
	dir := path.Join(root, splitsDir)
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hfiles: list %s: %w", dir, err)
	}
	var out []*splitRecord
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue // WriteFileAtomic's temporaries
		}
		var r splitRecord
		if _, err := readJSON(fsys, path.Join(dir, e.Name()), &r); err != nil {
			return nil, err
		}
		out = append(out, &r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// currentRecords returns the records of recs that count, and the splits
// of those left out: the records of attempts that lost the task's lease
// to a takeover (Options.Superseded). HDFS cannot refuse a rename, so
// such an attempt's record can land after the takeover, over the
// holder's. On opening the folder (inherit) the records of the attempt
// this task took the lease from are its inheritance: it stamps each
// anew, as its own, and any of that attempt's that lands later is late.
// A record left out stays in the folder; its split is redone (a new
// record replaces it) and its runs are strays the next open removes.
func (s *Sink) currentRecords(recs []*splitRecord, dir string, inherit bool) ([]*splitRecord, []LostSplit, error) {
	if s.o.Superseded == nil {
		return recs, nil, nil
	}
	sup, err := s.o.Superseded()
	if err != nil {
		return nil, nil, fmt.Errorf("hfiles: %w", err)
	}
	out := make([]*splitRecord, 0, len(recs))
	var left []LostSplit
	for _, r := range recs {
		switch {
		case !sup.Of(r.Lease):
		case inherit && sup.TakenFrom(r.Lease):
			old := r.Lease
			r.Lease = state.Stamped(s.o.Lease)
			if err := s.record(path.Join(dir, splitsDir, splitKey(r.ID)+".json"), r); err != nil {
				r.Lease = old
				return nil, nil, fmt.Errorf("hfiles: split %s: taking over its record: %w", r.ID, err)
			}
		default:
			left = append(left, LostSplit{ID: r.ID, Why: "its record in " + s.url(path.Join(dir, splitsDir)) + " is left out, since " + sup.Why(r.Lease), Superseded: true})
			continue
		}
		out = append(out, r)
	}
	return out, left, nil
}

// fingerprint identifies a set of split records (ID and attempt of each).
func fingerprint(recs []*splitRecord) string {
	h := sha256.New()
	for _, r := range recs {
		fmt.Fprintf(h, "%s\x00%s\x00", r.ID, r.Attempt)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// removeStrayRuns deletes files under SPILL/runs/ that no committed split
// record names: runs of splits that were never committed, or of a split's
// earlier attempt. Only the folder's own runs are looked at (a spill
// task's, under its lease), never another task's. It returns the bytes of
// the runs that stay.
func removeStrayRuns(fsys vfs.WriteFS, root, spill string, recs []*splitRecord) (int64, error) {
	keep := map[string]bool{}
	var kept int64
	for _, r := range recs {
		for _, f := range r.Runs {
			if f.Local != "" {
				continue // in a local run folder (localruns.go)
			}
			keep[path.Join(root, f.Name)] = true
			kept += f.Size
		}
	}
	return kept, removeUnnamed(fsys, path.Join(root, spill, runsDir), keep)
}

// removeUnnamed deletes the files in the split folders under dir (a
// runs/ folder) whose paths keep does not hold.
func removeUnnamed(fsys vfs.WriteFS, dir string, keep map[string]bool) error {
	splits, err := fsys.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hfiles: list %s: %w", dir, err)
	}
	for _, s := range splits {
		if !s.IsDir() {
			continue
		}
		sd := path.Join(dir, s.Name())
		files, err := fsys.ReadDir(sd)
		if err != nil {
			return fmt.Errorf("hfiles: list %s: %w", sd, err)
		}
		for _, f := range files {
			p := path.Join(sd, f.Name())
			if !keep[p] {
				if err := fsys.Remove(p); err != nil {
					return fmt.Errorf("hfiles: remove stray run %s: %w", p, err)
				}
			}
		}
	}
	return nil
}
