package snapshot_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"
)

// dumpSnapshot renders every cell of a snapshot in the canonical dump
// format, split by split, as `rekey inspect snapshot --cells` prints it.
func dumpSnapshot(t testing.TB, root, name string, opts snapshot.ScanOptions) []byte {
	t.Helper()
	return dumpSplits(t, root, name, opts, snapshot.SplitOptions{})
}

// dumpSplits is dumpSnapshot with the snapshot cut by splitOpts.
func dumpSplits(t testing.TB, root, name string, opts snapshot.ScanOptions, splitOpts snapshot.SplitOptions) []byte {
	t.Helper()
	return dumpWith(t, root, name, snapshot.OpenOptions{}, opts, splitOpts)
}

// dumpWith is dumpSplits with the snapshot opened with openOpts.
func dumpWith(t testing.TB, root, name string, openOpts snapshot.OpenOptions, opts snapshot.ScanOptions, splitOpts snapshot.SplitOptions) []byte {
	t.Helper()
	s, err := snapshot.Open(t.Context(), root, name, openOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	splits, err := s.Splits(splitOpts)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, sp := range splits {
		sc, err := s.NewScanner(t.Context(), sp, opts)
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			out = cell.AppendDump(out, sc.Cell())
		}
		if err := sc.Close(); err != nil {
			t.Fatalf("%s split %s: %v", name, sp.ID, err)
		}
	}
	return out
}

// diffDumps reports the first differing line of two dumps, with counts.
func diffDumps(got, want []byte) string { return testenv.DiffDumps(got, want) }

// TestFixtures reads every snapshot committed under testdata/snapshots
// (written by the real mini cluster, with the Java oracle's dumps beside
// them) and checks our cells equal the oracle's, normal and raw.
func TestFixtures(t *testing.T) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "testdata", "snapshots")
	dumps, _ := filepath.Glob(filepath.Join(dir, "*.cells"))
	var names []string
	for _, d := range dumps {
		if strings.HasSuffix(d, ".raw.cells") {
			continue
		}
		names = append(names, strings.TrimSuffix(filepath.Base(d), ".cells"))
	}
	if len(names) == 0 {
		t.Fatalf("no snapshot fixtures under %s (they are committed; testenv/bin/make-fixtures remakes them)", dir)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(dir, name)
			for _, mode := range dumpModes(name) {
				want, err := os.ReadFile(filepath.Join(dir, mode.file))
				if err != nil {
					if os.IsNotExist(err) {
						continue
					}
					t.Fatal(err)
				}
				if d := diffDumps(dumpSnapshot(t, root, name, mode.opts), want); d != "" {
					t.Errorf("%s: %s", mode.file, d)
				}
				// Cut into small pieces at data-index keys, the splits
				// together read the same cells in the same order.
				if d := diffDumps(dumpSplits(t, root, name, mode.opts, snapshot.SplitOptions{TargetBytes: 16 << 10}), want); d != "" {
					t.Errorf("%s, 16 KiB splits: %s", mode.file, d)
				}
				// Read through read-ahead streams (local files read
				// positionally by default), with chunks smaller than a
				// block, and with the splits too.
				ra := snapshot.OpenOptions{ReadAhead: vfs.ReadAheadOptions{AllFiles: true, Chunk: 4 << 10}}
				if d := diffDumps(dumpWith(t, root, name, ra, mode.opts, snapshot.SplitOptions{}), want); d != "" {
					t.Errorf("%s, read-ahead in 4 KiB chunks: %s", mode.file, d)
				}
				if d := diffDumps(dumpWith(t, root, name, ra, mode.opts, snapshot.SplitOptions{TargetBytes: 16 << 10}), want); d != "" {
					t.Errorf("%s, read-ahead in 4 KiB chunks, 16 KiB splits: %s", mode.file, d)
				}
			}
		})
	}
}

