package verify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/vfs"
)

// Rejected accounts for the old cells whose key does not fit the old
// layout: no entity holds them, so no entity's comparison sees them, and a
// run with bad_keys: reject leaves them out of the target. Each must be in
// the run's reject files; one that is not is a cell the target lacks with
// nothing to say why, and fails the check.
type Rejected struct {
	// Counted says a pass over the whole old snapshot (--all,
	// --find-worst) counted Cells; without one, only the run's reject
	// files are reported.
	Counted bool `json:"counted"`
	// Cells counts the old cells whose key does not fit; ByRun those of
	// them the run's reject files hold, Unaccounted those they do not.
	Cells       int64 `json:"cells"`
	ByRun       int64 `json:"rejected_by_run"`
	Unaccounted int64 `json:"unaccounted"`
	// RunFileCells counts the cells in the run's reject files, RunFiles
	// says where they were read ("" when none was found).
	RunFileCells int64  `json:"run_file_cells"`
	RunFiles     string `json:"run_files,omitempty"`
	// Examples are a few of the cells, unaccounted ones first, each as
	// "dump line: why".
	Examples []string `json:"examples,omitempty"`
}

// Line says in one sentence what the report found of rejected cells.
func (r *Rejected) Line() string {
	where := "no reject file of the run was found (give --rejects)"
	if r.RunFiles != "" {
		where = fmt.Sprintf("the run's reject files (%s) hold %d", r.RunFiles, r.RunFileCells)
	}
	if !r.Counted {
		return fmt.Sprintf("rejected keys: %s; not checked against the snapshot (that takes --all or --find-worst)", where)
	}
	s := fmt.Sprintf("rejected keys: %d old cells do not fit the old layout; %d of them rejected by the run", r.Cells, r.ByRun)
	if r.Unaccounted > 0 {
		s += fmt.Sprintf(", %d in no reject file of the run: MISMATCH, the target lacks them with nothing to say why", r.Unaccounted)
	}
	return s + "; " + where
}

// runRejects is the set of cells a run's reject files hold, by a 64-bit
// hash of each cell's dump line (a false match needs two such hashes to
// clash).
type runRejects struct {
	cells map[uint64]struct{}
	n     int64
	where string
}

// rejectHash hashes a cell's dump line without its newline: the part of a
// reject file's line before the reason.
func rejectHash(line []byte) uint64 {
	h := fnv.New64a()
	h.Write(line)
	return h.Sum64()
}

// has reports whether the run rejected c; buf is scratch space, returned
// grown.
func (rr *runRejects) has(c *cell.Cell, buf []byte) (bool, []byte) {
	buf = cell.AppendDump(buf[:0], c)
	_, ok := rr.cells[rejectHash(buf[:len(buf)-1])]
	return ok, buf
}

// loadRunRejects reads the run's reject files: at where (a file, or a
// folder of them) when given, else the per-split files the run keeps in
// the job's state folder (STATE/rejects/*.tsv, every shard's), else the
// job's bad_keys.file, opened with vo. Nothing found is an empty set with
// where "".
func loadRunRejects(j *job.Job, stateDir, where string, vo vfs.Options) (*runRejects, error) {
	rr := &runRejects{cells: map[uint64]struct{}{}}
	var candidates []string
	if where != "" {
		candidates = []string{where}
	} else {
		candidates = []string{runRejectsDir(stateDir)}
		if j.BadKeys.File != "" {
			candidates = append(candidates, j.BadKeys.File)
		}
	}
	for _, c := range candidates {
		found, err := rr.read(c, vo)
		if err != nil {
			return nil, fmt.Errorf("reject files %s: %w", c, err)
		}
		if found {
			rr.where = c
			return rr, nil
		}
		if where != "" {
			return nil, fmt.Errorf("--rejects %s: no such file or folder", where)
		}
	}
	return rr, nil
}

// runRejectsDir is STATE/rejects. Not path.Join: the state folder may be
// a URL (hdfs://nn:8020/...), whose "//" path.Join cleans into "/", and
// verify then refused every job whose checkpoint is on HDFS, as the
// Kubernetes overlay's is (exit 2, "hdfs:/// URL without a host").
func runRejectsDir(stateDir string) string {
	return strings.TrimSuffix(stateDir, "/") + "/rejects"
}

// read adds the reject file at p, or every .tsv file in the folder p;
// found is false when p does not exist.
func (rr *runRejects) read(p string, vo vfs.Options) (found bool, err error) {
	loc, err := vfs.OpenWith(p, vo)
	if err != nil {
		return false, err
	}
	defer loc.Close()
	fi, err := loc.FS.Stat(loc.Path)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	files := []string{loc.Path}
	if fi.IsDir() {
		ents, err := loc.FS.ReadDir(loc.Path)
		if err != nil {
			return false, err
		}
		files = files[:0]
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".tsv") {
				files = append(files, path.Join(loc.Path, e.Name()))
			}
		}
		sort.Strings(files)
	}
	for _, f := range files {
		if err := rr.readFile(loc.FS, f); err != nil {
			return false, err
		}
	}
	return true, nil
}

// readFile adds one reject file: a line per cell, its dump line's fields
// and then, after the last tab, the reason.
func (rr *runRejects) readFile(fsys vfs.FS, name string) error {
	f, err := fsys.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.NewSectionReader(f, 0, f.Size()))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		i := bytes.LastIndexByte(line, '\t')
		// A dump line has six fields; with the reason, seven.
		if i < 0 || bytes.Count(line[:i], []byte{'\t'}) != 5 {
			return fmt.Errorf("%s:%d: not a reject line (a cell's six fields and the reason, tab-separated)", name, n)
		}
		rr.cells[rejectHash(line[:i])] = struct{}{}
		rr.n++
	}
	return sc.Err()
}
