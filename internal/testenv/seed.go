package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// SourceTable describes a table the oracle creates and fills for a test.
type SourceTable struct {
	Table, Snapshot string
	Families        []string
	// SplitKeys pre-split the table (text keys).
	SplitKeys []string
	// Versions is each family's VERSIONS.
	Versions int
	// Encoding and Compression of every family (default FAST_DIFF, SNAPPY).
	Encoding, Compression string
}

// SeedCells writes cells into a new table with HBase's own client (the
// oracle's seed "cells" step), flushes it, snapshots it, and returns the
// snapshot's cells as TableSnapshotScanner reads them: the source truth a
// test computes its expected results from.
func SeedCells(t testing.TB, st *State, src SourceTable, cells []cell.Cell) []cell.Cell {
	t.Helper()
	dir := t.TempDir()
	dump := filepath.Join(dir, "source.cells")
	if err := os.WriteFile(dump, DumpCells(cells), 0o644); err != nil {
		t.Fatal(err)
	}
	if src.Encoding == "" {
		src.Encoding = "FAST_DIFF"
	}
	if src.Compression == "" {
		src.Compression = "SNAPPY"
	}
	var fams []map[string]any
	for _, f := range src.Families {
		fams = append(fams, map[string]any{"name": f, "versions": max(src.Versions, 1), "encoding": src.Encoding, "compression": src.Compression})
	}
	spec := map[string]any{
		"table": src.Table, "families": fams, "split_keys": src.SplitKeys,
		"steps": []map[string]any{{"op": "cells", "file": dump}, {"op": "flush"}, {"op": "snapshot", "name": src.Snapshot}},
	}
	b, _ := json.Marshal(spec)
	specPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	Oracle(t, "seed", specPath)
	out, err := ParseDump(Oracle(t, "dump-snapshot", st.RootDir, src.Snapshot))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("the seeded snapshot reads empty")
	}
	return out
}

// DropAfter removes the table and snapshot when the test ends.
func DropAfter(t testing.TB, table, snapshot string) {
	t.Cleanup(func() {
		var snapshots []string
		if snapshot != "" {
			snapshots = []string{snapshot}
		}
		Drop(snapshots, []string{table})
	})
}

// Drop deletes the snapshots, then the tables, of a test that is done with
// them; names that do not exist are fine, and so is an error (cleanup
// never fails a test). It asks the cluster process, over its control
// channel, whose HBase connection is already open: an oracle JVM started
// for a drop cost more CPU than the drop, on the cores the tests share.
// A cluster that does not know the command (one started by an older
// checkout) gets the oracle's drop-table and delete-snapshot.
func Drop(snapshots, tables []string) {
	var cmd strings.Builder
	cmd.WriteString("drop-tables")
	for _, s := range snapshots {
		cmd.WriteString(" --snapshot " + s)
	}
	for _, tb := range tables {
		cmd.WriteString(" " + tb)
	}
	if st, err := Load(); err == nil {
		if _, err := st.Control(cmd.String()); err == nil {
			return
		}
	}
	if len(snapshots) > 0 {
		RunOracle(append([]string{"delete-snapshot"}, snapshots...)...)
	}
	if len(tables) > 0 {
		RunOracle(append([]string{"drop-table"}, tables...)...)
	}
}

// DumpTable returns a live table's cells as HBase's own client scans them
// (every version the families keep; raw adds delete markers and versions
// not yet compacted away).
func DumpTable(t testing.TB, table string, raw bool) []cell.Cell {
	t.Helper()
	args := []string{"dump-table", table}
	if raw {
		args = append(args, "--raw")
	}
	cells, err := ParseDump(Oracle(t, args...))
	if err != nil {
		t.Fatal(err)
	}
	return cells
}

// SortCells sorts cells in HBase's order.
func SortCells(cells []cell.Cell) {
	slices.SortFunc(cells, func(a, b cell.Cell) int { return cell.Compare(&a, &b) })
}

// SameCells fails the test with the first differences when got and want
// differ in any cell (key, type or value).
func SameCells(t testing.TB, what string, got, want []cell.Cell) {
	t.Helper()
	sameBy(t, what, got, want, cell.AppendDump)
}

// SameCellsTags is SameCells with the cells' tags compared too.
func SameCellsTags(t testing.TB, what string, got, want []cell.Cell) {
	t.Helper()
	sameBy(t, what, got, want, AppendDumpTags)
}

// sameBy compares got and want as multisets of their dump lines.
func sameBy(t testing.TB, what string, got, want []cell.Cell, line func([]byte, *cell.Cell) []byte) {
	t.Helper()
	g, w := map[string]int{}, map[string]int{}
	for i := range got {
		g[string(line(nil, &got[i]))]++
	}
	for i := range want {
		w[string(line(nil, &want[i]))]++
	}
	var missing, extra []string
	for k, n := range w {
		if g[k] < n {
			missing = append(missing, k)
		}
	}
	for k, n := range g {
		if w[k] < n {
			extra = append(extra, k)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return
	}
	slices.Sort(missing)
	slices.Sort(extra)
	t.Errorf("%s: got %d cells, want %d; %d missing (first: %s), %d extra (first: %s)", what, len(got), len(want), len(missing), firstFew(missing), len(extra), firstFew(extra))
}

func firstFew(s []string) string {
	if len(s) > 3 {
		s = s[:3]
	}
	return fmt.Sprintf("%q", s)
}
