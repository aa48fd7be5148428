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
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/verify"
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
	st, c, table := scratchTable(t, "verify_e2e_")
	ctx := context.Background()
	job := demoJob(t)
	if code, out, errOut := runRekey(t, "run", job, "--zk", st.ZKQuorum, "--table", table, "--create", "--progress", "none"); code != 0 {
		t.Fatalf("run: exit %d: %s\n%s", code, errOut, out)
	}
	code, out, errOut := runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--table", table, "--heaviest", "10", "--sample", "50", "--json")
	if code != exitOK {
		t.Fatalf("verify from the run's sketch: exit %d: %s\n%.3000s", code, errOut, out)
	}
	// The demo's new key keeps every old field: compared by the inverse.
	if r := decodeReport(t, out); r.Summary.Entities < 50 || r.Summary.Mismatched != 0 || r.Method != "inverse" {
		t.Errorf("method %s, summary %+v", r.Method, r.Summary)
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

// hourLate is a forward transform with a bug, for tests: the demo job's
// own mapping, but a cell of the first hour of a UTC day goes to the
// previous day's row, its offset unchanged (a day boundary an hour late).
func hourLate(p *transform.Program) func() transform.Mapper {
	const hour, day = 3_600_000, 86_400_000
	return func() transform.Mapper {
		rk := p.New()
		return transform.MapFunc(func(src cell.Cell, emit func(cell.Cell)) error {
			return rk.Map(src, func(c cell.Cell) {
				if binary.BigEndian.Uint32(c.Qualifier) < hour {
					start := int64(binary.BigEndian.Uint64(c.Row[6:]))
					c.Row = binary.BigEndian.AppendUint64(append([]byte(nil), c.Row[:6]...), uint64(start-day))
				}
				emit(c)
			})
		})
	}
}

// TestVerifyFindsABrokenRun: a run of the demo job through puts whose
// forward transform carries a bug (hourLate) writes the target. HBase's
// dumps of the snapshot and of the target, read by the demo layout's rule,
// say which users' cells were moved. `rekey verify` (the inverse, its
// default here) fails naming exactly those users, each moved cell as
// mapped_wrong with its old and new keys; verifying with the same broken
// transform forward passes (the blind spot), and `--method forward` with
// the job's own transform fails too (a target another tool mapped wrong).
func TestVerifyFindsABrokenRun(t *testing.T) {
	st, _, table := scratchTable(t, "verify_broken_")
	ctx := context.Background()
	jobPath := demoJob(t)
	load := func() *job.Job {
		j, err := job.Load(jobPath)
		if err != nil {
			t.Fatal(err)
		}
		j.Target.Table, j.Target.ZKQuorum, j.Target.ZNodeParent = table, st.ZKQuorum, st.ZNodeParent
		return j
	}
	j := load()
	j.Target.Create.Enabled = true
	run, err := pipeline.Prepare(ctx, j, pipeline.Options{NewMapper: hourLate(j.Program)})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(); err != nil {
		t.Fatal(err)
	}

	// The judge. An old cell is the user, event time, timestamp and value
	// of a line of the snapshot's dump; a new cell of the target's dump
	// reads back, by the demo layout, to user = row[:6] and event time =
	// day start (row[6:14]) + offset (the qualifier). A new cell that
	// reads back to no old cell was moved by the bug.
	type content struct {
		user     string
		evt, ts  int64
		valueHex string
	}
	olds := map[content]bool{}
	for _, f := range dumpLines(t, mustRead(t, "../../testdata/snapshots/demo_events.cells")) {
		row, _ := hex.DecodeString(f[0])
		q, _ := hex.DecodeString(f[2])
		ts, _ := strconv.ParseInt(f[3], 10, 64)
		olds[content{string(row), int64(binary.BigEndian.Uint64(q)), ts, f[5]}] = true
	}
	moved := map[string]int64{}
	var newCells int
	for _, f := range dumpLines(t, testenv.Oracle(t, "dump-table", table)) {
		row, _ := hex.DecodeString(f[0])
		q, _ := hex.DecodeString(f[2])
		ts, _ := strconv.ParseInt(f[3], 10, 64)
		evt := int64(binary.BigEndian.Uint64(row[6:14])) + int64(binary.BigEndian.Uint32(q))
		newCells++
		if !olds[content{string(row[:6]), evt, ts, f[5]}] {
			moved["user="+string(row[:6])]++
		}
	}
	if newCells != len(olds) || len(moved) == 0 {
		t.Fatalf("the target holds %d cells (the snapshot %d), %d users with moved cells", newCells, len(olds), len(moved))
	}
	t.Logf("the broken run moved cells of %d users", len(moved))

	code, out, errOut := runRekey(t, "verify", jobPath, "--zk", st.ZKQuorum, "--table", table, "--all", "--retries", "0", "--json")
	if code != exitProblems {
		t.Fatalf("verify: exit %d, want %d: %s\n%.2000s", code, exitProblems, errOut, out)
	}
	r := decodeReport(t, out)
	if r.Method != "inverse" || r.Summary.Mismatched != len(moved) {
		t.Errorf("method %s, %d entities mismatched; want inverse and the %d users the dump says", r.Method, r.Summary.Mismatched, len(moved))
	}
	for _, e := range r.Entities {
		if n := moved[e.Entity]; e.Match != (n == 0) || n > 0 && (len(e.Mismatches) != 1 || e.Mismatches["mapped_wrong"] != n) {
			t.Errorf("%s: match %v, %v; the dump says %d cells moved", e.Entity, e.Match, e.Mismatches, n)
		}
		for _, d := range e.First {
			// Both keys: the old cell, and the new cell that holds its
			// content a day early, which leads back to a day-early key.
			if d.Class != "mapped_wrong" || d.Old == "" || d.New == "" || d.MapsTo == "" || strings.Split(d.Old, "\t")[5] != strings.Split(d.New, "\t")[5] {
				t.Errorf("%s: difference %+v does not name both keys", e.Entity, d)
			}
		}
	}

	// Verified with the same broken transform, forward: every entity
	// matches, the bug unseen.
	all, none := true, 0
	check, err := verify.Prepare(ctx, load(), verify.Options{Method: verify.Forward, NewMapper: hourLate(j.Program), All: &all, Retries: &none})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	rep, err := check.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Method != verify.Forward || !rep.OK() || rep.Summary.Entities != r.Summary.Entities {
		t.Errorf("forward with the broken transform: method %s, summary %+v; want every entity to match", rep.Method, rep.Summary)
	}

	code, out, errOut = runRekey(t, "verify", jobPath, "--zk", st.ZKQuorum, "--table", table, "--all", "--retries", "0", "--method", "forward", "--json")
	if code != exitProblems {
		t.Fatalf("verify --method forward: exit %d: %s", code, errOut)
	}
	if r := decodeReport(t, out); r.Method != "forward" || r.Summary.Mismatched != len(moved) {
		t.Errorf("--method forward: method %s, %d mismatched, want %d", r.Method, r.Summary.Mismatched, len(moved))
	}
}

// dumpLines splits the oracle's canonical dump into its fields.
func dumpLines(t *testing.T, dump []byte) [][]string {
	t.Helper()
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(dump)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			t.Fatalf("dump line %q: %d fields", line, len(f))
		}
		out = append(out, f)
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scratchTable needs the mini cluster and names a table for the test
// (prefix and a unique suffix), dropped when the test ends, with a client
// to reach it.
func scratchTable(t *testing.T, prefix string) (*testenv.State, *hbase.Client, string) {
	t.Helper()
	st := testenv.Require(t)
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	table := prefix + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		ctx := context.Background()
		c.DisableTable(ctx, table)
		c.DeleteTable(ctx, table)
		c.Close()
	})
	return st, c, table
}
