package snapshot_test

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"
	vfshdfs "github.com/rekeyhq/rekey/vfs/hdfs"
)

// TestHDFSReplicaFailover reads a snapshot from an HDFS with two
// DataNodes and every block on both (testenv's dfs2), and stops a
// DataNode in the middle of the read: the read completes with exactly the
// cells of the local copy (and of the oracle's dump of it). It stops
// DataNode 0 in one pass and DataNode 1 in the next, so at least one stop
// hits the replica that was serving, and checks that DataNode connections
// really failed across the two passes: a read that never met the stopped
// DataNode would prove nothing.
//
// The failover itself is the HDFS client's: each block's replicas come
// from the NameNode in order of network distance to the reader (here both
// DataNodes are on 127.0.0.1 and the order is random per block), and the
// client's block reader goes on with the next replica, from the same
// offset, when a DataNode refuses the connection or breaks it. vfs only
// counts (HDFS.Stats) and reopens when every replica failed.
func TestHDFSReplicaFailover(t *testing.T) {
	st := testenv.Require(t)
	const name = "demo_events"
	local, oracleDump := fixtureWithDump(t, name)
	want := dumpSnapshot(t, local, name, snapshot.ScanOptions{})
	if diff := diffDumps(want, oracleDump); diff != "" {
		t.Fatalf("local copy against the oracle's dump: %s", diff)
	}

	nn, err := st.Control("dfs2-start")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := st.Control("dfs2-shutdown"); err != nil {
			t.Errorf("shutting dfs2 down: %v", err)
		}
	})

	// 32 KB blocks: the store files (75 to 171 KB) span 3 to 6 blocks
	// each, so a DataNode stopped mid-read is stopped mid-file, with
	// blocks still to fetch.
	const root = "/replica-failover"
	upload(t, nn, local, root, 2, 32<<10)
	ans, err := st.Control("dfs2-replicated " + root)
	if err != nil {
		t.Fatal(err)
	}
	var files, blocks int
	if _, err := fmt.Sscanf(ans, "%d files %d blocks", &files, &blocks); err != nil || blocks <= files {
		t.Fatalf("dfs2-replicated answered %q: the store files should span several blocks", ans)
	}
	t.Logf("dfs2 at %s: %s, each on 2 DataNodes", nn, ans)

	var failures int64
	for _, stop := range []int{0, 1} {
		begin := time.Now()
		got, stopped, hs := readStopping(t, st, "hdfs://"+nn+root, local, name, stop)
		if !stopped {
			t.Fatalf("DataNode %d was never stopped: the read ended before the stop point", stop)
		}
		if diff := diffDumps(got, want); diff != "" {
			t.Fatalf("DataNode %d stopped mid-read: %s", stop, diff)
		}
		failures += hs.DatanodeFailures
		t.Logf("DataNode %d stopped mid-read: %d cells as wanted in %v; DataNode connections %d, failed %d, reads retried by vfs %d",
			stop, strings.Count(string(got), "\n"), time.Since(begin).Round(time.Millisecond), hs.DatanodeConns, hs.DatanodeFailures, hs.Retries)
		if _, err := st.Control("dfs2-start-datanode " + strconv.Itoa(stop)); err != nil {
			t.Fatal(err)
		}
	}
	if failures == 0 {
		t.Fatal("no DataNode connection failed in either pass: the stops never hit a replica being read, so nothing failed over")
	}
}

