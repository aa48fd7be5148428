package diff_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/snapshot/diff"
	_ "github.com/rekeyhq/rekey/vfs/all"
)

// t0 is the seeded cells' first timestamp, far in the past so that a
// server-time marker sorts after every seeded version.
const t0 = int64(1_600_000_000_000)

// seedCells is the table before A: rows r00..r29 in families f (two
// columns, three versions each) and g (one column, two versions), over
// three regions split at r10 and r20.
func seedCells() []cell.Cell {
	var out []cell.Cell
	for r := 0; r < 30; r++ {
		row := []byte(fmt.Sprintf("r%02d", r))
		for _, q := range []string{"q1", "q2"} {
			for v := 0; v < 3; v++ {
				out = append(out, cell.Cell{Row: row, Family: []byte("f"), Qualifier: []byte(q), Timestamp: t0 + int64(v), Type: cell.Put, Value: []byte(fmt.Sprintf("%s/%s/%d", row, q, v))})
			}
		}
		for v := 0; v < 2; v++ {
			out = append(out, cell.Cell{Row: row, Family: []byte("g"), Qualifier: []byte("x"), Timestamp: t0 + int64(v), Type: cell.Put, Value: []byte(fmt.Sprintf("%s/x/%d", row, v))})
		}
	}
	return out
}

func put(row, fam, q string, ts int64, val string) cell.Cell {
	return cell.Cell{Row: []byte(row), Family: []byte(fam), Qualifier: []byte(q), Timestamp: ts, Type: cell.Put, Value: []byte(val)}
}

func marker(row, fam, q string, ts int64, typ cell.Type) cell.Cell {
	return cell.Cell{Row: []byte(row), Family: []byte(fam), Qualifier: []byte(q), Timestamp: ts, Type: typ}
}

// change is one mutation HBase applies between A and B: puts, markers, or
// (both nil) a delete of the whole row.
type change struct {
	row     string
	puts    []cell.Cell
	markers []cell.Cell
}

// everyChange holds one change of each kind, all in regions 1 and 2 (rows
// r00..r19): region 3's files are the same in A and B.
func everyChange(later int64) []change {
	return []change{
		{row: "r05a", puts: []cell.Cell{put("r05a", "f", "q1", t0+10, "new row")}},
		{row: "r01", puts: []cell.Cell{put("r01", "f", "q1", t0+5, "newer 5"), put("r01", "f", "q1", t0+6, "newer 6")}},
		{row: "r02", puts: []cell.Cell{put("r02", "f", "q9", t0-1000, "past ts"), put("r02", "g", "x", t0-1000, "past, beyond VERSIONS")}},
		{row: "r03", puts: []cell.Cell{put("r03", "f", "q1", t0+2, "same key, other value")}},
		{row: "r04", markers: []cell.Cell{marker("r04", "f", "q1", t0+2, cell.Delete)}},
		{row: "r05", markers: []cell.Cell{marker("r05", "f", "q2", cell.LatestTimestamp, cell.DeleteColumn)}},
		{row: "r06", markers: []cell.Cell{marker("r06", "g", "", cell.LatestTimestamp, cell.DeleteFamily)}},
		{row: "r07"},
		{row: "r08"},
		{row: "r08", puts: []cell.Cell{put("r08", "f", "q1", later, "written again")}},
		{row: "r09", markers: []cell.Cell{marker("r09", "f", "", t0+1, cell.DeleteFamilyVersion)}},
		{row: "r11", markers: []cell.Cell{marker("r11", "f", "q1", t0+1, cell.DeleteColumn)}},
	}
}

func apply(t *testing.T, client *hbase.Client, table string, changes []change) {
	t.Helper()
	ctx := context.Background()
	for _, c := range changes {
		var err error
		switch {
		case c.puts != nil:
			err = client.Put(ctx, []byte(table), []byte(c.row), c.puts)
		default:
			err = client.Delete(ctx, []byte(table), []byte(c.row), c.markers)
		}
		if err != nil {
			t.Fatalf("change of row %s: %v", c.row, err)
		}
	}
}

