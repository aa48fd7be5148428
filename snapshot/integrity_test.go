package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/snapshot/manifest"
	"github.com/rekeyhq/rekey/vfs"
	"google.golang.org/protobuf/proto"
)

// The tests here hold snapshot reading to "no silent loss": damage to a
// manifest or a store file reads as an error, or as exactly the cells of
// the undamaged snapshot. Each damaged input is built in the test from a
// snapshot HBase wrote (committed under testdata/snapshots).

const fixtureRoot = "../testdata/snapshots/enc_none"

// loadFixture copies a committed snapshot's root dir into memory and lists
// its files in a stable order.
func loadFixture(t testing.TB, root string) (*vfs.Mem, []string) {
	t.Helper()
	mem := vfs.NewMem()
	var names []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel := "/hbase/" + filepath.ToSlash(strings.TrimPrefix(p, root+"/"))
		mem.WriteFile(rel, b)
		names = append(names, rel)
		return nil
	})
	if err != nil || len(names) == 0 {
		t.Fatalf("committed fixture %s: %v", root, err)
	}
	sort.Strings(names)
	return mem, names
}

// rawCells is what a snapshot stores: a raw scan (so no schema value such
// as VERSIONS or TTL shapes it) of every split, as dump lines, and how
// many store files had their cell count checked.
func rawCells(fsys vfs.FS, name string) ([]byte, int, error) {
	return rawCellsAt(fsys, "/hbase", name)
}

// rawCellsAt is rawCells for a snapshot under root.
func rawCellsAt(fsys vfs.FS, root, name string) ([]byte, int, error) {
	s, err := Open(context.Background(), root, name, OpenOptions{FS: fsys})
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	splits, err := s.Splits(SplitOptions{})
	if err != nil {
		return nil, 0, err
	}
	var out []byte
	checked := 0
	for _, sp := range splits {
		sc, err := s.NewScanner(context.Background(), sp, ScanOptions{Raw: true})
		if err != nil {
			return nil, 0, err
		}
		for sc.Next() {
			out = cell.AppendDump(out, sc.Cell())
		}
		checked += sc.Stats().FilesCountChecked
		if err := sc.Close(); err != nil {
			return nil, 0, err
		}
	}
	return out, checked, nil
}

// isClassified: the error is one of the package's classes, or the HFile
// reader's (a damaged store file).
func isClassified(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnsupported) ||
		errors.Is(err, hfile.ErrCorrupt) || errors.Is(err, hfile.ErrUnsupported)
}

// TestFixtureCountsChecked: reading a whole snapshot checks every store
// file's cell count against its trailer.
func TestFixtureCountsChecked(t *testing.T) {
	mem, names := loadFixture(t, fixtureRoot)
	_, checked, err := rawCells(mem, "enc_none")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, n := range names {
		if strings.Contains(n, "/data/") && !strings.Contains(n, "/.") {
			files++
		}
	}
	if checked != files {
		t.Fatalf("%d store files count-checked, want all %d", checked, files)
	}
}

// TestRegionsMustTile is the third class: one byte of the manifest
// moves a region boundary, leaving a gap whose cells were dropped.
func TestRegionsMustTile(t *testing.T) {
	mem, _ := loadFixture(t, fixtureRoot)
	mp := "/hbase/.hbase-snapshot/enc_none/data.manifest"
	good, _ := vfs.ReadFile(mem, mp)
	d := bytes.Clone(good)
	d[1288] = '0'
	mem.WriteFile(mp, d)
	_, _, err := rawCells(mem, "enc_none")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "region 01e7d08b7344c3fb4c74b9ddc35d630e") {
		t.Fatalf("err = %v, want the broken region refused by name", err)
	}

	// Rewritten region lists: each way of not tiling the key space.
	m, err := manifest.DecodeDataManifest(good)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(m.RegionManifests, func(i, j int) bool {
		return string(m.RegionManifests[i].RegionInfo.StartKey) < string(m.RegionManifests[j].RegionInfo.StartKey)
	})
	for _, tc := range []struct {
		name   string
		damage func(rms []*manifest.SnapshotRegionManifest) []*manifest.SnapshotRegionManifest
		want   string
	}{
		{"first region missing", func(r []*manifest.SnapshotRegionManifest) []*manifest.SnapshotRegionManifest { return r[1:] }, "does not start at the empty key"},
		{"last region missing", func(r []*manifest.SnapshotRegionManifest) []*manifest.SnapshotRegionManifest { return r[:len(r)-1] }, "does not end at the empty key"},
		{"middle region missing", func(r []*manifest.SnapshotRegionManifest) []*manifest.SnapshotRegionManifest {
			return append(append([]*manifest.SnapshotRegionManifest{}, r[0]), r[2:]...)
		}, "regions leave a gap"},
		{"no regions", func(r []*manifest.SnapshotRegionManifest) []*manifest.SnapshotRegionManifest { return nil }, "lists no regions"},
		{"overlap", func(r []*manifest.SnapshotRegionManifest) []*manifest.SnapshotRegionManifest {
			r[0].RegionInfo.EndKey = append(bytes.Clone(r[1].RegionInfo.StartKey), 'x')
			return r
		}, "regions overlap"},
		{"start after end", func(r []*manifest.SnapshotRegionManifest) []*manifest.SnapshotRegionManifest {
			r[1].RegionInfo.EndKey = r[1].RegionInfo.StartKey
			return r
		}, "starts at or after its end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m2 := proto.Clone(m).(*manifest.SnapshotDataManifest)
			m2.RegionManifests = tc.damage(m2.RegionManifests)
			b, err := proto.Marshal(m2)
			if err != nil {
				t.Fatal(err)
			}
			mem.WriteFile(mp, b)
			_, _, err = rawCells(mem, "enc_none")
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrCorrupt saying %q", err, tc.want)
			}
		})
	}
}

