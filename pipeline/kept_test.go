package pipeline_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// progressSplits matches a progress log line's split count.
var progressSplits = regexp.MustCompile(`progress: splits (\d+)/(\d+)`)

// killAfterSplitsDone starts bin with args, reads its progress lines and
// kills it with SIGKILL at the first line that shows at least one split
// done and some still to do; it returns the splits done then (0 when the
// run ended before such a line).
func killAfterSplitsDone(t *testing.T, bin string, args []string) int {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := 0
	var log bytes.Buffer
	sc := bufio.NewScanner(io.TeeReader(stderr, &log))
	for sc.Scan() {
		m := progressSplits.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		k, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		if k >= 1 && k < n {
			cmd.Process.Signal(syscall.SIGKILL)
			done = k
			break
		}
	}
	io.Copy(io.Discard, stderr)
	err = cmd.Wait()
	t.Logf("first run: killed after %d splits done (exit %d)", done, exitCode(err))
	if done == 0 {
		t.Logf("first run's log:\n%s", log.String())
	}
	return done
}

// killThenResume runs bin with args slowed down, kills it with SIGKILL
// once a split is done (killAfterSplitsDone), and runs it again to the
// end: the splits done at the kill, and the resume's JSON summary.
func killThenResume(t *testing.T, bin string, args []string) (int, []byte) {
	t.Helper()
	k := killAfterSplitsDone(t, bin, append(slices.Clone(args), "--progress", "log", "--max-cells-per-sec", "6000"))
	if k == 0 {
		t.Fatal("the first run showed no split done before it ended; slow it further")
	}
	out, err := exec.Command(bin, append(slices.Clone(args), "--progress", "none", "--json")...).Output()
	if err != nil {
		t.Fatalf("resume: exit %d: %v", exitCode(err), err)
	}
	return k, out
}

// TestKillNineKeptSplitsThenResume: a staged run whose splits fit in
// memory keeps them there (no run file), so a run killed with SIGKILL
// after some splits were done in memory must not have claimed them: the
// resumed run finds no split done by the earlier run, redoes every one,
// and the target holds each expected cell (the preset's rule applied to
// the oracle's dump of the source) exactly once. With a budget too small
// to keep every split, the kept splits are spilled as the memory fills
// and recorded then; the resumed run again leaves the target exact.
func TestKillNineKeptSplitsThenResume(t *testing.T) {
	st := testenv.Require(t)
	bin := rekeyBinary(t)
	p := presets["wide_to_bucketed"]
	for _, tc := range []struct {
		name, memory string
		allKept      bool // every split fits: nothing may be claimed at the kill
	}{
		{"fits", "1GiB", true},
		{"spills", "6MiB", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := uniq(t, "keep_src"), uniq(t, "keep_dst")
			snap := src + "_snap"
			testenv.DropAfter(t, src, snap)
			testenv.DropAfter(t, dst, "")
			source := seedSource(t, st, src, snap, p, bigWide(40, 1000), 3)
			want := expect(p, source)
			dir := t.TempDir()
			jobPath := writeJobFile(t, st, snap, dst, dir)
			staging := "hdfs://" + st.NameNode + "/tmp/" + dst
			// --no-direct: the preset keeps the old order, whose splits would
			// otherwise write their HFiles themselves, never kept.
			args := []string{"run", jobPath, "--sink", "hfiles", "--staging", staging, "--resume", "--force-takeover",
				"--workers", "2", "--memory", tc.memory, "--split-bytes", "256KiB", "--no-direct"}
			k, out := killThenResume(t, bin, args)
			var sum struct {
				Finished bool `json:"finished"`
				Splits   int  `json:"splits"`
				Skipped  int  `json:"splits_skipped"`
				Stats    struct {
					Runs           int64  `json:"runs"`
					SplitsInMemory int64  `json:"splits_in_memory"`
					LocalRuns      string `json:"local_runs"`
				} `json:"sink_stats"`
			}
			if err := json.Unmarshal(out, &sum); err != nil {
				t.Fatal(err)
			}
			t.Logf("resume: %d of %d splits done by the killed run; %d runs in %q, %d splits written from memory", sum.Skipped, sum.Splits, sum.Stats.Runs, sum.Stats.LocalRuns, sum.Stats.SplitsInMemory)
			// The checkpoint is local and the staging folder on HDFS: the
			// runs go beside the checkpoint (job.Job.SpillDirFor).
			if want := filepath.Join(dir, "job.rekey", "checkpoint.spill"); sum.Stats.LocalRuns != want {
				t.Errorf("runs spilled to %q, want %s", sum.Stats.LocalRuns, want)
			}
			if !sum.Finished {
				t.Errorf("resume did not finish: %s", out)
			}
			if tc.allKept {
				if sum.Skipped != 0 {
					t.Errorf("the killed run had %d splits done, all in memory, yet its checkpoint claims %d", k, sum.Skipped)
				}
				if sum.Stats.Runs != 0 || sum.Stats.SplitsInMemory != int64(sum.Splits) {
					t.Errorf("with room for every split: %d runs spilled, %d of %d splits written from memory; want 0 and all", sum.Stats.Runs, sum.Stats.SplitsInMemory, sum.Splits)
				}
			}
			sameCells(t, fmt.Sprintf("target after a kill at %d splits done and a resume (raw)", k), dumpTable(t, dst, true), want)
			verifyPasses(t, bin, jobPath, st)
		})
	}
}

