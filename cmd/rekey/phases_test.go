package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/pipeline"
)

// TestPhaseFlagErrors: a phase with flags that do not go with it, or with
// a sink that has no phases, is a usage error; so is --since with the
// merge (a catch-up runs in one process) and the load of a catch-up
// never staged.
func TestPhaseFlagErrors(t *testing.T) {
	job := demoJob(t)
	for _, args := range [][]string{
		{"run", job, "--phase", "sort"},
		{"run", job, "--phase", "merge", "--sink", "hfiles"},
		{"run", job, "--part", "0/2", "--sink", "hfiles"},
		{"run", job, "--phase", "merge", "--part", "2/2", "--sink", "hfiles"},
		{"run", job, "--phase", "load", "--shard", "0/2", "--sink", "hfiles"},
		{"run", job, "--phase", "spill", "--shard", "0/2", "--sink", "dry-run"},
		{"run", job, "--phase", "spill", "--shard", "0/2", "--sink", "puts"},
		{"run", job, "--phase", "merge", "--part", "0/2", "--sink", "puts"},
		{"load", job},
		{"run", job, "--phase", "merge", "--part", "0/2", "--sink", "hfiles", "--since", "earlier"},
		{"load", job, "--since", "earlier"},
	} {
		code, _, errOut := runRekey(t, args...)
		if code != 2 {
			t.Errorf("rekey %v: exit %d (%s), want 2", args, code, strings.TrimSpace(errOut))
		}
		// The catch-up's load looks in the folder named after the
		// snapshot it started from.
		if args[0] == "load" && len(args) > 2 && !strings.Contains(errOut, "staging.since-earlier does not exist") {
			t.Errorf("rekey %v: %s; want the catch-up's folder named", args, strings.TrimSpace(errOut))
		}
	}
}

// offlinePhasedJob is the demo job with the hfiles sink, offline, staging
// into out.
func offlinePhasedJob(t *testing.T) (job, out string) {
	job = demoJob(t)
	out = filepath.Join(filepath.Dir(job), "out")
	f, err := os.OpenFile(job, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("sink:\n  type: hfiles\n  offline: true\n  staging: " + out + "\n")
	f.Close()
	return job, out
}

// TestPhasesOffline runs the demo job in phases on one machine, offline:
// two spill shards, a merge too early (exit 2), two merge parts. Every
// cell of the snapshot lands once in the HFiles, one per region and
// family, and rekey status counts every task done; the load, offline,
// is refused.
func TestPhasesOffline(t *testing.T) {
	job, out := offlinePhasedJob(t)
	run := func(want int, args ...string) {
		t.Helper()
		code, stdout, errOut := runRekey(t, append([]string{"run", job, "--progress", "none", "--split-bytes", "16KiB"}, args...)...)
		if code != want {
			t.Fatalf("rekey run %v: exit %d, want %d\n%s\n%s", args, code, want, stdout, errOut)
		}
	}
	run(0, "--phase", "spill", "--shard", "0/2")
	run(2, "--phase", "merge", "--part", "0/2")
	run(0, "--phase", "spill", "--shard", "1/2")
	run(0, "--phase", "merge", "--part", "1/2")
	run(0, "--phase", "merge", "--part", "0/2")
	if code, _, errOut := runRekey(t, "load", job); code != 2 {
		t.Errorf("rekey load of an offline job: exit %d, want 2\n%s", code, errOut)
	}
	code, stdout, errOut := runRekey(t, "status", job, "--json")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, errOut)
	}
	var st pipeline.StagingStatus
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Spill.Tasks != 2 || st.Spill.Done != 2 || st.Merge.Tasks != 2 || st.Merge.Done != 2 {
		t.Errorf("status: spill %d of %d done, merge %d of %d", st.Spill.Done, st.Spill.Tasks, st.Merge.Done, st.Merge.Tasks)
	}
	// The merge done: no time left to estimate ("0s" read as work to come).
	if code, text, _ := runRekey(t, "status", job); code != 0 || !strings.Contains(text, "eta    none: the merge is done") {
		t.Errorf("status text after the merge: exit %d\n%s", code, text)
	}
	perDir := map[string]int{}
	var n int
	filepath.WalkDir(filepath.Join(out, "hfiles"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		perDir[filepath.Dir(p)]++
		rd, err := hfile.OpenFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n += int(rd.Entries())
		rd.Close()
		return nil
	})
	for d, k := range perDir {
		if k != 1 {
			t.Errorf("%s holds %d HFiles, want 1", d, k)
		}
	}
	// testdata/snapshots/demo_events.cells, the oracle's dump of the
	// snapshot, has 31413 cells; the demo layout keeps every one.
	if n != 31413 || st.Merge.Cells != 31413 {
		t.Errorf("%d cells in the HFiles, %d in status, want 31413", n, st.Merge.Cells)
	}
}

