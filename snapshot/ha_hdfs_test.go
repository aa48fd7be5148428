package snapshot_test

import (
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// haHDFS is testenv's HDFS with two NameNodes in one nameservice, as
// ha1-start answers it.
type haHDFS struct {
	nameservice string
	confDir     string
	// nn maps nn1 and nn2 to their RPC addresses.
	nn map[string]string
}

// startHA starts testenv's HA HDFS ha1 (shut down when the test ends; the
// pipeline tests use ha2) and
// points HADOOP_CONF_DIR at the client configuration it wrote, which names
// the nameservice and both NameNodes. The test must not be parallel.
func startHA(t *testing.T, st *testenv.State) haHDFS {
	t.Helper()
	ans, err := st.Control("ha1-start")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := st.Control("ha1-shutdown"); err != nil {
			t.Errorf("shutting the HA HDFS down: %v", err)
		}
	})
	f := strings.Fields(ans)
	if len(f) != 4 {
		t.Fatalf("ha1-start answered %q, want NAMESERVICE CONF_DIR nn1=ADDR nn2=ADDR", ans)
	}
	h := haHDFS{nameservice: f[0], confDir: f[1], nn: map[string]string{}}
	for _, kv := range f[2:] {
		k, v, _ := strings.Cut(kv, "=")
		h.nn[k] = v
	}
	t.Setenv("HADOOP_CONF_DIR", h.confDir)
	return h
}

// active asks which NameNode is active and returns its name and address.
func (h haHDFS) active(t *testing.T, st *testenv.State) (string, string) {
	t.Helper()
	name, err := st.Control("ha1-active")
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := h.nn[name]
	if !ok {
		t.Fatalf("ha1-active answered %q, not a NameNode of %v", name, h.nn)
	}
	return name, addr
}

// TestHANameserviceFailoverMidRead copies a snapshot HBase wrote onto an
// HDFS with two NameNodes in one nameservice (testenv's HA HDFS), reads it
// as hdfs://NAMESERVICE/... with HADOOP_CONF_DIR naming both NameNodes,
// and fails the active NameNode over halfway through the first split: once
// gracefully (the old active turns standby and answers StandbyException)
// and once by shutting it down. Each read completes with exactly the
// oracle's cells. The snapshot reader keeps one store file open
// (MaxOpenFiles 1), so every later file is opened, its status and block
// locations asked of the NameNode, after the failover: the test checks
// that files were opened after it, which only the new active could have
// answered.
func TestHANameserviceFailoverMidRead(t *testing.T) {
	st := testenv.Require(t)
	const name = "demo_events"
	local, oracleDump := fixtureWithDump(t, name)
	ha := startHA(t, st)
	_, nn := ha.active(t, st)
	// 32 KB blocks: each store file (75 to 171 KB) spans several blocks.
	const root = "/ha-failover"
	upload(t, nn, local, root, 2, 32<<10)

	for _, failover := range []string{"failover", "kill-active"} {
		t.Run(failover, func(t *testing.T) {
			before, _ := ha.active(t, st)
			var openedAtFailover int64
			got, acted, hs := readMidway(t, "hdfs://"+ha.nameservice+root, local, name, 1, func(h *hdfs.FS) {
				openedAtFailover = h.Stats().FileReaders
				ans, err := st.Control("ha1-" + failover)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s mid-read: %s", failover, ans)
			})
			if !acted {
				t.Fatal("the read ended before the failover point")
			}
			if after, _ := ha.active(t, st); after == before {
				t.Fatalf("%s left %s active", failover, after)
			}
			if diff := diffDumps(got, oracleDump); diff != "" {
				t.Fatalf("read across %s against the oracle's dump: %s", failover, diff)
			}
			if hs.FileReaders <= openedAtFailover {
				t.Fatalf("no store file opened after the failover (%d before, %d in all): the new active NameNode was never asked", openedAtFailover, hs.FileReaders)
			}
			t.Logf("%d cells as the oracle's; store files opened %d before the failover, %d after; NameNode waits %d",
				strings.Count(string(got), "\n"), openedAtFailover, hs.FileReaders-openedAtFailover, hs.NameNodeRetries)
		})
		if _, err := st.Control("ha1-restart-down"); err != nil {
			t.Fatal(err)
		}
	}
}
