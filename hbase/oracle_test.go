package hbase

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// oracle runs testenv/bin/oracle (HBase's own Java client) and returns its
// standard output.
func oracle(t testing.TB, args ...string) string {
	t.Helper()
	return string(testenv.Oracle(t, args...))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// control sends one line to the mini cluster's control port.
func control(t testing.TB, st *testenv.State, line string) string {
	t.Helper()
	resp, err := st.ControlWithin(line, 3*time.Minute)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace("ok " + resp)
}

// dumpLines keeps the canonical dump lines of an oracle output (it may
// print other lines, which do not have six tab-separated fields).
func dumpLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Count(l, "\t") == 5 {
			out = append(out, l)
		}
	}
	return out
}

func goDump(t testing.TB, c *Client, table string, s *Scan) []string {
	return dumpLines(dump(scanAll(t, c, table, s)))
}

func diffLines(t testing.TB, what string, got, want []string) {
	t.Helper()
	if len(got) == len(want) {
		same := true
		for i := range got {
			if got[i] != want[i] {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	n := 0
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("%s: line %d:\n got  %q\n want %q", what, i, g, w)
			if n++; n == 5 {
				break
			}
		}
	}
	t.Fatalf("%s: %d lines, want %d", what, len(got), len(want))
}

// genCells makes n cells over rows with binary bytes, several qualifiers
// and versions, each with its own timestamp, in random order.
func genCells(n int) []cell.Cell {
	out := make([]cell.Cell, 0, n)
	for i := 0; len(out) < n; i++ {
		row := []byte(fmt.Sprintf("row%05d", i))
		if i%7 == 0 {
			row = append(row, 0, 0xFF, byte(i)) // bytes a text format would mangle
		}
		for q := 0; q < 1+i%3 && len(out) < n; q++ {
			for v := 0; v < 1+i%2 && len(out) < n; v++ {
				out = append(out, cell.Cell{
					Row: row, Family: []byte("f"), Qualifier: []byte(fmt.Sprintf("q%d", q)),
					Timestamp: 1767225600000 + int64(i*10+v), Type: cell.Put,
					Value: []byte(fmt.Sprintf("v%d.%d.%d", i, q, v)),
				})
			}
		}
	}
	return out
}

func TestOracleReadsWhatGoWrites(t *testing.T) {
	c, _ := testClient(t)
	ctx := context.Background()
	table := tempTable(t, c, "gowrites", nil, []byte("row00300"), []byte("row00600"))
	cells := genCells(3000)
	w := c.NewWriter([]byte(table), WriterConfig{MaxCellsPerCall: 200})
	// Group each row's cells together, as the pipeline does per source row.
	if err := w.Write(ctx, cells...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Written != uint64(len(cells)) || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	sorted := append([]cell.Cell(nil), cells...)
	sort.Slice(sorted, func(i, j int) bool { return cell.Compare(&sorted[i], &sorted[j]) < 0 })
	want := dumpLines(dump(sorted))
	diffLines(t, "oracle dump-table", dumpLines(oracle(t, "dump-table", table)), want)
	diffLines(t, "go scan", goDump(t, c, table, &Scan{MaxVersions: 10}), want)
}

// seedSpec writes a spec for the oracle's seed command.
func seedSpec(t testing.TB, spec map[string]any) string {
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGoReadsWhatOracleSeeds(t *testing.T) {
	c, _ := testClient(t)
	table := fmt.Sprintf("seeded_%d", time.Now().UnixNano())
	spec := seedSpec(t, map[string]any{
		"table": table,
		"families": []map[string]any{
			{"name": "a", "versions": 3, "encoding": "FAST_DIFF"},
			{"name": "b", "versions": 1, "compression": "GZ"},
		},
		"split_keys": []string{"r00100", "r00250"},
		"steps": []map[string]any{
			{"op": "rows", "rows": 400, "qualifiers": 3, "versions": 3, "deletes": 60},
			{"op": "flush"},
			{"op": "rows", "rows": 150, "row_start": 50, "qualifiers": 2, "versions": 2, "deletes": 20, "ts_base": 1767325600000},
			{"op": "split", "key": "r00180"},
			{"op": "wide_row", "row": "r00200w", "family": "a", "cells": 3000, "value_size": 16},
		},
	})
	oracle(t, "seed", spec)
	t.Cleanup(func() { testenv.Drop(nil, []string{table}) })

	want := dumpLines(oracle(t, "dump-table", table))
	if len(want) < 3000 {
		t.Fatalf("oracle dumped only %d cells", len(want))
	}
	diffLines(t, "scan", goDump(t, c, table, &Scan{MaxVersions: 1 << 20}), want)
	// Small RPCs, slices of rows and partial results: the same cells.
	diffLines(t, "scan in slices", goDump(t, c, table, &Scan{MaxVersions: 1 << 20, Batch: 7, Caching: 5, MaxResultSize: 1024}), want)

	wantRaw := dumpLines(oracle(t, "dump-table", table, "--raw"))
	diffLines(t, "raw scan", goDump(t, c, table, &Scan{Raw: true, MaxVersions: 1 << 20}), wantRaw)
	var markers int
	for _, l := range wantRaw {
		if strings.Contains(l, "\tDelete") {
			markers++
		}
	}
	if markers == 0 {
		t.Fatal("the seeded table has no delete markers; the raw comparison proves nothing")
	}

	wantLatest := dumpLines(oracle(t, "dump-table", table, "--max-versions", "1"))
	diffLines(t, "scan latest", goDump(t, c, table, &Scan{}), wantLatest)
}
