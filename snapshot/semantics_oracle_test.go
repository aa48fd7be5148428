package snapshot

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// oracleScanArgs are the oracle's dump-snapshot flags for o: the same scan
// asked of HBase's own Scan and TableSnapshotScanner.
func oracleScanArgs(o ScanOptions) []string {
	var a []string
	if o.Raw {
		a = append(a, "--raw")
	}
	if o.MaxVersions > 0 {
		a = append(a, "--max-versions", strconv.Itoa(o.MaxVersions))
	}
	if o.TimeRange.Min != 0 || o.TimeRange.Max != 0 {
		a = append(a, "--from", strconv.FormatInt(o.TimeRange.Min, 10), "--to", strconv.FormatInt(o.TimeRange.Max, 10))
	}
	for _, f := range o.Families {
		a = append(a, "--family", string(f))
	}
	for _, c := range o.Columns {
		a = append(a, "--column", string(c.Family)+":"+hex.EncodeToString(c.Qualifier))
	}
	if len(o.StartRow) > 0 {
		a = append(a, "--start", hex.EncodeToString(o.StartRow))
	}
	if len(o.StopRow) > 0 {
		a = append(a, "--stop", hex.EncodeToString(o.StopRow))
	}
	if !o.Now.IsZero() {
		a = append(a, "--now", strconv.FormatInt(o.Now.UnixMilli(), 10))
	}
	return a
}

// readDump reads a snapshot on the cluster with rekey's reader, every
// split in order, as dump lines (with the tags column when tags is set).
func readDump(t *testing.T, root, name string, opts ScanOptions, tags bool) []byte {
	t.Helper()
	s, err := Open(t.Context(), root, name, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	splits, err := s.Splits(SplitOptions{})
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
			if tags {
				out = testenv.AppendDumpTags(out, sc.Cell())
			} else {
				out = cell.AppendDump(out, sc.Cell())
			}
		}
		if err := sc.Close(); err != nil {
			t.Fatalf("%s split %s: %v", name, sp.ID, err)
		}
	}
	return out
}

// writeSpecs writes each seed spec to a file and has one oracle JVM seed
// them all.
func writeSpecs(t *testing.T, specs []map[string]any) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"seed"}
	for i, sp := range specs {
		b, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("spec%02d.json", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	testenv.Oracle(t, args...)
}

// writeCells writes cells as a dump file for the seed's cells and
// bulk_cells steps (with the tags column when any cell has tags).
func writeCells(t *testing.T, cells []cell.Cell) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "cells")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tags := false
	for i := range cells {
		tags = tags || len(cells[i].Tags) > 0
	}
	b := testenv.DumpCells(cells)
	if tags {
		b = testenv.DumpCellsTags(cells)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// seedFamily turns a case's family attributes into the seed spec's family.
func seedFamily(t *testing.T, name string, attrs []string) map[string]any {
	t.Helper()
	f := map[string]any{"name": name}
	keys := map[string]string{"VERSIONS": "versions", "TTL": "ttl", "MIN_VERSIONS": "min_versions"}
	for i := 0; i+1 < len(attrs); i += 2 {
		k, v := attrs[i], attrs[i+1]
		if k == "KEEP_DELETED_CELLS" {
			f["keep_deleted_cells"] = v
			continue
		}
		n, err := strconv.Atoi(v)
		if keys[k] == "" || err != nil {
			t.Fatalf("family attribute %s=%s has no seed field", k, v)
		}
		f[keys[k]] = n
	}
	return f
}

// TestReadSemanticsOnHBase writes each TestReadSemantics case with
// HBase's client into a table of its own (one flush per store file, so
// the files' order is their sequence ids' order), snapshots it, and asks
// the oracle for the cells under the case's scan options. rekey's reader
// must return exactly HBase's dump, and HBase's dump must be the case's
// hand-written answer (or its onHBase answer, where HBase's own flush
// changed the files). Timestamps move by an hour into the future, TTL
// reference and time range with them, so that the flush, which applies
// TTLs by the real clock, drops nothing the case needs.
func TestReadSemanticsOnHBase(t *testing.T) {
	st := testenv.Require(t)
	prefix := os.Getenv("REKEY_TEST_PREFIX")
	shift := (time.Now().Add(time.Hour).UnixMilli() / 1000) * 1000
	var specs []map[string]any
	var names []string
	for i, tc := range readSemanticsCases {
		if tc.notOnHBase != "" {
			continue
		}
		name := fmt.Sprintf("%ssem_case%02d", prefix, i)
		var steps []map[string]any
		for _, f := range tc.files {
			cells := parseCells(t, f)
			for j := range cells {
				cells[j].Timestamp += shift
				cells[j].SeqID = 0
			}
			steps = append(steps, map[string]any{"op": "cells", "file": writeCells(t, cells)}, map[string]any{"op": "flush"})
		}
		steps = append(steps, map[string]any{"op": "snapshot", "name": name})
		specs = append(specs, map[string]any{"table": name, "families": []any{seedFamily(t, "f", tc.attrs)}, "steps": steps})
		names = append(names, name)
	}
	t.Cleanup(func() {
		// One oracle JVM for all the snapshots, one for all the tables.
		testenv.Drop(names, names)
	})
	writeSpecs(t, specs)

	var dumps [][]string
	for i, tc := range readSemanticsCases {
		if tc.notOnHBase == "" {
			name := fmt.Sprintf("%ssem_case%02d", prefix, i)
			dumps = append(dumps, append([]string{"dump-snapshot", st.RootDir, name}, oracleScanArgs(shiftOptions(tc.opts, shift))...))
		}
	}
	outs := testenv.OracleDumps(t, dumps)
	k := 0
	for i, tc := range readSemanticsCases {
		if tc.notOnHBase != "" {
			// Not a skip: the case cannot be written by HBase at all, and
			// its hand-written rule is pinned by TestReadSemantics.
			t.Logf("%s: not on HBase: %s", tc.name, tc.notOnHBase)
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			oracle := outs[k]
			k++
			name := fmt.Sprintf("%ssem_case%02d", prefix, i)
			got := readDump(t, st.RootDir, name, shiftOptions(tc.opts, shift), false)
			if d := testenv.DiffDumps(got, oracle); d != "" {
				t.Errorf("rekey vs HBase: %s", d)
			}
			want, why := tc.want, "the case's rule"
			if tc.onHBase != "" {
				want, why = tc.onHBase, "the rule on HBase's files ("+tc.onHBaseWhy+")"
			}
			if h := shortForm(t, oracle, shift); h != want {
				t.Errorf("HBase returned %q\n%s says %q", h, why, want)
			}
		})
	}
}

// shiftOptions moves a case's time options by shift ms, as its cells.
func shiftOptions(o ScanOptions, shift int64) ScanOptions {
	if o.TimeRange.Min != 0 || o.TimeRange.Max != 0 {
		o.TimeRange.Min += shift
		if o.TimeRange.Max != 0 {
			o.TimeRange.Max += shift
		}
	}
	if !o.Now.IsZero() {
		o.Now = time.UnixMilli(o.Now.UnixMilli() + shift)
	}
	return o
}

// shortForm renders a dump in the cases' row/fam:qual/ts/Type=value form,
// timestamps moved back by shift.
func shortForm(t *testing.T, dump []byte, shift int64) string {
	t.Helper()
	cells, err := testenv.ParseDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range cells {
		cells[i].Timestamp -= shift
		out = append(out, formatCell(&cells[i]))
	}
	return strings.Join(out, " ")
}
