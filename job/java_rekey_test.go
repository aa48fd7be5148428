package job

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// The end-to-end bench runs the wide -> bucketed re-key of
// configs/wide_to_bucketed.yaml in four places: rekey's preset, and the
// oracle's Java rule (WideToBucketed) used by the Java and Spark
// contenders. These tests hold the Java rule, and the Java contenders'
// target tables, to the layout as documented, computed here from the
// oracle's dump of a source the cluster wrote.

// ruleSpec seeds a small source in the wide layout with cells of every kind
// the rule treats differently: several regions and families, versions,
// delete markers, a heavy sensor, empty values, and keys the rule must
// refuse (a 0x00 inside the sensor, times in year 10000, 2-byte
// qualifiers).
const ruleSpec = `{"table": "bench_rule_src", "seed": 15,
 "families": [{"name": "d", "encoding": "FAST_DIFF", "compression": "SNAPPY", "versions": 3},
              {"name": "e", "versions": 2}],
 "split_keys": ["s000010", "s000020"],
 "steps": [
  {"op": "readings", "family": "d", "sensors": 30, "readings": 40, "versions": 3, "value_min": 0, "value_max": 12,
   "heavy": [{"index": 12, "readings": 3000}], "deletes": 4, "flush_before_deletes": true},
  {"op": "readings", "family": "e", "sensors": 5, "sensor_format": "t%03d", "readings": 20, "versions": 2},
  {"op": "readings", "family": "d", "sensors": 3, "sensor_format": "z\u0000%02d", "readings": 5},
  {"op": "readings", "family": "d", "sensors": 2, "sensor_format": "y%02d", "readings": 100, "days": 1,
   "ts_base": 253402299000000},
  {"op": "rows", "families": ["d"], "rows": 5, "row_format": "q%03d", "qualifiers": 2},
  {"op": "flush"},
  {"op": "snapshot", "name": "bench_rule_snap"}]}`

// isoMax is 10000-01-01T00:00:00Z in ms: hours from there on have no
// four-digit-year ISO text, so the layout refuses them.
const isoMax = 253402300800000

// ruleRekey is the layout written out: old row = sensor, old qualifier =
// 8-byte two's-complement ms; new row = sensor, 0x00, the hour as
// "2006-01-02T15" (UTC); new qualifier = ms past the hour, 4 bytes
// big-endian. Everything else is copied. ok is false for a key the layout
// refuses.
func ruleRekey(c cell.Cell) (out cell.Cell, ok bool) {
	if len(c.Qualifier) != 8 || bytes.IndexByte(c.Row, 0) >= 0 {
		return out, false
	}
	ts := int64(binary.BigEndian.Uint64(c.Qualifier))
	if ts < 0 || ts >= isoMax {
		return out, false
	}
	start := ts - ts%3_600_000
	out = c
	out.Row = append(append(append([]byte(nil), c.Row...), 0), time.UnixMilli(start).UTC().Format("2006-01-02T15")...)
	out.Qualifier = binary.BigEndian.AppendUint32(nil, uint32(ts-start))
	return out, true
}

func parseDump(t *testing.T, what string, b []byte) []cell.Cell {
	t.Helper()
	var cells []cell.Cell
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		c, err := dumpLine(line)
		if err != nil {
			t.Fatalf("%s line %d %q: %v", what, i+1, line, err)
		}
		cells = append(cells, c)
	}
	return cells
}

func dumpLine(s string) (cell.Cell, error) {
	var c cell.Cell
	f := strings.Split(s, "\t")
	if len(f) != 6 {
		return c, fmt.Errorf("%d fields, want 6", len(f))
	}
	var err error
	if c.Row, err = hex.DecodeString(f[0]); err != nil {
		return c, err
	}
	c.Family = []byte(f[1])
	if c.Qualifier, err = hex.DecodeString(f[2]); err != nil {
		return c, err
	}
	if c.Timestamp, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return c, err
	}
	if c.Type, err = cell.ParseType(f[4]); err != nil {
		return c, err
	}
	c.Value, err = hex.DecodeString(f[5])
	return c, err
}

