package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/puts"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// rekeyBinary builds cmd/rekey once per test process, so tests can kill it
// as a user's scheduler would.
func rekeyBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rekey-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "rekey")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/rekey").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// bigWide makes a wide_to_bucketed source of sensors x per cells.
func bigWide(sensors, per int) []cell.Cell {
	r := rand.New(rand.NewSource(11))
	var out []cell.Cell
	for s := 1; s <= sensors; s++ {
		for i := 0; i < per; i++ {
			ts := tsBase + r.Int63n(3*24*3600*1000)
			out = append(out, cell.Cell{Row: []byte(fmt.Sprintf("s%03d", s)), Family: []byte("r"), Qualifier: be64(uint64(ts)), Timestamp: ts, Type: cell.Put, Value: randValue(r)})
		}
	}
	return out
}

// writeJobFile writes the wide_to_bucketed preset as a job file pointing at
// the test cluster.
func writeJobFile(t *testing.T, st *testenv.State, snap, target, dir string) string {
	t.Helper()
	b, err := os.ReadFile("../configs/wide_to_bucketed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{"root: /hbase ", "root: " + st.RootDir + " "},
		{"name: readings_snap", "name: " + snap},
		{"table: readings_by_hour", fmt.Sprintf("table: %s\n  zookeeper: %q\n  create: {split_keys: [s005, s015, s025]}", target, st.ZKQuorum)},
		{"file: readings-rejects.tsv", "file: " + filepath.Join(dir, "rejects.tsv")},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("configs/wide_to_bucketed.yaml has no %q", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	s += "sink: {batch_cells: 500}\n"
	p := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// verifyPasses runs rekey verify on the run's target three ways (the
// run's sketch: heaviest and a sample; --find-worst; --all) and expects
// every entity to match (exit 0).
func verifyPasses(t *testing.T, bin, jobPath string, st *testenv.State) {
	t.Helper()
	for _, extra := range [][]string{nil, {"--find-worst", "--heaviest", "5", "--sample", "10"}, {"--all"}} {
		args := append([]string{"verify", jobPath, "--zk", st.ZKQuorum}, extra...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		if code := exitCode(err); code != 0 {
			t.Errorf("rekey %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestKillNineThenResume kills rekey run at random points, resumes each
// time, and checks the target holds exactly the expected cells with no
// version added by a redo (raw dump: every version HBase holds).
func TestKillNineThenResume(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	bin := rekeyBinary(t)
	src, dst := uniq(t, "kill_src"), uniq(t, "kill_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, bigWide(40, 1500), 3)
	want := expect(p, source)
	dir := t.TempDir()
	jobPath := writeJobFile(t, st, snap, dst, dir)
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	args := []string{"run", jobPath, "--resume", "--workers", "2", "--progress", "none", "--max-cells-per-sec", "15000"}
	for k := 0; k < 3; k++ {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		d := time.Duration(300+r.Intn(1500)) * time.Millisecond
		time.Sleep(d)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		t.Logf("kill -9 after %v: exit %d", d, exitCode(err))
	}
	final := exec.Command(bin, append(args[:len(args)-2], "--json")...)
	var finalErr bytes.Buffer
	final.Stderr = &finalErr
	out, err := final.Output()
	if err != nil {
		t.Fatalf("final resume: exit %d: %v\n%s", exitCode(err), err, finalErr.String())
	}
	var sum pipeline.Summary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatal(err)
	}
	if !sum.Finished || sum.Done != sum.Splits || sum.Written != int64(len(want)) {
		t.Errorf("final summary: finished %v, %d/%d splits, written %d, want %d", sum.Finished, sum.Done, sum.Splits, sum.Written, len(want))
	}
	t.Logf("resumed: %d splits done by earlier runs", sum.Skipped)
	sameCells(t, "target after kills and resume (raw)", dumpTable(t, dst, true), want)
	verifyPasses(t, bin, jobPath, st)
}

// TestSigtermExitsThreeAndResumes: SIGTERM stops the run with exit 3 and a
// checkpoint; --resume finishes the job.
func TestSigtermExitsThreeAndResumes(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	bin := rekeyBinary(t)
	src, dst := uniq(t, "term_src"), uniq(t, "term_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, bigWide(30, 1000), 3)
	want := expect(p, source)
	dir := t.TempDir()
	jobPath := writeJobFile(t, st, snap, dst, dir)
	cmd := exec.Command(bin, "run", jobPath, "--workers", "2", "--progress", "log", "--max-cells-per-sec", "5000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Signal once the run is writing: its checkpoint exists (written
	// before the workers start), and a second later.
	for i := 0; i < 600; i++ {
		if _, err := os.Stat(filepath.Join(dir, "job.rekey", "checkpoint.json")); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := exitCode(err); code != 3 {
			t.Fatalf("after SIGTERM: exit %d, want 3\n%s", code, stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no exit within 60 s of SIGTERM\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "job.rekey", "checkpoint.json")); err != nil {
		t.Fatalf("no checkpoint after SIGTERM: %v", err)
	}
	// Without --resume, the checkpoint is not silently overwritten.
	if err := exec.Command(bin, "run", jobPath, "--progress", "none").Run(); exitCode(err) != 2 {
		t.Errorf("a run without --resume over a checkpoint: exit %d, want 2", exitCode(err))
	}
	if out, err := exec.Command(bin, "run", jobPath, "--resume", "--progress", "none").CombinedOutput(); err != nil {
		t.Fatalf("resume: exit %d\n%s", exitCode(err), out)
	}
	sameCells(t, "target after SIGTERM and resume", dumpTable(t, dst, true), want)
}

// TestDestructiveRegionServerStoppedAndTargetMoved: a region server stops during the
// run and the target's regions split and move; failures are reported (the
// split is not recorded done) and --resume completes the job.
func TestDestructiveRegionServerStoppedAndTargetMoved(t *testing.T) {
	st := testenv.RequireDestructive(t)
	ctx := context.Background()
	src, dst := uniq(t, "rs_src"), uniq(t, "rs_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, bigWide(30, 1500), 3)
	want := expect(p, source)
	j := loadJob(t, p, st, snap, dst)
	client, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	// Split and move the target while the run writes into it.
	cfg := pipeline.Options{Workers: 2, Limits: pipeline.Limits{CellsPerSec: 8000}}
	var wg sync.WaitGroup
	wg.Add(1)
	var sum *pipeline.Summary
	go func() {
		defer wg.Done()
		sum, err = runPuts(t, ctx, j, p.newSplits, cfg)
	}()
	time.Sleep(1500 * time.Millisecond)
	if out, err := testenv.RunOracle("split", dst); err != nil {
		t.Logf("split during the run: %v", err)
	} else {
		t.Logf("split: %s", bytes.TrimSpace(out))
	}
	if out, err := testenv.RunOracle("move", dst, hexOf("s020")); err != nil {
		t.Logf("move during the run: %v", err)
	} else {
		t.Logf("move: %s", bytes.TrimSpace(out))
	}
	wg.Wait()
	if err != nil {
		t.Fatalf("run during split and move: %v", err)
	}
	if !sum.Finished || sum.Failed != 0 {
		t.Fatalf("split and move should be retried through: finished %v, failed %d", sum.Finished, sum.Failed)
	}
	sameCells(t, "target after split and move", dumpTable(t, dst, false), want)

	// Now a region server stops mid-run, with a retry deadline shorter than
	// HBase needs to reassign its regions: rows fail and are reported.
	j2 := loadJob(t, p, st, snap, dst+"_b")
	testenv.DropAfter(t, dst+"_b", "")
	servers := strings.Fields(strings.TrimPrefix(control(t, st, "list-regionservers"), "ok"))
	if len(servers) < 2 {
		t.Skipf("needs 2 region servers, have %v", servers)
	}
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			control(t, st, "start-regionserver")
		}
	}
	t.Cleanup(restart)
	cfg2 := pipeline.Options{Workers: 2, Limits: pipeline.Limits{CellsPerSec: 8000}}
	wg.Add(1)
	var sum2 *pipeline.Summary
	var err2 error
	go func() {
		defer wg.Done()
		sum2, err2 = runPutsWith(t, ctx, j2, p.newSplits, cfg2, puts.Options{BatchCells: 500, Workers: 2, RetryTimeout: 500 * time.Millisecond})
	}()
	time.Sleep(1500 * time.Millisecond)
	t.Log(control(t, st, "stop-regionserver 0"))
	wg.Wait()
	restart()
	if err2 != nil {
		t.Fatalf("run with a stopped server: %v", err2)
	}
	t.Logf("with a server stopped: %d failed cells, %d of %d splits done; examples %q", sum2.Failed, sum2.Done, sum2.Splits, sum2.Examples)
	if sum2.Failed > 0 && sum2.Finished {
		t.Errorf("a run with failed cells says it finished")
	}
	cfg3 := pipeline.Options{Workers: 2, Resume: true}
	sum3, err := runPuts(t, ctx, j2, p.newSplits, cfg3)
	if err != nil || !sum3.Finished || sum3.Failed != 0 {
		t.Fatalf("resume after the stop: %v, %+v", err, sum3)
	}
	sameCells(t, "target after a stopped server and resume", dumpTable(t, dst+"_b", false), want)
}

func control(t *testing.T, st *testenv.State, cmd string) string {
	t.Helper()
	out, err := st.Control(cmd)
	if err != nil {
		t.Fatalf("control %s: %v", cmd, err)
	}
	return out
}

// TestThrottleHoldsTheRate runs for over 20 s under a cap and measures the
// write rate from the cells HBase acknowledged over the run's time.
func TestThrottleHoldsTheRate(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	src, dst := uniq(t, "thr_src"), uniq(t, "thr_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, bigWide(20, 1500), 1)
	j := loadJob(t, p, st, snap, dst)
	const capRate = 1200.0
	start := time.Now()
	sum, err := runPuts(t, ctx, j, p.newSplits, pipeline.Options{Workers: 2, Limits: pipeline.Limits{CellsPerSec: capRate}})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start).Seconds()
	rate := float64(sum.Written) / sum.Seconds
	t.Logf("%d cells in %.1f s (%.1f s with setup): %.0f cells/s under a cap of %.0f", sum.Written, sum.Seconds, el, rate, capRate)
	if sum.Written != int64(len(source)) {
		t.Errorf("wrote %d cells, want %d", sum.Written, len(source))
	}
	if sum.Seconds < 20 {
		t.Errorf("the run took %.1f s: too short to judge the cap", sum.Seconds)
	}
	if rate > capRate*1.1 || rate < capRate*0.9 {
		t.Errorf("measured %.0f cells/s, not within 10%% of the cap %.0f", rate, capRate)
	}
}

// TestRejectsAndCollisionsCounted runs a crafted source: keys that do not
// fit, and a layout that drops a field so distinct old cells collide.
func TestRejectsAndCollisionsCounted(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	src := uniq(t, "rej_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	var cells []cell.Cell
	// 50 good rows with 2 qualifiers each, 7 rows whose key has no '|'.
	for i := 0; i < 50; i++ {
		for _, q := range []string{"a", "b"} {
			cells = append(cells, cell.Cell{Row: []byte(fmt.Sprintf("c%03d|%d", i%10, i)), Family: []byte("o"), Qualifier: []byte(q), Timestamp: tsBase + int64(i), Type: cell.Put, Value: []byte("v")})
		}
	}
	for i := 0; i < 7; i++ {
		cells = append(cells, cell.Cell{Row: []byte(fmt.Sprintf("bad%d", i)), Family: []byte("o"), Qualifier: []byte("a"), Timestamp: tsBase, Type: cell.Put, Value: []byte("v")})
	}
	source := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: []string{"o"}}, cells)
	dir := t.TempDir()
	// New row = customer, qualifier = old qualifier: the order number is
	// dropped. Within one customer, rows differ only by order but all
	// timestamps differ, so only equal timestamps collide: make them so.
	jobText := fmt.Sprintf(`
source: {root: %q, name: %s}
target: {table: unused}
source_layout:
  row: [{field: customer, type: string, sep: "|"}, {field: order, type: decimal}]
target_layout:
  row: [{field: customer, type: string}]
  qualifier: [{field: $qualifier, type: string}]
entity: [customer]
bad_keys: {action: reject, file: %q}
run: {checkpoint: %q, set_timestamp: 1767225600000}
`, st.RootDir, snap, filepath.Join(dir, "rejects.tsv"), filepath.Join(dir, "ck.json"))
	jp := filepath.Join(dir, "job.yaml")
	os.WriteFile(jp, []byte(jobText), 0o644)
	j, err := loadJobFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Sink: sink.DryRun{}, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Expected by the rule: every good cell maps to (customer, qualifier,
	// fixed ts); per customer and qualifier the first is kept and the rest
	// collide. The source has 10 customers x 2 qualifiers.
	good := 0
	for _, c := range source {
		if bytes.IndexByte(c.Row, '|') >= 0 {
			good++
		}
	}
	wantCollided := int64(good - 10*2)
	if sum.Rejected != 7 || sum.Collided != wantCollided || sum.Read != int64(len(source)) {
		t.Errorf("rejected %d (want 7), collided %d (want %d), read %d (want %d)", sum.Rejected, sum.Collided, wantCollided, sum.Read, len(source))
	}
	b, err := os.ReadFile(filepath.Join(dir, "rejects.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 7 {
		t.Errorf("reject file has %d lines, want 7:\n%s", n, b)
	}
	if !bytes.Contains(b, []byte("does not fit")) {
		t.Errorf("reject file lines carry no reason:\n%s", b)
	}
}

// TestKillNineHFilesThenResume kills a staged-HFiles run at points spread
// over the spill, the merge and the load, resumes, and checks the target
// holds each expected cell exactly once (raw dump).
func TestKillNineHFilesThenResume(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	bin := rekeyBinary(t)
	src, dst := uniq(t, "hkill_src"), uniq(t, "hkill_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, bigWide(40, 1000), 3)
	want := expect(p, source)
	dir := t.TempDir()
	jobPath := writeJobFile(t, st, snap, dst, dir)
	staging := "hdfs://" + st.NameNode + "/tmp/" + dst
	// Each run is killed by the test, so the next one knows the HDFS lease
	// on the staging folder is a dead run's and need not wait it out.
	args := []string{"run", jobPath, "--sink", "hfiles", "--staging", staging, "--resume", "--force-takeover", "--workers", "2", "--progress", "none", "--memory", "4MiB"}
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	for k, base := range []int{300, 1200, 2200, 3200} {
		cmd := exec.Command(bin, append(args, "--max-cells-per-sec", "10000")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		d := time.Duration(base+r.Intn(1000)) * time.Millisecond
		time.Sleep(d)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		t.Logf("kill %d after %v: exit %d", k, d, exitCode(err))
		if code := exitCode(err); code > 0 {
			t.Logf("stderr: %s", stderr.String())
		}
	}
	out, err := exec.Command(bin, append(args, "--json")...).Output()
	if err != nil {
		t.Fatalf("final resume: exit %d", exitCode(err))
	}
	var sum struct {
		Finished bool  `json:"finished"`
		Written  int64 `json:"cells_written"`
	}
	json.Unmarshal(out, &sum)
	if !sum.Finished {
		t.Errorf("final resume did not finish: %s", out)
	}
	sameCells(t, "staged target after kills and resume (raw)", dumpTable(t, dst, true), want)
	verifyPasses(t, bin, jobPath, st)
}
