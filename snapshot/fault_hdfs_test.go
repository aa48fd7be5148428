package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// dropper opens DataNode connections for the HDFS client and cuts them
// as a test says: after a number of bytes received in all, once (a
// DataNode connection that drops mid-file), and optionally refusing every
// connection after that (a DataNode that stays away).
type dropper struct {
	after     int64 // bytes received over all connections before the cut
	thenDown  bool  // refuse every connection after the cut
	received  atomic.Int64
	cut       atomic.Bool
	dials     atomic.Int64
	mu        sync.Mutex
	cutOffset int64
}

var errDropped = errors.New("test: DataNode connection dropped")

func (d *dropper) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	if d.thenDown && d.cut.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("test: DataNode down")}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &droppingConn{Conn: c, d: d}, nil
}

type droppingConn struct {
	net.Conn
	d *dropper
}

func (c *droppingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if total := c.d.received.Add(int64(n)); total > c.d.after && c.d.cut.CompareAndSwap(false, true) {
		c.Conn.Close()
		return 0, errDropped
	}
	return n, err
}

// TestHDFSConnectionDrops reads a snapshot over HDFS through DataNode
// connections that drop mid-file. A drop once: the read reconnects at the
// same offset and returns exactly the oracle's cells, with read-ahead on
// and off. A DataNode that does not come back: the scan fails with an
// error naming the store file, never ends early with fewer cells. (The
// cluster's HDFS has one DataNode, so the client has no other replica and
// every failure reaches vfs, which reopens; TestHDFSReplicaFailover shows
// the client failing over to another replica, on testenv's dfs2.)
func TestHDFSConnectionDrops(t *testing.T) {
	st := testenv.Require(t)
	prefix := os.Getenv("REKEY_TEST_PREFIX")
	name := prefix + "it_drops"
	spec := map[string]any{
		"table": name, "families": []map[string]any{{"name": "f", "versions": 2}},
		"steps": []map[string]any{
			{"op": "rows", "rows": 6000, "qualifiers": 4, "versions": 2, "value_max": 300},
			{"op": "flush"}, {"op": "snapshot", "name": name},
		},
	}
	b, _ := json.Marshal(spec)
	path := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	oracle(t, "seed", path)
	want := oracle(t, "dump-snapshot", st.RootDir, name)
	u, err := url.Parse(st.RootDir)
	if err != nil {
		t.Fatal(err)
	}

	var hs hdfs.Stats // the last read's
	read := func(d *dropper, ra vfs.ReadAheadOptions) ([]byte, snapshot.Stats, error) {
		h, err := hdfs.DialWith(u.Host, hdfs.Options{DatanodeDial: d.dial})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { hs = h.Stats(); h.Close() }()
		s, err := snapshot.Open(t.Context(), u.Path, name, snapshot.OpenOptions{FS: h, ReadAhead: ra})
		if err != nil {
			return nil, snapshot.Stats{}, err
		}
		defer s.Close()
		splits, err := s.Splits(snapshot.SplitOptions{})
		if err != nil {
			return nil, snapshot.Stats{}, err
		}
		var out []byte
		var stats snapshot.Stats
		for _, sp := range splits {
			sc, err := s.NewScanner(t.Context(), sp, snapshot.ScanOptions{})
			if err != nil {
				return out, stats, err
			}
			for sc.Next() {
				out = cell.AppendDump(out, sc.Cell())
			}
			err = sc.Close()
			st := sc.Stats()
			stats.ReadAhead.Streams += st.ReadAhead.Streams
			stats.ReadAhead.StreamBytes += st.ReadAhead.StreamBytes
			stats.ReadAhead.Positional += st.ReadAhead.Positional
			if err != nil {
				return out, stats, err
			}
		}
		return out, stats, nil
	}

	// The store file is a few MB; cut the connection well inside it.
	const cutAt = 1 << 20
	for _, ra := range []struct {
		label string
		opts  vfs.ReadAheadOptions
	}{
		{"read-ahead", vfs.ReadAheadOptions{Chunk: 256 << 10}},
		{"read-ahead off", vfs.ReadAheadOptions{Off: true}},
	} {
		t.Run("drop once, "+ra.label, func(t *testing.T) {
			d := &dropper{after: cutAt}
			got, stats, err := read(d, ra.opts)
			if err != nil {
				t.Fatalf("read failed after one dropped connection: %v", err)
			}
			if !d.cut.Load() {
				t.Fatalf("the connection was never cut (%d bytes received): the test proves nothing", d.received.Load())
			}
			if diff := diffDumps(got, want); diff != "" {
				t.Fatalf("after a dropped connection: %s", diff)
			}
			// One DataNode, so the client has no other replica: the
			// failure reaches vfs, which reads again.
			if hs.DatanodeFailures != 1 || hs.Retries < 1 || hs.DatanodeConns != d.dials.Load() {
				t.Errorf("HDFS stats %+v after one dropped connection of %d: want 1 failure, a retry, every connection counted", hs, d.dials.Load())
			}
			t.Logf("%d DataNode connections, %d bytes; read-ahead %+v; HDFS %+v", d.dials.Load(), d.received.Load(), stats.ReadAhead, hs)
		})
		t.Run("DataNode gone, "+ra.label, func(t *testing.T) {
			d := &dropper{after: cutAt, thenDown: true}
			got, _, err := read(d, ra.opts)
			if err == nil {
				t.Fatalf("read succeeded with %d of %d bytes of cells although the DataNode went away", len(got), len(want))
			}
			if !strings.Contains(err.Error(), "store file") || !strings.Contains(err.Error(), name) {
				t.Errorf("error does not name the store file: %v", err)
			}
			t.Logf("error, as wanted: %v", err)
		})
	}
}