// TestOneFolderOneKindOfJob: a one-process run and a job in phases lease
// different files of a staging folder, so neither could keep the other
// out by its lease; each refuses the other's folder (exit 2, naming what
// it found), and leaves it as it was.
func TestOneFolderOneKindOfJob(t *testing.T) {
	job, out := offlinePhasedJob(t)
	run := func(want int, args ...string) string {
		t.Helper()
		code, stdout, errOut := runRekey(t, append([]string{"run", job, "--progress", "none", "--split-bytes", "16KiB"}, args...)...)
		if code != want {
			t.Fatalf("rekey run %v: exit %d, want %d\n%s\n%s", args, code, want, stdout, errOut)
		}
		return errOut
	}
	run(0, "--phase", "spill", "--shard", "0/2")
	said := run(2, "--fresh")
	if !strings.Contains(said, "holds a job in phases") || !strings.Contains(said, `kind says "phases"`) {
		t.Errorf("a one-process run on a phased folder says:\n%s", said)
	}
	if _, err := os.Stat(filepath.Join(out, "finish.json")); !os.IsNotExist(err) {
		t.Errorf("the refused run wrote finish.json: %v", err)
	}

	job2, out2 := offlinePhasedJob(t)
	job = job2
	run(0)
	said = run(2, "--phase", "spill", "--shard", "1/2")
	if !strings.Contains(said, "holds a one-process run") {
		t.Errorf("a spill task on a one-process run's folder says:\n%s", said)
	}
	if _, err := os.Stat(filepath.Join(out2, "spill")); !os.IsNotExist(err) {
		t.Errorf("the refused spill task wrote spill/: %v", err)
	}
}

