// Package yarn_test runs the YARN driver (deploy/yarn, Java) against the
// mini cluster's MapReduce on YARN and judges the target table by HBase's
// own dump of it. Each test takes minutes (YARN starts a JVM per task on
// two shared cores): run them with -timeout 40m, past go test's default 10.
package yarn_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/verify"
)

const tsBase = 1767225600000 // 2026-01-01T00:00:00Z

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// jobYAML is configs/rekey.yaml's layout: old row = 13-digit time "#"
// decimal user; new row = 8-byte user "E" reversed time; family cf -> a.
const jobYAML = `source:
  root: %s
  name: %s
target:
  table: %s
  zookeeper: %s
  znode_parent: %s
source_layout:
  row:
    - {field: ts, type: decimal, width: 13}
    - {type: literal, bytes: "#"}
    - {field: user, type: decimal}
target_layout:
  row:
    - {field: user, type: uint, width: 8}
    - {type: literal, bytes: "E"}
    - {field: ts, type: reversed_ts}
entity: [user]
families: {cf: a}
bad_keys: {action: fail}
sink: {type: %s}
`

// rule is the re-key written out here, apart from package transform: the
// expected target is the oracle's dump of the source through it.
func rule(c cell.Cell) cell.Cell {
	ts, user, _ := strings.Cut(string(c.Row), "#")
	t, _ := strconv.ParseInt(ts, 10, 64)
	u, _ := strconv.ParseUint(user, 10, 64)
	c.Row = append(append(be64(u), 'E'), be64(uint64(math.MaxInt64-t))...)
	c.Family = []byte("a")
	return c
}

// source makes n cells of events by 2000 users over about 3.5 days.
func source(n int) []cell.Cell {
	r := rand.New(rand.NewSource(26))
	out := make([]cell.Cell, 0, n)
	for i := 0; i < n; i++ {
		ts := tsBase + r.Int63n(300_000_000)
		row := []byte(fmt.Sprintf("%013d#%d", ts, r.Intn(2000)))
		v := make([]byte, 8+r.Intn(16))
		r.Read(v)
		out = append(out, cell.Cell{Row: row, Family: []byte("cf"), Qualifier: []byte("e"), Timestamp: ts, Type: cell.Put, Value: v})
	}
	return out
}

// setup is what one driver test needs: the cluster, the source and its
// expected target, a job file, and the programs.
type setup struct {
	st             *testenv.State
	root, dir      string
	jobPath, table string
	state          string // the run's state folder on HDFS, unique to the test
	want           []cell.Cell
	rekey, jar     string
	yarnConf       string
}

// newSetup seeds a source of cells, creates the target, and writes a job
// file with the sink (puts or hfiles).
func newSetup(t *testing.T, cells int, sink string) *setup {
	st := testenv.Require(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s := &setup{st: st, root: root, dir: t.TempDir()}
	s.rekey = buildRekey(t, root, s.dir)
	s.jar = buildJar(t, root)
	if s.yarnConf, err = st.Control("yarn-start"); err != nil {
		t.Fatal(err)
	}
	id := time.Now().UnixNano() % 1_000_000_000
	src, snap := fmt.Sprintf("yarn_src_%d", id), fmt.Sprintf("yarn_snap_%d", id)
	s.table = fmt.Sprintf("yarn_dst_%d", id)
	s.state = fmt.Sprintf("hdfs://%s/tmp/rekey-yarn-%d", st.NameNode, id)
	testenv.DropAfter(t, src, snap)
	t.Cleanup(func() { testenv.Drop(nil, []string{s.table}) })
	got := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: []string{"cf"},
		SplitKeys: []string{"1767300000000", "1767400000000"}}, source(cells))
	for _, c := range got {
		s.want = append(s.want, rule(c))
	}
	testenv.SortCells(s.want)
	s.jobPath = filepath.Join(s.dir, "events.yaml")
	text := fmt.Sprintf(jobYAML, st.RootDir, snap, s.table, st.ZKQuorum, st.ZNodeParent, sink)
	if err := os.WriteFile(s.jobPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s.createTarget(t)
	return s
}

