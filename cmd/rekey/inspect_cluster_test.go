package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// inspectTTL is the TTL of family t of the table inspectClusterTable makes.
const inspectTTL = 10 * 24 * time.Hour

// edgeMargin is how long after they are written the edge cells of
// inspectClusterTable expire: they are alive when the snapshot is taken
// right after, and expired once the test has waited edgeMargin.
const edgeMargin = 60 * time.Second

// clusterTable is what inspectClusterTable made.
type clusterTable struct {
	table, snap string
	// created is the snapshot's creation time as HBase's master lists it.
	created time.Time
	// edgeExpiry is when the edge cells expire.
	edgeExpiry time.Time
}

// inspectClusterTable has HBase create a table with family t (TTL 10
// days) and family p (VERSIONS 3), write 40 rows, flush and snapshot it.
// Family t's cells are half a day to 8.5 days old, one a row per
// qualifier, plus in four rows an edge cell (qualifier e) that expires
// edgeMargin after it is written; family p has three versions per column.
// The table and snapshot are dropped when the test ends.
func inspectClusterTable(t *testing.T, st *testenv.State) clusterTable {
	t.Helper()
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	table := fmt.Sprintf("inspectcl_%d", time.Now().UnixNano()%1_000_000_000)
	snap := table + "_snap"
	testenv.DropAfter(t, table, snap)
	ttl := strconv.Itoa(int(inspectTTL / time.Second))
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: table, Families: []hbase.Family{
		{Name: "t", Attributes: map[string]string{"TTL": ttl}},
		{Name: "p", Attributes: map[string]string{"VERSIONS": "3"}},
	}, SplitKeys: [][]byte{[]byte("r020")}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	edge := now.Add(edgeMargin - inspectTTL)
	for i := 0; i < 40; i++ {
		row := []byte(fmt.Sprintf("r%03d", i))
		var cells []cell.Cell
		if i%10 == 0 {
			cells = append(cells, cell.Cell{Row: row, Family: []byte("t"), Qualifier: []byte("e"),
				Timestamp: edge.UnixMilli(), Type: cell.Put, Value: []byte("edge")})
		}
		for q := 0; q < 2; q++ {
			age := time.Duration(12+(i*2+q)%17*12) * time.Hour // 0.5 to 8.5 days
			cells = append(cells, cell.Cell{Row: row, Family: []byte("t"), Qualifier: []byte{'q', byte('0' + q)},
				Timestamp: now.Add(-age).UnixMilli(), Type: cell.Put, Value: []byte(fmt.Sprintf("t%d.%d", i, q))})
			for v := 0; v < 3; v++ {
				cells = append(cells, cell.Cell{Row: row, Family: []byte("p"), Qualifier: []byte{'q', byte('0' + q)},
					Timestamp: now.Add(-time.Duration(v) * time.Minute).UnixMilli(), Type: cell.Put, Value: []byte(fmt.Sprintf("p%d.%d.%d", i, q, v))})
			}
		}
		if err := c.Put(ctx, []byte(table), row, cells); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(ctx, table); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(ctx, snap, table); err != nil {
		t.Fatal(err)
	}
	snaps, err := c.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ct := clusterTable{table: table, snap: snap, edgeExpiry: time.UnixMilli(edge.UnixMilli()).Add(inspectTTL)}
	for _, sd := range snaps {
		if sd.Name == snap {
			ct.created = sd.Created
		}
	}
	if ct.created.IsZero() {
		t.Fatalf("HBase does not list snapshot %s", snap)
	}
	if !ct.created.Before(ct.edgeExpiry) {
		t.Fatalf("the snapshot was taken %v after the edge cells expired: the machine is too slow for this test's %v margin", ct.created.Sub(ct.edgeExpiry), edgeMargin)
	}
	return ct
}

// sortedDump is the canonical dump of cells in HBase's cell order.
func sortedDump(cells []cell.Cell) string {
	testenv.SortCells(cells)
	return string(testenv.DumpCells(cells))
}

// keepDumpLines keeps the lines of an oracle dump whose cell keep accepts.
func keepDumpLines(t *testing.T, dump []byte, keep func(cell.Cell) bool) string {
	t.Helper()
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(dump), "\n") {
		if l == "" {
			continue
		}
		c, err := testenv.ParseDumpLine(strings.TrimSuffix(l, "\n"))
		if err != nil {
			t.Fatalf("oracle dump line %q: %v", l, err)
		}
		if keep(c) {
			b.WriteString(l)
		}
	}
	return b.String()
}

