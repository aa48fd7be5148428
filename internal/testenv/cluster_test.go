package testenv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/go-zookeeper/zk"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestClusterLayout seeds a small table through the oracle, then checks
// with a Go HDFS client that HBase laid it out where rekey will look (the
// table under data/, the snapshot under .hbase-snapshot/), and that a
// local export of the snapshot reads back, through HBase, to exactly the
// cells of the snapshot on HDFS and of the live table.
func TestClusterLayout(t *testing.T) {
	s := Require(t)
	const table, snap = "testenv_layout", "testenv_layout_snap"
	spec := `{"table":"` + table + `","seed":5,
	  "families":[{"name":"f","encoding":"FAST_DIFF","compression":"SNAPPY"}],
	  "split_keys":["r00010"],
	  "steps":[{"op":"rows","rows":20,"qualifiers":2},{"op":"flush"},{"op":"snapshot","name":"` + snap + `"}]}`
	specPath := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	Oracle(t, "seed", specPath)

	u, err := url.Parse(s.RootDir)
	if err != nil || u.Scheme != "hdfs" {
		t.Fatalf("hbase_rootdir %q is not an hdfs:// URL (%v)", s.RootDir, err)
	}
	client, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{s.NameNode}, User: "root"})
	if err != nil {
		t.Fatalf("connecting to the NameNode at %s: %v", s.NameNode, err)
	}
	defer client.Close()
	entries, err := client.ReadDir(u.Path)
	if err != nil {
		t.Fatalf("listing hbase.rootdir %s: %v", u.Path, err)
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Name()] = true
	}
	for _, want := range []string{"data", ".hbase-snapshot", "hbase.id", "hbase.version"} {
		if !have[want] {
			t.Errorf("hbase.rootdir %s has no %s (has %v)", u.Path, want, have)
		}
	}
	for _, p := range []string{
		path.Join(u.Path, "data", "default", table, ".tabledesc"),
		path.Join(u.Path, ".hbase-snapshot", snap, ".snapshotinfo"),
		path.Join(u.Path, ".hbase-snapshot", snap, "data.manifest"),
	} {
		if _, err := client.Stat(p); err != nil {
			t.Errorf("stat %s: %v", p, err)
		}
	}
	// Read a whole HFile's bytes over HDFS: the DataNode's address must be
	// reachable (loopback), not only the NameNode.
	regions, err := client.ReadDir(path.Join(u.Path, "data", "default", table))
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, r := range regions {
		if !r.IsDir() || strings.HasPrefix(r.Name(), ".") {
			continue
		}
		dir := path.Join(u.Path, "data", "default", table, r.Name(), "f")
		files, err := client.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := client.ReadFile(path.Join(dir, f.Name()))
			if err != nil {
				t.Fatalf("reading %s/%s over HDFS: %v", dir, f.Name(), err)
			}
			// Every HFile v3 ends with its trailer: version 3 in the last byte.
			if len(b) < 4 || b[len(b)-1] != 3 {
				t.Errorf("%s/%s: %d bytes, last byte %v: not an HFile v3", dir, f.Name(), len(b), b[len(b)-1:])
			}
			read++
		}
	}
	if read != 2 {
		t.Errorf("read %d HFiles of %s over HDFS, want 2 (two regions, one flush)", read, table)
	}

	fromHDFS := Oracle(t, "dump-snapshot", s.RootDir, snap)
	checkDump(t, fromHDFS, 40)
	if live := Oracle(t, "dump-table", table); !bytes.Equal(live, fromHDFS) {
		t.Errorf("dump-table %s differs from dump-snapshot %s", table, snap)
	}
	dest := t.TempDir()
	Oracle(t, "export-snapshot", snap, dest)
	fromLocal := Oracle(t, "dump-snapshot", "file://"+dest, snap)
	if !bytes.Equal(fromLocal, fromHDFS) {
		t.Errorf("the local export of %s reads back differently:\nHDFS:\n%s\nlocal:\n%s", snap, fromHDFS, fromLocal)
	}
}

// checkDump checks that out is n lines in the canonical dump format.
func checkDump(t *testing.T, out []byte, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("dump has %d lines, want %d:\n%s", len(lines), n, out)
	}
	for i, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 6 {
			t.Fatalf("dump line %d has %d fields, want 6: %q", i+1, len(f), l)
		}
		if _, err := strconv.ParseInt(f[3], 10, 64); err != nil || f[4] != "Put" {
			t.Fatalf("dump line %d: bad timestamp or type: %q", i+1, l)
		}
	}
}

