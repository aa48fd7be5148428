package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: `rekey version` names the version, Go and the platform, in
// text and as JSON, and a run's --json summary carries the same build
// beside its own fields, so a summary kept for months names its build.
func TestVersion(t *testing.T) {
	code, out, errOut := runRekey(t, "version")
	if code != 0 || !strings.HasPrefix(out, "rekey "+version) || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("rekey version: exit %d, %q %s", code, out, errOut)
	}
	code, out, _ = runRekey(t, "version", "--json")
	var b buildInfo
	if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil || b.Version != version || b.Go != runtime.Version() || b.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("rekey version --json: exit %d, %q (%v)", code, out, err)
	}
	code, out, errOut = runRekey(t, "run", demoJob(t), "--sink", "dry-run", "--progress", "none", "--json")
	if code != 0 {
		t.Fatalf("run: exit %d %s", code, errOut)
	}
	var sum struct {
		Snapshot string    `json:"snapshot"`
		Rekey    buildInfo `json:"rekey"`
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Snapshot == "" || sum.Rekey != b {
		t.Errorf("run --json: %+v (%v), want the summary's fields and rekey %+v", sum, err, b)
	}
}
