package testenv

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// TestFixtures checks the committed snapshots under testdata/snapshots
// without a cluster: each has its snapshot files and dumps; every dump
// line parses and re-serializes through cell.AppendDump to the same bytes
// (so Java's and Go's dump formats agree); cells come in strictly
// increasing cell.Compare order (TableSnapshotScanner's order, regions
// being sorted); and the normal dump is a subsequence of the raw one.
func TestFixtures(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "testdata", "snapshots")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		n++
		t.Run(name, func(t *testing.T) {
			for _, f := range []string{".snapshotinfo", "data.manifest"} {
				if _, err := os.Stat(filepath.Join(dir, name, ".hbase-snapshot", name, f)); err != nil {
					t.Error(err)
				}
			}
			normal := readDump(t, filepath.Join(dir, name+".cells"))
			raw := readDump(t, filepath.Join(dir, name+".raw.cells"))
			if len(normal) == 0 {
				t.Fatalf("%s.cells is empty", name)
			}
			j := 0
			for i := range normal {
				for j < len(raw) && cell.Compare(&raw[j], &normal[i]) != 0 {
					j++
				}
				if j == len(raw) {
					t.Fatalf("%s.cells line %d (%s) is not in %s.raw.cells in order", name, i+1, &normal[i], name)
				}
				j++
			}
		})
	}
	if n < 8 {
		t.Errorf("found %d fixture snapshots under %s, want at least 8", n, dir)
	}
}

// readDump parses a dump file, checking the round trip and the order.
func readDump(t *testing.T, path string) []cell.Cell {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cells []cell.Cell
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var buf []byte
	for line := 1; sc.Scan(); line++ {
		c, err := ParseDumpLine(sc.Text())
		if err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		buf = cell.AppendDump(buf[:0], &c)
		if !bytes.Equal(bytes.TrimSuffix(buf, []byte("\n")), sc.Bytes()) {
			t.Fatalf("%s:%d: Go re-dumps the line as %q", path, line, buf)
		}
		if len(cells) > 0 && cell.Compare(&cells[len(cells)-1], &c) >= 0 {
			t.Fatalf("%s:%d: cell %s does not sort after %s", path, line, &c, &cells[len(cells)-1])
		}
		cells = append(cells, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cells
}
