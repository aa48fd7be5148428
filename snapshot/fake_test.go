package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot/manifest"
	"github.com/rekeyhq/rekey/vfs"
	"google.golang.org/protobuf/proto"
)

// Unit tests of the merge and the read semantics run on store files in a
// tiny test-only format (JSON cells behind a magic), so each case states
// its cells directly; the real HFile path is covered by the corpus,
// fixture and integration tests.

const fakeMagic = "FAKESTORE\n"

type fakeFile struct {
	Meta  fileMeta
	Cells []cell.Cell
}

func init() {
	real := openStoreReader
	openStoreReader = func(r io.ReaderAt, size int64, name string) (storeReader, error) {
		head := make([]byte, len(fakeMagic))
		if size >= int64(len(head)) {
			if _, err := r.ReadAt(head, 0); err == nil && string(head) == fakeMagic {
				b := make([]byte, size)
				if _, err := r.ReadAt(b, 0); err != nil {
					return nil, err
				}
				var f fakeFile
				if err := json.Unmarshal(b[len(fakeMagic):], &f); err != nil {
					return nil, err
				}
				sort.SliceStable(f.Cells, func(i, j int) bool { return cell.Compare(&f.Cells[i], &f.Cells[j]) < 0 })
				return &f, nil
			}
		}
		return real(r, size, name)
	}
}

func (f *fakeFile) meta() fileMeta                      { return f.Meta }
func (f *fakeFile) newIter(io.ReaderAt) cellIter        { return &sliceIter{cells: f.Cells, i: -1} }
func (f *fakeFile) dataEnd() int64                      { return 0 }
func (f *fakeFile) blocksEnd(*cell.Cell) (int64, error) { return 0, nil }
func (f *fakeFile) close() error                        { return nil }
func (f *fakeFile) dataIndex() ([]indexKey, error) {
	var out []indexKey
	for i := 0; i < len(f.Cells); i += 2 {
		out = append(out, indexKey{Key: cell.AppendKey(nil, &f.Cells[i]), Offset: int64(i * 100)})
	}
	return out, nil
}

type sliceIter struct {
	cells []cell.Cell
	i     int
	cur   cell.Cell
}

func (it *sliceIter) set() bool {
	if it.i >= len(it.cells) {
		return false
	}
	it.cur = it.cells[it.i].Clone() // a fresh copy, as a block decoder would overwrite
	return true
}
func (it *sliceIter) First() bool { it.i = 0; return it.set() }
func (it *sliceIter) Next() bool  { it.i++; return it.set() }
func (it *sliceIter) SeekGE(c *cell.Cell) bool {
	it.i = sort.Search(len(it.cells), func(i int) bool { return cell.Compare(&it.cells[i], c) >= 0 })
	return it.set()
}
func (it *sliceIter) Cell() *cell.Cell { return &it.cur }
func (it *sliceIter) Err() error       { return nil }
func (it *sliceIter) Close() error     { return nil }

// parseCells reads cells written one per field as
// row/family:qualifier/ts/Type[=value][@seq].
func parseCells(t testing.TB, spec string) []cell.Cell {
	t.Helper()
	var out []cell.Cell
	for _, f := range strings.Fields(spec) {
		var c cell.Cell
		if i := strings.LastIndexByte(f, '@'); i >= 0 {
			n, err := strconv.ParseUint(f[i+1:], 10, 64)
			if err != nil {
				t.Fatalf("cell %q: %v", f, err)
			}
			c.SeqID = n
			f = f[:i]
		}
		if i := strings.IndexByte(f, '='); i >= 0 {
			c.Value = []byte(f[i+1:])
			f = f[:i]
		}
		parts := strings.Split(f, "/")
		if len(parts) != 4 {
			t.Fatalf("cell %q: want row/fam:qual/ts/Type", f)
		}
		fq := strings.SplitN(parts[1], ":", 2)
		if len(fq) != 2 {
			t.Fatalf("cell %q: want fam:qual", f)
		}
		ts, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			t.Fatalf("cell %q: %v", f, err)
		}
		typ, err := cell.ParseType(parts[3])
		if err != nil {
			t.Fatalf("cell %q: %v", f, err)
		}
		c.Row, c.Family, c.Qualifier, c.Timestamp, c.Type = []byte(parts[0]), []byte(fq[0]), []byte(fq[1]), ts, typ
		out = append(out, c)
	}
	return out
}

func formatCell(c *cell.Cell) string {
	s := fmt.Sprintf("%s/%s:%s/%d/%s", c.Row, c.Family, c.Qualifier, c.Timestamp, c.Type)
	if len(c.Value) > 0 {
		s += "=" + string(c.Value)
	}
	return s
}

