package snapshot

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot/manifest"
	"github.com/rekeyhq/rekey/vfs"
)

// Directory and file names of the HBase root-dir layout.
const (
	snapshotDirName    = ".hbase-snapshot"
	oldSnapshotDirName = ".snapshot" // 0.94, pre-manifest
	snapshotInfoName   = ".snapshotinfo"
	dataManifestName   = "data.manifest"
	regionManifestPfx  = "region-manifest."
	regionInfoName     = ".regioninfo"
	tableDescDir       = ".tabledesc"
	tableInfoPrefix    = ".tableinfo."
	dataDirName        = "data"
	archiveDirName     = "archive"
	tmpDirName         = ".tmp"
	mobDirName         = "mobdir"
)

// Error classes; every error the package returns for these cases wraps one
// of them (errors.Is) and says what and where.
var (
	// ErrNotFound: the snapshot, or a store file it lists, does not exist.
	ErrNotFound = errors.New("snapshot: not found")
	// ErrCorrupt: a manifest or reference file does not decode.
	ErrCorrupt = manifest.ErrCorrupt
	// ErrUnsupported: a valid layout this package does not read (0.94
	// snapshots, MOB references, unknown manifest versions).
	ErrUnsupported = errors.New("snapshot: unsupported")
	// ErrInvalid: the caller named something that cannot be a snapshot or
	// a root dir (a name with a slash, a root that is a file, a malformed
	// or unsupported URL), as opposed to a snapshot that is damaged.
	ErrInvalid = errors.New("snapshot: invalid argument")
)

// OpenOptions configures Open and List.
type OpenOptions struct {
	// FS, when set, is the file system to read, and root is a path inside
	// it (tests use an in-memory or fault-injecting FS). When nil, root's
	// scheme picks one: none or file:// = local disk, else the vfs
	// backend the program imported for it (hdfs:// = vfs/hdfs).
	FS vfs.FS
	// Location opens root when FS is nil: the Kerberos login a kerberized
	// HDFS needs.
	Location vfs.Options
	// MaxOpenFiles bounds the store file readers kept open between scans
	// (0 = DefaultMaxOpenFiles). Readers are shared by the scanners that use
	// them; an idle one is closed, least recently used first, once more than
	// MaxOpenFiles are open. Readers in use are never closed, so it bounds
	// idle readers, not the files of scanners open at once.
	MaxOpenFiles int
	// ReadAhead configures how scanners read store files on HDFS: each
	// store file a scanner reads is streamed front to back in large
	// chunks, with the next chunk prefetched (see vfs.ReadAhead); trailers,
	// indexes and seeks stay positional reads. The zero value reads ahead
	// in chunks of vfs.DefaultChunk with prefetch and no budget; set Budget
	// to bound the chunk memory of all scans together, Off to read every
	// block with a positional read, AllFiles to read local files ahead too.
	ReadAhead vfs.ReadAheadOptions
}

// Info describes the snapshot itself (.snapshotinfo).
type Info struct {
	Name string
	// Table is namespace:qualifier ("default:t" for the default namespace).
	Table        string
	CreationTime time.Time
	// Version is the manifest layout: 0 = v1 (region directories), 2 = v2.
	Version int
	// Type is DISABLED, FLUSH or SKIPFLUSH.
	Type  string
	Owner string
	// TTL is the snapshot's own time to live (HBase 2.3+), 0 = none.
	TTL time.Duration
}

// KeepDeleted is a family's KEEP_DELETED_CELLS setting.
type KeepDeleted uint8

// KEEP_DELETED_CELLS values.
const (
	KeepDeletedFalse KeepDeleted = iota
	KeepDeletedTrue
	KeepDeletedTTL
)

// String returns HBase's spelling.
func (k KeepDeleted) String() string {
	switch k {
	case KeepDeletedTrue:
		return "TRUE"
	case KeepDeletedTTL:
		return "TTL"
	}
	return "FALSE"
}

// ForeverTTL is HConstants.FOREVER, the TTL (seconds) meaning "never
// expires".
const ForeverTTL = int64(1<<31 - 1)

