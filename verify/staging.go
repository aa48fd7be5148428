package verify

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/vfs"
)

// StagingReader reads row ranges of a folder of HFiles laid out as
// REGION/FAMILY/FILE (a run's STAGING/hfiles before bulk load, or a table's
// own directory). The files hold cells as written: there are no versions,
// deletes or TTL to apply, so every cell is returned.
type StagingReader struct {
	files   []stagedFile
	count   *countingFS
	name    string
	closeFS func() error
}

type stagedFile struct {
	path    string
	f       vfs.File
	rd      *hfile.Reader
	lastRow []byte // nil when the file has no LastKey (empty file)
}

// OpenStaging opens every HFile under dir (a path or URL) for range reads.
// Names starting with "." or "_" and recovered.edits are skipped, so a
// table directory reads too.
func OpenStaging(dir string) (*StagingReader, error) {
	loc, err := vfs.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("verify: staging folder %s: %w", dir, err)
	}
	return openStaged(loc, dir, nil)
}

// openStaged opens the HFiles under loc laid out as REGION/FAMILY/FILE;
// when keep is set, only those it keeps (by path on loc's file system).
// It closes loc on error.
func openStaged(loc *vfs.Location, dir string, keep func(p string) bool) (*StagingReader, error) {
	s := &StagingReader{count: newCountingFS(loc.FS), name: "staged files " + dir, closeFS: loc.Close}
	skip := func(name string) bool {
		return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "recovered.edits"
	}
	regions, err := loc.FS.ReadDir(loc.Path)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("verify: staging folder %s: %w", dir, err)
	}
	for _, r := range regions {
		if !r.IsDir() || skip(r.Name()) {
			continue
		}
		fams, err := loc.FS.ReadDir(path.Join(loc.Path, r.Name()))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("verify: staging folder %s: %w", dir, err)
		}
		for _, fam := range fams {
			if !fam.IsDir() || skip(fam.Name()) {
				continue
			}
			famDir := path.Join(loc.Path, r.Name(), fam.Name())
			files, err := loc.FS.ReadDir(famDir)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("verify: staging folder %s: %w", dir, err)
			}
			for _, fi := range files {
				if fi.IsDir() || skip(fi.Name()) {
					continue
				}
				if keep != nil && !keep(path.Join(famDir, fi.Name())) {
					continue
				}
				if err := s.add(path.Join(famDir, fi.Name())); err != nil {
					s.Close()
					return nil, err
				}
			}
		}
	}
	if len(s.files) == 0 {
		s.Close()
		return nil, fmt.Errorf("verify: staging folder %s holds no HFiles (expected REGION/FAMILY/FILE)", dir)
	}
	sort.Slice(s.files, func(i, j int) bool { return s.files[i].path < s.files[j].path })
	return s, nil
}

// OpenStagingRun opens the HFiles a run staged in the folder staging
// (STAGING/hfiles/REGION/FAMILY/FILE), and only those: the ones its
// records name (recordedHFiles). A file no record names was left by a
// crash while writing or re-splitting, and the load deletes it rather than
// load it; reading it would count cells the table will never hold. A
// recorded file that is missing fails the open, naming it: a bulk load
// moves staged files into the table, so a folder loaded in part holds
// part of the job (verify the table then). A folder with no record at all
// (HFiles laid out by hand or another tool) is read whole, as OpenStaging
// reads STAGING/hfiles.
func OpenStagingRun(staging string) (*StagingReader, error) {
	return openStagingRun(staging, nil, vfs.Options{})
}

