package snapshot

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path"
	"strings"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot/manifest"
)

// fileMeta is what the scanner needs from an HFile's file info.
type fileMeta struct {
	MaxSeqID       int64
	HasMaxSeqID    bool
	IncludesMVCC   bool
	BulkLoadTS     int64
	HasBulkLoadTS  bool
	SkipResetSeqID bool
	TimeRangeMin   int64
	TimeRangeMax   int64
	HasTimeRange   bool
	Entries        uint64
	// MaxTagsLen is hfile.MAX_TAGS_LEN: 0 when no cell has tags.
	MaxTagsLen int32
	// LastKey is the serialized key of the file's last cell (nil when
	// unknown); the store file iterator checks it at the end of the file.
	LastKey []byte
	// FirstKey is the serialized key of the file's first cell and
	// DataStart the offset of its first data block (nil and 0 when
	// unknown): a scan from before FirstKey reads from DataStart on.
	FirstKey  []byte
	DataStart int64
}

// indexKey is one data-index entry: the first key of a data block and the
// block's offset.
type indexKey struct {
	Key    []byte
	Offset int64
}

// cellIter is a positioned iterator over one store file (see the hfile
// iterator contract): Cell is valid until the next call.
type cellIter interface {
	First() bool
	SeekGE(c *cell.Cell) bool
	Next() bool
	Cell() *cell.Cell
	Err() error
	Close() error
}

// storeReader is an open HFile.
type storeReader interface {
	meta() fileMeta
	// newIter returns an iterator that reads data blocks from data (a
	// read-ahead stream over the file), or from the file when data is nil.
	newIter(data io.ReaderAt) cellIter
	// dataEnd is the offset where the data blocks end (0 = unknown).
	dataEnd() int64
	// blocksEnd is where the data blocks that can hold a cell before key
	// end (0 = unknown).
	blocksEnd(key *cell.Cell) (int64, error)
	dataIndex() ([]indexKey, error)
	close() error
}

// openStoreReader opens an HFile; set by the hfile adapter.
var openStoreReader func(r io.ReaderAt, size int64, name string) (storeReader, error)

// resolvedFile is a manifest entry resolved to the file that holds its
// cells.
type resolvedFile struct {
	region, family, entry string
	path                  string // where it was found
	size                  int64
	ref                   *manifest.Ref
	// sortName stands in for the store file path name HBase sorts by when
	// sequence ids and sizes tie.
	sortName string

	// The open reader, shared by the scanners using it; see readers.go.
	// Guarded by the Snapshot's readerPool.
	open pooledReader
}

// where names a store file for error messages.
func (f *resolvedFile) where() string {
	return fmt.Sprintf("store file %s (region %s, family %s)", f.path, f.region, f.family)
}

// target is the (table, region, family, hfile) a manifest entry points at.
type target struct {
	ns, table, region, family, hfile string
}

// targetOf works out which file a manifest entry names, as HBase's
// StoreFileInfo does: references point into the parent region (or through
// a link), links into another table, plain names into the snapshot's own
// table and region.
func (s *Snapshot) targetOf(r *Region, family []byte, sf *StoreFile) (target, error) {
	fam := string(family)
	name := sf.Name
	if sf.Reference != nil {
		m := refNamePattern.FindStringSubmatch(name)
		if m == nil {
			return target{}, fmt.Errorf("%w: region %s family %s: reference %q does not look like <hfile>.<parent region>", ErrCorrupt, r.EncodedName, fam, name)
		}
		base, parent := m[1], m[len(m)-1]
		if l, ok := parseLink(base); ok {
			return target{l.ns, l.table, l.region, fam, l.hfile}, nil
		}
		return target{s.ns, s.tbl, parent, fam, base}, nil
	}
	if l, ok := parseLink(name); ok {
		return target{l.ns, l.table, l.region, fam, l.hfile}, nil
	}
	if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return target{}, fmt.Errorf("%w: region %s family %s: store file name %q", ErrCorrupt, r.EncodedName, fam, name)
	}
	return target{s.ns, s.tbl, r.EncodedName, fam, name}, nil
}