// Family is one column family's schema.
type Family struct {
	Name []byte
	// MaxVersions is VERSIONS (default 1).
	MaxVersions int
	// MinVersions is MIN_VERSIONS (default 0).
	MinVersions int
	// TTL is in seconds; ForeverTTL means none.
	TTL int64
	// KeepDeletedCells is KEEP_DELETED_CELLS (default FALSE).
	KeepDeletedCells KeepDeleted
	// Attributes holds every attribute as HBase stored it (COMPRESSION,
	// DATA_BLOCK_ENCODING, BLOOMFILTER, BLOCKSIZE, ...).
	Attributes map[string]string
	// Configuration holds the family's configuration overrides.
	Configuration map[string]string
}

// TTLMillis is the TTL as HBase's ScanInfo uses it: milliseconds, or
// math.MaxInt64 for none.
func (f *Family) TTLMillis() int64 {
	if f.TTL == ForeverTTL || f.TTL < 0 || f.TTL > (1<<63-1)/1000 {
		return 1<<63 - 1
	}
	return f.TTL * 1000
}

// TableDescriptor is the table schema stored in the snapshot.
type TableDescriptor struct {
	Namespace  string
	Qualifier  string
	Attributes map[string]string
	Families   []Family
}

// Family returns the named family, or nil.
func (t TableDescriptor) Family(name []byte) *Family {
	for i := range t.Families {
		if string(t.Families[i].Name) == string(name) {
			return &t.Families[i]
		}
	}
	return nil
}

// Region is one region of the snapshot with its store files.
type Region struct {
	// EncodedName is the region's directory name.
	EncodedName string
	RegionID    uint64
	StartKey    []byte
	// EndKey is empty for the last region.
	EndKey   []byte
	Families []FamilyFiles
}

// Bytes is the sum of the region's store file sizes as the manifest
// records them.
func (r *Region) Bytes() int64 {
	var n int64
	for _, f := range r.Families {
		for _, sf := range f.Files {
			n += sf.Size
		}
	}
	return n
}

// FamilyFiles lists one family's store files in a region.
type FamilyFiles struct {
	Family []byte
	Files  []StoreFile
}

// StoreFile is one manifest entry.
type StoreFile struct {
	// Name is the entry as the manifest writes it (plain, link or reference
	// name).
	Name string
	// Size is the manifest's file_size: the size of the file, or of the
	// referenced file for links and references (0 when not recorded).
	Size int64
	// Reference is set for split references.
	Reference *manifest.Ref
}

// Snapshot is an open snapshot. It is safe for concurrent use: scanners
// on different splits may run in parallel.
type Snapshot struct {
	fs      vfs.FS
	closeFS func() error
	root    string // path of the root dir inside fs
	dir     string // the snapshot directory
	info    Info
	table   TableDescriptor
	regions []Region
	ns, tbl string // the snapshot's table

	mu        sync.Mutex
	fileCache map[string]*resolvedFile
	readers   readerPool
	readAhead vfs.ReadAheadOptions
	// preparing counts Prepare's background opens; Close waits for them
	// before it closes the file system under them.
	preparing sync.WaitGroup
}

// Info returns the snapshot description.
func (s *Snapshot) Info() Info { return s.info }

// Table returns the table schema.
func (s *Snapshot) Table() TableDescriptor { return s.table }

// Regions returns the regions HBase would read: those the manifest lists,
// minus offline split parents and read replicas, sorted by start key.
func (s *Snapshot) Regions() []Region { return s.regions }

// FS returns the file system the snapshot is read from, and the root
// directory's path in it.
func (s *Snapshot) FS() (vfs.FS, string) { return s.fs, s.root }

// Close releases the file system connection (HDFS) and every open store
// file reader. Scanners still open fail on their next read.
func (s *Snapshot) Close() error {
	s.mu.Lock()
	s.fileCache = nil
	s.mu.Unlock()
	s.readers.closeAllReaders()
	// Opens under way finish (or fail) against the closed pool, which
	// closes what they opened.
	s.preparing.Wait()
	if s.closeFS != nil {
		return s.closeFS()
	}
	return nil
}