// createTarget creates the target table, split at three users, before the
// tasks start, so no two shards race to create it.
func (s *setup) createTarget(t *testing.T) {
	ctx := context.Background()
	j, err := job.Load(s.jobPath)
	if err != nil {
		t.Fatal(err)
	}
	client, err := hbase.NewClient(hbase.Config{ZKQuorum: j.Target.ZKQuorum, ZNodeParent: j.Target.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	snap, err := snapshot.Open(ctx, j.Source.Root, j.Source.Name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	j.Target.Create.Enabled = true
	if _, err := pipeline.PrepareTarget(ctx, client, j, snap, [][]byte{be64(500), be64(1000), be64(1500)}); err != nil {
		t.Fatal(err)
	}
}

// buildRekey builds the static binary the tasks run.
func buildRekey(t *testing.T, root, dir string) string {
	bin := filepath.Join(dir, "rekey")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rekey")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// buildJar builds bin/rekey-yarn.jar with make (a no-op when it is current).
func buildJar(t *testing.T, root string) string {
	cmd := exec.Command("make", "-s", "yarn-jar")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make yarn-jar: %v\n%s", err, out)
	}
	return filepath.Join(root, "bin", "rekey-yarn.jar")
}

// driver returns the command `hadoop jar bin/rekey-yarn.jar ARGS` runs:
// Hadoop's RunJar in a JVM with the cluster's Hadoop classes (testenv's
// classpath, standing in for `hadoop classpath`: the mini cluster puts
// the submitting JVM's classpath on the task containers), given the jar
// and its arguments; RunJar loads the jar's Main-Class (the driver) from
// the jar, and MapReduce ships the jar to the tasks from there. The mini
// cluster's client configuration comes as -conf, a generic option `hadoop
// jar` passes on as any other.
func (s *setup) driver(t *testing.T, args ...string) *exec.Cmd {
	cp, err := os.ReadFile(filepath.Join(s.root, "testenv", "target", "classpath.txt"))
	if err != nil {
		t.Fatal(err)
	}
	classpath := filepath.Join(s.root, "testenv", "target", "testenv.jar") + ":" + strings.TrimSpace(string(cp))
	jargs := []string{"-Xmx256m", "-Djava.net.preferIPv4Stack=true", "-cp", classpath, "org.apache.hadoop.util.RunJar", s.jar, "-conf", s.yarnConf}
	return exec.Command("java", append(jargs, args...)...)
}

// logDirs is where the mini NodeManager keeps container logs
// (Yarn.java: test.build.data = testenv/run/yarn).
func (s *setup) logDirs() string { return filepath.Join(s.root, "testenv", "run", "yarn") }

// TestYarnPutsShardsKillOneChild: the driver runs a puts job as 4 map
// tasks on the mini cluster's YARN; one task's rekey child is killed with
// SIGKILL after it finished some splits. YARN retries the attempt, the
// retry resumes from the shard's checkpoint on HDFS (it skips splits) with
// --force-takeover, and HBase's raw dump of the target equals the rule
// applied to the source: no cell twice, none missing, no extra version.
func TestYarnPutsShardsKillOneChild(t *testing.T) {
	s := newSetup(t, 48000, "puts")
	// A cap per task makes each shard take several seconds, so the child
	// can be killed mid-task, after its first progress line.
	out := s.runKillingShard1(t, "--shards", "4", "--", "--workers", "1", "--split-bytes", "16KiB", "--max-cells-per-sec", "1500", "--batch-cells", "200")
	if !bytes.Contains(out, []byte("rekey-yarn: run: submitted")) {
		t.Errorf("the driver submitted no run job")
	}
	counter(t, out, "run", "cells_written", len(s.want))
	testenv.SameCells(t, "target (raw dump) vs the rule over the source", testenv.DumpTable(t, s.table, true), s.want)
}

// runKillingShard1 runs the driver with args (after the job file, binary,
// state and memory) while a killer SIGKILLs shard 1/4's first rekey child
// mid-task, and checks that YARN retried it and the retry resumed: its
// summary, the only one for the shard, skipped some splits but not all.
func (s *setup) runKillingShard1(t *testing.T, args ...string) []byte {
	cmd := s.driver(t, append([]string{s.jobPath, "--binary", s.rekey, "--state", s.state, "--memory", "256"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	k := &killer{shard: "1/4", state: s.state, logs: s.logDirs()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); k.watch(t, stop) }()
	err := cmd.Wait()
	close(stop)
	wg.Wait()
	t.Logf("driver output:\n%s", out.String())
	if err != nil {
		t.Fatalf("driver: %v", err)
	}
	if k.killed == 0 {
		t.Fatalf("no rekey child of shard 1/4 was seen mid-task to kill")
	}
	if !k.retried {
		t.Errorf("no second attempt of shard 1/4 ran with --resume --force-takeover")
	}
	sums := summaries(t, s.logDirs(), s.state, "shard-1-of-4")
	if len(sums) != 1 {
		t.Fatalf("shard 1/4 printed %d summaries, want 1 (the killed attempt prints none)", len(sums))
	}
	if sum := sums[0]; !sum.Finished || sum.Skipped == 0 || sum.Skipped >= sum.Splits {
		t.Errorf("the retried attempt of shard 1/4: finished %v, %d of %d splits skipped; want some skipped (done before the kill), not all", sum.Finished, sum.Skipped, sum.Splits)
	} else {
		t.Logf("the retry of shard 1/4 skipped %d of %d splits the killed attempt had finished", sum.Skipped, sum.Splits)
	}
	return out.Bytes()
}

// TestYarnPhases: with --parts the driver runs the job in phases as three
// MapReduce jobs, 4 spill tasks, 2 merge tasks and the load, while spill
// shard 1/4's first rekey child is killed with SIGKILL mid-task (YARN
// retries it; the retry resumes). HBase's raw dump of the target equals
// the rule over the source (no cell twice: the killed attempt's runs are
// not merged beside the retry's), and every target region's one family
// holds one store file: the merge wrote one HFile per region and family
// from all four shards' runs.
func TestYarnPhases(t *testing.T) {
	s := newSetup(t, 48000, "hfiles")
	s.nameStateInJob(t)
	out := s.runKillingShard1(t, "--shards", "4", "--parts", "2", "--", "--workers", "1", "--split-bytes", "16KiB", "--max-cells-per-sec", "1500")
	for _, phase := range []string{"spill", "merge", "load"} {
		if !bytes.Contains(out, []byte("rekey-yarn: "+phase+": submitted")) {
			t.Errorf("the driver submitted no %s job", phase)
		}
	}
	// The tasks' summaries, summed by MapReduce into the job's counters.
	counter(t, out, "spill", "cells_written", len(s.want))
	counter(t, out, "merge", "hfiles", 4)
	counter(t, out, "load", "regions_loaded", 4)
	testenv.SameCells(t, "target (raw dump) vs the rule over the source", testenv.DumpTable(t, s.table, true), s.want)
	testenv.OneStoreFileEach(t, s.table, 4)
	s.edgeNodeSteps(t)
}

// nameStateInJob adds to the job file what deploy/yarn/README.md's step 2
// asks for: the driver's checkpoint and staging folder, named in the job
// (run.checkpoint, sink.staging), so that rekey status and rekey verify
// on the edge node find them.
func (s *setup) nameStateInJob(t *testing.T) {
	b, err := os.ReadFile(s.jobPath)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "sink: {type: hfiles}\n",
		fmt.Sprintf("sink: {type: hfiles, staging: %s/staging}\nrun: {checkpoint: %s/checkpoint.json}\n", s.state, s.state), 1)
	if text == string(b) {
		t.Fatalf("the job file has no hfiles sink line to extend:\n%s", b)
	}
	if err := os.WriteFile(s.jobPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// edgeNodeSteps follows deploy/yarn/README.md's steps 4 and 5 after the
// driver exited 0, with the commands the README gives (checked against its
// text, so that the two change together): rekey status on the job file
// reads the state folder on HDFS and shows every task of the three phases
// done, and rekey verify on the job file finds the spill tasks' entity
// sketch through run.checkpoint and finds the new table equal to the old
// snapshot, exit 0.
func (s *setup) edgeNodeSteps(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(s.root, "deploy", "yarn", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"`rekey status JOB.yaml`", "    rekey verify JOB.yaml --json > report.json\n"} {
		if !bytes.Contains(readme, []byte(cmd)) {
			t.Errorf("deploy/yarn/README.md no longer gives %q; this test follows it", cmd)
		}
	}
	rekey := func(args ...string) (int, []byte, []byte) {
		t.Helper()
		cmd := exec.Command(s.rekey, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.Bytes(), stderr.Bytes()
	}
	if code, out, errOut := rekey("status", s.jobPath); code != 0 || !bytes.Contains(out, []byte("load")) {
		t.Errorf("rekey status JOB.yaml: exit %d\n%s\n%s", code, out, errOut)
	} else {
		t.Logf("rekey status JOB.yaml:\n%s", out)
	}
	code, out, errOut := rekey("status", s.jobPath, "--json")
	var st pipeline.StagingStatus
	if code != 0 || json.Unmarshal(out, &st) != nil {
		t.Fatalf("rekey status JOB.yaml --json: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, ph := range []struct {
		name         string
		p            hfiles.PhaseStatus
		tasks        int
		cellsAtLeast int
	}{{"spill", st.Spill, 4, len(s.want)}, {"merge", st.Merge, 2, len(s.want)}, {"load", st.Load, 1, len(s.want)}} {
		if ph.p.Tasks != ph.tasks || ph.p.Done != ph.tasks || ph.p.Failed != 0 || ph.p.Left != 0 || ph.p.Cells < int64(ph.cellsAtLeast) {
			t.Errorf("status: %s %d of %d tasks done, %d failed, %d left, %d cells; want %d of %d, %d cells",
				ph.name, ph.p.Done, ph.p.Tasks, ph.p.Failed, ph.p.Left, ph.p.Cells, ph.tasks, ph.tasks, ph.cellsAtLeast)
		}
	}
	code, out, errOut = rekey("verify", s.jobPath, "--json")
	if code != 0 {
		t.Fatalf("rekey verify JOB.yaml --json: exit %d, want 0\n%s\n%s", code, out, errOut)
	}
	var report verify.Report
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, out)
	}
	if sum := report.Summary; sum.Entities == 0 || sum.Mismatched != 0 || sum.CellsCompared == 0 || report.NewSide != "table" {
		t.Errorf("verify: %d entities, %d mismatched, %d cells compared, new side %q; want some entities and cells, none mismatched, the table", sum.Entities, sum.Mismatched, sum.CellsCompared, report.NewSide)
	}
	t.Logf("rekey verify JOB.yaml --json: exit 0, %d entities, %d cells compared", report.Summary.Entities, report.Summary.CellsCompared)
}

// counter checks a job counter the driver printed ("rekey-yarn: PHASE:
// NAME VALUE").
func counter(t *testing.T, out []byte, phase, name string, want int) {
	t.Helper()
	m := regexp.MustCompile(`rekey-yarn: ` + phase + `: ` + name + ` (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Errorf("no %s counter %s in the driver's output", phase, name)
	} else if got, _ := strconv.Atoi(string(m[1])); got != want {
		t.Errorf("%s counter %s = %d, want %d", phase, name, got, want)
	}
}

// killer watches for the rekey child of one shard: it kills the first
// attempt's child with SIGKILL once its log shows some splits done and
// some left, then watches for the retry.
type killer struct {
	shard, state, logs string
	killed             int // the pid killed
	retried            bool
}

var progressRE = regexp.MustCompile(`progress: splits (\d+)/(\d+)`)

func (k *killer) watch(t *testing.T, stop <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for _, p := range k.children() {
			switch {
			case slices.Contains(p.args, "--force-takeover"):
				k.retried = k.retried || slices.Contains(p.args, "--resume")
			case k.killed == 0 && k.midTask():
				if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
					t.Errorf("kill -9 %d: %v", p.pid, err)
				}
				k.killed = p.pid
				t.Logf("killed the rekey child of shard %s (pid %d) with SIGKILL", k.shard, p.pid)
			}
		}
	}
}

type proc struct {
	pid  int
	args []string
}

// children lists the running rekey processes of the shard in this run.
func (k *killer) children() []proc {
	var out []proc
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 0 && args[0] == "./rekey" && slices.Contains(args, k.shard) && strings.Contains(string(b), k.state) {
			out = append(out, proc{pid, args})
		}
	}
	return out
}

// midTask reports whether the first attempt's container log shows a
// progress line with some but not all of the shard's splits done.
func (k *killer) midTask() bool {
	for _, f := range containerLogs(k.logs, "stderr") {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte(k.state)) || !bytes.Contains(b, []byte("--shard "+k.shard)) {
			continue
		}
		for _, m := range progressRE.FindAllSubmatch(b, -1) {
			done, _ := strconv.Atoi(string(m[1]))
			all, _ := strconv.Atoi(string(m[2]))
			if done > 0 && done < all {
				return true
			}
		}
	}
	return false
}

// summaries reads the JSON summaries rekey printed on the containers'
// stdout for a checkpoint under state whose name holds name.
func summaries(t *testing.T, logs, state, name string) []pipeline.Summary {
	var out []pipeline.Summary
	for _, f := range containerLogs(logs, "stdout") {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var s pipeline.Summary
			if line := sc.Bytes(); bytes.HasPrefix(line, []byte("{")) && json.Unmarshal(line, &s) == nil && strings.Contains(s.Checkpoint, state) && strings.Contains(s.Checkpoint, name) {
				out = append(out, s)
			}
		}
		fh.Close()
	}
	return out
}

// containerLogs lists the containers' log files of that name under dir
// (MiniYARNCluster nests them as CLUSTER/yarn-N/CLUSTER-logDir-nm-I/APP/CONTAINER/).
func containerLogs(dir, name string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name && strings.HasPrefix(filepath.Base(filepath.Dir(p)), "container_") {
			out = append(out, p)
		}
		return nil
	})
	return out
}