// TestPhasesRefuseAnotherCut is issue 49's scenario: spill shards 0/3 and
// 2/3 of a job cut with the default split size, shard 1/3 retried with
// another --split-bytes (a changed ConfigMap for one retried pod). The
// shard is refused before it reads a cell (exit 2, naming the split
// size), as is a shard of another count; run as the job says, the merge
// has every cell of the snapshot once. A shard commit that lost a split
// (what a shard of an older build, cutting otherwise, committed) makes
// the merge fail (exit 1, naming the split), never merge fewer cells.
func TestPhasesRefuseAnotherCut(t *testing.T) {
	job, out := offlinePhasedJob(t)
	run := func(want int, wantMsg string, args ...string) {
		t.Helper()
		code, stdout, errOut := runRekey(t, append([]string{"run", job, "--progress", "none"}, args...)...)
		if code != want || !strings.Contains(errOut, wantMsg) {
			t.Fatalf("rekey run %v: exit %d, want %d and a message with %q\n%s\n%s", args, code, want, wantMsg, stdout, errOut)
		}
	}
	run(0, "", "--phase", "spill", "--shard", "0/3", "--split-bytes", "64KiB")
	run(0, "", "--phase", "spill", "--shard", "2/3", "--split-bytes", "64KiB")
	run(2, "split size: the job record", "--phase", "spill", "--shard", "1/3", "--split-bytes", "40000")
	run(2, "deals the splits to 3 shards", "--phase", "spill", "--shard", "1/4", "--split-bytes", "64KiB")
	run(2, "time range is from none to none in the job record", "--phase", "spill", "--shard", "1/3", "--split-bytes", "64KiB", "--to", "2030-01-01T00:00:00Z")
	run(0, "", "--phase", "spill", "--shard", "1/3", "--split-bytes", "64KiB")
	// The refused shard of 4 left a folder (its lease's); status counts
	// the record's shards, not the folders.
	code, stdout, errOut := runRekey(t, "status", job, "--json")
	var st pipeline.StagingStatus
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || st.Spill.Tasks != 3 || st.Spill.Done != 3 {
		t.Errorf("status after the 3 shards: exit %d (%v), spill %d of %d tasks done; want 3 of 3\n%s", code, err, st.Spill.Done, st.Spill.Tasks, errOut)
	}

	// The shards' commits are the record's splits: the merge goes on.
	var rec struct {
		Splits []struct{ ID string }
	}
	b, err := os.ReadFile(filepath.Join(out, "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil || len(rec.Splits) < 4 {
		t.Fatalf("job.json: %v, %d splits; want a record of several", err, len(rec.Splits))
	}

	// A commit that lost a split is refused by the merge, by name.
	commit := filepath.Join(out, "spill", "shard-0001-of-0003.json")
	orig, err := os.ReadFile(commit)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(orig, &c); err != nil {
		t.Fatal(err)
	}
	splits := c["splits"].([]any)
	if len(splits) == 0 {
		t.Fatal("shard 1/3 committed no split; the test needs one to remove")
	}
	lost := splits[0].(map[string]any)["id"].(string)
	c["splits"] = splits[1:]
	tampered, _ := json.Marshal(c)
	os.WriteFile(commit, tampered, 0o644)
	run(1, "split "+lost, "--phase", "merge", "--part", "0/1")
	os.WriteFile(commit, orig, 0o644)

	run(0, "", "--phase", "merge", "--part", "0/1")
	n := stagedCells(t, out)
	// testdata/snapshots/demo_events.cells, the oracle's dump of the
	// snapshot, has 31413 cells; the demo layout keeps every one.
	if n != 31413 {
		t.Errorf("%d cells in the HFiles, want 31413", n)
	}
}

// TestPhasesFreshStartsOver: a job in phases begun as 4 shards, then
// started over as 3 with --fresh on every shard, merges the 3 shards'
// splits; the commit the 4-shard job left is an earlier job's and is not
// read. Before, it made every merge fail, so --fresh could not start a
// job over (found by TestPhaseSchedules, seed 1796613070626419815).
func TestPhasesFreshStartsOver(t *testing.T) {
	job, out := offlinePhasedJob(t)
	run := func(args ...string) {
		t.Helper()
		code, stdout, errOut := runRekey(t, append([]string{"run", job, "--progress", "none", "--split-bytes", "64KiB"}, args...)...)
		if code != 0 {
			t.Fatalf("rekey run %v: exit %d\n%s\n%s", args, code, stdout, errOut)
		}
	}
	run("--phase", "spill", "--shard", "0/4")
	for i := range 3 {
		run("--phase", "spill", "--shard", fmt.Sprintf("%d/3", i), "--fresh")
	}
	run("--phase", "merge", "--part", "0/1")
	n := stagedCells(t, out)
	if n != 31413 {
		t.Errorf("%d cells in the HFiles, want the snapshot's 31413", n)
	}
}

// TestStatusShowsCoverage: `rekey status` of a dry-run job in shards
// reads the job record beside the checkpoint: none before a task ran
// (exit 2), one of two shards committed after the first, coverage proven
// after the second; of a job in phases, the spill shards' coverage from
// the staging folder.
func TestStatusShowsCoverage(t *testing.T) {
	job := demoJob(t)
	if code, _, errOut := runRekey(t, "status", job); code != exitUsage || !strings.Contains(errOut, "no task of this job has started") {
		t.Errorf("status before any task: exit %d, %q", code, errOut)
	}
	status := func(j string) pipeline.JobStatus {
		t.Helper()
		code, out, errOut := runRekey(t, "status", j, "--json")
		if code != 0 {
			t.Fatalf("status: exit %d: %s", code, errOut)
		}
		var st struct{ Job *pipeline.JobStatus }
		if err := json.Unmarshal([]byte(out), &st); err != nil || st.Job == nil {
			t.Fatalf("status --json: %v, %s", err, out)
		}
		return *st.Job
	}
	for i, want := range []pipeline.JobStatus{{Shards: 2, Committed: 1}, {Shards: 2, Committed: 2, Proven: true}} {
		if code, _, errOut := runRekey(t, "run", job, "--sink", "dry-run", "--shard", fmt.Sprintf("%d/2", i), "--progress", "none"); code != 0 {
			t.Fatalf("shard %d/2: exit %d: %s", i, code, errOut)
		}
		if st := status(job); st.Shards != want.Shards || st.Committed != want.Committed || st.Proven != want.Proven || st.Problem != "" {
			t.Errorf("after shard %d/2: %+v, want %+v", i, st, want)
		}
	}
	if code, out, _ := runRekey(t, "status", job); code != 0 || !strings.Contains(out, "cover  proven") {
		t.Errorf("status text: exit %d\n%s", code, out)
	}

	phased, _ := offlinePhasedJob(t)
	for i := range 2 {
		if code, _, errOut := runRekey(t, "run", phased, "--phase", "spill", "--shard", fmt.Sprintf("%d/2", i), "--progress", "none"); code != 0 {
			t.Fatalf("spill %d/2: exit %d: %s", i, code, errOut)
		}
	}
	if st := status(phased); !st.Proven || st.Committed != 2 || !strings.HasSuffix(st.Record, "job.json") {
		t.Errorf("status of the spilled job in phases: %+v, want both shards committed, proven, from the staging folder's job.json", st)
	}
}

// TestWaitReady: a merge started before every spill shard committed, with
// --wait-ready, waits (polling) and merges once the last shard commits;
// one whose wait runs out exits 4, so a scheduler retries it (without
// --wait-ready it is exit 2, final, which the Kubernetes manifests' merge
// and load Jobs met when applied together). The load waits likewise for
// a staging folder not there yet.
func TestWaitReady(t *testing.T) {
	saved := readyPoll
	readyPoll = 100 * time.Millisecond
	defer func() { readyPoll = saved }()
	job, _ := offlinePhasedJob(t)
	run := func(args ...string) (int, string) {
		code, _, errOut := runRekey(t, append([]string{"run", job, "--progress", "none"}, args...)...)
		return code, errOut
	}
	if code, errOut := run("--phase", "merge", "--part", "0/1", "--wait-ready", "300ms"); code != exitRetry || !strings.Contains(errOut, "did not finish within --wait-ready") {
		t.Errorf("merge with no spill, --wait-ready 300ms: exit %d, want 4\n%s", code, errOut)
	}
	if code, _ := run("--phase", "spill", "--shard", "0/2"); code != 0 {
		t.Fatal("spill 0/2 failed")
	}
	merged := make(chan int)
	go func() {
		code, _ := run("--phase", "merge", "--part", "0/1", "--wait-ready", "1m")
		merged <- code
	}()
	time.Sleep(500 * time.Millisecond)
	if code, _ := run("--phase", "spill", "--shard", "1/2"); code != 0 {
		t.Fatal("spill 1/2 failed")
	}
	select {
	case code := <-merged:
		if code != 0 {
			t.Errorf("the waiting merge: exit %d, want 0", code)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiting merge did not end")
	}

	loadJob := demoJob(t)
	if code, _, errOut := runRekey(t, "load", loadJob, "--wait-ready", "300ms"); code != exitRetry || !strings.Contains(errOut, "does not exist") {
		t.Errorf("load of a folder not there yet, --wait-ready 300ms: exit %d, want 4\n%s", code, errOut)
	}
}

// stagedCells counts the cells of every HFile under the staging folder
// out's hfiles/, by each file's trailer.
func stagedCells(t *testing.T, out string) uint64 {
	t.Helper()
	var n uint64
	err := filepath.WalkDir(filepath.Join(out, "hfiles"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rd, err := hfile.OpenFile(p)
		if err != nil {
			return err
		}
		n += rd.Entries()
		return rd.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStatusOfOneProcessFolder: status describes a folder a one-process
// run staged (splits staged, HFiles written with their cells and bytes,
// regions loaded) where it showed every phase "not started" and an ETA of
// no split committed; a folder that does not exist, or holds no staged
// job, is exit 2, and status creates nothing.
func TestStatusOfOneProcessFolder(t *testing.T) {
	job := demoJob(t)
	staging := filepath.Join(t.TempDir(), "staging")
	if code, _, errOut := runRekey(t, "run", job, "--sink", "hfiles", "--offline", "--staging", staging, "--progress", "none"); code != 0 {
		t.Fatalf("staged run: exit %d: %s", code, errOut)
	}
	// What the folder holds, from its HFiles.
	var files int
	var bytes int64
	filepath.WalkDir(filepath.Join(staging, "hfiles"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			files++
			bytes += fi.Size()
		}
		return err
	})
	code, out, errOut := runRekey(t, "status", job, "--staging", staging, "--json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	var st pipeline.StagingStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	op := st.OneProcess
	// testdata/snapshots/demo_events.cells, the oracle's dump, has 31413
	// cells, and the demo layout keeps every one.
	if op == nil || !op.Written || op.HFiles != files || op.HFileBytes != bytes || op.HFileCells != 31413 || op.Loaded != 0 || op.Regions == 0 {
		t.Fatalf("one-process status %+v, want written, %d files of %d bytes, 31413 cells, none loaded", op, files, bytes)
	}
	code, out, _ = runRekey(t, "status", job, "--staging", staging)
	if code != 0 || !strings.Contains(out, "in one process") || !strings.Contains(out, "not loaded (rekey load)") || strings.Contains(out, "not started") {
		t.Errorf("status text: exit %d\n%s", code, out)
	}
	missing := filepath.Join(t.TempDir(), "nowhere")
	if code, _, errOut := runRekey(t, "status", job, "--staging", missing); code != exitUsage || !strings.Contains(errOut, "does not exist") {
		t.Errorf("missing folder: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("status created %s: %v", missing, err)
	}
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("x"), 0o644)
	if code, _, errOut := runRekey(t, "status", job, "--staging", foreign); code != exitUsage || !strings.Contains(errOut, "holds no staged job") {
		t.Errorf("foreign folder: exit %d: %s", code, errOut)
	}
}
