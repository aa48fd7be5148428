package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// demoCell is what the demo job must keep of a cell: the user, family,
// event time (epoch millis), timestamp and value.
type demoCell struct {
	user, family string
	evt, ts      int64
	valueHex     string
}

// requireDemoRule checks the secure oracle's dump of table against the
// demo job's rule applied to the oracle's dump of the bundled snapshot:
// an old cell (row user, qualifier 8-byte event time) becomes a new cell
// whose row is the 6-byte user and the day's start (8 bytes of millis)
// and whose qualifier is the 4-byte offset into the day, with family,
// timestamp and value unchanged; each old cell exactly once.
func requireDemoRule(t *testing.T, table string) {
	t.Helper()
	abs, err := filepath.Abs("../../testdata/snapshots/demo_events")
	if err != nil {
		t.Fatal(err)
	}
	want := map[demoCell]int{}
	for _, f := range dumpLines(t, testenv.SecureOracle(t, nil, "dump-snapshot", "file://"+abs, "demo_events")) {
		row, q, ts := hexField(t, f[0]), hexField(t, f[2]), intField(t, f[3])
		if len(q) != 8 {
			t.Fatalf("old qualifier %s is not 8 bytes", f[2])
		}
		want[demoCell{string(row), f[1], int64(binary.BigEndian.Uint64(q)), ts, f[5]}]++
	}
	got := map[demoCell]int{}
	for _, f := range dumpLines(t, testenv.SecureOracle(t, nil, "dump-table", table)) {
		row, q, ts := hexField(t, f[0]), hexField(t, f[2]), intField(t, f[3])
		if len(row) != 14 || len(q) != 4 {
			t.Fatalf("new cell %v: row %d bytes, qualifier %d; want 14 and 4", f, len(row), len(q))
		}
		evt := int64(binary.BigEndian.Uint64(row[6:])) + int64(binary.BigEndian.Uint32(q))
		got[demoCell{string(row[:6]), f[1], evt, ts, f[5]}]++
	}
	missing, extra := 0, 0
	for c, n := range want {
		if got[c] < n {
			missing += n - got[c]
		}
	}
	for c, n := range got {
		if want[c] < n {
			extra += n - want[c]
		}
	}
	if len(want) == 0 || missing != 0 || extra != 0 {
		t.Fatalf("%s against the rule on the oracle's dump (%d cells): %d missing, %d not from any old cell", table, len(want), missing, extra)
	}
	t.Logf("%s: the oracle's dump equals the rule on the snapshot's dump (%d cells)", table, len(want))
}

func hexField(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("dump field %q: %v", s, err)
	}
	return b
}

func intField(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("dump field %q: %v", s, err)
	}
	return v
}

// confWith copies the client configuration in dir into a new folder,
// with props set in its hdfs-site.xml (added after the file's own, so
// they win: the last value of a property counts).
func confWith(t *testing.T, dir string, props map[string]string) string {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{"core-site.xml", "hdfs-site.xml", "hbase-site.xml"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "hdfs-site.xml" {
			const end = "</configuration>"
			if !bytes.Contains(b, []byte(end)) {
				t.Fatalf("%s has no %s", name, end)
			}
			var add strings.Builder
			for k, v := range props {
				fmt.Fprintf(&add, "<property><name>%s</name><value>%s</value></property>\n", k, v)
			}
			b = bytes.Replace(b, []byte(end), []byte(add.String()+end), 1)
		}
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// seedSpec has the secure oracle seed spec, written to a file named after
// table.
func seedSpec(t *testing.T, table string, spec map[string]any) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	path := filepath.Join(os.TempDir(), table+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	testenv.SecureOracle(t, nil, "seed", path)
	return nil
}

// TestSecureInspectLargeSnapshotMatchesOracle: a store file of a few MiB
// (some fifty 64 KiB packets, so hundreds of reads that span the
// DataNode's wrapped messages, the reads the HDFS client's own layers get
// wrong) reads through rekey's protection of the cluster's
// dfs.data.transfer.protection, and `rekey inspect snapshot --cells`
// prints exactly the oracle's dump.
func TestSecureInspectLargeSnapshotMatchesOracle(t *testing.T) {
	s := testenv.RequireSecure(t)
	table := fmt.Sprintf("secure_large_%d", time.Now().UnixNano())
	err := seedSpec(t, table, map[string]any{
		"table": table, "seed": 11,
		"families": []map[string]any{{"name": "f", "encoding": "NONE", "compression": "NONE", "versions": 1, "blocksize": 65536}},
		"steps": []map[string]any{
			{"op": "rows", "rows": 1500, "qualifiers": 2, "versions": 1, "value_max": 2000},
			{"op": "flush"},
			{"op": "snapshot", "name": table},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	secureClientEnv(t, s)
	want := string(testenv.SecureOracle(t, nil, "dump-snapshot", s.RootDir, table))
	code, out, errOut := runRekey(t, "inspect", "snapshot", s.RootDir, table, "--cells",
		"--keytab", s.Secure.HBaseKeytab, "--principal", s.Secure.HBasePrincipal)
	if code != 0 || out != want || len(want) == 0 {
		t.Fatalf("protection %s: exit %d, %d bytes (want %d identical to the oracle's dump); stderr %s",
			s.Secure.DataTransferProtection, code, len(out), len(want), errOut)
	}
	_, desc, _ := runRekey(t, "inspect", "snapshot", s.RootDir, table,
		"--keytab", s.Secure.HBaseKeytab, "--principal", s.Secure.HBasePrincipal)
	t.Logf("protection %s: %d bytes identical to the oracle's dump; %s", s.Secure.DataTransferProtection, len(out), regionsLine(desc))
}

// regionsLine is the "regions" line of inspect's description (the bytes
// of store files).
func regionsLine(desc string) string {
	for _, l := range strings.Split(desc, "\n") {
		if strings.HasPrefix(l, "regions") {
			return l
		}
	}
	return ""
}
