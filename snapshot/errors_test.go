package snapshot

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/snapshot/manifest"
	"github.com/rekeyhq/rekey/vfs"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func oneFileSnapshot(t *testing.T) (*vfs.Mem, string) {
	return buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f")}, []testRegion{{enc: "aaaa", files: []testFile{
		{family: "f", name: "abcd", cells: "r/f:q/1/Put=v s/f:q/1/Put=w"},
	}}})
}

func TestMissingStoreFileNamesWhereItLooked(t *testing.T) {
	mem, root := oneFileSnapshot(t)
	mem.Remove(root + "/data/default/t/aaaa/f/abcd")
	_, err := readAll(t, mem, root, ScanOptions{})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	for _, want := range []string{"region aaaa", "family f", "abcd", "/hbase/data/default/t/aaaa/f/abcd", "/hbase/archive/data/default/t/aaaa/f/abcd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestStoreFileFoundInArchive(t *testing.T) {
	mem, root := oneFileSnapshot(t)
	b, _ := vfs.ReadFile(mem, root+"/data/default/t/aaaa/f/abcd")
	mem.Remove(root + "/data/default/t/aaaa/f/abcd")
	mem.WriteFile(root+"/archive/data/default/t/aaaa/f/abcd", b)
	got, err := readAll(t, mem, root, ScanOptions{})
	if err != nil || joinCells(got) != "r/f:q/1/Put=v s/f:q/1/Put=w" {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestHFileLinkResolution(t *testing.T) {
	// A snapshot of a cloned table names its files as links into the
	// source table: ns=table=region-hfile.
	mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f")}, []testRegion{{enc: "aaaa", files: []testFile{
		{family: "f", name: "src=bbbb-abcd", cells: "r/f:q/1/Put=v"},
	}}})
	b, _ := vfs.ReadFile(mem, root+"/data/default/t/aaaa/f/src=bbbb-abcd")
	mem.Remove(root + "/data/default/t/aaaa/f/src=bbbb-abcd")
	mem.WriteFile(root+"/archive/data/default/src/bbbb/f/abcd", b)
	got, err := readAll(t, mem, root, ScanOptions{})
	if err != nil || joinCells(got) != "r/f:q/1/Put=v" {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestReadFaultsAreReported(t *testing.T) {
	mem, root := oneFileSnapshot(t)
	faulty := vfs.NewFaulty(mem, vfs.Fault{PathContains: "/f/abcd", Op: "read", Offset: 20})
	_, err := readAll(t, faulty, root, ScanOptions{})
	if !errors.Is(err, vfs.ErrInjected) || !strings.Contains(err.Error(), "region aaaa") {
		t.Fatalf("err = %v, want the injected fault, naming the region", err)
	}
}

func TestShortReadsAreCompleted(t *testing.T) {
	// A ReaderAt that returns short reads without an error is made whole
	// by vfs.Full: the scan succeeds with every cell.
	mem, root := oneFileSnapshot(t)
	faulty := vfs.NewFaulty(mem, vfs.Fault{PathContains: "/f/abcd", Op: "read", Offset: 20, Short: true, Times: 1})
	got, err := readAll(t, faulty, root, ScanOptions{})
	if err != nil || joinCells(got) != "r/f:q/1/Put=v s/f:q/1/Put=w" {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestCorruptManifest(t *testing.T) {
	mem, root := oneFileSnapshot(t)
	b, _ := vfs.ReadFile(mem, root+"/.hbase-snapshot/snap/data.manifest")
	mem.WriteFile(root+"/.hbase-snapshot/snap/data.manifest", b[:len(b)/2])
	_, err := Open(t.Context(), root, "snap", OpenOptions{FS: mem})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "data.manifest") {
		t.Fatalf("err = %v, want ErrCorrupt naming data.manifest", err)
	}
}

func TestManifestReadErrorIsNotNotFound(t *testing.T) {
	mem, root := oneFileSnapshot(t)
	faulty := vfs.NewFaulty(mem, vfs.Fault{PathContains: ".snapshotinfo", Op: "open", Err: io.ErrUnexpectedEOF})
	_, err := Open(t.Context(), root, "snap", OpenOptions{FS: faulty})
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), ".snapshotinfo") {
		t.Fatalf("err = %v, want a read error naming .snapshotinfo", err)
	}
}