// TestFixtureSplitsCut checks that TargetBytes really cuts the committed
// fixtures' larger regions (so TestFixtures' split comparison is not
// vacuous) and that the pieces tile each region.
func TestFixtureSplitsCut(t *testing.T) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "testdata", "snapshots")
	dumps, _ := filepath.Glob(filepath.Join(dir, "*.raw.cells"))
	if len(dumps) == 0 {
		t.Fatalf("no fixtures under %s", dir)
	}
	regions, pieces := 0, 0
	for _, d := range dumps {
		name := strings.TrimSuffix(filepath.Base(d), ".raw.cells")
		s, err := snapshot.Open(t.Context(), filepath.Join(dir, name), name, snapshot.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		splits, err := s.Splits(snapshot.SplitOptions{TargetBytes: 16 << 10})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		regions += len(s.Regions())
		pieces += len(splits)
		for i := 1; i < len(splits); i++ {
			a, b := splits[i-1], splits[i]
			if a.Region.EncodedName == b.Region.EncodedName && !bytes.Equal(a.EndRow, b.StartRow) {
				t.Errorf("%s: split %s ends at %q but %s starts at %q", name, a.ID, a.EndRow, b.ID, b.StartRow)
			}
		}
	}
	if pieces <= regions {
		t.Errorf("%d splits for %d regions: nothing was cut", pieces, regions)
	}
	t.Logf("%d regions cut into %d splits", regions, pieces)
}

// TestWideRowStreams reads the 100k-cell row of the wide_row fixture and
// checks the scan allocates far less than the row's size: cells stream
// through block buffers and are never gathered into a row.
func TestWideRowStreams(t *testing.T) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(repo, "testdata", "snapshots", "wide_row")
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("wide_row fixture missing: %v", err)
	}
	// Read-ahead buffers (on for this local copy too) are a fixed cost per
	// open store file, bounded by the chunk size whatever the row's size; a
	// small chunk keeps them well under the threshold below, which is about
	// the row.
	s, splits := openSplits(t, root, "wide_row", snapshot.OpenOptions{ReadAhead: vfs.ReadAheadOptions{AllFiles: true, Chunk: 64 << 10}})
	defer s.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var cells, bytes int64
	for _, sp := range splits {
		sc, err := s.NewScanner(t.Context(), sp, snapshot.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			c := sc.Cell()
			cells++
			bytes += int64(len(c.Row) + len(c.Qualifier) + len(c.Value))
		}
		if err := sc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if cells < 100000 {
		t.Fatalf("%d cells, want the 100k-cell row", cells)
	}
	if alloc > uint64(bytes)/4 {
		t.Errorf("reading %d cells (%d bytes of keys and values) allocated %d bytes: the row is being buffered", cells, bytes, alloc)
	}
}

// TestRowGen: over every committed fixture (HBase's files, every
// encoding, normal and raw, whole and in 16 KiB splits), two cells given
// one after the other with the same RowGen have the same row and family,
// and cells of one row do share it.
func TestRowGen(t *testing.T) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "testdata", "snapshots")
	names := hbase1Names(t, dir)
	if len(names) == 0 {
		t.Fatalf("no snapshot fixtures under %s", dir)
	}
	for _, name := range names {
		root := filepath.Join(dir, name)
		for _, raw := range []bool{false, true} {
			for _, target := range []int64{0, 16 << 10} {
				s, err := snapshot.Open(t.Context(), root, name, snapshot.OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				splits, err := s.Splits(snapshot.SplitOptions{TargetBytes: target})
				if err != nil {
					t.Fatal(err)
				}
				same := 0
				for _, sp := range splits {
					sc, err := s.NewScanner(t.Context(), sp, snapshot.ScanOptions{Raw: raw})
					if err != nil {
						t.Fatal(err)
					}
					var last cell.Cell
					var lastGen uint64
					for n := 0; sc.Next(); n++ {
						c, gen := sc.Cell(), sc.RowGen()
						sameKey := n > 0 && bytes.Equal(c.Row, last.Row) && bytes.Equal(c.Family, last.Family)
						if n > 0 && gen == lastGen && !sameKey {
							t.Fatalf("%s raw=%v split %s: cell %s has RowGen %d, the cell before (%s) %d", name, raw, sp.ID, c, gen, &last, lastGen)
						}
						if n > 0 && gen == lastGen {
							same++
						}
						last, lastGen = c.Clone(), gen
					}
					if err := sc.Close(); err != nil {
						t.Fatal(err)
					}
				}
				s.Close()
				if same == 0 {
					t.Fatalf("%s raw=%v: no two cells in a row share a RowGen", name, raw)
				}
			}
		}
	}
}