// resolveRoot turns root into a file system and a path in it.
func resolveRoot(root string, opts OpenOptions) (vfs.FS, string, func() error, error) {
	if opts.FS != nil {
		return opts.FS, path.Clean("/" + root), nil, nil
	}
	if root == "" {
		r, err := rootFromHBaseConf()
		if err != nil {
			return nil, "", nil, err
		}
		root = r
	}
	loc, err := vfs.OpenWith(root, opts.Location)
	if err != nil {
		if errors.Is(err, vfs.ErrUnsupportedScheme) {
			return nil, "", nil, fmt.Errorf("%w: %w: root %q: %w", ErrInvalid, ErrUnsupported, root, err)
		}
		if errors.Is(err, vfs.ErrBadLocation) {
			return nil, "", nil, fmt.Errorf("%w: root %q: %w", ErrInvalid, root, err)
		}
		return nil, "", nil, err
	}
	return loc.FS, loc.Path, loc.Close, nil
}

// rootFromHBaseConf reads hbase.rootdir from $HBASE_CONF_DIR/hbase-site.xml.
func rootFromHBaseConf() (string, error) {
	dir := os.Getenv("HBASE_CONF_DIR")
	if dir == "" {
		return "", errors.New("snapshot: no root directory given and HBASE_CONF_DIR is not set (it should hold hbase-site.xml with hbase.rootdir)")
	}
	p := filepath.Join(dir, "hbase-site.xml")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("snapshot: no root directory given: %w", err)
	}
	var conf struct {
		Property []struct {
			Name  string `xml:"name"`
			Value string `xml:"value"`
		} `xml:"property"`
	}
	if err := xml.Unmarshal(b, &conf); err != nil {
		return "", fmt.Errorf("snapshot: %s: %w", p, err)
	}
	for _, pr := range conf.Property {
		if pr.Name == "hbase.rootdir" && pr.Value != "" {
			return strings.TrimSpace(pr.Value), nil
		}
	}
	return "", fmt.Errorf("snapshot: %s has no hbase.rootdir", p)
}

// List returns the names of the completed snapshots under root.
func List(ctx context.Context, root string, opts OpenOptions) ([]string, error) {
	fsys, rp, closeFS, err := resolveRoot(root, opts)
	if err != nil {
		return nil, err
	}
	if closeFS != nil {
		defer closeFS()
	}
	return listSnapshots(fsys, rp)
}

