package verify

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
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
// sought to its start.
func (s *StagingReader) Read(ctx context.Context, r transform.KeyRange, fn func(*cell.Cell) error) error {
	for i := range s.files {
		sf := &s.files[i]
		if sf.lastRow == nil || bytes.Compare(sf.lastRow, r.Start) < 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		it := sf.rd.NewIterator()
		var ok bool
		if len(r.Start) == 0 {
			ok = it.First()
		} else {
			k := cell.FirstOnRow(r.Start)
			ok = it.SeekGE(&k)
		}
		for ; ok; ok = it.Next() {
			c := it.Cell()
			if len(r.Stop) > 0 && bytes.Compare(c.Row, r.Stop) >= 0 {
				break
			}
			if err := fn(c); err != nil {
				it.Close()
				return err
			}
		}
		err := it.Err()
		it.Close()
		if err != nil {
			return fmt.Errorf("verify: staged file %s: %w", sf.path, err)
		}
	}
	return nil
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