// TestStoreFilesAgainstManifest is the fourth class: files under a family
// the schema lacks, and files whose size on disk is not the manifest's.
func TestStoreFilesAgainstManifest(t *testing.T) {
	mem, names := loadFixture(t, fixtureRoot)
	mp := "/hbase/.hbase-snapshot/enc_none/data.manifest"
	good, _ := vfs.ReadFile(mem, mp)
	m, _ := manifest.DecodeDataManifest(good)

	t.Run("family not in schema", func(t *testing.T) {
		m2 := proto.Clone(m).(*manifest.SnapshotDataManifest)
		m2.TableSchema.ColumnFamilies = m2.TableSchema.ColumnFamilies[:1] // keep "a", drop "b"
		b, _ := proto.Marshal(m2)
		mem.WriteFile(mp, b)
		defer mem.WriteFile(mp, good)
		_, _, err := rawCells(mem, "enc_none")
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `family "b", which is not in the table schema`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("truncated store file", func(t *testing.T) {
		var victim string
		for _, n := range names {
			if strings.Contains(n, "/data/") && !strings.Contains(n, "/.") {
				victim = n
				break
			}
		}
		b, _ := vfs.ReadFile(mem, victim)
		mem.WriteFile(victim, b[:len(b)-100])
		defer mem.WriteFile(victim, b)
		_, _, err := rawCells(mem, "enc_none")
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v", err)
		}
		for _, want := range []string{victim, " is " + strconv.Itoa(len(b)-100) + " bytes on disk", "manifest records " + strconv.Itoa(len(b)) + " bytes"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	})
	t.Run("unknown manifest field", func(t *testing.T) {
		m2 := proto.Clone(m).(*manifest.SnapshotDataManifest)
		ff := m2.RegionManifests[0].FamilyFiles[0]
		// A store file entry whose field number (2) is damaged into 4:
		// protobuf keeps it as an unknown field and the file would vanish.
		sf, _ := proto.Marshal(ff.StoreFiles[0])
		ff.StoreFiles = ff.StoreFiles[1:]
		ff.ProtoReflect().SetUnknown(append([]byte{0x22, byte(len(sf))}, sf...))
		b, _ := proto.Marshal(m2)
		mem.WriteFile(mp, b)
		defer mem.WriteFile(mp, good)
		_, _, err := rawCells(mem, "enc_none")
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "unknown field 4") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestNonRegularStoreFile is the fifth class: a store file that is a FIFO
// would block the reader forever.
func TestNonRegularStoreFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixtureRoot)); err != nil {
		t.Fatal(err)
	}
	var victim string
	filepath.Walk(filepath.Join(dir, "data"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && victim == "" && !fi.IsDir() && !strings.HasPrefix(fi.Name(), ".") {
			victim = p
		}
		return nil
	})
	os.Remove(victim)
	if err := syscall.Mkfifo(victim, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := rawCellsAt(vfs.Local{}, dir, "enc_none")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("reading a snapshot with a FIFO for a store file blocked")
	}
}

// FuzzDamagedSnapshot damages a whole committed snapshot directory,
// manifest and store files alike: the fuzzer picks edits of (file, offset,
// xor) and whether to truncate a file. The property: an error of the
// package's classes, or exactly the undamaged snapshot's cells.
func FuzzDamagedSnapshot(f *testing.F) {
	mem, names := loadFixture(f, fixtureRoot)
	want, _, err := rawCells(mem, "enc_none")
	if err != nil {
		f.Fatal(err)
	}
	files := map[string][]byte{}
	for _, n := range names {
		files[n], _ = vfs.ReadFile(mem, n)
	}
	f.Add([]byte{0, 0, 0, 4, 0x08}, uint16(0))       // .snapshotinfo
	f.Add([]byte{1, 0, 5, 8, 0x01}, uint16(0))       // data.manifest, region keys
	f.Add([]byte{7, 0, 0x10, 0x00, 0x80}, uint16(0)) // a store file's data
	f.Add([]byte{9, 0, 0, 0, 0}, uint16(9<<8|100))   // a truncated store file
	f.Fuzz(func(t *testing.T, edits []byte, cut uint16) {
		d := vfs.NewMem()
		img := map[string][]byte{}
		for n, b := range files {
			img[n] = bytes.Clone(b)
		}
		// Each edit is 5 bytes: file index, big-endian 24-bit offset
		// (modulo the file's size), xor byte.
		for len(edits) >= 5 {
			n := names[int(edits[0])%len(names)]
			b := img[n]
			if len(b) > 0 {
				off := int(binary.BigEndian.Uint32(edits[:4])&0xffffff) % len(b)
				b[off] ^= edits[4]
			}
			edits = edits[5:]
		}
		if cut&0xff != 0 {
			n := names[int(cut>>8)%len(names)]
			if b := img[n]; len(b) > 0 {
				img[n] = b[:len(b)-int(cut&0xff)%len(b)]
			}
		}
		for n, b := range img {
			d.WriteFile(n, b)
		}
		got, _, err := rawCells(d, "enc_none")
		if err != nil {
			if !isClassified(err) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read without error but the cells differ from the undamaged snapshot's (%d vs %d dump bytes)", len(got), len(want))
		}
	})
}