func lines(cells []cell.Cell) []string {
	out := make([]string, len(cells))
	for i := range cells {
		out[i] = strings.TrimSuffix(string(cell.AppendDump(nil, &cells[i])), "\n")
	}
	sort.Strings(out)
	return out
}

// digest is the oracle's order-independent digest: the sum mod 2^64 of the
// first 8 bytes (big-endian) of the MD5 of each cell's dump line.
func digest(cells []cell.Cell) string {
	var sum uint64
	for i := range cells {
		h := md5.Sum(bytes.TrimSuffix(cell.AppendDump(nil, &cells[i]), []byte("\n")))
		sum += binary.BigEndian.Uint64(h[:8])
	}
	return fmt.Sprintf("%016x", sum)
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d cells, want %d", what, len(got), len(want))
	}
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i] != want[i] {
			t.Fatalf("%s: first difference at sorted cell %d:\n got %s\nwant %s", what, i, got[i], want[i])
		}
	}
}

// ruleSource seeds the rule source once per test binary and returns its
// cells (from the oracle's TableSnapshotScanner dump), the expected new
// cells and the refused old ones.
func ruleSource(t *testing.T) (st *testenv.State, src, want, refused []cell.Cell) {
	st = testenv.Require(t)
	spec := filepath.Join(t.TempDir(), "rule.json")
	if err := os.WriteFile(spec, []byte(ruleSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", spec)
	t.Cleanup(func() {
		testenv.Drop([]string{"bench_rule_snap"}, []string{"bench_rule_src"})
	})
	src = parseDump(t, "dump-snapshot", testenv.Oracle(t, "dump-snapshot", st.RootDir, "bench_rule_snap"))
	for _, c := range src {
		if o, ok := ruleRekey(c); ok {
			want = append(want, o)
		} else {
			refused = append(refused, c)
		}
	}
	// The source must exercise both outcomes and every refusal.
	kinds := map[string]int{}
	for _, c := range refused {
		switch {
		case len(c.Qualifier) != 8:
			kinds["qualifier"]++
		case bytes.IndexByte(c.Row, 0) >= 0:
			kinds["separator"]++
		default:
			kinds["year"]++
		}
	}
	if len(want) < 10000 || kinds["qualifier"] == 0 || kinds["separator"] == 0 || kinds["year"] == 0 {
		t.Fatalf("source too thin: %d cells kept, refusals %v", len(want), kinds)
	}
	t.Logf("source: %d cells, %d re-keyed, refusals %v", len(src), len(want), kinds)
	return st, src, want, refused
}

// TestJavaRekey seeds the rule source once and runs the checks below on it.
func TestJavaRekey(t *testing.T) {
	st, src, want, refused := ruleSource(t)
	t.Run("rule", func(t *testing.T) { checkRule(t, st, src, want, refused) })
	t.Run("put", func(t *testing.T) {
		checkContender(t, st, len(src), want, len(refused), "bench-e2e-put", "1000")
	})
	t.Run("hfile", func(t *testing.T) {
		// A 0.1 MB sort buffer makes several sorted runs, so regions get
		// several files each.
		checkContender(t, st, len(src), want, len(refused), "bench-e2e-hfile",
			fmt.Sprintf("hdfs://%s/tmp/bench_rule_stage_%d", st.NameNode, os.Getpid()), "0.1")
	})
}

// checkRule runs the oracle's Java re-key over a snapshot the cluster
// wrote and checks it cell for cell against the layout computed here, and
// checks rekey's own preset (configs/wide_to_bucketed.yaml) against the
// same expectation; then checks the oracle's digest of the expected target
// against the digest computed here.
func checkRule(t *testing.T, st *testenv.State, src, want, refused []cell.Cell) {
	wantLines := lines(want)

	var stdout, stderr bytes.Buffer
	if _, err := (testenv.OracleCall{Args: []string{"rekey-dump", st.RootDir, "bench_rule_snap"}, Stdout: &stdout, Stderr: &stderr}).Run(); err != nil {
		t.Fatalf("%v", err)
	}
	sameLines(t, "Java re-key", lines(parseDump(t, "rekey-dump", stdout.Bytes())), wantLines)
	var gotRefused []cell.Cell
	for _, l := range strings.Split(stderr.String(), "\n") {
		rest, ok := strings.CutPrefix(l, "rejected\t")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '\t')
		c, err := dumpLine(rest[:i])
		if err != nil {
			t.Fatalf("rejected line %q: %v", l, err)
		}
		gotRefused = append(gotRefused, c)
	}
	sameLines(t, "Java refusals", lines(gotRefused), lines(refused))

	j, err := Load("../configs/wide_to_bucketed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := j.Program.New()
	var goOut, goRefused []cell.Cell
	for _, c := range src {
		if err := r.Map(c, func(o cell.Cell) { goOut = append(goOut, o.Clone()) }); err != nil {
			goRefused = append(goRefused, c)
		}
	}
	sameLines(t, "Go preset", lines(goOut), wantLines)
	sameLines(t, "Go preset refusals", lines(goRefused), lines(refused))

	var d struct {
		Cells    int    `json:"cells"`
		Digest   string `json:"digest"`
		Rejected int    `json:"rejected"`
	}
	out := testenv.Oracle(t, "digest-snapshot", st.RootDir, "bench_rule_snap", "--rekey")
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("digest-snapshot: %v: %s", err, out)
	}
	if d.Cells != len(want) || d.Digest != digest(want) || d.Rejected != len(refused) {
		t.Fatalf("digest-snapshot --rekey = %s, want cells %d digest %s rejected %d", out, len(want), digest(want), len(refused))
	}
}

// checkContender runs one Java contender (an oracle bench-e2e-* command)
// from the rule snapshot into a fresh pre-split target table and checks
// its counts and the table's cells, as HBase returns them, against the
// expected cells.
func checkContender(t *testing.T, st *testenv.State, read int, want []cell.Cell, refused int, cmd string, extra ...string) {
	table := "bench_rule_" + strings.TrimPrefix(cmd, "bench-e2e-")
	spec := filepath.Join(t.TempDir(), "target.json")
	targetSpec := `{"table": "` + table + `", "families": [
	  {"name": "d", "encoding": "FAST_DIFF", "compression": "SNAPPY", "versions": 3}, {"name": "e", "versions": 2}],
	  "split_keys": ["s000010", "s000020", "t"], "steps": []}`
	if err := os.WriteFile(spec, []byte(targetSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", spec)
	t.Cleanup(func() { testenv.Drop(nil, []string{table}) })

	out := testenv.Oracle(t, append([]string{cmd, st.RootDir, "bench_rule_snap", table}, extra...)...)
	var res struct {
		Read     int `json:"cells_read"`
		Written  int `json:"cells_written"`
		Rejected int `json:"rejected"`
		Files    int `json:"files"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		t.Fatalf("%s: %v: %s", cmd, err, out)
	}
	if res.Read != read || res.Written != len(want) || res.Rejected != refused {
		t.Fatalf("%s: read %d, wrote %d, refused %d; want %d, %d, %d", cmd, res.Read, res.Written, res.Rejected, read, len(want), refused)
	}
	if cmd == "bench-e2e-hfile" && res.Files < 8 {
		t.Errorf("%s staged %d files; a 0.1 MB buffer over 4 regions and 2 families should make more than 8", cmd, res.Files)
	}
	sameLines(t, cmd+" target", lines(parseDump(t, "dump-table", testenv.Oracle(t, "dump-table", table))), lines(want))
}