func listSnapshots(fsys vfs.FS, root string) ([]string, error) {
	ents, err := fsys.ReadDir(path.Join(root, snapshotDirName))
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("snapshot: listing %s on %s: %w", path.Join(root, snapshotDirName), fsys, err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // .tmp holds snapshots in progress
		}
		if ok, _ := vfs.Exists(fsys, path.Join(root, snapshotDirName, e.Name(), snapshotInfoName)); ok {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Open finds snapshot name under root (a local path, file:///path,
// hdfs://host:port/path or hdfs://nameservice/path; "" = hbase.rootdir from
// $HBASE_CONF_DIR/hbase-site.xml) and reads its description and manifest.
func Open(ctx context.Context, root, name string, opts OpenOptions) (*Snapshot, error) {
	fsys, rp, closeFS, err := resolveRoot(root, opts)
	if err != nil {
		return nil, err
	}
	if opts.MaxOpenFiles < 0 {
		if closeFS != nil {
			closeFS()
		}
		return nil, fmt.Errorf("snapshot: MaxOpenFiles %d < 0", opts.MaxOpenFiles)
	}
	s, err := open(ctx, fsys, rp, name)
	if err != nil {
		if closeFS != nil {
			closeFS()
		}
		return nil, err
	}
	s.closeFS = closeFS
	s.readAhead = opts.ReadAhead
	s.readers.max = opts.MaxOpenFiles
	if s.readers.max == 0 {
		s.readers.max = DefaultMaxOpenFiles
	}
	return s, nil
}

func open(ctx context.Context, fsys vfs.FS, root, name string) (*Snapshot, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("%w: snapshot name %q (a snapshot name is one path element)", ErrInvalid, name)
	}
	if fi, err := fsys.Stat(root); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("%w: root dir %s on %s is not a directory; give the HBase root dir (hbase.rootdir)", ErrInvalid, root, fsys)
	}
	dir := path.Join(root, snapshotDirName, name)
	infoPath := path.Join(dir, snapshotInfoName)
	b, err := vfs.ReadFile(fsys, infoPath)
	if err != nil {
		if !errors.Is(err, iofs.ErrNotExist) {
			return nil, fmt.Errorf("snapshot %s: reading %s on %s: %w", name, infoPath, fsys, err)
		}
		if ok, _ := vfs.Exists(fsys, path.Join(root, oldSnapshotDirName)); ok {
			if ok2, _ := vfs.Exists(fsys, path.Join(root, snapshotDirName)); !ok2 {
				return nil, fmt.Errorf("%w: %s on %s has a 0.94-era %s/ directory and no %s/: snapshots from HBase before 0.96 must be migrated (by upgrading HBase) before rekey can read them", ErrUnsupported, root, fsys, oldSnapshotDirName, snapshotDirName)
			}
		}
		names, lerr := listSnapshots(fsys, root)
		msg := "none exist"
		if ok, _ := vfs.Exists(fsys, root); !ok {
			// The likelier mistake is the root dir, not the name.
			msg = "the root dir " + root + " does not exist; is it hbase.rootdir?"
		} else if lerr != nil {
			msg = "listing them failed: " + lerr.Error()
		} else if len(names) > 0 {
			msg = "existing snapshots: " + strings.Join(names, ", ")
		}
		if ok, _ := vfs.Exists(fsys, path.Join(root, snapshotDirName, ".tmp", name)); ok {
			msg = "it is still being taken (found under .tmp); " + msg
		}
		return nil, fmt.Errorf("%w: snapshot %q under %s on %s (%s)", ErrNotFound, name, root, fsys, msg)
	}
	desc, err := manifest.DecodeSnapshotInfo(b)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %s: %w", name, infoPath, err)
	}
	s := &Snapshot{fs: fsys, root: root, dir: dir, fileCache: map[string]*resolvedFile{}}
	s.info = Info{
		Name:    desc.GetName(),
		Version: int(desc.GetVersion()),
		Type:    desc.GetType().String(),
		Owner:   desc.GetOwner(),
		TTL:     time.Duration(desc.GetTtl()) * time.Second,
	}
	if desc.CreationTime != nil {
		s.info.CreationTime = time.UnixMilli(desc.GetCreationTime()).UTC()
	}
	s.ns, s.tbl = splitTableName(desc.GetTable())
	if ok, _ := vfs.Exists(fsys, path.Join(dir, "_CORRUPTED")); ok {
		return nil, fmt.Errorf("%w: snapshot %s: %s exists: HBase marked this snapshot corrupted", ErrCorrupt, name, path.Join(dir, "_CORRUPTED"))
	}

	var schema *manifest.TableSchema
	var rms []*manifest.SnapshotRegionManifest
	switch s.info.Version {
	case 0, 1:
		schema, rms, err = s.loadV1(ctx)
	case 2:
		schema, rms, err = s.loadV2(ctx)
	default:
		return nil, fmt.Errorf("%w: snapshot %s: manifest version %d (rekey reads 0/v1 and 2)", ErrUnsupported, name, s.info.Version)
	}
	if err != nil {
		return nil, err
	}
	if schema == nil {
		return nil, fmt.Errorf("%w: snapshot %s: no table schema found in %s", ErrCorrupt, name, dir)
	}
	if err := s.setTable(schema); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	if s.tbl == "" {
		return nil, fmt.Errorf("%w: snapshot %s: no table name in .snapshotinfo or schema", ErrCorrupt, name)
	}
	s.info.Table = s.ns + ":" + s.tbl
	if err := s.setRegions(rms); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	if err := s.checkReadable(); err != nil {
		return nil, err
	}
	return s, nil
}

// splitTableName splits "ns:qualifier" (or "qualifier" = default namespace).
func splitTableName(t string) (string, string) {
	if i := strings.IndexByte(t, ':'); i >= 0 {
		return t[:i], t[i+1:]
	}
	if t == "" {
		return "", ""
	}
	return "default", t
}

