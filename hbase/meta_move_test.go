package hbase

import (
	"context"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestMetaMoveIsFollowed: hbase:meta moves to the other region server
// (HBase's own Admin.move, through the oracle) after the client cached its
// location; the next lookup follows the old server's RegionMovedException
// to the new one at once, instead of asking the old server again until it
// forgets the move (minutes).
func TestMetaMoveIsFollowed(t *testing.T) {
	testenv.Require(t)
	t.Parallel() // the other tests' clients follow the move too
	ctx := context.Background()
	c, _ := testClient(t)
	table := tempTable(t, c, "metamove", nil)
	if err := c.Put(ctx, []byte(table), []byte("r1"), []cell.Cell{put("r1", "q", 1, "before")}); err != nil {
		t.Fatal(err)
	}
	m, err := c.metaRegion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := testenv.Oracle(t, "move", MetaTable, "00")
	t.Logf("meta was on %s; %s", m.Server, out)
	c.cache.forgetTable(table)
	begin := time.Now()
	qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.Put(qctx, []byte(table), []byte("r2"), []cell.Cell{put("r2", "q", 2, "after")}); err != nil {
		t.Fatalf("put after hbase:meta moved: %v", err)
	}
	now, err := c.metaRegion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now.Server == m.Server {
		t.Errorf("the client still has hbase:meta on %s after it moved", m.Server)
	}
	t.Logf("put after the move took %v; meta now on %s", time.Since(begin).Round(time.Millisecond), now.Server)
	rows, cells := oracleCount(t, table, "r")
	if rows != 2 || cells != 2 {
		t.Errorf("HBase counts %d rows, %d cells under r; want 2, 2", rows, cells)
	}
}
