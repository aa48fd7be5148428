package pipeline_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// state is where a test keeps a run's checkpoint and staging folder.
type state struct {
	Checkpoint, Staging, Rejects string
	TTL                          time.Duration
}

// demoRun is the demo job with its state at s: the hfiles sink offline
// when s has a staging folder, else the dry run.
func demoRun(t *testing.T, s state) (*job.Job, pipeline.Options) {
	t.Helper()
	j, err := job.Load("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j.Run.Checkpoint, j.BadKeys.File = s.Checkpoint, s.Rejects
	o := pipeline.Options{LeaseTTL: s.TTL, Fresh: true}
	if s.Staging != "" {
		j.Sink.Kind, j.Sink.Offline, j.Sink.Staging = job.SinkHFiles, true, s.Staging
	} else {
		o.Sink = sink.DryRun{}
	}
	return j, o
}

func localState(t *testing.T) state {
	dir := t.TempDir()
	return state{Checkpoint: filepath.Join(dir, "checkpoint.json"), Staging: filepath.Join(dir, "staging"), Rejects: filepath.Join(dir, "rejects.tsv")}
}

// leasedBy checks that err refuses the run because pid holds its state.
func leasedBy(t *testing.T, err error, pid int, what string) *pipeline.LeasedError {
	t.Helper()
	var le *pipeline.LeasedError
	if !errors.As(err, &le) || !errors.Is(err, pipeline.ErrLeased) {
		t.Fatalf("want a refusal (ErrLeased) naming pid %d, got %v", pid, err)
	}
	if le.Owner.PID != pid || !strings.Contains(err.Error(), fmt.Sprintf("pid %d on host", pid)) || !strings.Contains(err.Error(), what) {
		t.Errorf("refusal does not name %s held by pid %d: %v", what, pid, err)
	}
	return le
}

// TestSecondRunOfOneStateIsRefused: while a run holds its checkpoint and
// staging folder, a second run of either is refused, naming the holder,
// also with ForceTakeover (a local lock's holder is alive); once the
// first is closed the state is free.
func TestSecondRunOfOneStateIsRefused(t *testing.T) {
	secondRunRefused(t, localState(t), func(le *pipeline.LeasedError) {
		if !le.Expires.IsZero() {
			t.Errorf("a local lock with an expiry: %v", le)
		}
	})
}

// secondRunRefused runs the demo job on s and, while it holds s, a run of
// the same checkpoint (checked further by check) and a run of another
// checkpoint with the same staging folder: both are refused. Once the
// first run is closed, the second goes.
func secondRunRefused(t *testing.T, s state, check func(*pipeline.LeasedError)) {
	t.Helper()
	j, o := demoRun(t, s)
	r1, err := pipeline.Prepare(context.Background(), j, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()

	j2, o2 := demoRun(t, s)
	o2.ForceTakeover = !strings.HasPrefix(s.Checkpoint, "hdfs:") // no force takes a local lock
	_, err = pipeline.Prepare(context.Background(), j2, o2)
	check(leasedBy(t, err, os.Getpid(), "checkpoint "+s.Checkpoint))

	j3, o3 := demoRun(t, s)
	j3.Run.Checkpoint = strings.TrimSuffix(s.Checkpoint, ".json") + "-other.json"
	_, err = pipeline.Prepare(context.Background(), j3, o3)
	leasedBy(t, err, os.Getpid(), "staging folder "+s.Staging)

	r1.Close()
	r4, err := pipeline.Prepare(context.Background(), j2, o2)
	if err != nil {
		t.Fatalf("after the first run closed: %v", err)
	}
	r4.Close()
}

// TestShardsOfOneJobRunSideBySide: the shards of one job each lease their
// own checkpoint, so they run at once, and together read every cell of
// the demo snapshot once (31413, the oracle's dump in
// testdata/snapshots/demo_events.cells).
func TestShardsOfOneJobRunSideBySide(t *testing.T) {
	s := localState(t)
	var runs []*pipeline.Run
	for i := range 2 {
		j, o := demoRun(t, state{Checkpoint: s.Checkpoint, Rejects: s.Rejects})
		o.Shard = pipeline.Shard{Index: i, Count: 2}
		o.Limits.CellsPerSec = 20000 // both still going when both have started
		r, err := pipeline.Prepare(context.Background(), j, o)
		if err != nil {
			t.Fatalf("shard %d/2 beside the other: %v", i, err)
		}
		defer r.Close()
		runs = append(runs, r)
	}
	for _, r := range runs {
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var read int64
	for i, r := range runs {
		sum, err := r.Wait()
		if err != nil || !sum.Finished {
			t.Fatalf("shard %d: %v, %+v", i, err, sum)
		}
		read += sum.Read
	}
	if read != 31413 {
		t.Errorf("the shards read %d cells, want 31413", read)
	}
}

// holderEnv hands a lease holder (TestLeaseHolder in a child process) its
// state.
const holderEnv = "REKEY_TEST_LEASE_HOLDER"

// TestLeaseHolder is not a test: run by startHolder in a child process,
// it prepares the demo job on the state holderEnv gives, says so on
// stdout and waits to be killed.
func TestLeaseHolder(t *testing.T) {
	v := os.Getenv(holderEnv)
	if v == "" {
		t.Skip("a helper for the lease tests, run in a child process")
	}
	var s state
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		t.Fatal(err)
	}
	j, o := demoRun(t, s)
	if _, err := pipeline.Prepare(context.Background(), j, o); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("held")
	select {}
}

// startHolder starts a child process that holds s, and returns it once
// it does.
func startHolder(t *testing.T, s state) *exec.Cmd {
	t.Helper()
	b, _ := json.Marshal(s)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseHolder$")
	cmd.Env = append(os.Environ(), holderEnv+"="+string(b))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == "held" {
			return cmd
		}
		t.Logf("holder: %s", sc.Text())
	}
	t.Fatalf("the holder ended before it held the state")
	return nil
}

// kill9 kills the holder as a scheduler or the OOM killer would.
func kill9(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// TestKillNineFreesTheLocalLock: another process's run holds the state
// and a run here is refused, naming that process; once it is killed with
// -9, the next run goes at once (the kernel dropped its lock).
func TestKillNineFreesTheLocalLock(t *testing.T) {
	s := localState(t)
	holder := startHolder(t, s)
	j, o := demoRun(t, s)
	_, err := pipeline.Prepare(context.Background(), j, o)
	leasedBy(t, err, holder.Process.Pid, "checkpoint "+s.Checkpoint)
	kill9(t, holder)
	r, err := pipeline.Prepare(context.Background(), j, o)
	if err != nil {
		t.Fatalf("right after kill -9 of the holder: %v", err)
	}
	r.Close()
}

// hdfsState is a state on the mini cluster's HDFS, removed after the
// test.
func hdfsState(t *testing.T, st *testenv.State, name string) state {
	t.Helper()
	base := "hdfs://" + st.NameNode + "/tmp/" + os.Getenv("REKEY_TEST_PREFIX") + uniq(t, name)
	t.Cleanup(func() {
		if loc, err := vfs.Open(base); err == nil {
			loc.FS.RemoveAll(loc.Path)
			loc.Close()
		}
	})
	return state{Checkpoint: base + "/checkpoint.json", Staging: base + "/staging", Rejects: filepath.Join(t.TempDir(), "rejects.tsv")}
}

// TestSecondRunRefusedOnHDFS: with the checkpoint and the staging folder
// on HDFS, a second run is refused while the first holds them, naming the
// first and when its lease expires; a run closed gives its leases back.
func TestSecondRunRefusedOnHDFS(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	secondRunRefused(t, hdfsState(t, st, "lease_two"), func(le *pipeline.LeasedError) {
		if now := time.Now(); le.Expires.Before(now) || le.Expires.After(now.Add(pipeline.DefaultLeaseTTL)) || !strings.Contains(le.Error(), "expires at") {
			t.Errorf("expiry %v: %v", le.Expires, le)
		}
	})
}

// TestKillNineLeavesAnHDFSLeaseThatExpires: a run killed with -9 leaves
// its HDFS leases; the next run is refused until they expire, then takes
// them over and logs it. --force-takeover takes them at once.
func TestKillNineLeavesAnHDFSLeaseThatExpires(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	s := hdfsState(t, st, "lease_kill")
	s.TTL = 3 * time.Second
	holder := startHolder(t, s)
	pid := holder.Process.Pid
	kill9(t, holder)

	var log takeoverLog
	j, o := demoRun(t, s)
	o.Logf = log.Logf
	_, err := pipeline.Prepare(context.Background(), j, o)
	le := leasedBy(t, err, pid, "checkpoint "+s.Checkpoint)
	time.Sleep(time.Until(le.Expires))
	var r *pipeline.Run
	for deadline := time.Now().Add(2 * s.TTL); ; {
		if r, err = pipeline.Prepare(context.Background(), j, o); err == nil || !errors.Is(err, pipeline.ErrLeased) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after the dead run's lease expired: %v", err)
	}
	r.Close()
	for _, what := range []string{"checkpoint " + s.Checkpoint, "staging folder " + s.Staging} {
		if !log.Has("took over the lease on "+what, fmt.Sprintf("pid %d", pid), "expired at") {
			t.Errorf("no takeover of the %s logged:\n%s", what, &log)
		}
	}

	holder = startHolder(t, s)
	pid = holder.Process.Pid
	kill9(t, holder)
	o.ForceTakeover = true
	r, err = pipeline.Prepare(context.Background(), j, o)
	if err != nil {
		t.Fatalf("--force-takeover right after kill -9: %v", err)
	}
	r.Close()
	if !log.Has("took over the lease on checkpoint", fmt.Sprintf("pid %d", pid), "--force-takeover") {
		t.Errorf("forced takeover not logged:\n%s", &log)
	}
}

// TestForcedTakeoverStopsTheLiveRun: when a run's HDFS lease is taken
// from it (--force-takeover on a run that was alive after all), the run
// notices at its next renewal and stops with ErrLeaseLost instead of
// working on beside the new owner.
func TestForcedTakeoverStopsTheLiveRun(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	s := hdfsState(t, st, "lease_lost")
	s.Staging = "" // the dry run: a checkpoint alone
	s.TTL = 3 * time.Second
	j, o := demoRun(t, s)
	o.Limits.CellsPerSec = 2000 // 15 s for the demo's cells
	r1, err := pipeline.Prepare(context.Background(), j, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	j2, o2 := demoRun(t, s)
	o2.ForceTakeover = true
	r2, err := pipeline.Prepare(context.Background(), j2, o2)
	if err != nil {
		t.Fatalf("forced takeover: %v", err)
	}
	defer r2.Close()
	started := time.Now()
	sum, err := r1.Wait()
	if !errors.Is(err, pipeline.ErrLeaseLost) {
		t.Fatalf("the run whose lease was taken: %v", err)
	}
	// At the cap the demo's 31413 cells take 15 s; the renewal that finds
	// the lease taken comes a third of a lifetime (1 s) after it.
	if took := time.Since(started); took > 10*time.Second || sum.Finished || sum.Written >= 31413 {
		t.Errorf("it stopped %v after the takeover, having written %d cells (finished %v)", took, sum.Written, sum.Finished)
	}
}

// takeoverLog collects what a run logs, so that a test finds the line
// that says whose lease it took over.
type takeoverLog struct {
	mu   sync.Mutex
	text strings.Builder
}

// Logf is a Logf for Options.
func (l *takeoverLog) Logf(f string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text.WriteString(fmt.Sprintf(f, a...) + "\n")
}

// Has reports whether one line holds every part.
func (l *takeoverLog) Has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(l.text.String(), "\n") {
		n := 0
		for _, p := range parts {
			if strings.Contains(line, p) {
				n++
			}
		}
		if n == len(parts) {
			return true
		}
	}
	return false
}

func (l *takeoverLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}