// fixtureWithDump returns the root of the committed fixture snapshot name
// and the oracle's dump of it.
func fixtureWithDump(t *testing.T, name string) (string, []byte) {
	t.Helper()
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dump, err := os.ReadFile(filepath.Join(repo, "testdata", "snapshots", name+".cells"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(repo, "testdata", "snapshots", name), dump
}

// readStopping reads the snapshot at rootURL (readMidway) and stops
// DataNode stop once the read is halfway through the first split: mid-file,
// with most of the snapshot's blocks still to read, each of which the
// NameNode lists with the stopped DataNode first half of the time.
// It returns the dump, whether the stop happened, and the HDFS counters.
func readStopping(t *testing.T, st *testenv.State, rootURL, local, name string, stop int) ([]byte, bool, vfshdfs.Stats) {
	t.Helper()
	return readMidway(t, rootURL, local, name, 0, func(*vfshdfs.FS) {
		if _, err := st.Control("dfs2-stop-datanode " + strconv.Itoa(stop)); err != nil {
			t.Fatal(err)
		}
		// Bring it back whatever happens next, for the next pass.
		t.Cleanup(func() { st.Control("dfs2-start-datanode " + strconv.Itoa(stop)) })
	})
}

// readMidway reads the snapshot at rootURL through vfs.Open and the
// snapshot reader, with read-ahead in small chunks, and calls act once the
// read is halfway through the first split (its cells counted on the same
// snapshot's local copy). maxOpen is OpenOptions.MaxOpenFiles (0: the
// default). It returns the dump, whether act ran, and the HDFS counters.
func readMidway(t *testing.T, rootURL, local, name string, maxOpen int, act func(*vfshdfs.FS)) ([]byte, bool, vfshdfs.Stats) {
	t.Helper()
	loc, err := vfs.Open(rootURL)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	h, ok := loc.FS.(*vfshdfs.FS)
	if !ok {
		t.Fatalf("%s opened as %T, not HDFS", rootURL, loc.FS)
	}
	// 8 KB chunks: the stream runs at most two chunks ahead of the
	// scanner, so act lands while the file is being read.
	s, splits := openSplits(t, loc.Path, name, snapshot.OpenOptions{FS: h, MaxOpenFiles: maxOpen, ReadAhead: vfs.ReadAheadOptions{Chunk: 8 << 10}})
	defer s.Close()
	// Split IDs are the same for the same snapshot and split options, so
	// the local copy's count for the first split says where its middle is.
	target := splits[0].ID
	actAt := cellsPerSplit(t, local, name)[target] / 2
	if actAt == 0 {
		t.Fatalf("split %s of the local copy has no cells", target)
	}

	var out []byte
	acted := false
	for _, sp := range splits {
		sc, err := s.NewScanner(t.Context(), sp, snapshot.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for sc.Next() {
			out = cell.AppendDump(out, sc.Cell())
			n++
			if sp.ID == target && n == actAt {
				act(h)
				acted = true
			}
		}
		if err := sc.Close(); err != nil {
			t.Fatalf("split %s, read on after the mid-read event: %v", sp.ID, err)
		}
	}
	return out, acted, h.Stats()
}

// cellsPerSplit counts each split's cells in the snapshot at a local root.
func cellsPerSplit(t *testing.T, root, name string) map[string]int {
	t.Helper()
	s, splits := openSplits(t, root, name, snapshot.OpenOptions{})
	defer s.Close()
	m := map[string]int{}
	for _, sp := range splits {
		if err := s.ReadSplit(t.Context(), sp, snapshot.ScanOptions{}, func(*cell.Cell) error {
			m[sp.ID]++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// upload copies the local directory tree src to dst on the HDFS at nn,
// every file written with the given replication and block size.
func upload(t *testing.T, nn, src, dst string, replication int, blockSize int64) {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	c, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{nn}, User: u.Username})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A run that died before its cleanup leaves dfs2 running with the files.
	if err := c.RemoveAll(dst); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	err = filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := path.Join(dst, filepath.ToSlash(rel))
		if d.IsDir() {
			return c.MkdirAll(to, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		w, err := c.CreateFile(to, replication, blockSize, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, in); err != nil {
			w.Close()
			return err
		}
		// The NameNode answers "not yet" until the last block has a
		// replica reported; asking again completes the file.
		err = w.Close()
		for deadline := time.Now().Add(time.Minute); hdfs.IsErrReplicating(err) && time.Now().Before(deadline); {
			time.Sleep(25 * time.Millisecond)
			err = w.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("uploading %s to hdfs://%s%s: %v", src, nn, dst, err)
	}
}