func (s *Snapshot) loadV2(ctx context.Context) (*manifest.TableSchema, []*manifest.SnapshotRegionManifest, error) {
	mp := path.Join(s.dir, dataManifestName)
	b, err := vfs.ReadFile(s.fs, mp)
	if err == nil {
		m, err := manifest.DecodeDataManifest(b)
		if err != nil {
			return nil, nil, fmt.Errorf("snapshot %s: %s: %w", s.info.Name, mp, err)
		}
		if u := m.ProtoReflect().GetUnknown(); len(u) > 0 {
			num, _, _ := protowire.ConsumeTag(u)
			return nil, nil, fmt.Errorf("%w: snapshot %s: %s has an unknown top-level field %d (damaged, or written by a newer HBase)", ErrCorrupt, s.info.Name, mp, num)
		}
		return m.TableSchema, m.RegionManifests, nil
	}
	if !errors.Is(err, iofs.ErrNotExist) {
		return nil, nil, fmt.Errorf("snapshot %s: reading %s: %w", s.info.Name, mp, err)
	}
	// Not consolidated: per-region manifests, plus v1-style region
	// directories, with the schema in .tabledesc.
	schema, rms, err := s.loadV1(ctx)
	if err != nil {
		return nil, nil, err
	}
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: listing %s: %w", s.info.Name, s.dir, err)
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasPrefix(e.Name(), regionManifestPfx) {
			continue
		}
		p := path.Join(s.dir, e.Name())
		b, err := vfs.ReadFile(s.fs, p)
		if err != nil {
			return nil, nil, fmt.Errorf("snapshot %s: %w", s.info.Name, err)
		}
		rm, err := manifest.DecodeRegionManifest(b)
		if err != nil {
			return nil, nil, fmt.Errorf("snapshot %s: %s: %w", s.info.Name, p, err)
		}
		rms = append(rms, rm)
	}
	return schema, rms, nil
}

// loadV1 reads the table descriptor in .tabledesc and one directory per
// region (.regioninfo plus <family>/<storefile> entries: empty files for
// HFiles and links, copies of Reference files for references).
func (s *Snapshot) loadV1(ctx context.Context) (*manifest.TableSchema, []*manifest.SnapshotRegionManifest, error) {
	var schema *manifest.TableSchema
	tdDir := path.Join(s.dir, tableDescDir)
	ents, err := s.fs.ReadDir(tdDir)
	if errors.Is(err, iofs.ErrNotExist) {
		// Before HBase 0.96.1 the descriptor sat in the snapshot directory
		// itself.
		tdDir = s.dir
		ents, err = s.fs.ReadDir(tdDir)
	}
	if err == nil {
		best := ""
		for _, e := range ents {
			if !e.IsDir() && strings.HasPrefix(e.Name(), tableInfoPrefix) && e.Name() > best {
				best = e.Name() // zero-padded sequence numbers sort as text
			}
		}
		if best != "" {
			p := path.Join(tdDir, best)
			b, err := vfs.ReadFile(s.fs, p)
			if err != nil {
				return nil, nil, fmt.Errorf("snapshot %s: %w", s.info.Name, err)
			}
			if schema, err = manifest.DecodeTableInfoFile(b); err != nil {
				return nil, nil, fmt.Errorf("snapshot %s: %s: %w", s.info.Name, p, err)
			}
		}
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, nil, fmt.Errorf("snapshot %s: listing %s: %w", s.info.Name, tdDir, err)
	}
	ents, err = s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot %s: listing %s: %w", s.info.Name, s.dir, err)
	}
	var rms []*manifest.SnapshotRegionManifest
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		rdir := path.Join(s.dir, e.Name())
		rip := path.Join(rdir, regionInfoName)
		b, err := vfs.ReadFile(s.fs, rip)
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				continue // not a region directory
			}
			return nil, nil, fmt.Errorf("snapshot %s: %w", s.info.Name, err)
		}
		ri, err := manifest.DecodeRegionInfoFile(b)
		if err != nil {
			return nil, nil, fmt.Errorf("snapshot %s: %s: %w", s.info.Name, rip, err)
		}
		rm := &manifest.SnapshotRegionManifest{RegionInfo: ri}
		fams, err := s.fs.ReadDir(rdir)
		if err != nil {
			return nil, nil, fmt.Errorf("snapshot %s: listing %s: %w", s.info.Name, rdir, err)
		}
		for _, fam := range fams {
			if !fam.IsDir() || strings.HasPrefix(fam.Name(), ".") {
				continue
			}
			fdir := path.Join(rdir, fam.Name())
			files, err := s.fs.ReadDir(fdir)
			if err != nil {
				return nil, nil, fmt.Errorf("snapshot %s: listing %s: %w", s.info.Name, fdir, err)
			}
			ff := &manifest.SnapshotRegionManifest_FamilyFiles{FamilyName: []byte(fam.Name())}
			for _, f := range files {
				if f.IsDir() || strings.HasPrefix(f.Name(), ".") {
					continue
				}
				sf := &manifest.SnapshotRegionManifest_StoreFile{Name: ptr(f.Name())}
				if isReferenceName(f.Name()) {
					p := path.Join(fdir, f.Name())
					rb, err := vfs.ReadFile(s.fs, p)
					if err != nil {
						return nil, nil, fmt.Errorf("snapshot %s: %w", s.info.Name, err)
					}
					ref, err := manifest.DecodeReference(rb)
					if err != nil {
						return nil, nil, fmt.Errorf("snapshot %s: %s: %w", s.info.Name, p, err)
					}
					rng := manifest.Reference_BOTTOM
					if ref.Top {
						rng = manifest.Reference_TOP
					}
					sf.Reference = &manifest.Reference{Splitkey: ref.SplitKey, Range: &rng}
				}
				ff.StoreFiles = append(ff.StoreFiles, sf)
			}
			rm.FamilyFiles = append(rm.FamilyFiles, ff)
		}
		rms = append(rms, rm)
	}
	return schema, rms, nil
}

