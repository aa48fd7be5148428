package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestVerifyLiveTable runs `rekey verify` against a live table built from
// the oracle's dump of a snapshot by the demo preset's rule, breaks it,
// fixes it, and checks the exit codes and that --only re-checks just the
// broken entity.
func TestVerifyLiveTable(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	src, snap, dst := "verify_cli_src_"+suffix, "verify_cli_snap_"+suffix, "verify_cli_dst_"+suffix
	dir := t.TempDir()
	spec := fmt.Sprintf(`{"table": %q, "seed": 3, "families": [{"name": "e"}], "split_keys": ["u00020"],
 "steps": [{"op": "events", "users": 40, "max_events": 300, "days": 5}, {"op": "flush"}, {"op": "snapshot", "name": %q}]}`, src, snap)
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", filepath.Join(dir, "spec.json"))
	defer func() {
		c.DeleteSnapshot(ctx, snap)
		c.DisableTable(ctx, src)
		c.DeleteTable(ctx, src)
	}()

	// The demo preset's rule: new row = user | day start (8 bytes), new
	// qualifier = millis into the day (4 bytes).
	const day = int64(24 * time.Hour / time.Millisecond)
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: dst, Families: []hbase.Family{{Name: "e"}}, SplitKeys: [][]byte{[]byte("u00010"), []byte("u00030")}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.DisableTable(ctx, dst)
		c.DeleteTable(ctx, dst)
	}()
	var target []cell.Cell
	for _, line := range strings.Split(strings.TrimSpace(string(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap))), "\n") {
		f := strings.Split(line, "\t")
		row, _ := hex.DecodeString(f[0])
		q, _ := hex.DecodeString(f[2])
		val, _ := hex.DecodeString(f[5])
		ts, _ := strconv.ParseInt(f[3], 10, 64)
		evt := int64(binary.BigEndian.Uint64(q))
		start := evt - evt%day
		target = append(target, cell.Cell{
			Row: binary.BigEndian.AppendUint64(row, uint64(start)), Family: []byte(f[1]),
			Qualifier: binary.BigEndian.AppendUint32(nil, uint32(evt-start)), Timestamp: ts, Type: cell.Put, Value: val,
		})
	}
	w := c.NewWriter([]byte(dst), hbase.WriterConfig{})
	if err := w.Write(ctx, target...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	job := filepath.Join(dir, "demo.yaml")
	if err := os.WriteFile(job, []byte(fmt.Sprintf(`source: {root: %q, name: %s}
target: {table: %s}
source_layout:
  row: [{field: user, type: string}]
  qualifier: [{field: ts, type: int, width: 8}]
target_layout:
  row:
    - {field: user, type: fixed, width: 6}
    - {field: day, type: time_bucket, of: ts, unit: day}
  qualifier:
    - {type: offset, of: ts, bucket: day}
entity: [user]
verify: {find_worst: true, heaviest: 5, sample: 10, retries: 1, backoff: 10ms}
`, st.RootDir, snap, dst)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--json")
	if code != exitOK {
		t.Fatalf("clean target: exit %d: %s\n%s", code, errOut, out)
	}
	// The job file's choice: 5 heaviest by cells, 5 by bytes (the same
	// users here), 10 sampled, some in both.
	clean := decodeReport(t, out)
	if n := clean.Summary.Entities; n < 10 || n > 15 {
		t.Errorf("the job's verify section chose %d entities, want 10 to 15", n)
	}
	// Rows are each side's own: one old row per user, one new row per
	// user and day.
	days := map[string]map[string]bool{}
	for _, tc := range target {
		u := "user=" + string(tc.Row[:6])
		if days[u] == nil {
			days[u] = map[string]bool{}
		}
		days[u][string(tc.Row)] = true
	}
	for _, e := range clean.Entities {
		if e.Old.Rows != 1 || e.New.Rows != int64(len(days[e.Entity])) {
			t.Errorf("%s: %d old rows, %d new rows; want 1 and %d", e.Entity, e.Old.Rows, e.New.Rows, len(days[e.Entity]))
		}
	}

	// Break one cell.
	broken := target[len(target)/2]
	changed := broken
	changed.Value = []byte("broken")
	if err := c.Put(ctx, []byte(dst), changed.Row, []cell.Cell{changed}); err != nil {
		t.Fatal(err)
	}
	user := string(broken.Row[:6])
	report := filepath.Join(dir, "report.json")
	code, out, errOut = runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--all", "--out", report)
	if code != exitProblems {
		t.Fatalf("broken target: exit %d, want %d: %s\n%s", code, exitProblems, errOut, out)
	}
	if !strings.Contains(out, "user="+user) || !strings.Contains(out, "value_differs=1") {
		t.Errorf("report does not name user=%s with value_differs=1:\n%s", user, out)
	}

	// Put the cell back (what `rekey run --only` will do), then --only
	// checks just that user, and passes.
	if err := c.Put(ctx, []byte(dst), broken.Row, []cell.Cell{broken}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--only", report, "--json")
	if code != exitOK {
		t.Fatalf("--only after the fix: exit %d: %s\n%s", code, errOut, out)
	}
	r := decodeReport(t, out)
	if r.Summary.Entities != 1 || r.Entities[0].Entity != "user="+user {
		t.Errorf("--only checked %+v, want only user=%s", r.Entities, user)
	}
}

// TestRunThenVerify: `rekey run` of the demo job into a live table, then
// `rekey verify` from the run's own sketch (the heaviest and a sample) and
// with --all: every entity matches.
func TestRunThenVerify(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	table := "verify_e2e_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	defer func() {
		c.DisableTable(ctx, table)
		c.DeleteTable(ctx, table)
	}()
	job := demoJob(t)
	if code, out, errOut := runRekey(t, "run", job, "--zk", st.ZKQuorum, "--table", table, "--create", "--progress", "none"); code != 0 {
		t.Fatalf("run: exit %d: %s\n%s", code, errOut, out)
	}
	code, out, errOut := runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--table", table, "--heaviest", "10", "--sample", "50", "--json")
	if code != exitOK {
		t.Fatalf("verify from the run's sketch: exit %d: %s\n%.3000s", code, errOut, out)
	}
	if r := decodeReport(t, out); r.Summary.Entities < 50 || r.Summary.Mismatched != 0 {
		t.Errorf("summary %+v", r.Summary)
	}
	code, out, errOut = runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--table", table, "--all", "--json")
	if code != exitOK {
		t.Fatalf("verify --all: exit %d: %s\n%.3000s", code, errOut, out)
	}
	// The oracle's dump of the bundled snapshot: 31413 cells, compared
	// on both sides.
	if r := decodeReport(t, out); r.Summary.CellsCompared != 2*31413 || r.Summary.Mismatched != 0 {
		t.Errorf("--all summary %+v", r.Summary)
	}
	siteFindsTheCluster(t, st, job, table)

	// Break one cell, verify, redo with run --only, verify again: clean.
	sc := c.Scan(ctx, []byte(table), &hbase.Scan{Start: []byte("u00100"), Limit: 1})
	if !sc.Next() {
		t.Fatalf("no row from u00100: %v", sc.Err())
	}
	broken := sc.Cell().Clone()
	sc.Close()
	broken.Value = []byte("broken")
	if err := c.Put(ctx, []byte(table), broken.Row, []cell.Cell{broken}); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	code, out, errOut = runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--table", table, "--all", "--retries", "0", "--out", report)
	if code != exitProblems || !strings.Contains(out, "value_differs=1") {
		t.Fatalf("broken target: exit %d: %s\n%.3000s", code, errOut, out)
	}
	if code, out, errOut := runRekey(t, "run", job, "--zk", st.ZKQuorum, "--table", table, "--only", report, "--progress", "none"); code != 0 {
		t.Fatalf("run --only: exit %d: %s\n%s", code, errOut, out)
	}
	code, out, errOut = runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--table", table, "--only", report, "--json")
	if code != exitOK {
		t.Fatalf("verify --only after run --only: exit %d: %s\n%.3000s", code, errOut, out)
	}
	if r := decodeReport(t, out); r.Summary.Entities != 1 {
		t.Errorf("--only checked %d entities, want the 1 broken", r.Summary.Entities)
	}
}

// siteFindsTheCluster: with only $HBASE_CONF_DIR naming the cluster (no
// --zk, no $REKEY_ZK, no target.zookeeper in the job), `rekey run JOB`
// (the same cells again, idempotent), `rekey verify JOB --all` of the table
// and `rekey inspect table TABLE` find it, as HBase's own tools do.
func siteFindsTheCluster(t *testing.T, st *testenv.State, job, table string) {
	t.Helper()
	t.Run("found through HBASE_CONF_DIR", func(t *testing.T) {
		t.Setenv("REKEY_ZK", "")
		t.Setenv("HBASE_CONF_DIR", writeHBaseSite(t, st.ZKQuorum, st.ZNodeParent))
		ckpt := filepath.Join(t.TempDir(), "checkpoint.json")
		code, out, errOut := runRekey(t, "run", job, "--table", table, "--checkpoint", ckpt, "--progress", "none", "--json")
		if code != exitOK || !strings.Contains(out, `"cells_written":31413`) {
			t.Fatalf("run: exit %d: %s\n%.3000s", code, errOut, out)
		}
		code, out, errOut = runRekey(t, "verify", job, "--table", table, "--all", "--json")
		if code != exitOK {
			t.Fatalf("verify --all: exit %d: %s\n%.3000s", code, errOut, out)
		}
		if r := decodeReport(t, out); r.Summary.CellsCompared != 2*31413 || r.Summary.Mismatched != 0 {
			t.Errorf("verify --all summary %+v", r.Summary)
		}
		code, out, errOut = runRekey(t, "inspect", "table", table)
		if code != exitOK || out == "" {
			t.Fatalf("inspect table: exit %d, %d bytes of regions: %s", code, len(out), errOut)
		}
	})
}
