package pipeline_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
)

// phasedJobFile is writeJobFile's job with the hfiles sink staging into
// staging, and the source cut into pieces of splitBytes.
func phasedJobFile(t *testing.T, st *testenv.State, snap, target, dir, staging string) string {
	t.Helper()
	p := writeJobFile(t, st, snap, target, dir)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "sink: {batch_cells: 500}\n", fmt.Sprintf("sink: {type: hfiles, staging: %q}\n", staging), 1)
	if s == string(b) {
		t.Fatal("writeJobFile's job has no sink line to replace")
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// rekeyRun runs the rekey binary and returns its exit code and output.
func rekeyRun(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return exitCode(err), out.String(), errOut.String()
}

// phaseStatus runs rekey status --json.
func phaseStatus(t *testing.T, bin, jobPath string) *pipeline.StagingStatus {
	t.Helper()
	st, _ := pollStatus(t, bin, jobPath)
	if st == nil {
		t.Fatalf("rekey status: exit 2: the staging folder does not exist")
	}
	return st
}

// pollStatus is phaseStatus for a folder a task may not have created
// yet: status refuses a missing folder with exit 2 (it creates nothing),
// and so a folder the first task has made but not yet claimed (its kind
// file is created exclusively, and on HDFS holds its bytes only once
// closed), both of which a poller reads as "not yet"; any other failure
// is fatal.
func pollStatus(t *testing.T, bin, jobPath string) (*pipeline.StagingStatus, bool) {
	t.Helper()
	code, out, errOut := rekeyRun(t, bin, "status", jobPath, "--json")
	if code == 2 && (strings.Contains(errOut, "does not exist") || strings.Contains(errOut, "holds no staged job")) {
		return nil, false
	}
	if code != 0 {
		t.Fatalf("rekey status: exit %d\n%s", code, errOut)
	}
	var st pipeline.StagingStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("rekey status --json: %v\n%s", err, out)
	}
	return &st, true
}