// openStagingRun is OpenStagingRun, opening staging with vo (a Kerberos
// login), for job j: a folder that records another job's output
// (job.StagedIdentityFile) is refused, naming what differs, rather than
// read as j's and reported all missing. j nil checks nothing.
func openStagingRun(staging string, j *job.Job, vo vfs.Options) (*StagingReader, error) {
	staging = strings.TrimSuffix(staging, "/")
	loc, err := vfs.OpenWith(staging, vo)
	if err != nil {
		return nil, fmt.Errorf("verify: staging folder %s: %w", staging, err)
	}
	if err := notCatchup(loc, staging); err != nil {
		loc.Close()
		return nil, err
	}
	if j != nil {
		if err := checkStagedJob(loc, staging, j); err != nil {
			loc.Close()
			return nil, err
		}
	}
	names, err := recordedHFiles(loc)
	if errors.Is(err, errNoRecord) {
		// HFiles laid out by hand or by another tool: nothing says
		// which belong, and no rekey load would delete any.
		sub := *loc
		sub.Path = path.Join(loc.Path, "hfiles")
		return openStaged(&sub, staging+"/hfiles", nil)
	}
	if err != nil {
		loc.Close()
		return nil, fmt.Errorf("verify: staging folder %s: %w", staging, err)
	}
	recorded := make(map[string]bool, len(names))
	for _, n := range names {
		p := path.Join(loc.Path, n)
		if _, err := loc.FS.Stat(p); err != nil {
			loc.Close()
			return nil, fmt.Errorf("verify: staging folder %s: the recorded HFile %s: %w (a bulk load moves staged files into the table: once a load began, verify the table)", staging, n, err)
		}
		recorded[p] = true
	}
	sub := *loc
	sub.Path = path.Join(loc.Path, "hfiles")
	return openStaged(&sub, staging+"/hfiles", func(p string) bool { return recorded[p] })
}

// ErrCatchupStaging is the error of a verify on the staging folder of a
// catch-up (rekey run JOB --since A through staged HFiles): it holds only
// the difference between A and the job's snapshot, puts and version
// deletes, which no copy of the snapshot equals.
var ErrCatchupStaging = errors.New("verify: the staging folder holds a catch-up's difference, not a copy of the snapshot")

// notCatchup refuses a staging folder whose identity record says a
// catch-up staged it (job.StagedIdentity.Since), naming what to verify
// instead.
func notCatchup(loc *vfs.Location, staging string) error {
	rec, err := readStagedIdentity(loc, staging)
	if rec == nil || err != nil || rec.Since == "" {
		return err
	}
	return fmt.Errorf("%w: %s was staged by a catch-up from snapshot %s (rekey run %s --since %s) and holds only what changed since, version deletes included; verify the target table once it is loaded (rekey verify JOB, without --staging)",
		ErrCatchupStaging, staging, rec.Since, rec.JobFile, rec.Since)
}

// checkNotCatchup is notCatchup for a folder not opened yet: a verify
// refuses a catch-up's folder before it reads the snapshot.
func checkNotCatchup(staging string, vo vfs.Options) error {
	staging = strings.TrimSuffix(staging, "/")
	loc, err := vfs.OpenWith(staging, vo)
	if err != nil {
		return fmt.Errorf("verify: staging folder %s: %w", staging, err)
	}
	defer loc.Close()
	return notCatchup(loc, staging)
}

// ErrOtherJob is the error of a verify on a staging folder that holds
// another job's output.
var ErrOtherJob = errors.New("verify: the staging folder holds another job's output")

// checkStagedJob refuses a staging folder whose identity record names
// another job than j. A folder staged before the record existed, or laid
// out by another tool, has none and is read as it is.
func checkStagedJob(loc *vfs.Location, staging string, j *job.Job) error {
	rec, err := readStagedIdentity(loc, staging)
	if rec == nil || err != nil {
		return err
	}
	if diff := job.Mismatch(rec.Identity, j.OutputIdentity()); diff != "" {
		return fmt.Errorf("%w: %s was staged by %s, not this job (%s): verify it with the job that staged it", ErrOtherJob, staging, rec.JobFile, diff)
	}
	return nil
}

// readStagedIdentity reads the staging folder's identity record; nil and
// no error when it has none.
func readStagedIdentity(loc *vfs.Location, staging string) (*job.StagedIdentity, error) {
	b, err := vfs.ReadFile(loc.FS, path.Join(loc.Path, job.StagedIdentityFile))
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verify: staging folder %s: %w", staging, err)
	}
	var rec job.StagedIdentity
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("verify: staging folder %s: %s: %w", staging, job.StagedIdentityFile, err)
	}
	return &rec, nil
}