// testFile is one store file of a test region.
type testFile struct {
	family string
	name   string // default: f<index>
	cells  string
	meta   fileMeta
	ref    *manifest.Ref
	// at is "data" (default) or "archive".
	at string
	// parent is the region the file lies in (references: the parent).
	parent string
}

// testRegion is a region of a test snapshot.
type testRegion struct {
	enc        string
	start, end string
	files      []testFile
}

// buildSnapshot writes a v2 snapshot of table default:t into an in-memory
// file system and returns it with the root path.
func buildSnapshot(t testing.TB, families []*manifest.ColumnFamilySchema, regions []testRegion) (*vfs.Mem, string) {
	t.Helper()
	mem := vfs.NewMem()
	root := "/hbase"
	desc := &manifest.SnapshotDescription{Name: proto.String("snap"), Table: proto.String("t"), CreationTime: proto.Int64(1_700_000_000_000), Version: proto.Int32(2)}
	b, _ := proto.Marshal(desc)
	mem.WriteFile(root+"/.hbase-snapshot/snap/.snapshotinfo", b)
	dm := &manifest.SnapshotDataManifest{TableSchema: &manifest.TableSchema{
		TableName:      &manifest.TableName{Namespace: []byte("default"), Qualifier: []byte("t")},
		ColumnFamilies: families,
	}}
	for ri, r := range regions {
		rm := &manifest.SnapshotRegionManifest{RegionInfo: &manifest.RegionInfo{
			RegionId: proto.Uint64(uint64(ri + 1)), TableName: dm.TableSchema.TableName,
			StartKey: []byte(r.start), EndKey: []byte(r.end), RegionEncodedName: proto.String(r.enc),
		}}
		fams := map[string]*manifest.SnapshotRegionManifest_FamilyFiles{}
		for i, f := range r.files {
			name := f.name
			if name == "" {
				name = fmt.Sprintf("%x", 0xf0+i)
			}
			body, _ := json.Marshal(fakeFile{Meta: f.meta, Cells: parseCells(t, f.cells)})
			data := append([]byte(fakeMagic), body...)
			dir := "data"
			if f.at == "archive" {
				dir = "archive/data"
			}
			region, file := r.enc, name
			if f.parent != "" {
				region = f.parent
			}
			if f.ref != nil {
				file = strings.SplitN(name, ".", 2)[0]
			}
			mem.WriteFile(fmt.Sprintf("%s/%s/default/t/%s/%s/%s", root, dir, region, f.family, file), data)
			ff := fams[f.family]
			if ff == nil {
				ff = &manifest.SnapshotRegionManifest_FamilyFiles{FamilyName: []byte(f.family)}
				fams[f.family] = ff
				rm.FamilyFiles = append(rm.FamilyFiles, ff)
			}
			sf := &manifest.SnapshotRegionManifest_StoreFile{Name: proto.String(name), FileSize: proto.Uint64(uint64(len(data)))}
			if f.ref != nil {
				rng := manifest.Reference_BOTTOM
				if f.ref.Top {
					rng = manifest.Reference_TOP
				}
				sf.Reference = &manifest.Reference{Splitkey: f.ref.SplitKey, Range: &rng}
			}
			ff.StoreFiles = append(ff.StoreFiles, sf)
		}
		dm.RegionManifests = append(dm.RegionManifests, rm)
	}
	b, err := proto.Marshal(dm)
	if err != nil {
		t.Fatal(err)
	}
	mem.WriteFile(root+"/.hbase-snapshot/snap/data.manifest", b)
	return mem, root
}

func family(name string, attrs ...string) *manifest.ColumnFamilySchema {
	cf := &manifest.ColumnFamilySchema{Name: []byte(name)}
	for i := 0; i+1 < len(attrs); i += 2 {
		cf.Attributes = append(cf.Attributes, &manifest.BytesBytesPair{First: []byte(attrs[i]), Second: []byte(attrs[i+1])})
	}
	return cf
}

// readAll opens the snapshot and returns every cell of every split.
func readAll(t testing.TB, fsys vfs.FS, root string, opts ScanOptions) ([]string, error) {
	t.Helper()
	s, err := Open(t.Context(), root, "snap", OpenOptions{FS: fsys})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	splits, err := s.Splits(SplitOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sp := range splits {
		sc, err := s.NewScanner(t.Context(), sp, opts)
		if err != nil {
			return nil, err
		}
		for sc.Next() {
			out = append(out, formatCell(sc.Cell()))
		}
		if err := sc.Close(); err != nil {
			return out, err
		}
	}
	return out, nil
}

func joinCells(cs []string) string { return strings.Join(cs, " ") }

var _ = bytes.Equal
