package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadAStagedRun: the demo job, whose sink section is puts, staged
// with `rekey run --sink hfiles --no-load`; the summary's "to load"
// command, `rekey load JOB --source-snapshot S` (the snapshot the run was
// told; another is refused), loads the folder (it was refused: "the load
// phase needs the hfiles sink") and only then records the target at the
// snapshot (the reached record `--since last` reads; the load wrote none
// before), and `rekey verify --all` finds every
// cell of the oracle's dump of the snapshot (31413) on both sides.
func TestLoadAStagedRun(t *testing.T) {
	st, _, table := scratchTable(t, "load_staged_")
	job := demoJob(t)
	code, out, errOut := runRekey(t, "run", job, "--zk", st.ZKQuorum, "--table", table, "--create", "--sink", "hfiles", "--no-load", "--progress", "none", "--source-snapshot", "demo_events")
	if code != 0 {
		t.Fatalf("run --no-load: exit %d: %s\n%s", code, errOut, out)
	}
	if !strings.Contains(out+errOut, "rekey load ") || !strings.Contains(out+errOut, "--source-snapshot demo_events") {
		t.Errorf("the staged run's summary names no load command with the snapshot it read:\n%s\n%s", out, errOut)
	}
	// The load checks the folder holds the snapshot it is told of.
	if code, _, errOut := runRekey(t, "load", job, "--zk", st.ZKQuorum, "--table", table, "--source-snapshot", "other_snapshot"); code != exitUsage || !strings.Contains(errOut, "source snapshot") {
		t.Fatalf("rekey load --source-snapshot naming another snapshot: exit %d: %s", code, errOut)
	}
	reached := filepath.Join(filepath.Dir(job), "demo.rekey", "checkpoint.reached.json")
	if _, err := os.Stat(reached); err == nil {
		t.Error("a run that staged its HFiles without loading them recorded the target at its snapshot")
	}
	if code, out, errOut := runRekey(t, "load", job, "--zk", st.ZKQuorum, "--table", table, "--source-snapshot", "demo_events"); code != 0 {
		t.Fatalf("rekey load of the staged folder: exit %d: %s\n%s", code, errOut, out)
	}
	// Loaded, the target is at the snapshot: the record a catch-up
	// (--since last) starts from says so.
	if b, err := os.ReadFile(reached); err != nil || !strings.Contains(string(b), `"snapshot": "demo_events"`) {
		t.Errorf("the reached record after rekey load: %v\n%s", err, b)
	}
	code, out, errOut = runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--table", table, "--all", "--json")
	if code != exitOK {
		t.Fatalf("verify --all: exit %d: %s\n%.3000s", code, errOut, out)
	}
	if r := decodeReport(t, out); r.Summary.CellsCompared != 2*31413 || r.Summary.Mismatched != 0 {
		t.Errorf("verify --all summary %+v, want 2x31413 cells compared, no mismatch", r.Summary)
	}
}

// TestLoadMissingFolder: `rekey load` of a folder nothing was staged into
// is exit 2 naming it, and creates nothing.
func TestLoadMissingFolder(t *testing.T) {
	job := demoJob(t)
	code, _, errOut := runRekey(t, "load", job)
	if code != exitUsage || !strings.Contains(errOut, "does not exist: nothing was staged there") {
		t.Errorf("load of a missing folder: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(job), "demo.rekey")); err == nil {
		t.Error("the load of a missing folder created the job's state folder")
	}
}