// stagedStateDir is the state folder that the identity record of the
// staging folder names, when the record is this job's and the folder
// exists: a run with --checkpoint DIR/c.json keeps its entity sketches and
// reject files in DIR, not in the job file's default state folder. ""
// when there is none to go by; the open of the new side reports what is
// wrong with the staging folder itself.
func stagedStateDir(staging string, j *job.Job, vo vfs.Options) string {
	loc, err := vfs.OpenWith(strings.TrimSuffix(staging, "/"), vo)
	if err != nil {
		return ""
	}
	defer loc.Close()
	rec, err := readStagedIdentity(loc, staging)
	if rec == nil || err != nil || rec.StateDir == "" || job.Mismatch(rec.Identity, j.OutputIdentity()) != "" {
		return ""
	}
	dir, err := vfs.OpenWith(rec.StateDir, vo)
	if err != nil {
		return ""
	}
	defer dir.Close()
	if fi, err := dir.FS.Stat(dir.Path); err != nil || !fi.IsDir() {
		return ""
	}
	return rec.StateDir
}

// stagedRecord is the part of a staging folder's record of its HFiles that
// verify reads: finish.json of a run in one process, load/state.json of a
// load task, parts/PART/state.json of a merge task (sink/hfiles writes
// them; its manifest.go is the format's owner). Each file's name is
// relative to the staging folder.
type stagedRecord struct {
	Written bool `json:"written"`
	Parts   map[string]struct {
		Files []struct {
			Name string `json:"name"`
		} `json:"files"`
	} `json:"parts"`
}

// errNoRecord says a folder holds no record of staged HFiles (finish.json,
// load/state.json or parts/*/state.json): not a folder rekey staged in.
var errNoRecord = errors.New("verify: no record of staged HFiles")

// recordedHFiles returns the names (relative to the folder) of the HFiles
// the staging folder at loc records: from finish.json, else from the load
// task's state, else from every merge part's.
func recordedHFiles(loc *vfs.Location) ([]string, error) {
	read := func(rel string) (*stagedRecord, bool, error) {
		b, err := vfs.ReadFile(loc.FS, path.Join(loc.Path, rel))
		if errors.Is(err, iofs.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		var r stagedRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, false, fmt.Errorf("%s is not valid: %w", rel, err)
		}
		return &r, true, nil
	}
	loadState, err := newestLoadState(loc)
	if err != nil {
		return nil, err
	}
	var recs []*stagedRecord
	for _, rel := range []string{"finish.json", loadState} {
		r, found, err := read(rel)
		if err != nil {
			return nil, err
		}
		if found {
			if !r.Written {
				return nil, fmt.Errorf("%s says its HFiles are not all written yet: the merge has not finished", rel)
			}
			recs = append(recs, r)
			break
		}
	}
	if len(recs) == 0 {
		parts, err := loc.FS.ReadDir(path.Join(loc.Path, "parts"))
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return nil, err
		}
		for _, p := range parts {
			if !p.IsDir() {
				continue
			}
			rel := path.Join("parts", p.Name(), "state.json")
			r, found, err := read(rel)
			if err != nil {
				return nil, err
			}
			if found {
				if !r.Written {
					return nil, fmt.Errorf("%s says its HFiles are not all written yet: that merge part has not finished", rel)
				}
				recs = append(recs, r)
			}
		}
	}
	if len(recs) == 0 {
		return nil, errNoRecord
	}
	var names []string
	for _, r := range recs {
		for _, ps := range r.Parts {
			for _, f := range ps.Files {
				names = append(names, f.Name)
			}
		}
	}
	return names, nil
}

// newestLoadState names the load task's state under the staging folder,
// relative to it: the load saves it per lease generation, as
// load/state-gNNNNNNNNNNNNNNNN.json (16 digits), and the newest generation's
// is the state (sink/hfiles' loadstate.go says why); load/state.json when
// there is none (a load without a lease, or staged by an earlier rekey).
func newestLoadState(loc *vfs.Location) (string, error) {
	ents, err := loc.FS.ReadDir(path.Join(loc.Path, "load"))
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return "", err
	}
	newest := "load/state.json"
	var best int64 = -1
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, "state-g") || !strings.HasSuffix(name, ".json") {
			continue
		}
		digits := strings.TrimSuffix(strings.TrimPrefix(name, "state-g"), ".json")
		if len(digits) != 16 {
			continue
		}
		gen, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || gen <= best {
			continue
		}
		best, newest = gen, path.Join("load", e.Name())
	}
	return newest, nil
}