// dumpAt is the oracle's view of a snapshot with TTLs at now.
func dumpAt(t *testing.T, st *testenv.State, name string, now time.Time) []cell.Cell {
	t.Helper()
	cells, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, name, "--now", strconv.FormatInt(now.UnixMilli(), 10)))
	if err != nil {
		t.Fatal(err)
	}
	return cells
}

// expected is the rule the engine must meet, applied to the oracle's
// dumps: added are B's cells whose key A lacks or holds with another
// value; removed are A's cells whose key B lacks.
func expected(a, b []cell.Cell) (added, removed []cell.Cell) {
	key := func(c *cell.Cell) string {
		return fmt.Sprintf("%x/%s/%x/%d/%d", c.Row, c.Family, c.Qualifier, c.Timestamp, c.Type)
	}
	ka, kb := map[string][]byte{}, map[string][]byte{}
	for i := range a {
		ka[key(&a[i])] = a[i].Value
	}
	for i := range b {
		kb[key(&b[i])] = b[i].Value
	}
	for i := range b {
		if v, ok := ka[key(&b[i])]; !ok || !bytes.Equal(v, b[i].Value) {
			added = append(added, b[i])
		}
	}
	for i := range a {
		if _, ok := kb[key(&a[i])]; !ok {
			removed = append(removed, a[i])
		}
	}
	return added, removed
}