func ptr[T any](v T) *T { return &v }

func (s *Snapshot) setTable(ts *manifest.TableSchema) error {
	t := TableDescriptor{Attributes: map[string]string{}}
	if tn := ts.TableName; tn != nil {
		t.Namespace, t.Qualifier = string(tn.Namespace), string(tn.Qualifier)
	}
	if s.tbl == "" && t.Qualifier != "" {
		s.ns, s.tbl = t.Namespace, t.Qualifier
	}
	if t.Qualifier == "" {
		t.Namespace, t.Qualifier = s.ns, s.tbl
	}
	for _, a := range ts.Attributes {
		t.Attributes[string(a.First)] = string(a.Second)
	}
	for _, cf := range ts.ColumnFamilies {
		f, err := parseFamily(cf)
		if err != nil {
			return err
		}
		t.Families = append(t.Families, f)
	}
	sort.Slice(t.Families, func(i, j int) bool { return string(t.Families[i].Name) < string(t.Families[j].Name) })
	s.table = t
	return nil
}

// parseFamily reads the attributes HBase's ScanInfo uses, with HBase's
// defaults for absent ones.
func parseFamily(cf *manifest.ColumnFamilySchema) (Family, error) {
	f := Family{Name: cf.Name, MaxVersions: 1, TTL: ForeverTTL, Attributes: map[string]string{}, Configuration: map[string]string{}}
	for _, a := range cf.Attributes {
		f.Attributes[string(a.First)] = string(a.Second)
	}
	for _, c := range cf.Configuration {
		f.Configuration[c.GetName()] = c.GetValue()
	}
	bad := func(attr, v string) error {
		return fmt.Errorf("%w: family %q: attribute %s=%q is not valid", ErrCorrupt, f.Name, attr, v)
	}
	if v, ok := f.Attributes["VERSIONS"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return f, bad("VERSIONS", v)
		}
		f.MaxVersions = n
	}
	if v, ok := f.Attributes["MIN_VERSIONS"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return f, bad("MIN_VERSIONS", v)
		}
		f.MinVersions = n
	}
	if v, ok := f.Attributes["TTL"]; ok {
		v = strings.TrimSpace(v)
		if strings.EqualFold(v, "FOREVER") {
			f.TTL = ForeverTTL
		} else {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return f, bad("TTL", v)
			}
			f.TTL = n
		}
	}
	if v, ok := f.Attributes["KEEP_DELETED_CELLS"]; ok {
		switch strings.ToUpper(strings.TrimSpace(v)) {
		case "FALSE":
			f.KeepDeletedCells = KeepDeletedFalse
		case "TRUE":
			f.KeepDeletedCells = KeepDeletedTrue
		case "TTL":
			f.KeepDeletedCells = KeepDeletedTTL
		default:
			return f, bad("KEEP_DELETED_CELLS", v)
		}
	}
	if v := f.Attributes["NEW_VERSION_BEHAVIOR"]; strings.EqualFold(v, "true") {
		return f, fmt.Errorf("%w: family %q has NEW_VERSION_BEHAVIOR=true, whose delete semantics rekey does not implement", ErrUnsupported, f.Name)
	}
	return f, nil
}

