package hfiles

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"sync/atomic"

	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// localRuns is a local folder that holds a one-process run's run files
// instead of the staging folder (Options.LocalRuns). The staging folder
// must be on the cluster's HDFS for the bulk load, but the runs are read
// back by this process alone: spilled to HDFS they cost the DataNode a
// write and a read of every byte (times the replication), on the cluster's
// cores, and rekey's HDFS client the same bytes again, where MapReduce and
// Spark spill to their own local directories. The split records stay in the staging
// folder; each run they name says it lies in this folder by the folder's
// ID, so a record read on another machine, or after the folder was wiped,
// is known not to have its runs here.
//
//	LOCAL/folder.json                   the folder's ID, host and path
//	LOCAL/runs/SPLIT/ATTEMPT-N.run      runs, as under the staging folder
//	LOCAL/merge/                        intermediate merge passes
type localRuns struct {
	loc  *vfs.Location
	fs   vfs.WriteFS
	root string
	// id names this folder in the runs it holds (runFile.Local).
	id string
	// held is the bytes of the job's runs in the folder; they do not count
	// against Options.MaxStagingBytes, which bounds the staging folder.
	held atomic.Int64
}

// localFolder is LOCAL/folder.json.
type localFolder struct {
	ID   string `json:"id"`
	Host string `json:"host"`
	Path string `json:"path"`
}

const localFolderFile = "folder.json"

// openLocalRuns opens (creating it if need be) the local run folder dir
// and reads or gives it its ID.
func openLocalRuns(dir string) (_ *localRuns, err error) {
	loc, err := vfs.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("hfiles: local run folder: %w", err)
	}
	defer func() {
		if err != nil {
			loc.Close()
		}
	}()
	if _, ok := loc.FS.(vfs.Local); !ok {
		return nil, fmt.Errorf("hfiles: local run folder %s is not on a local disk", dir)
	}
	fsys := loc.FS.(vfs.WriteFS)
	l := &localRuns{loc: loc, fs: fsys, root: loc.Path}
	if err := fsys.MkdirAll(path.Join(l.root, runsDir)); err != nil {
		return nil, fmt.Errorf("hfiles: create %s: %w", dir, err)
	}
	var f localFolder
	found, err := readJSON(fsys, path.Join(l.root, localFolderFile), &f)
	if err != nil {
		return nil, err
	}
	if !found || f.ID == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		host, _ := os.Hostname()
		f = localFolder{ID: hex.EncodeToString(b[:]), Host: host, Path: l.root}
		if err := writeJSON(fsys, path.Join(l.root, localFolderFile), &f); err != nil {
			return nil, err
		}
	}
	l.id = f.ID
	// Merge passes of a process that died are of no use to anyone.
	if err := fsys.RemoveAll(path.Join(l.root, mergeDir)); err != nil {
		return nil, fmt.Errorf("hfiles: remove old merge passes in %s: %w", dir, err)
	}
	return l, nil
}

func (l *localRuns) close() error { return l.loc.Close() }

// runFS is where the run f lies: its file system and its full path there.
// A run in another local folder than this sink's (runsHere) is nowhere
// this process can reach: runFS gives nil.
func (s *Sink) runFS(f *runFile) (vfs.WriteFS, string) {
	switch {
	case f.Local == "":
		return s.fs, path.Join(s.root, f.Name)
	case s.local != nil && f.Local == s.local.id:
		return s.local.fs, path.Join(s.local.root, f.Name)
	}
	return nil, ""
}

// runsHere reports whether every run of rec is where its record says: in
// the staging folder (the merge checks those), or in this sink's local run
// folder with the size recorded. A run spilled to a local folder of
// another machine or process, or one removed since, is not.
func (s *Sink) runsHere(rec *splitRecord) (bool, string) {
	for i := range rec.Runs {
		f := &rec.Runs[i]
		if f.Local == "" {
			continue
		}
		if s.local == nil || f.Local != s.local.id {
			return false, fmt.Sprintf("its run %s was spilled to another local folder (ID %s)", f.Name, f.Local)
		}
		fsys, p := s.runFS(f)
		fi, err := fsys.Stat(p)
		if err != nil {
			return false, fmt.Sprintf("its run %s: %v", p, err)
		}
		if fi.Size() != f.Size {
			return false, fmt.Sprintf("its run %s holds %d bytes, its record says %d", p, fi.Size(), f.Size)
		}
	}
	return true, ""
}

// dropLost returns the records of recs whose runs are here (runsHere),
// and the splits of the others. Such a split is not staged: the run
// redoes it when its checkpoint does not record it done (its new record
// replaces the old), and refuses to go on when it does (Lost). The record
// stays in the folder until then, so a run refused for want of its runs
// leaves the folder as it found it, and a later one that has them back
// goes on.
func (s *Sink) dropLost(recs []*splitRecord) ([]*splitRecord, []LostSplit) {
	var out []*splitRecord
	var lost []LostSplit
	for _, r := range recs {
		if ok, why := s.runsHere(r); !ok {
			lost = append(lost, LostSplit{ID: r.ID, Why: why, Where: s.o.LocalRuns})
			continue
		}
		out = append(out, r)
	}
	return out, lost
}

// LostSplit is a split whose record the sink dropped when it opened the
// staging folder, because the record names runs that are not where it
// says (Sink.Lost); it is the run's sink.Lost.
type LostSplit = sink.Lost

// Lost returns the splits whose records the sink dropped because their
// runs, spilled to a local run folder, are not in this process's folder:
// another machine's, or removed since. A run whose checkpoint records one
// of them done must not go on: the merge would miss its cells.
func (s *Sink) Lost() []LostSplit { return s.lost }

// removeStrayLocal deletes files under the local run folder's runs/ that
// no record names, as removeStrayRuns does in the staging folder, and
// returns the bytes of the runs that stay.
func (s *Sink) removeStrayLocal(recs []*splitRecord) (int64, error) {
	keep := map[string]bool{}
	var kept int64
	for _, r := range recs {
		for i := range r.Runs {
			if f := &r.Runs[i]; f.Local != "" {
				_, p := s.runFS(f)
				keep[p] = true
				kept += f.Size
			}
		}
	}
	return kept, removeUnnamed(s.local.fs, path.Join(s.local.root, runsDir), keep)
}
