package snapshot

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot/manifest"
	"github.com/rekeyhq/rekey/vfs"
)

// countingFS counts the files open on it now and at most.
type countingFS struct {
	vfs.FS
	open, peak atomic.Int64
}

func (c *countingFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	n := c.open.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return &countedFile{File: f, fs: c}, nil
}

type countedFile struct {
	vfs.File
	fs   *countingFS
	once sync.Once
}

func (f *countedFile) Close() error {
	f.once.Do(func() { f.fs.open.Add(-1) })
	return f.File.Close()
}

// manyRegions builds a snapshot of n regions with two store files each,
// every file holding enough cells that a reader kept open is visible in
// the heap.
func manyRegions(t *testing.T, n int) (*vfs.Mem, string, int) {
	t.Helper()
	val := strings.Repeat("v", 200)
	var regions []testRegion
	total := 0
	for i := 0; i < n; i++ {
		start, end := fmt.Sprintf("r%04d", i), fmt.Sprintf("r%04d", i+1)
		if i == 0 {
			start = ""
		}
		if i == n-1 {
			end = ""
		}
		var a, b []string
		for k := 0; k < 40; k++ {
			row := fmt.Sprintf("r%04d-%02d", i, k)
			a = append(a, row+"/f:q/2/Put="+val)
			b = append(b, row+"/f:p/1/Put="+val)
			total += 2
		}
		regions = append(regions, testRegion{enc: fmt.Sprintf("%032x", i), start: start, end: end, files: []testFile{
			{family: "f", cells: strings.Join(a, " ")},
			{family: "f", cells: strings.Join(b, " ")},
		}})
	}
	mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f")}, regions)
	return mem, root, total
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestReadersBounded reads every split of a 300-region snapshot one after
// the other and checks that the store files open at once never exceed
// MaxOpenFiles, that the heap does not grow with the regions read, and
// that closing the Snapshot closes every file.
func TestReadersBounded(t *testing.T) {
	const regions, maxOpen = 300, 4
	mem, root, total := manyRegions(t, regions)
	fsys := &countingFS{FS: mem}
	s, err := Open(t.Context(), root, "snap", OpenOptions{FS: fsys, MaxOpenFiles: maxOpen})
	if err != nil {
		t.Fatal(err)
	}
	splits, err := s.Splits(SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != regions {
		t.Fatalf("%d splits, want %d", len(splits), regions)
	}
	cells := 0
	var early uint64
	for i, sp := range splits {
		if i == regions/5 {
			early = heapInUse()
		}
		if err := s.ReadSplit(t.Context(), sp, ScanOptions{}, func(*cell.Cell) error { cells++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n := fsys.open.Load(); n > maxOpen {
			t.Fatalf("after split %d: %d files open, want at most %d", i, n, maxOpen)
		}
	}
	late := heapInUse()
	if cells != total {
		t.Fatalf("read %d cells, want %d", cells, total)
	}
	if p := fsys.peak.Load(); p > maxOpen {
		t.Errorf("%d files were open at once, want at most %d", p, maxOpen)
	}
	st := s.ReaderStats()
	if st.Open > maxOpen || st.Peak > maxOpen || st.Opens < 2*regions {
		t.Errorf("reader stats %+v: want at most %d open and %d opens", st, maxOpen, 2*regions)
	}
	// Each region's two readers hold their parsed cells (about 20 KB);
	// kept open, the 240 regions read after the first sample would add
	// about 5 MB.
	if late > early+1<<20 {
		t.Errorf("heap grew from %d to %d bytes while reading %d more regions", early, late, regions-regions/5)
	}
	t.Logf("heap in use %d -> %d bytes; readers %+v", early, late, st)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fsys.open.Load(); n != 0 {
		t.Errorf("%d files still open after Close", n)
	}
}

// TestReadersShared reads the splits of one snapshot from four goroutines
// at once (run under -race): every cell is read exactly once, files in use
// are shared rather than opened twice, and the open files stay within the
// limit plus what the running scanners hold.
func TestReadersShared(t *testing.T) {
	const regions, maxOpen, workers = 60, 3, 4
	mem, root, total := manyRegions(t, regions)
	fsys := &countingFS{FS: mem}
	s, err := Open(t.Context(), root, "snap", OpenOptions{FS: fsys, MaxOpenFiles: maxOpen})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Cut regions in pieces, so several scanners share a region's files.
	splits, err := s.Splits(SplitOptions{TargetBytes: s.Regions()[1].Bytes() / 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) < 2*regions {
		t.Fatalf("%d splits of %d regions, want the regions cut", len(splits), regions)
	}
	var cells atomic.Int64
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(workers)
	for _, sp := range splits {
		g.Go(func() error {
			return s.ReadSplit(ctx, sp, ScanOptions{}, func(*cell.Cell) error { cells.Add(1); return nil })
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if int(cells.Load()) != total {
		t.Errorf("read %d cells, want %d", cells.Load(), total)
	}
	if p := fsys.peak.Load(); p > maxOpen+2*workers {
		t.Errorf("%d files open at once, want at most %d", p, maxOpen+2*workers)
	}
	if n := fsys.open.Load(); n > maxOpen {
		t.Errorf("%d files open when no scan runs, want at most %d", n, maxOpen)
	}
}