func (s *Snapshot) setRegions(rms []*manifest.SnapshotRegionManifest) error {
	seen := map[string]bool{}
	for _, rm := range rms {
		if err := unknownFields(rm); err != nil {
			return err
		}
		ri := rm.RegionInfo
		if ri.GetReplicaId() != 0 {
			continue
		}
		if ri.GetOffline() && ri.GetSplit() {
			continue // a split parent: its daughters hold the data
		}
		if mob, err := s.mobRegion(rm); mob || err != nil {
			// Not a key range of the table: the MOB files' holder, which
			// a scan of a MOB family refuses anyway.
			if err != nil {
				return err
			}
			continue
		}
		enc := ri.GetRegionEncodedName()
		if enc == "" {
			enc = encodedRegionName(ri)
		}
		if seen[enc] {
			return fmt.Errorf("%w: region %s is listed twice", ErrCorrupt, enc)
		}
		seen[enc] = true
		r := Region{EncodedName: enc, RegionID: ri.GetRegionId(), StartKey: ri.StartKey, EndKey: ri.EndKey}
		for _, ff := range rm.FamilyFiles {
			if s.table.Family(ff.FamilyName) == nil {
				// HBase opens no store for a family the schema lacks, so
				// its files would be skipped: refuse rather than lose them.
				return fmt.Errorf("%w: region %s lists %d store file(s) under family %q, which is not in the table schema (families: %s)", ErrCorrupt, enc, len(ff.StoreFiles), ff.FamilyName, s.familyNames())
			}
			fam := FamilyFiles{Family: ff.FamilyName}
			for _, sf := range ff.StoreFiles {
				e := StoreFile{Name: sf.GetName(), Size: int64(sf.GetFileSize())}
				if sf.Reference != nil {
					ref, err := manifest.DecodeReferencePB(sf.Reference)
					if err != nil {
						return fmt.Errorf("region %s family %s file %s: %w", enc, ff.FamilyName, e.Name, err)
					}
					e.Reference = &ref
				} else if isReferenceName(e.Name) {
					return fmt.Errorf("%w: region %s family %s: %s is named like a reference but the manifest has no reference for it", ErrCorrupt, enc, ff.FamilyName, e.Name)
				}
				fam.Files = append(fam.Files, e)
			}
			r.Families = append(r.Families, fam)
		}
		s.regions = append(s.regions, r)
	}
	sort.Slice(s.regions, func(i, j int) bool {
		return string(s.regions[i].StartKey) < string(s.regions[j].StartKey)
	})
	if err := checkTiling(s.regions); err != nil {
		return err
	}
	for i := range s.regions {
		if err := checkReferences(&s.regions[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Snapshot) familyNames() string {
	var names []string
	for _, f := range s.table.Families {
		names = append(names, string(f.Name))
	}
	return strings.Join(names, ", ")
}

// unknownFields refuses a region manifest with fields this reader does not
// know. The manifest carries no checksum, and a damaged field number turns
// a store file, a family or a key into an unknown field that protobuf
// would skip without a word; HBase 2.x writes no fields beyond these.
func unknownFields(rm *manifest.SnapshotRegionManifest) error {
	where := func() string {
		return fmt.Sprintf("region %s", rm.GetRegionInfo().GetRegionEncodedName())
	}
	check := func(m proto.Message, what string) error {
		if u := m.ProtoReflect().GetUnknown(); len(u) > 0 {
			num, _, _ := protowire.ConsumeTag(u)
			return fmt.Errorf("%w: %s: the manifest's %s has an unknown field %d (damaged, or written by a newer HBase)", ErrCorrupt, where(), what, num)
		}
		return nil
	}
	if err := check(rm, "region manifest"); err != nil {
		return err
	}
	if rm.RegionInfo == nil {
		return fmt.Errorf("%w: a region manifest has no region info", ErrCorrupt)
	}
	if err := check(rm.RegionInfo, "region info"); err != nil {
		return err
	}
	for _, ff := range rm.FamilyFiles {
		if err := check(ff, fmt.Sprintf("family %q entry", ff.FamilyName)); err != nil {
			return err
		}
		for _, sf := range ff.StoreFiles {
			if err := check(sf, fmt.Sprintf("store file %q entry", sf.GetName())); err != nil {
				return err
			}
			if sf.Reference != nil {
				if err := check(sf.Reference, fmt.Sprintf("store file %q reference", sf.GetName())); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// mobRegionStart is the start key of the pseudo-region a snapshot of a
// table with MOB families lists for its MOB files (HBase's
// MobUtils.getMobRegionInfo: start ".mob", empty end, region id 0).
const mobRegionStart = ".mob"

// mobRegion says whether rm is the MOB pseudo-region. It must list files
// of MOB families only: anything else there is a damaged manifest.
func (s *Snapshot) mobRegion(rm *manifest.SnapshotRegionManifest) (bool, error) {
	ri := rm.RegionInfo
	if string(ri.StartKey) != mobRegionStart || len(ri.EndKey) != 0 || ri.GetRegionId() != 0 {
		return false, nil
	}
	for _, ff := range rm.FamilyFiles {
		if f := s.table.Family(ff.FamilyName); f == nil || !strings.EqualFold(f.Attributes["IS_MOB"], "true") {
			return false, fmt.Errorf("%w: the MOB region lists store files under family %q, which is not a MOB family of the table", ErrCorrupt, ff.FamilyName)
		}
	}
	return true, nil
}

// checkTiling refuses regions that do not cover the key space exactly once,
// as a table's regions do: the first starts at the empty key, each ends
// where the next starts, the last ends at the empty key. A gap or an
// overlap would drop or double cells without an error.
func checkTiling(rs []Region) error {
	if len(rs) == 0 {
		return fmt.Errorf("%w: the manifest lists no regions (every table has at least one)", ErrCorrupt)
	}
	name := func(r *Region) string {
		return fmt.Sprintf("region %s [%s, %s)", r.EncodedName, keyText(r.StartKey), keyText(r.EndKey))
	}
	if len(rs[0].StartKey) != 0 {
		return fmt.Errorf("%w: regions do not cover the table: the first, %s, does not start at the empty key", ErrCorrupt, name(&rs[0]))
	}
	for i := range rs {
		r := &rs[i]
		if len(r.EndKey) > 0 && bytes.Compare(r.StartKey, r.EndKey) >= 0 {
			return fmt.Errorf("%w: %s starts at or after its end", ErrCorrupt, name(r))
		}
		if i+1 == len(rs) {
			if len(r.EndKey) != 0 {
				return fmt.Errorf("%w: regions do not cover the table: the last, %s, does not end at the empty key", ErrCorrupt, name(r))
			}
			break
		}
		next := &rs[i+1]
		switch c := bytes.Compare(r.EndKey, next.StartKey); {
		case len(r.EndKey) == 0 || c > 0:
			return fmt.Errorf("%w: regions overlap: %s and %s", ErrCorrupt, name(r), name(next))
		case c < 0:
			return fmt.Errorf("%w: regions leave a gap: %s and %s", ErrCorrupt, name(r), name(next))
		}
	}
	return nil
}

// checkReferences holds a region's split references to its bounds: only a
// split writes bottom halves, and the daughter holding one ends at the split
// row; a top half starts at or after the region's start (at it for a split,
// at a parent's start for a merge) and before its end.
func checkReferences(r *Region) error {
	for _, ff := range r.Families {
		for _, sf := range ff.Files {
			ref := sf.Reference
			if ref == nil {
				continue
			}
			var sk cell.Cell
			if err := cell.ParseKey(ref.SplitKey, &sk); err != nil {
				return fmt.Errorf("%w: region %s family %s: reference %s: split key: %v", ErrCorrupt, r.EncodedName, ff.Family, sf.Name, err)
			}
			bad := false
			if ref.Top {
				bad = bytes.Compare(sk.Row, r.StartKey) < 0 || (len(r.EndKey) > 0 && bytes.Compare(sk.Row, r.EndKey) >= 0)
			} else {
				bad = len(r.EndKey) == 0 || !bytes.Equal(sk.Row, r.EndKey)
			}
			if bad {
				half := map[bool]string{true: "top", false: "bottom"}[ref.Top]
				return fmt.Errorf("%w: region %s [%s, %s) family %s: reference %s is the %s half at row %s, which does not fit the region", ErrCorrupt, r.EncodedName, keyText(r.StartKey), keyText(r.EndKey), ff.Family, sf.Name, half, keyText(sk.Row))
			}
		}
	}
	return nil
}

// keyText shows a row key in errors: quoted when printable, else hex.
func keyText(k []byte) string {
	for _, c := range k {
		if c < 0x20 || c > 0x7e {
			return "0x" + hex.EncodeToString(k)
		}
	}
	return strconv.Quote(string(k))
}