// TestMetaLocationInZooKeeper reads where hbase:meta lives the way a
// client bootstraps: the meta-region-server znode (0xFF, a 4-byte id
// length, the id, "PBUF", then a MetaRegionServer protobuf whose field 1 is
// a ServerName {1: host, 2: port, 3: start code}). The server must be a
// loopback address and one of the live region servers the control channel
// reports.
func TestMetaLocationInZooKeeper(t *testing.T) {
	s := Require(t)
	conn, _, err := zk.Connect([]string{s.ZKQuorum}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("zookeeper %s: %v", s.ZKQuorum, err)
	}
	defer conn.Close()
	znode := s.ZNodeParent + "/meta-region-server"
	data, _, err := conn.Get(znode)
	if err != nil {
		t.Fatalf("get %s from %s: %v", znode, s.ZKQuorum, err)
	}
	host, port, err := parseMetaRegionServer(data)
	if err != nil {
		t.Fatalf("%s: %v (% x)", znode, err, data)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		t.Errorf("hbase:meta is on %q, not a loopback address", host)
	}
	live, err := s.Control("list-regionservers")
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("%s,%d,", host, port)
	found := false
	for _, sn := range strings.Fields(live) {
		found = found || strings.HasPrefix(sn, prefix)
	}
	if !found {
		t.Errorf("hbase:meta on %s:%d, which is not a live region server (%s)", host, port, live)
	}
}

// parseMetaRegionServer decodes the meta-region-server znode's host and
// port, reading only the fields it needs.
func parseMetaRegionServer(b []byte) (string, int, error) {
	if len(b) < 5 || b[0] != 0xFF {
		return "", 0, fmt.Errorf("no 0xFF metadata marker")
	}
	idLen := int(binary.BigEndian.Uint32(b[1:5]))
	if idLen < 0 || 5+idLen+4 > len(b) {
		return "", 0, fmt.Errorf("metadata length %d overruns %d bytes", idLen, len(b))
	}
	b = b[5+idLen:]
	if string(b[:4]) != "PBUF" {
		return "", 0, fmt.Errorf("no PBUF magic after the metadata")
	}
	server, err := field(b[4:], 1)
	if err != nil {
		return "", 0, fmt.Errorf("MetaRegionServer: %w", err)
	}
	host, err := field(server, 1)
	if err != nil {
		return "", 0, fmt.Errorf("ServerName: %w", err)
	}
	port := -1
	for rest := server; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return "", 0, protowire.ParseError(n)
		}
		rest = rest[n:]
		if num == 2 && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(rest)
			if m < 0 {
				return "", 0, protowire.ParseError(m)
			}
			port = int(v)
		}
		m := protowire.ConsumeFieldValue(num, typ, rest)
		if m < 0 {
			return "", 0, protowire.ParseError(m)
		}
		rest = rest[m:]
	}
	if port <= 0 {
		return "", 0, fmt.Errorf("ServerName has no port")
	}
	return string(host), port, nil
}

// field returns the bytes of length-delimited field num of message b.
func field(b []byte, num protowire.Number) ([]byte, error) {
	for len(b) > 0 {
		n, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return nil, protowire.ParseError(k)
		}
		b = b[k:]
		if n == num && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			return v, nil
		}
		m := protowire.ConsumeFieldValue(n, typ, b)
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil, fmt.Errorf("no field %d", num)
}

// TestControlChannel checks the control channel answers and rejects
// unknown commands with an error rather than silence.
func TestControlChannel(t *testing.T) {
	s := Require(t)
	if got, err := s.Control("ping"); err != nil || got != "pong" {
		t.Fatalf("ping: %q, %v", got, err)
	}
	if _, err := s.Control("no-such-command"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown command: got %v, want an error naming it", err)
	}
	live, err := s.Control("list-regionservers")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(live)); n < 1 {
		t.Fatalf("list-regionservers: %q", live)
	}
}

// TestOracleCallPastItsDeadline runs an oracle call that does not answer
// (hang, a sleeping main thread) under a 15 s deadline: it must come back
// within the deadline and a little more, stopped, with an error naming the
// call, the cluster's state from the control channel (cluster-state) and
// where the oracle's main thread waited, taken from its thread dump.
func TestOracleCallPastItsDeadline(t *testing.T) {
	s := Require(t)
	state, err := s.ControlWithin("cluster-state", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(state, "live region servers") || !strings.Contains(state, "procedures not finished") {
		t.Fatalf("cluster-state: %q", state)
	}
	t.Setenv("TESTENV_ORACLE_TIMEOUT", "15s")
	start := time.Now()
	_, err = OracleCall{Args: []string{"hang", "600"}}.Run()
	took := time.Since(start)
	if err == nil {
		t.Fatal("an oracle call sleeping 600 s returned no error under a 15 s deadline")
	}
	msg := err.Error()
	for _, want := range []string{"oracle hang 600", "no answer within 15s", "cluster: master", "live region servers", "Thread.sleep"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	// 15 s, the cluster's state (an admin call), the thread dump's 3 s.
	if took > 90*time.Second {
		t.Errorf("the call came back after %v, not near its 15 s deadline", took)
	}
	t.Logf("stopped after %v:\n%s", took.Round(time.Second), msg)
}
