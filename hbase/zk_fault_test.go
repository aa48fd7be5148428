package hbase

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestZooKeeperSessionExpiredWhileUnreachable: the client's ZooKeeper
// session expires and ZooKeeper stays unreachable for a few seconds while
// the client needs it (hbase:meta's location forgotten, as after meta
// moved; a master call, which reads the active master's znode). Both
// calls wait for ZooKeeper, then succeed on a new session; HBase's own
// scan (the oracle's count) sees the row written meanwhile.
func TestZooKeeperSessionExpiredWhileUnreachable(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	proxy := testenv.NewProxy(t, st.ZKQuorum)
	c, err := NewClient(Config{ZKQuorum: proxy.Addr(), ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // after tempTable's cleanup, which needs it
	table := tempTable(t, c, "zkexp", nil)
	if err := c.Put(ctx, []byte(table), []byte("r1"), []cell.Cell{put("r1", "q", 1, "before")}); err != nil {
		t.Fatal(err)
	}
	before := c.zk.conn.SessionID()

	const away = 3 * time.Second
	testenv.ExpireSession(t, st, proxy)
	c.forgetMeta()
	c.cache.forgetTable(table)
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(away)
		if err := proxy.Release(); err != nil {
			t.Errorf("reopening the proxy: %v", err)
		}
		released <- time.Now()
	}()
	begin := time.Now()
	if err := c.Put(ctx, []byte(table), []byte("r2"), []cell.Cell{put("r2", "q", 2, "during")}); err != nil {
		t.Fatalf("put while ZooKeeper is unreachable and the session expired: %v", err)
	}
	took := time.Since(begin)
	back := <-released
	if back.Before(begin) || time.Now().Before(back) {
		t.Fatalf("the put returned before ZooKeeper was reachable again: it never needed it, so nothing was tested")
	}
	if ok, err := c.TableExists(ctx, table); err != nil || !ok {
		t.Fatalf("master call after the session expired: %v, %v", ok, err)
	}
	if after := c.zk.conn.SessionID(); after == before || after == 0 {
		t.Errorf("session id %x before, %x after: the server should have ended the old session", before, after)
	}
	rows, cells := oracleCount(t, table, "r")
	if rows != 2 || cells != 2 {
		t.Errorf("HBase counts %d rows, %d cells under r; want 2, 2", rows, cells)
	}
	t.Logf("put took %v with ZooKeeper away %v; session %x -> %x", took.Round(time.Millisecond), away, before, c.zk.conn.SessionID())
}

// TestMissingZNodeTellsWhy: missing znodes are retried only under an
// existing parent (no master for a moment, during a failover); a wrong
// parent still fails at once, with the hint.
func TestMissingZNodeTellsWhy(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	c, err := NewClient(Config{ZKQuorum: st.ZKQuorum, ZNodeParent: "/no-such-parent", OperationTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	begin := time.Now()
	_, err = c.TableExists(ctx, "anything")
	if err == nil || !strings.Contains(err.Error(), "zookeeper.znode.parent") {
		t.Fatalf("wrong parent: %v", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("a wrong parent took %v to fail: retrying cannot help there", d)
	}
}
