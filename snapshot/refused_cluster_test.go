package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
)

// clusterSnapshot has HBase create table with the given families, write
// cells into it (values of valueSize bytes in family big, 8 bytes
// elsewhere), flush it and snapshot it. The table and snapshot are dropped
// when the test ends; it returns the snapshot's name.
func clusterSnapshot(t *testing.T, st *testenv.State, prefix string, fams []hbase.Family, big string, valueSize int) string {
	t.Helper()
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	table := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1_000_000_000)
	snap := table + "_snap"
	testenv.DropAfter(t, table, snap)
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: table, Families: fams}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		row := []byte(fmt.Sprintf("r%03d", i))
		var cells []cell.Cell
		for _, f := range fams {
			v := []byte(fmt.Sprintf("%08d", i))
			if f.Name == big {
				v = bytes.Repeat(v, valueSize/len(v))
			}
			cells = append(cells, cell.Cell{Row: row, Family: []byte(f.Name), Qualifier: []byte("q"), Timestamp: int64(1000 + i), Type: cell.Put, Value: v})
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
	return snap
}

// TestNewVersionBehaviorRefusedOnHBaseSnapshot: HBase creates a family
// with NEW_VERSION_BEHAVIOR=true, writes and snapshots it; opening the
// snapshot fails with ErrUnsupported naming the attribute and the family,
// rather than reading it with the classic delete semantics.
func TestNewVersionBehaviorRefusedOnHBaseSnapshot(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	snap := clusterSnapshot(t, st, "nvb", []hbase.Family{{Name: "n", Attributes: map[string]string{"NEW_VERSION_BEHAVIOR": "true"}}}, "", 0)
	s, err := snapshot.Open(t.Context(), st.RootDir, snap, snapshot.OpenOptions{})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, snapshot.ErrUnsupported) || !strings.Contains(err.Error(), "NEW_VERSION_BEHAVIOR") || !strings.Contains(err.Error(), `"n"`) {
		t.Fatalf("opening a NEW_VERSION_BEHAVIOR snapshot: %v; want ErrUnsupported naming the attribute and family n", err)
	}
	t.Log(err)
}

// TestMOBFamilyRefusedOnHBaseSnapshot: HBase creates a table with a MOB
// family (values over 100 bytes go to MOB files) beside a plain one,
// writes 800-byte values, flushes and snapshots it. Reading every family
// fails with ErrUnsupported naming MOB; reading only the plain family
// returns exactly that family's cells of HBase's own dump of the snapshot.
func TestMOBFamilyRefusedOnHBaseSnapshot(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	snap := clusterSnapshot(t, st, "mob", []hbase.Family{
		{Name: "f"},
		{Name: "m", Attributes: map[string]string{"IS_MOB": "true", "MOB_THRESHOLD": "100"}},
	}, "m", 800)
	s, splits := openSplits(t, st.RootDir, snap, snapshot.OpenOptions{})
	defer s.Close()
	_, err := s.NewScanner(t.Context(), splits[0], snapshot.ScanOptions{})
	if !errors.Is(err, snapshot.ErrUnsupported) || !strings.Contains(err.Error(), "MOB") {
		t.Fatalf("scanning every family of a MOB table: %v; want ErrUnsupported naming MOB", err)
	}
	t.Log(err)

	// The rule: HBase's dump of the snapshot, family f's lines only.
	var want []byte
	for _, l := range strings.SplitAfter(string(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap)), "\n") {
		c, err := testenv.ParseDumpLine(strings.TrimSuffix(l, "\n"))
		if err == nil && string(c.Family) == "f" {
			want = append(want, l...)
		}
	}
	if len(want) == 0 {
		t.Fatal("HBase's dump has no cells of family f")
	}
	got := dumpSnapshot(t, st.RootDir, snap, snapshot.ScanOptions{Families: [][]byte{[]byte("f")}})
	if diff := diffDumps(got, want); diff != "" {
		t.Fatalf("family f of the MOB table against HBase's dump: %s", diff)
	}
}
