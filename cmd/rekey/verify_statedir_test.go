package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyFindsSketchOfCheckpointRun: a run whose --checkpoint puts its
// state folder elsewhere than the job file's default (JOB.rekey) writes
// its entity sketch there; verify of the folder it staged finds the
// sketch through the folder's identity record, where it exited 2 with "no
// entity sketch in JOB.rekey". Where nothing records it (the live table),
// the refusal names --sketch PATH.
func TestVerifyFindsSketchOfCheckpointRun(t *testing.T) {
	job := demoJob(t)
	dir := filepath.Join(t.TempDir(), "DIR")
	if code, out, errOut := runRekey(t, "run", job, "--checkpoint", filepath.Join(dir, "c.json"), "--sink", "hfiles", "--offline", "--no-load", "--progress", "none"); code != exitOK {
		t.Fatalf("run --checkpoint: exit %d\n%s%s", code, out, errOut)
	}
	sketch := filepath.Join(dir, "entities.json")
	if _, err := os.Stat(sketch); err != nil {
		t.Fatalf("the run wrote no sketch beside its checkpoint: %v", err)
	}
	if _, err := os.Stat(strings.TrimSuffix(job, ".yaml") + ".rekey"); err == nil {
		t.Fatal("the run made the default state folder too: the case tests nothing")
	}
	code, out, errOut := runRekey(t, "verify", job, "--staging", filepath.Join(dir, "staging"))
	if code != exitOK || !strings.Contains(out, "300 entities checked, 0 mismatched") {
		t.Errorf("verify --staging DIR/staging: exit %d, want 0 with the sketch's 300 entities\n%s%s", code, out, errOut)
	}
	// The live table's side records no state folder: the run's sketch is
	// named with --sketch. Nothing reaches the (absent) cluster before the
	// entities are chosen.
	code, _, errOut = runRekey(t, "verify", job, "--zk", "127.0.0.1:1", "--table", "t", "--timeout", "1s")
	if code != exitUsage || !strings.Contains(errOut, "no entity sketch in") || !strings.Contains(errOut, "--sketch PATH") {
		t.Errorf("verify of the table without the sketch: exit %d, want 2 naming --sketch PATH\n%s", code, errOut)
	}
}