func (s *StagingReader) add(p string) error {
	f, err := s.count.Open(p)
	if err != nil {
		return fmt.Errorf("verify: staged file %s: %w", p, err)
	}
	rd, err := hfile.Open(f, f.Size(), p)
	if err != nil {
		f.Close()
		return fmt.Errorf("verify: staged file %s: %w", p, err)
	}
	sf := stagedFile{path: p, f: f, rd: rd}
	if lk := rd.Info().LastKey; lk != nil {
		var c cell.Cell
		if err := cell.ParseKey(lk, &c); err != nil {
			f.Close()
			return fmt.Errorf("verify: staged file %s: last key: %w", p, err)
		}
		sf.lastRow = append([]byte(nil), c.Row...)
	}
	s.files = append(s.files, sf)
	return nil
}

// Read implements Reader: each file whose rows may reach the range is
// sought to its start, and the files' cells are merged into key order. A
// region's families and several files of one family hold cells of the same
// rows, and the counts of a side take a change of row for a new row: read
// file after file, a row in two families counted twice.
func (s *StagingReader) Read(ctx context.Context, r transform.KeyRange, fn func(*cell.Cell) error) error {
	var h stagedHeap
	defer func() {
		for _, it := range h {
			it.it.Close()
		}
	}()
	for i := range s.files {
		sf := &s.files[i]
		if sf.lastRow == nil || bytes.Compare(sf.lastRow, r.Start) < 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		it := &stagedIter{it: sf.rd.NewIterator(), sf: sf}
		var ok bool
		if len(r.Start) == 0 {
			ok = it.it.First()
		} else {
			k := cell.FirstOnRow(r.Start)
			ok = it.it.SeekGE(&k)
		}
		if !ok || it.past(r.Stop) {
			err := it.it.Err()
			it.it.Close()
			if err != nil {
				return fmt.Errorf("verify: staged file %s: %w", sf.path, err)
			}
			continue
		}
		h = append(h, it)
	}
	heap.Init(&h)
	for n := 0; len(h) > 0; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		top := h[0]
		if err := fn(top.it.Cell()); err != nil {
			return err
		}
		if top.it.Next() && !top.past(r.Stop) {
			heap.Fix(&h, 0)
			continue
		}
		err := top.it.Err()
		top.it.Close()
		heap.Pop(&h)
		if err != nil {
			return fmt.Errorf("verify: staged file %s: %w", top.sf.path, err)
		}
	}
	return nil
}

// stagedIter is one staged file's iterator at its current cell.
type stagedIter struct {
	it *hfile.Iterator
	sf *stagedFile
}

// past says the current cell's row is at or after stop (none: never).
func (s *stagedIter) past(stop []byte) bool {
	return len(stop) > 0 && bytes.Compare(s.it.Cell().Row, stop) >= 0
}

// stagedHeap orders the files' iterators by their current cells.
type stagedHeap []*stagedIter

func (h stagedHeap) Len() int           { return len(h) }
func (h stagedHeap) Less(i, j int) bool { return cell.Compare(h[i].it.Cell(), h[j].it.Cell()) < 0 }
func (h stagedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *stagedHeap) Push(x any)        { *h = append(*h, x.(*stagedIter)) }
func (h *stagedHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// BytesRead implements Reader: file bytes fetched.
func (s *StagingReader) BytesRead() int64 { return s.count.n.Load() }

// Live implements Reader: staged files do not change.
func (s *StagingReader) Live() bool { return false }

// String implements Reader.
func (s *StagingReader) String() string { return s.name }

// Close closes every file.
func (s *StagingReader) Close() error {
	for _, sf := range s.files {
		sf.f.Close()
	}
	s.files = nil
	if s.closeFS != nil {
		return s.closeFS()
	}
	return nil
}
