package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// demoJob copies configs/demo.yaml into a temp dir (so its state folder
// lands there) with the snapshot root made absolute.
func demoJob(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../../testdata/snapshots/demo_events")
	s := strings.Replace(string(b), "../testdata/snapshots/demo_events", abs, 1)
	dir := t.TempDir()
	s = strings.Replace(s, "../bin/demo-rejects.tsv", filepath.Join(dir, "rejects.tsv"), 1)
	p := filepath.Join(dir, "demo.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunDryRunOnTheBundledSnapshot(t *testing.T) {
	job := demoJob(t)
	code, out, errOut := runRekey(t, "run", job, "--sink", "dry-run", "--json", "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var sum struct {
		Read     int64 `json:"cells_read"`
		Written  int64 `json:"cells_written"`
		Finished bool  `json:"finished"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	// testdata/snapshots/demo_events.cells, the oracle's dump of the
	// snapshot, has 31413 cells.
	if sum.Read != 31413 || sum.Written != 31413 || !sum.Finished {
		t.Errorf("read %d, mapped %d, finished %v; want 31413, 31413, true", sum.Read, sum.Written, sum.Finished)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(job), "demo.rekey", "checkpoint.json")); err != nil {
		t.Errorf("no checkpoint beside the job: %v", err)
	}
	// A second run over the checkpoint must say how to go on: exit 2.
	if code, _, errOut := runRekey(t, "run", job, "--sink", "dry-run", "--progress", "none"); code != 2 || !strings.Contains(errOut, "--resume") {
		t.Errorf("second run: exit %d, %q", code, errOut)
	}
	// --resume finds every split done and does nothing more.
	code, out, _ = runRekey(t, "run", job, "--sink", "dry-run", "--resume", "--progress", "none")
	if code != 0 || !strings.Contains(out, "4 done by earlier runs") {
		t.Errorf("resume of a finished run: exit %d\n%s", code, out)
	}
	// The job was one shard: a shard of two is another job over the same
	// state, refused until it is started over.
	if code, _, errOut := runRekey(t, "run", job, "--sink", "dry-run", "--shard", "0/2", "--progress", "none"); code != 2 || !strings.Contains(errOut, "deals the splits to 1 shards") {
		t.Errorf("shard 0/2 of a job of one shard: exit %d, %q; want 2, naming the job record's shard count", code, errOut)
	}
	// Two shards together, started over, read every cell once.
	var total int64
	for _, sh := range []string{"0/2", "1/2"} {
		code, out, errOut := runRekey(t, "run", job, "--sink", "dry-run", "--shard", sh, "--fresh", "--json", "--progress", "none")
		if code != 0 {
			t.Fatalf("shard %s: exit %d %s", sh, code, errOut)
		}
		var s struct {
			Read int64 `json:"cells_read"`
		}
		json.Unmarshal([]byte(out), &s)
		total += s.Read
	}
	if total != 31413 {
		t.Errorf("two shards read %d cells together, want 31413", total)
	}
}

func TestRunFlagErrors(t *testing.T) {
	job := demoJob(t)
	for _, args := range [][]string{
		{"--sink", "s3"},
		{"--shard", "4/4"},
		{"--shard", "x"},
		{"--from", "yesterday"},
		{"--from", "2000", "--to", "1000"},
		{"--memory", "lots"},
		{"--resume", "--fresh"},
		{"--control-addr", "0.0.0.0:7070", "--sink", "dry-run"},
	} {
		code, _, errOut := runRekey(t, append([]string{"run", job}, args...)...)
		if code != 2 {
			t.Errorf("rekey run %v: exit %d (%s), want 2", args, code, strings.TrimSpace(errOut))
		}
	}
}

// TestRunWorkersFollowGOMAXPROCS: with no --workers and none in the job,
// the run uses GOMAXPROCS workers and sizes the sink's buffers for that
// many, and says so in its summary.
func TestRunWorkersFollowGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	code, out, errOut := runRekey(t, "run", demoJob(t), "--sink", "dry-run", "--json", "--progress", "none", "--memory", "64MiB")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var sum struct {
		Workers int `json:"workers"`
		Budget  struct {
			Total   int64 `json:"total"`
			Workers int   `json:"workers"`
			Sink    int64 `json:"sink"`
		} `json:"memory_budget"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if sum.Workers != 1 || sum.Budget.Workers != 1 || sum.Budget.Total != 64<<20 || sum.Budget.Sink != 14<<20 {
		t.Errorf("GOMAXPROCS=1, --memory 64MiB: workers %d, budget %+v; want 1 worker, a budget for 1, 7/16 of its 32 MiB soft limit to the sink", sum.Workers, sum.Budget)
	}
}