// TestInspectOnClusterMatchesOracle runs `rekey inspect` against files and
// a snapshot the mini cluster wrote on its HDFS: `inspect hfile` over
// hdfs:// (the summary's entry count and --cells-only against HBase's
// reader), and `inspect snapshot --cells` with --family, --max-versions
// and --now (an RFC 3339 time, epoch milliseconds and 'snapshot') against
// HBase's TableSnapshotScanner. The --now expectations apply HBase's TTL
// rule (a cell is expired when its timestamp is before now minus the TTL)
// to the oracle's dumps; the edge cells, expired when HBase dumps the
// snapshot but alive when it was taken, come from HBase's HFile reader.
func TestInspectOnClusterMatchesOracle(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ct := inspectClusterTable(t, st)
	table, snap := ct.table, ct.snap
	time.Sleep(time.Until(ct.edgeExpiry.Add(time.Second)))
	all := testenv.Oracle(t, "dump-snapshot", st.RootDir, snap)
	if strings.Contains(string(all), "\tt\t65\t") {
		t.Fatal("HBase's dump still has the edge cells (family t, qualifier e) after they expired")
	}
	// HBase's HFile reader applies no TTL: the edge cells are in the store
	// files of family t.
	var edge []cell.Cell
	f := strings.Fields(string(testenv.Oracle(t, "files", table)))
	hfileDumps := map[string]string{}
	for i := 0; i+1 < len(f); i += 2 {
		hfileDumps[f[i]] = string(testenv.Oracle(t, "dump-hfile", f[i]))
		cells, err := testenv.ParseDump([]byte(hfileDumps[f[i]]))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells {
			// Alive at the snapshot's creation, expired by now.
			ts := time.UnixMilli(c.Timestamp)
			if string(c.Family) == "t" && !ts.Before(ct.created.Add(-inspectTTL)) && ts.Before(time.Now().Add(-inspectTTL)) {
				edge = append(edge, c)
			}
		}
	}
	if len(edge) != 4 {
		t.Fatalf("HBase's store files hold %d cells alive at the snapshot and expired now, want the 4 edge cells", len(edge))
	}

	t.Run("hfile over hdfs", func(t *testing.T) {
		if len(hfileDumps) != 4 { // 2 regions x 2 families
			t.Fatalf("oracle files %s: %q, want 4 store files", table, f)
		}
		for url, want := range hfileDumps {
			if !strings.HasPrefix(url, "hdfs://") {
				t.Fatalf("store file %s is not on HDFS", url)
			}
			code, out, errOut := runInspectHFileCLI(t, "--cells-only", url)
			if code != exitOK || out != want {
				t.Fatalf("inspect hfile --cells-only %s: exit %d, %d bytes, want HBase's %d; stderr %s", url, code, len(out), len(want), errOut)
			}
			code, out, errOut = runInspectHFileCLI(t, url)
			if entries := fmt.Sprintf("  entries: %d\n", strings.Count(want, "\n")); code != exitOK || !strings.Contains(out, entries) {
				t.Fatalf("inspect hfile %s: exit %d, summary lacks %q:\n%s%s", url, code, entries, out, errOut)
			}
		}
	})

	// Five days on, cells over five days old are past the 10-day TTL.
	later := time.Now().Add(5 * 24 * time.Hour).Truncate(time.Second)
	expiredBy := func(t *testing.T) string {
		limit := later.Add(-inspectTTL).UnixMilli()
		kept := keepDumpLines(t, all, func(c cell.Cell) bool { return string(c.Family) != "t" || c.Timestamp >= limit })
		if kept == string(all) {
			t.Fatal("no cell expires five days on: the test would prove nothing")
		}
		return kept
	}
	cases := []struct {
		name string
		args []string
		want func(t *testing.T) string
	}{
		{"--family t", []string{"--family", "t"}, func(t *testing.T) string {
			return keepDumpLines(t, all, func(c cell.Cell) bool { return string(c.Family) == "t" })
		}},
		{"--max-versions 1", []string{"--max-versions", "1"}, func(t *testing.T) string {
			one := string(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap, "--max-versions", "1"))
			if one == string(all) {
				t.Fatal("HBase's dump with one version equals the full one: the table has no older versions")
			}
			return one
		}},
		// At the snapshot's creation the edge cells were alive too.
		{"--now snapshot", []string{"--now", "snapshot"}, func(t *testing.T) string {
			cells, err := testenv.ParseDump(all)
			if err != nil {
				t.Fatal(err)
			}
			return sortedDump(append(cells, edge...))
		}},
		{"--now RFC 3339", []string{"--now", later.UTC().Format(time.RFC3339)}, expiredBy},
		{"--now epoch ms", []string{"--now", strconv.FormatInt(later.UnixMilli(), 10)}, expiredBy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want(t)
			code, out, errOut := runInspectSnapshotCLI(t, append([]string{st.RootDir, snap, "--cells"}, tc.args...)...)
			if code != exitOK || out != want {
				t.Fatalf("inspect snapshot --cells %s: exit %d, %d lines, want %d as the rule on HBase's dump; stderr %s",
					strings.Join(tc.args, " "), code, strings.Count(out, "\n"), strings.Count(want, "\n"), errOut)
			}
			t.Logf("%d cells as the rule on HBase's dump", strings.Count(out, "\n"))
		})
	}
}