// engine runs the plan and the changes over the whole table.
func engine(t *testing.T, st *testenv.State, nameA, nameB string, nowA, nowB time.Time) (added, removed []cell.Cell, p *diff.Plan, counts diff.Counts) {
	t.Helper()
	ctx := context.Background()
	a, err := snapshot.Open(ctx, st.RootDir, nameA, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := snapshot.Open(ctx, st.RootDir, nameB, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err = diff.NewPlan(ctx, a, b, diff.Options{NowA: nowA, NowB: nowB})
	if err != nil {
		t.Fatal(err)
	}
	ch := p.Changes(ctx, nil, nil)
	for ch.Next() {
		c := cloneCell(ch.Cell())
		if ch.Removed() {
			removed = append(removed, c)
		} else {
			added = append(added, c)
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	return added, removed, p, ch.Counts()
}

func cloneCell(c *cell.Cell) cell.Cell {
	return cell.Cell{Row: bytes.Clone(c.Row), Family: bytes.Clone(c.Family), Qualifier: bytes.Clone(c.Qualifier), Timestamp: c.Timestamp, Type: c.Type, Value: bytes.Clone(c.Value)}
}

func sorted(cs []cell.Cell) []cell.Cell {
	sort.SliceStable(cs, func(i, j int) bool { return cell.Compare(&cs[i], &cs[j]) < 0 })
	return cs
}

// TestChangesMatchOracle seeds a table, snapshots it (A), has HBase apply
// one change of every kind (new row, newer versions beyond VERSIONS, past
// timestamps, a value replaced at the same key, each delete type, a row
// deleted and written again), flushes and snapshots it (B), then major
// compacts it and snapshots it (C). The engine's added and removed cells
// from A to B and from A to C must equal the difference of the oracle's
// dumps; from A to B the untouched region's files are skipped, and from A
// to C (every file rewritten) nothing is.
func TestChangesMatchOracle(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel() // each on a table of its own
	prefix := os.Getenv("REKEY_TEST_PREFIX")
	table := prefix + "diff_oracle"
	snapA, snapB, snapC := table+"_a", table+"_b", table+"_c"
	t.Cleanup(func() { testenv.Drop([]string{snapA, snapB, snapC}, []string{table}) })
	testenv.SeedCells(t, st, testenv.SourceTable{Table: table, Snapshot: snapA, Families: []string{"f", "g"}, SplitKeys: []string{"r10", "r20"}, Versions: 3}, seedCells())

	client, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	apply(t, client, table, everyChange(time.Now().UnixMilli()+60_000))
	testenv.Oracle(t, "flush", table)
	testenv.Oracle(t, "snapshot", table, snapB)
	testenv.Oracle(t, "major-compact", table)
	testenv.Oracle(t, "snapshot", table, snapC)

	now := time.Now()
	dumpA := dumpAt(t, st, snapA, now)
	for _, tc := range []struct {
		name     string
		snap     string
		skipsAny bool
	}{
		{"flushed changes", snapB, true},
		{"after a major compaction", snapC, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantAdded, wantRemoved := expected(dumpA, dumpAt(t, st, tc.snap, now))
			if len(wantAdded) == 0 || len(wantRemoved) == 0 {
				t.Fatalf("the changes made %d added and %d removed cells: the test needs both", len(wantAdded), len(wantRemoved))
			}
			added, removed, p, counts := engine(t, st, snapA, tc.snap, now, now)
			testenv.SameCells(t, "added", sorted(added), sorted(wantAdded))
			// The engine leaves out a removal B replaced at the same key;
			// the rule's removed cells have no such key in B by definition.
			testenv.SameCells(t, "removed", sorted(removed), sorted(wantRemoved))
			s := p.Stats()
			t.Logf("plan: %+v; counts: %+v; ranges %d", s, counts, len(p.Ranges()))
			if s.FilesRead == 0 {
				t.Fatal("the plan reads no file")
			}
			if tc.skipsAny && (s.FilesSkipped == 0 || s.BytesSkipped == 0) {
				t.Fatalf("the plan skips no file though region 3 did not change: %+v", s)
			}
			if counts.Replaced != 1 {
				t.Fatalf("%d cells replaced at the same key, want 1 (r03 f:q1)", counts.Replaced)
			}
			// The work by B's regions (a catch-up's splits, its progress
			// line's total): no file here crosses a region, so the regions'
			// shares add up to what the plan reads, both sides' files.
			b, err := snapshot.Open(context.Background(), st.RootDir, tc.snap, snapshot.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var byRegion int64
			for _, r := range b.Regions() {
				byRegion += p.BytesIn(r.StartKey, r.EndKey)
			}
			if byRegion != s.BytesRead {
				t.Errorf("B's regions' shares of the read add up to %d bytes; the plan reads %d", byRegion, s.BytesRead)
			}
		})
	}
}

// TestTTLExpiryBetweenReadTimes reads one snapshot of a table whose family
// has a TTL of a day as of two times an hour apart: the cells that expire
// in that hour are removed, exactly as the oracle's dumps at the two times
// differ, and the region whose cells are all fresh is skipped by its
// files' TIMERANGE alone, with no change to any file.
func TestTTLExpiryBetweenReadTimes(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel() // each on a table of its own
	prefix := os.Getenv("REKEY_TEST_PREFIX")
	table := prefix + "diff_ttl"
	snap := table + "_snap"
	t.Cleanup(func() { testenv.Drop([]string{snap}, []string{table}) })
	now := time.Now()
	day := int64(24 * time.Hour / time.Millisecond)
	var cells []cell.Cell
	for r := 0; r < 10; r++ {
		// Rows a*: every ten minutes from a day ago on, some expiring
		// within the hour; rows b*: written now, none expiring.
		for k := 0; k < 12; k++ {
			ts := now.UnixMilli() - day + int64(k)*10*60*1000 + int64(r)
			cells = append(cells, put(fmt.Sprintf("a%02d", r), "f", fmt.Sprintf("q%02d", k), ts, "old"))
		}
		cells = append(cells, put(fmt.Sprintf("b%02d", r), "f", "q", now.UnixMilli()-int64(r), "fresh"))
	}
	dir := t.TempDir()
	dump := dir + "/cells"
	if err := os.WriteFile(dump, testenv.DumpCells(cells), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`{"table": %q, "drop_existing": true, "split_keys": ["b"],
		"families": [{"name": "f", "versions": 1, "ttl": 86400, "encoding": "FAST_DIFF", "compression": "SNAPPY"}],
		"steps": [{"op": "cells", "file": %q}, {"op": "flush"}, {"op": "snapshot", "name": %q}]}`, table, dump, snap)
	if err := os.WriteFile(dir+"/spec.json", []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", dir+"/spec.json")

	nowA, nowB := now.Add(time.Minute), now.Add(time.Hour+time.Minute)
	wantAdded, wantRemoved := expected(dumpAt(t, st, snap, nowA), dumpAt(t, st, snap, nowB))
	if len(wantRemoved) == 0 || len(wantAdded) != 0 {
		t.Fatalf("an hour of TTL removed %d cells and added %d: the test needs some removed and none added", len(wantRemoved), len(wantAdded))
	}
	added, removed, p, counts := engine(t, st, snap, snap, nowA, nowB)
	testenv.SameCells(t, "added", sorted(added), nil)
	testenv.SameCells(t, "removed", sorted(removed), sorted(wantRemoved))
	s := p.Stats()
	t.Logf("plan: %+v; counts: %+v", s, counts)
	// Both sides count their entries: the same file twice each.
	if s.FilesSkipped != 2 || s.FilesRead != 2 {
		t.Fatalf("the plan reads %d and skips %d store file entries; want the old region's read and the fresh one's skipped, on each side", s.FilesRead, s.FilesSkipped)
	}
	// Read as of one time, the same snapshot has no difference and no
	// row to read.
	added, removed, p, _ = engine(t, st, snap, snap, nowA, nowA)
	if len(added)+len(removed) != 0 || len(p.Ranges()) != 0 {
		t.Fatalf("one snapshot at one time: %d added, %d removed, %d ranges", len(added), len(removed), len(p.Ranges()))
	}
}

// TestSplitBetweenSnapshots: a region split between A and B hands the
// parent's files to the daughters as references (compactions are off, so
// they stay); resolved to the same underlying files over the same rows,
// they make no difference and nothing is read. A put after the split (C)
// is found, exactly as the oracle's dumps differ, reading only the
// daughter it landed in.
func TestSplitBetweenSnapshots(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel() // each on a table of its own
	prefix := os.Getenv("REKEY_TEST_PREFIX")
	table := prefix + "diff_split"
	snapA, snapB, snapC := table+"_a", table+"_b", table+"_c"
	t.Cleanup(func() { testenv.Drop([]string{snapA, snapB, snapC}, []string{table}) })
	dir := t.TempDir()
	dump := dir + "/cells"
	if err := os.WriteFile(dump, testenv.DumpCells(seedCells()), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`{"table": %q, "drop_existing": true, "compaction_enabled": false, "split_keys": ["r20"],
		"families": [{"name": "f", "versions": 3, "encoding": "FAST_DIFF", "compression": "SNAPPY"}, {"name": "g", "versions": 3, "encoding": "FAST_DIFF", "compression": "SNAPPY"}],
		"steps": [{"op": "cells", "file": %q}, {"op": "flush"}, {"op": "snapshot", "name": %q},
			{"op": "split", "key": "r10"}, {"op": "snapshot", "name": %q}]}`, table, dump, snapA, snapB)
	if err := os.WriteFile(dir+"/spec.json", []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", dir+"/spec.json")
	now := time.Now()

	ctx := context.Background()
	b, err := snapshot.Open(ctx, st.RootDir, snapB, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refs := 0
	for _, r := range b.Regions() {
		for _, ff := range r.Families {
			for _, sf := range ff.Files {
				if sf.Reference != nil {
					refs++
				}
			}
		}
	}
	b.Close()
	if refs == 0 {
		t.Fatal("snapshot B holds no reference: the split's daughters were compacted, and the test proves nothing")
	}

	added, removed, p, _ := engine(t, st, snapA, snapB, now, now)
	if len(added)+len(removed) != 0 || p.Stats().FilesRead != 0 {
		t.Fatalf("a split alone: %d added, %d removed, plan %+v; want nothing read and no difference", len(added), len(removed), p.Stats())
	}

	client, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	apply(t, client, table, []change{{row: "r12", puts: []cell.Cell{put("r12", "f", "q1", t0+9, "after the split")}}})
	testenv.Oracle(t, "flush", table)
	testenv.Oracle(t, "snapshot", table, snapC)
	wantAdded, wantRemoved := expected(dumpAt(t, st, snapA, now), dumpAt(t, st, snapC, now))
	added, removed, p, counts := engine(t, st, snapA, snapC, now, now)
	testenv.SameCells(t, "added", sorted(added), sorted(wantAdded))
	testenv.SameCells(t, "removed", sorted(removed), sorted(wantRemoved))
	t.Logf("plan %+v, counts %+v, %d refs in B", p.Stats(), counts, refs)
	if len(wantAdded) == 0 || counts.Rows != 1 || p.Stats().FilesSkipped == 0 {
		t.Fatalf("a put into one row after a split: %d added, %d rows read, plan %+v", len(wantAdded), counts.Rows, p.Stats())
	}
}
