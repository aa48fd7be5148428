package snapshot_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
)

// openSplits opens a snapshot and lists its splits (default split
// options); the caller closes the Snapshot.
func openSplits(t testing.TB, root, name string, o snapshot.OpenOptions) (*snapshot.Snapshot, []snapshot.Split) {
	t.Helper()
	s, err := snapshot.Open(t.Context(), root, name, o)
	if err != nil {
		t.Fatal(err)
	}
	splits, err := s.Splits(snapshot.SplitOptions{})
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s, splits
}

// readCells reads every cell of a snapshot, split by split.
func readCells(t testing.TB, root, name string, opts snapshot.ScanOptions) []cell.Cell {
	t.Helper()
	s, splits := openSplits(t, root, name, snapshot.OpenOptions{})
	defer s.Close()
	var out []cell.Cell
	for _, sp := range splits {
		sc, err := s.NewScanner(t.Context(), sp, opts)
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			out = append(out, sc.Cell().Clone())
		}
		if err := sc.Close(); err != nil {
			t.Fatalf("split %s: %v", sp.ID, err)
		}
	}
	return out
}

// checkValueRows checks the bigtable test tables: one cf:a cell per row,
// value "value<N>" where the row is N written with the given format.
func checkValueRows(t *testing.T, cells []cell.Cell, rows []string, ts int64) {
	t.Helper()
	if len(cells) != len(rows) {
		t.Fatalf("%d cells, want %d", len(cells), len(rows))
	}
	for i, c := range cells {
		n := strings.TrimLeft(rows[i], "0")
		if n == "" {
			n = "0"
		}
		if string(c.Row) != rows[i] || string(c.Family) != "cf" || string(c.Qualifier) != "a" || c.Type != cell.Put || string(c.Value) != "value"+n {
			t.Fatalf("cell %d: %s value %q, want row %q cf:a value%s", i, c.String(), c.Value, rows[i], n)
		}
		if ts != 0 && c.Timestamp != ts {
			t.Fatalf("cell %d: timestamp %d, want %d", i, c.Timestamp, ts)
		}
	}
}