// locations lists where HBase's HFileLink looks for a file, in the order
// of HBase 2.x's HFileLink (origin, archive, temp, MOB; older 2.x releases
// tried the archive last, which finds the same single file).
func (s *Snapshot) locations(t target) []string {
	rel := path.Join(dataDirName, t.ns, t.table, t.region, t.family, t.hfile)
	return []string{
		path.Join(s.root, rel),
		path.Join(s.root, archiveDirName, rel),
		path.Join(s.root, tmpDirName, rel),
		path.Join(s.root, mobDirName, rel),
	}
}

// resolve finds (and caches) the file behind a manifest entry.
func (s *Snapshot) resolve(r *Region, family []byte, sf *StoreFile) (*resolvedFile, error) {
	key := r.EncodedName + "/" + string(family) + "/" + sf.Name
	s.mu.Lock()
	if s.fileCache == nil {
		s.mu.Unlock()
		return nil, errors.New("snapshot: closed")
	}
	if f, ok := s.fileCache[key]; ok {
		s.mu.Unlock()
		return f, nil
	}
	s.mu.Unlock()

	t, err := s.targetOf(r, family, sf)
	if err != nil {
		return nil, err
	}
	locs := s.locations(t)
	var found iofs.FileInfo
	var at string
	for _, p := range locs {
		fi, err := s.fs.Stat(p)
		if err == nil && !fi.IsDir() {
			found, at = fi, p
			break
		}
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return nil, fmt.Errorf("snapshot %s: region %s family %s: store file %s: stat %s: %w", s.info.Name, r.EncodedName, family, sf.Name, p, err)
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: snapshot %s: region %s family %s: store file %s (target %s of table %s:%s, region %s) is missing; looked in %s",
			ErrNotFound, s.info.Name, r.EncodedName, family, sf.Name, t.hfile, t.ns, t.table, t.region, strings.Join(locs, ", "))
	}
	if !found.Mode().IsRegular() {
		// A FIFO blocks the reader and a device reads garbage.
		return nil, fmt.Errorf("%w: snapshot %s: region %s family %s: store file %s: %s is not a regular file (%s)", ErrCorrupt, s.info.Name, r.EncodedName, family, sf.Name, at, found.Mode().Type())
	}
	// The manifest records the size of the file it names (for links and
	// references, of the file they point at); 0 means not recorded (v1).
	if sf.Size > 0 && found.Size() != sf.Size {
		return nil, fmt.Errorf("%w: snapshot %s: region %s family %s: store file %s: %s is %d bytes on disk but the manifest records %d bytes (truncated, replaced or damaged)", ErrCorrupt, s.info.Name, r.EncodedName, family, sf.Name, at, found.Size(), sf.Size)
	}
	sortName := sf.Name
	if sf.Reference == nil {
		if _, isLink := parseLink(sf.Name); !isLink {
			// A restored snapshot region holds links named after the
			// original file; HBase sorts those names.
			sortName = linkName(t)
		}
	}
	f := &resolvedFile{region: r.EncodedName, family: string(family), entry: sf.Name, path: at, size: found.Size(), ref: sf.Reference, sortName: sortName}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fileCache == nil {
		return nil, errors.New("snapshot: closed")
	}
	if g, ok := s.fileCache[key]; ok {
		return g, nil
	}
	s.fileCache[key] = f
	return f, nil
}

func linkName(t target) string {
	if t.ns == "default" {
		return t.table + "=" + t.region + "-" + t.hfile
	}
	return t.ns + "=" + t.table + "=" + t.region + "-" + t.hfile
}

// relocate lists the other places a file found at p may have moved to.
func (s *Snapshot) relocate(p string) []string {
	rel := strings.TrimPrefix(p, s.root+"/")
	for _, pfx := range []string{archiveDirName + "/", tmpDirName + "/", mobDirName + "/"} {
		rel = strings.TrimPrefix(rel, pfx)
	}
	var out []string
	for _, pre := range []string{"", archiveDirName, tmpDirName, mobDirName} {
		q := path.Join(s.root, pre, rel)
		if q != p {
			out = append(out, q)
		}
	}
	return out
}
