package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyReportsTheRun: a run in one process keeps its summary in its
// state folder, and verify's reports (text, HTML, JSON) say what
// that run did beside what verify checked: cells read, written, rejected,
// collided, its time. The cell count is HBase's dump of the snapshot (the
// demo job rejects and collides nothing).
func TestVerifyReportsTheRun(t *testing.T) {
	job := demoJob(t)
	if code, out, errOut := runRekey(t, "run", job, "--sink", "hfiles", "--offline", "--no-load", "--progress", "none"); code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	page, rep := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.json")
	staging := filepath.Join(strings.TrimSuffix(job, ".yaml")+".rekey", "staging")
	code, text, errOut := runRekey(t, "verify", job, "--staging", staging, "--html", page, "--out", rep)
	if code != exitOK {
		t.Fatalf("verify: exit %d\n%s%s", code, text, errOut)
	}
	total := dumpCells(t, "demo_events")
	want := fmt.Sprintf(" splits done; %d cells read, %d written, 0 rejected, 0 collided, 0 failed;", total, total)
	if !strings.Contains(text, "\nthe run (") || !strings.Contains(text, want) {
		t.Errorf("the text report does not give the run's summary %q:\n%s", want, text)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `<p id="run">the run (`) || !strings.Contains(string(b), "): finished, ") || !strings.Contains(string(b), want) {
		t.Errorf("the HTML report does not give the run's summary %q:\n%s", want, b)
	}
	var r struct {
		Run *struct {
			Read     int64   `json:"cells_read"`
			Rejected int64   `json:"cells_rejected"`
			Seconds  float64 `json:"seconds"`
		} `json:"run"`
	}
	if b, err = os.ReadFile(rep); err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil || r.Run == nil || r.Run.Read != total || r.Run.Seconds <= 0 {
		t.Errorf("the JSON report's run: %+v (%v), want %d cells read and the run's time", r.Run, err, total)
	}
}