// TestPhasesByHand runs a job in phases as a scheduler would, one rekey
// process per task over one staging folder on the cluster's HDFS: three
// spill shards (shard 0 killed with SIGKILL after it committed a split,
// then rerun alone: it resumes; shard 2 retried with another split size,
// and as a shard of 4, both refused by the job record; shard 2 started
// twice at once: one attempt runs, the other is refused), `rekey status` on the half-done run, a
// merge started too early (exit 2), two merge parts side by side, and
// `rekey load`. The target equals the rule applied to the oracle's dump
// of the source (raw: no cell twice, no extra version), holds one store
// file per region and family, and equals a one-process run of the job.
func TestPhasesByHand(t *testing.T) {
	st := testenv.Require(t)
	bin := rekeyBinary(t)
	src, dst, one := uniq(t, "ph_src"), uniq(t, "ph_dst"), uniq(t, "ph_one")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	testenv.DropAfter(t, one, "")
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, bigWide(30, 1500), 3)
	want := expect(p, source)
	dir := t.TempDir()
	staging := fmt.Sprintf("hdfs://%s/tmp/rekey-phases-test/%s", st.NameNode, dst)
	jobPath := phasedJobFile(t, st, snap, dst, dir, staging)
	spill := func(shard int, extra ...string) []string {
		return append([]string{"run", jobPath, "--phase", "spill", "--shard", fmt.Sprintf("%d/3", shard),
			"--split-bytes", "64KiB", "--workers", "1", "--progress", "none"}, extra...)
	}

	// Shard 0, slowed, killed once it has committed a split.
	victim := exec.Command(bin, spill(0, "--max-cells-per-sec", "4000")...)
	var victimErr bytes.Buffer
	victim.Stderr = &victimErr
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		s, _ := pollStatus(t, bin, jobPath)
		if s != nil && len(s.Spill.List) > 0 && s.Spill.List[0].SplitsDone >= 1 {
			break
		}
		if i == 300 {
			victim.Process.Kill()
			t.Fatalf("shard 0 committed no split in 60 s\n%s", victimErr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	victim.Process.Signal(syscall.SIGKILL)
	victim.Wait()
	if code, _, errOut := rekeyRun(t, bin, spill(1)...); code != 0 {
		t.Fatalf("spill 1: exit %d\n%s", code, errOut)
	}

	// Half done: shard 1 committed, shard 0 killed (its HDFS lease has
	// not expired yet: running, or failed once it has), shard 2 not begun.
	half := phaseStatus(t, bin, jobPath)
	t.Logf("status, half done: %+v", half.Spill)
	if s := half.Spill; s.Tasks != 3 || s.Done != 1 || s.Left != 1 || s.Running+s.Failed != 1 || s.Cells == 0 {
		t.Errorf("half-done spill: %d tasks, %d done, %d running, %d failed, %d left, %d cells; want 3, 1 done, 1 running or failed, 1 left, cells > 0", s.Tasks, s.Done, s.Running, s.Failed, s.Left, s.Cells)
	}
	// An ETA while shard 0's lease is live; with nothing running, none (a
	// time counted down while nothing moves was wrong) and why.
	switch {
	case half.Spill.Running > 0 && half.ETASeconds < 0:
		t.Errorf("no ETA on a half-done run with a task running: %s", half.ETABasis)
	case half.Spill.Running == 0 && (half.ETASeconds >= 0 || !strings.Contains(half.ETABasis, "no task is running")):
		t.Errorf("ETA %.0fs (%s) on a half-done run with nothing running", half.ETASeconds, half.ETABasis)
	}
	if half.Merge.Tasks != 0 || half.Load.Done != 0 {
		t.Errorf("half-done run shows merge %+v, load %+v", half.Merge, half.Load)
	}
	if code, _, errOut := rekeyRun(t, bin, "run", jobPath, "--phase", "merge", "--part", "0/2", "--progress", "none"); code != 2 || !strings.Contains(errOut, "not committed") {
		t.Errorf("merge before every shard committed: exit %d, want 2\n%s", code, errOut)
	}

	// Shard 0 again, alone: it goes on from its checkpoint.
	code, out, errOut := rekeyRun(t, bin, spill(0, "--resume", "--force-takeover", "--json")...)
	if code != 0 {
		t.Fatalf("spill 0 rerun: exit %d\n%s", code, errOut)
	}
	var sum0 pipeline.Summary
	if err := json.Unmarshal([]byte(out), &sum0); err != nil {
		t.Fatal(err)
	}
	if sum0.Skipped < 1 || !sum0.Finished {
		t.Errorf("spill 0 rerun: %d splits skipped, finished %v; want the committed split skipped", sum0.Skipped, sum0.Finished)
	}

	// Shard 2 retried with another split size (a changed ConfigMap for
	// one retried pod) or as a shard of another count: refused by the
	// job record on HDFS before it reads a cell (exit 2, naming what
	// differs), where before it cut the snapshot its own way and the
	// merge lost a quarter of the cells.
	if code, _, errOut := rekeyRun(t, bin, spill(2, "--split-bytes", "40000")...); code != 2 || !strings.Contains(errOut, "split size: the job record") {
		t.Errorf("shard 2 with another split size: exit %d, want 2 naming the split size\n%s", code, errOut)
	}
	if code, _, errOut := rekeyRun(t, bin, "run", jobPath, "--phase", "spill", "--shard", "2/4", "--split-bytes", "64KiB", "--progress", "none"); code != 2 || !strings.Contains(errOut, "deals the splits to 3 shards") {
		t.Errorf("shard 2/4 of a job of 3: exit %d, want 2 naming the shard count\n%s", code, errOut)
	}

	// Shard 2, two attempts at once: one runs, the other is refused.
	a, b := exec.Command(bin, spill(2)...), exec.Command(bin, spill(2)...)
	var aErr, bErr bytes.Buffer
	a.Stderr, b.Stderr = &aErr, &bErr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	ca, cb := exitCode(a.Wait()), exitCode(b.Wait())
	if !(ca == 0 && cb == 2 || ca == 2 && cb == 0) {
		t.Fatalf("two attempts of shard 2: exits %d and %d, want 0 and 2\n%s\n%s", ca, cb, aErr.String(), bErr.String())
	}
	if s := phaseStatus(t, bin, jobPath).Spill; s.Done != 3 {
		t.Fatalf("after every shard: %+v", s)
	}

	// Two merge parts side by side, and a second attempt of part 0 at the
	// same time: refused while the first holds the part (exit 2), or, if
	// it starts after the first ended, finding the part done (exit 0).
	var parts []*exec.Cmd
	var partErr [3]bytes.Buffer
	for k, j := range []int{0, 1, 0} {
		c := exec.Command(bin, "run", jobPath, "--phase", "merge", "--part", fmt.Sprintf("%d/2", j), "--workers", "1")
		c.Stderr = &partErr[k]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, c)
	}
	var codes [3]int
	for k, c := range parts {
		codes[k] = exitCode(c.Wait())
	}
	// Part 1 runs; of part 0's attempts, one runs and the other is
	// refused or finds the part done.
	if codes[1] != 0 || !(codes[0] == 0 && (codes[2] == 0 || codes[2] == 2) || codes[2] == 0 && codes[0] == 2) {
		t.Fatalf("merge attempts (part 0, part 1, part 0 again): exits %v\n%s\n%s\n%s", codes, partErr[0].String(), partErr[1].String(), partErr[2].String())
	}
	t.Logf("merge attempts (part 0, part 1, part 0 again): exits %v", codes)
	if code, out, errOut := rekeyRun(t, bin, "load", jobPath); code != 0 {
		t.Fatalf("rekey load: exit %d\n%s\n%s", code, out, errOut)
	}
	sameCells(t, "target after the phases (raw)", dumpTable(t, dst, true), want)
	testenv.OneStoreFileEach(t, dst, 4)
	done := phaseStatus(t, bin, jobPath)
	if done.Spill.Done != 3 || done.Merge.Done != 2 || done.Load.Done != 1 || done.Load.Cells != int64(len(want)) {
		t.Errorf("status at the end: spill %d/3, merge %d/2, load %d/1 with %d cells (want %d)", done.Spill.Done, done.Merge.Done, done.Load.Done, done.Load.Cells, len(want))
	}

	// The same job in one process.
	oneDir := t.TempDir()
	oneJob := phasedJobFile(t, st, snap, one, oneDir, staging+"-one")
	if code, _, errOut := rekeyRun(t, bin, "run", oneJob, "--split-bytes", "64KiB", "--progress", "none"); code != 0 {
		t.Fatalf("one-process run: exit %d\n%s", code, errOut)
	}
	sameCells(t, "one-process target (raw) against the phased one", dumpTable(t, one, true), dumpTable(t, dst, true))
}