// TestKillNineDirectThenResume: the wide -> bucketed preset keeps the old
// order, so each split writes its HFiles itself and records them at its
// commit; a run killed with SIGKILL after some splits were done keeps
// those (the resume skips them, and removes what the splits in flight
// wrote), no run file is written, the merge adopts every file, and the
// target holds each expected cell (the preset's rule applied to the
// oracle's dump of the source) exactly once.
func TestKillNineDirectThenResume(t *testing.T) {
	st := testenv.Require(t)
	bin := rekeyBinary(t)
	p := presets["wide_to_bucketed"]
	src, dst := uniq(t, "direct_src"), uniq(t, "direct_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	source := seedSource(t, st, src, snap, p, bigWide(40, 1000), 3)
	want := expect(p, source)
	dir := t.TempDir()
	jobPath := writeJobFile(t, st, snap, dst, dir)
	staging := "hdfs://" + st.NameNode + "/tmp/" + dst
	args := []string{"run", jobPath, "--sink", "hfiles", "--staging", staging, "--resume", "--force-takeover",
		"--workers", "2", "--split-bytes", "256KiB"}
	k, out := killThenResume(t, bin, args)
	var sum struct {
		Finished bool `json:"finished"`
		Splits   int  `json:"splits"`
		Skipped  int  `json:"splits_skipped"`
		Stats    struct {
			Runs    int64 `json:"runs"`
			Direct  int64 `json:"direct_hfiles"`
			Adopted int64 `json:"direct_hfiles_adopted"`
			HFiles  int64 `json:"hfiles"`
		} `json:"sink_stats"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("resume: %d of %d splits done by the killed run; %d runs, %d HFiles written by the splits, %d adopted, %d HFiles in all",
		sum.Skipped, sum.Splits, sum.Stats.Runs, sum.Stats.Direct, sum.Stats.Adopted, sum.Stats.HFiles)
	if !sum.Finished {
		t.Errorf("resume did not finish: %s", out)
	}
	if sum.Skipped < 1 {
		t.Errorf("the killed run had %d splits done, written to their own HFiles and recorded, yet the resume redid all", k)
	}
	if sum.Stats.Runs != 0 || sum.Stats.Direct < int64(sum.Splits) || sum.Stats.Adopted != sum.Stats.Direct || sum.Stats.HFiles != sum.Stats.Direct {
		t.Errorf("%d runs, %d HFiles by the splits, %d adopted, %d HFiles; want no run, at least one per split (%d), every one adopted and nothing else", sum.Stats.Runs, sum.Stats.Direct, sum.Stats.Adopted, sum.Stats.HFiles, sum.Splits)
	}
	sameCells(t, fmt.Sprintf("target after a kill at %d splits done and a resume (raw)", k), dumpTable(t, dst, true), want)
	verifyPasses(t, bin, jobPath, st)
}
