package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot/manifest"
)

// TestPrepare checks that a prepared split's store files are open before
// its scan starts and that the scan uses them (no file opened twice), that
// a worker preparing the next split while it reads the current one reads
// every cell, and that Close waits for preparations and closes what they
// opened.
func TestPrepare(t *testing.T) {
	const regions = 6
	mem, root, total := manyRegions(t, regions)
	fsys := &countingFS{FS: mem}
	s, err := Open(t.Context(), root, "snap", OpenOptions{FS: fsys, MaxOpenFiles: 8})
	if err != nil {
		t.Fatal(err)
	}
	splits, err := s.Splits(SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}

	s.Prepare(splits[0], ScanOptions{})
	deadline := time.Now().Add(10 * time.Second)
	for s.ReaderStats().Open < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("Prepare opened %+v after 10 s, want the split's 2 store files", s.ReaderStats())
		}
		time.Sleep(time.Millisecond)
	}
	if st := s.ReaderStats(); st.Opens != 2 {
		t.Fatalf("after Prepare: %+v, want the 2 store files of the split opened", st)
	}

	cells := 0
	for i, sp := range splits {
		if i+1 < len(splits) {
			s.Prepare(splits[i+1], ScanOptions{})
		}
		if err := s.ReadSplit(t.Context(), sp, ScanOptions{}, func(*cell.Cell) error { cells++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if cells != total {
		t.Errorf("read %d cells, want %d", cells, total)
	}
	if st := s.ReaderStats(); st.Opens != 2*regions {
		t.Errorf("%+v: want each of the %d store files opened once", st, 2*regions)
	}

	// Close with preparations under way: it waits for them, and every
	// file they opened is closed.
	for _, sp := range splits {
		s.Prepare(sp, ScanOptions{})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsys.open.Load(); n != 0 {
		t.Errorf("%d files open after Close", n)
	}
	s.Prepare(splits[0], ScanOptions{}) // after Close: nothing happens
	if n := fsys.open.Load(); n != 0 {
		t.Errorf("%d files open after a Prepare on a closed Snapshot", n)
	}
}

// TestOpenFilesErrorOrder checks that a region's files, opened side by
// side, fail with the first missing file in manifest order, as one-by-one
// opening did, and keep no reader in use.
func TestOpenFilesErrorOrder(t *testing.T) {
	var files []testFile
	for i := 0; i < 5; i++ {
		files = append(files, testFile{family: "f", cells: fmt.Sprintf("r%d/f:q/1/Put=v", i)})
	}
	mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f")}, []testRegion{{enc: "aaaa", files: files}})
	fsys := &countingFS{FS: mem}
	s, err := Open(t.Context(), root, "snap", OpenOptions{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	names := s.Regions()[0].Families[0].Files
	for _, i := range []int{3, 1, 4} {
		if err := mem.Remove(root + "/data/default/t/aaaa/f/" + names[i].Name); err != nil {
			t.Fatal(err)
		}
	}
	splits, err := s.Splits(SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_, err = s.NewScanner(t.Context(), splits[0], ScanOptions{})
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "store file "+names[1].Name+" ") {
			t.Fatalf("NewScanner = %v, want ErrNotFound for store file %s, the first missing one", err, names[1].Name)
		}
		s.readers.mu.Lock()
		open, idle := len(s.readers.open), s.readers.idle.Len()
		s.readers.mu.Unlock()
		if open != idle {
			t.Fatalf("%d readers open but only %d idle after the failed scan: the scan kept some", open, idle)
		}
	}
}
