package stage

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
)

// clusterTable creates a pre-split table with families f1 and f2 and
// returns a client and a staging URL on the cluster's HDFS; both are
// removed when the test ends.
func clusterTable(t *testing.T, name string, splits ...string) (*hbase.Client, string, string) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("stage_%s_%d", name, time.Now().UnixNano())
	var keys [][]byte
	for _, k := range splits {
		keys = append(keys, []byte(k))
	}
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: table, Families: []hbase.Family{{Name: "f1"}, {Name: "f2"}}, SplitKeys: keys}); err != nil {
		t.Fatal(err)
	}
	staging := fmt.Sprintf("hdfs://%s/tmp/rekey-stage-test/%s", st.NameNode, table)
	t.Cleanup(func() {
		c.DisableTable(ctx, table)
		c.DeleteTable(ctx, table)
		c.Close()
		if loc, err := vfs.Open(staging); err == nil {
			loc.FS.RemoveAll(loc.Path)
			loc.Close()
		}
	})
	return c, table, staging
}

// oracleDump is HBase's own scan of table, in the canonical dump format.
func oracleDump(t *testing.T, table string) []string {
	out := strings.TrimSuffix(string(testenv.Oracle(t, "dump-table", table)), "\n")
	if out == "" {
		return nil
	}
	lines := strings.Split(out, "\n")
	for i := range lines {
		lines[i] += "\n"
	}
	return lines
}

func equalLines(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("table holds %d cells, want %d", len(got), len(want))
	}
	for i := 0; i < min(len(got), len(want)); i++ {
		if got[i] != want[i] {
			t.Fatalf("cell %d:\n got %s want %s", i, got[i], want[i])
		}
	}
}

// TestStageLoadCluster stages cells for a pre-split table on the cluster's
// HDFS with a small memory budget, and bulk loads them: HBase's scan of the
// table (the oracle) returns exactly the cells written, once each, though
// one split was staged twice.
func TestStageLoadCluster(t *testing.T) {
	c, table, staging := clusterTable(t, "load", "g", "n", "t")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Memory: 512 << 10, Workers: 2, HFileSize: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(s.Plan().Regions); n != 4 {
		t.Fatalf("plan has %d regions, the table 4", n)
	}
	cells := genCells(7, 20000)
	writeSplit(t, s, "one", cells[:12000])
	writeSplit(t, s, "two", cells[12000:])
	writeSplit(t, s, "two", cells[12000:]) // redone split
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("stats: runs %d (%d bytes), %d HFiles (%d bytes), %d cells, %d regions loaded, peak memory %d, peak staging %d",
		st.Runs, st.RunBytes, st.HFiles, st.HFileBytes, st.Cells, st.RegionsLoaded, st.PeakMemory, st.PeakStaging)
	if st.RegionsLoaded != 4 {
		t.Errorf("%d regions loaded, want 4", st.RegionsLoaded)
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))

	// Finish again (a later --resume): nothing is loaded twice.
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))
}

// TestStageLoadAfterSplit: the target region splits between the staging
// and the load; the files that now span two regions are split again and
// every cell arrives.
func TestStageLoadAfterSplit(t *testing.T) {
	c, table, staging := clusterTable(t, "split", "n")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Memory: 1 << 20, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cells := genCells(11, 8000)
	logRep{t}.Printf("staging")
	writeSplit(t, s, "all", cells)
	logRep{t}.Printf("staged")
	// Split the first region at "g" and the second at "t" after the plan.
	for _, at := range []string{"g", "t"} {
		testenv.Oracle(t, "split", table, hex.EncodeToString([]byte(at)))
	}
	logRep{t}.Printf("split")
	rs, err := c.Regions(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("table has %d regions after two splits, want 4", len(rs))
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("stats: %d HFiles, %d re-split, %d regions loaded", st.HFiles, st.FilesResplit, st.RegionsLoaded)
	if st.FilesResplit == 0 {
		t.Error("no file was re-split, though both planned regions split")
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))
}