func TestUnconsolidatedAndV1Layouts(t *testing.T) {
	// The same snapshot written as region-manifest.* files (v2 not yet
	// consolidated) and as v1 region directories reads the same cells.
	mem, root := oneFileSnapshot(t)
	want, err := readAll(t, mem, root, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := vfs.ReadFile(mem, root+"/.hbase-snapshot/snap/data.manifest")
	var dm manifest.SnapshotDataManifest
	if err := proto.Unmarshal(b, &dm); err != nil {
		t.Fatal(err)
	}
	mem.Remove(root + "/.hbase-snapshot/snap/data.manifest")
	schema, _ := proto.Marshal(dm.TableSchema)
	mem.WriteFile(root+"/.hbase-snapshot/snap/.tabledesc/.tableinfo.0000000001", append([]byte("PBUF"), schema...))
	rm, _ := proto.Marshal(dm.RegionManifests[0])
	mem.WriteFile(root+"/.hbase-snapshot/snap/region-manifest.aaaa", rm)
	got, err := readAll(t, mem, root, ScanOptions{})
	if err != nil || joinCells(got) != joinCells(want) {
		t.Fatalf("region-manifest layout: got %v, %v; want %v", got, err, want)
	}

	// v1: version 0, a directory per region.
	mem.Remove(root + "/.hbase-snapshot/snap/region-manifest.aaaa")
	desc := &manifest.SnapshotDescription{Name: proto.String("snap"), Table: proto.String("t"), Version: proto.Int32(0)}
	db, _ := proto.Marshal(desc)
	mem.WriteFile(root+"/.hbase-snapshot/snap/.snapshotinfo", db)
	ri, _ := proto.Marshal(dm.RegionManifests[0].RegionInfo)
	mem.WriteFile(root+"/.hbase-snapshot/snap/aaaa/.regioninfo", append([]byte("PBUF"), append(protowire.AppendVarint(nil, uint64(len(ri))), ri...)...))
	mem.WriteFile(root+"/.hbase-snapshot/snap/aaaa/f/abcd", nil)
	got, err = readAll(t, mem, root, ScanOptions{})
	if err != nil || joinCells(got) != joinCells(want) {
		t.Fatalf("v1 layout: got %v, %v; want %v", got, err, want)
	}
}

func TestEncodedRegionName(t *testing.T) {
	// Region directory names of the bigtable corpus snapshot (whose
	// manifest does not record encoded names), from (table, start key,
	// region id).
	cases := []struct {
		start string
		want  string
	}{
		{"", "1fbddd7d5db627713df9c912955fc697"},
		{"50", "90bb1f99aa849c964a755edd0330c24a"},
	}
	for _, tc := range cases {
		ri := &manifest.RegionInfo{RegionId: proto.Uint64(1652120363846), StartKey: []byte(tc.start),
			TableName: &manifest.TableName{Namespace: []byte("default"), Qualifier: []byte("test-table")}}
		if got := encodedRegionName(ri); got != tc.want {
			t.Errorf("start %q: %s, want %s", tc.start, got, tc.want)
		}
	}
}

func TestNamePatterns(t *testing.T) {
	cases := []struct {
		name      string
		link, ref bool
	}{
		{"0123abcd", false, false},
		{"0123abcd_SeqId_12_", false, false},
		{"t=0123=abcd", false, false},
		{"t=aaaa-0123abcd", true, false},
		{"ns=t.x=aaaa-0123abcd", true, false},
		{"0123abcd.aaaa", false, true},
		{"t=aaaa-0123abcd.bbbb", false, true},
	}
	for _, tc := range cases {
		_, isLink := parseLink(tc.name)
		if isLink != tc.link || isReferenceName(tc.name) != tc.ref {
			t.Errorf("%s: link=%v ref=%v, want %v %v", tc.name, isLink, isReferenceName(tc.name), tc.link, tc.ref)
		}
	}
	if l, _ := parseLink("ns=t.x=aaaa-0123abcd"); l != (link{"ns", "t.x", "aaaa", "0123abcd"}) {
		t.Errorf("parseLink = %+v", l)
	}
	if n, ok := bulkLoadSeqID("0123abcd_SeqId_12_"); !ok || n != 12 {
		t.Errorf("bulkLoadSeqID = %d %v", n, ok)
	}
}

func TestMissingRootDirIsNamed(t *testing.T) {
	root := filepath.Join(t.TempDir(), "no-such-hbase-root")
	_, err := Open(t.Context(), root, "events", OpenOptions{})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "root dir "+root+" does not exist") {
		t.Fatalf("error does not say the root dir is missing: %v", err)
	}
}