func TestCorpusBigtableEndToEnd(t *testing.T) {
	corpus := testenv.Corpus(t)
	root := filepath.Join(testenv.ExtractArchive(t, filepath.Join(corpus, "bigtable", "EndToEndIT-snapshot.zip")), "data")
	var rows []string
	for i := 0; i < 100; i++ {
		rows = append(rows, fmt.Sprintf("%02d", i))
	}
	names, err := snapshot.List(t.Context(), root, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, ","); got != "test-snappy-snapshot,test-snapshot" {
		t.Errorf("List = %s", got)
	}
	for _, name := range []string{"test-snapshot", "test-snappy-snapshot"} {
		t.Run(name, func(t *testing.T) {
			s, err := snapshot.Open(t.Context(), root, name, snapshot.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The archive holds 20 region directories; the manifest names 10.
			if n := len(s.Regions()); n != 10 {
				t.Errorf("%d regions, want the manifest's 10", n)
			}
			if f := s.Table().Family([]byte("cf")); f == nil || f.MaxVersions != 4 {
				t.Errorf("family cf: %+v, want VERSIONS=4", f)
			}
			s.Close()
			checkValueRows(t, readCells(t, root, name, snapshot.ScanOptions{}), rows, 1617828990)
			checkValueRows(t, readCells(t, root, name, snapshot.ScanOptions{Raw: true}), rows, 1617828990)
		})
	}
}

func TestCorpusBigtableTrees(t *testing.T) {
	corpus := testenv.Corpus(t)
	var rows100 []string
	for i := 1; i <= 100; i++ {
		rows100 = append(rows100, fmt.Sprint(i))
	}
	sortStrings(rows100) // row keys sort as bytes: 1, 10, 100, 11...
	var rows00 []string
	for i := 0; i < 100; i++ {
		rows00 = append(rows00, fmt.Sprintf("%02d", i))
	}
	cases := []struct {
		dir, name string
		rows      []string
		ts        int64
		firstTS   int64
	}{
		{"src-test-data-2021", "test-snapshot", rows100, 0, 1607574567345},
		{"src-test-integration-test-data-2022", "test-snapshot", rows100, 0, 1609291279317},
		{"src-test-integration-test-data-2022", "demo-snapshot", rows00, 1617828990, 0},
		{"src-test-integration-test-data-2022", "snappy-compressed-snapshot", rows00, 1617828990, 0},
	}
	for _, tc := range cases {
		t.Run(tc.dir+"/"+tc.name, func(t *testing.T) {
			cells := readCells(t, filepath.Join(corpus, "bigtable", tc.dir), tc.name, snapshot.ScanOptions{})
			checkValueRows(t, cells, tc.rows, tc.ts)
			if tc.firstTS != 0 && cells[0].Timestamp != tc.firstTS {
				t.Errorf("row 1 timestamp %d, want %d", cells[0].Timestamp, tc.firstTS)
			}
		})
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestCorpusPhoenixCatalog(t *testing.T) {
	corpus := testenv.Corpus(t)
	dir := testenv.ExtractArchive(t, filepath.Join(corpus, "phoenix", "snapshots47.tar"))
	root := filepath.Join(dir, "SYSTEM.CATALOG_SNAPSHOT")
	const name = "SYSTEM.CATALOG_SNAPSHOT"
	s, err := snapshot.Open(t.Context(), root, name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := s.Table().Family([]byte("0"))
	if f == nil || f.MaxVersions != 1000 || f.KeepDeletedCells != snapshot.KeepDeletedTrue {
		t.Errorf("family 0 = %+v, want VERSIONS=1000 KEEP_DELETED_CELLS=TRUE", f)
	}
	s.Close()
	// Raw: every entry of the three store files (1457 + 48 + 10).
	raw := readCells(t, root, name, snapshot.ScanOptions{Raw: true})
	if len(raw) != 1515 {
		t.Errorf("raw read: %d cells, want 1515", len(raw))
	}
	var markers int
	for i := range raw {
		if raw[i].Type.IsDelete() {
			markers++
		}
		if i > 0 && cell.Compare(&raw[i-1], &raw[i]) > 0 {
			t.Fatalf("raw cells out of order at %d: %s after %s", i, raw[i].String(), raw[i-1].String())
		}
	}
	// A normal read drops the markers and what they mask: fewer cells, no
	// markers.
	normal := readCells(t, root, name, snapshot.ScanOptions{})
	for i := range normal {
		if normal[i].Type.IsDelete() {
			t.Fatalf("normal read returned a marker: %s", normal[i].String())
		}
	}
	if len(normal) == 0 || len(normal) >= len(raw)-markers {
		t.Errorf("normal read: %d cells; raw has %d cells of which %d markers", len(normal), len(raw), markers)
	}
	// The other Phoenix system tables' snapshots have no store files.
	for _, n := range []string{"SYSTEM.STATS_SNAPSHOT", "SYSTEM.FUNCTION_SNAPSHOT", "SYSTEM.SEQUENCE_SNAPSHOT"} {
		if c := readCells(t, filepath.Join(dir, n), n, snapshot.ScanOptions{}); len(c) != 0 {
			t.Errorf("%s: %d cells, want 0", n, len(c))
		}
	}
}

func TestCorpusPhoenixIndexToolTTL(t *testing.T) {
	corpus := testenv.Corpus(t)
	dir := testenv.ExtractArchive(t, filepath.Join(corpus, "phoenix", "indexToolsnapshot.tar"))
	root := filepath.Join(dir, "phoenixtoolresultsnapshot")
	const name = "phoenixtoolresultsnapshot"
	s, err := snapshot.Open(t.Context(), root, name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := s.Info().CreationTime
	if f := s.Table().Family([]byte("0")); f == nil || f.TTL != 604800 {
		t.Fatalf("family 0 = %+v, want TTL=604800", f)
	}
	s.Close()
	// As of the snapshot's creation every one of the 26 cells is live; a
	// week later (TTL 7 days) every one has expired; raw ignores TTL.
	if n := len(readCells(t, root, name, snapshot.ScanOptions{Now: created})); n != 26 {
		t.Errorf("at creation: %d cells, want 26", n)
	}
	if n := len(readCells(t, root, name, snapshot.ScanOptions{Now: created.Add(8 * 24 * time.Hour)})); n != 0 {
		t.Errorf("8 days later: %d cells, want 0", n)
	}
	if n := len(readCells(t, root, name, snapshot.ScanOptions{Raw: true})); n != 26 {
		t.Errorf("raw: %d cells, want 26", n)
	}
}

func TestCorpusOldSnapshotLayoutRejected(t *testing.T) {
	corpus := testenv.Corpus(t)
	root := filepath.Join(testenv.ExtractArchive(t, filepath.Join(corpus, "hbase", "TestNamespaceUpgrade.tgz")), "hbase")
	_, err := snapshot.Open(t.Context(), root, "data_snapshot1", snapshot.OpenOptions{})
	if !errors.Is(err, snapshot.ErrUnsupported) || !strings.Contains(err.Error(), "0.94") {
		t.Fatalf("Open of a 0.94 .snapshot/ layout: %v, want ErrUnsupported naming 0.94", err)
	}
}

func TestCorpusSnapshotNotFoundListsOthers(t *testing.T) {
	corpus := testenv.Corpus(t)
	_, err := snapshot.Open(t.Context(), filepath.Join(corpus, "bigtable", "src-test-integration-test-data-2022"), "nope", snapshot.OpenOptions{})
	if !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	for _, n := range []string{"demo-snapshot", "snappy-compressed-snapshot", "test-snapshot"} {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not list %s", err, n)
		}
	}
}
