package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rejectsJob is the demo job with an old row key that only a third of the
// demo users fit: the literal "u000" and then the user, so u00000..u00099
// parse and every other row's cells are rejected (bad_keys: reject).
func rejectsJob(t *testing.T) (job, dir string) {
	t.Helper()
	dir = t.TempDir()
	snap, err := filepath.Abs("../../testdata/snapshots/demo_events")
	if err != nil {
		t.Fatal(err)
	}
	y := `source: {root: ` + snap + `, name: demo_events}
target: {table: events_by_day}
source_layout:
  row:
    - {type: literal, bytes: "u000"}
    - {field: user, type: string}
  qualifier:
    - {field: ts, type: int, width: 8}
target_layout:
  row:
    - {field: user, type: fixed, width: 2}
    - {field: day, type: time_bucket, of: ts, unit: day}
  qualifier:
    - {type: offset, of: ts, bucket: day}
entity: [user]
bad_keys: {action: reject}
`
	job = filepath.Join(dir, "rejects.yaml")
	if err := os.WriteFile(job, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return job, dir
}

// expectedRejects counts, in the oracle's dump of the demo snapshot
// (testdata/snapshots/demo_events.cells, written by HBase's own
// TableSnapshotScanner), the cells whose row does not begin with "u000":
// the rule of rejectsJob's old layout, written out here.
func expectedRejects(t *testing.T) (rejected, kept int64) {
	t.Helper()
	f, err := os.Open("../../testdata/snapshots/demo_events.cells")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		row, err := hex.DecodeString(strings.SplitN(sc.Text(), "\t", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(string(row), "u000") {
			kept++
		} else {
			rejected++
		}
	}
	return rejected, kept
}

type rejectedReport struct {
	OK       bool
	Rejected *struct {
		Counted      bool     `json:"counted"`
		Cells        int64    `json:"cells"`
		ByRun        int64    `json:"rejected_by_run"`
		Unaccounted  int64    `json:"unaccounted"`
		RunFileCells int64    `json:"run_file_cells"`
		RunFiles     string   `json:"run_files"`
		Examples     []string `json:"examples"`
	} `json:"rejected"`
	Summary struct {
		Entities     int   `json:"entities"`
		Mismatched   int   `json:"mismatched"`
		NewBytesRead int64 `json:"new_bytes_read"`
	} `json:"summary"`
}

// TestVerifyCountsRejectedCells: verify accounts for the old cells whose
// keys do not fit the old layout, which no entity holds. After a run that
// rejected them, each is in the run's reject files: exit 0, and every
// report says how many. A cell rejected with no reject file to show for it
// is a cell the target lacks with nothing to say why: exit 1. Before, the
// report said every entity matched and nothing else.
func TestVerifyCountsRejectedCells(t *testing.T) {
	job, dir := rejectsJob(t)
	wantRejected, wantKept := expectedRejects(t)
	if wantRejected == 0 || wantKept == 0 {
		t.Fatalf("the dump gives %d rejected and %d kept: the test needs both", wantRejected, wantKept)
	}
	staging := filepath.Join(dir, "staging")
	code, out, errOut := runRekey(t, "run", job, "--sink", "hfiles", "--offline", "--staging", staging, "--progress", "none", "--json")
	if code != exitProblems { // done, with rejected keys reported
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	verify := func(want int, extra ...string) rejectedReport {
		t.Helper()
		html := filepath.Join(t.TempDir(), "report.html")
		code, out, errOut := runRekey(t, append([]string{"verify", job, "--staging", staging, "--json", "--html", html}, extra...)...)
		if code != want {
			t.Fatalf("verify %v: exit %d, want %d\n%s\n%.3000s", extra, code, want, errOut, out)
		}
		var r rejectedReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("verify %v: %v\n%.2000s", extra, err, out)
		}
		page, err := os.ReadFile(html)
		if err != nil || !strings.Contains(string(page), `id="rejected"`) {
			t.Errorf("verify %v: the HTML report has no rejected section (%v)", extra, err)
		}
		if verdict := map[int]string{exitOK: "PASS (exit 0)", exitProblems: "FAIL (exit 1)"}[want]; !strings.Contains(string(page), verdict) {
			t.Errorf("verify %v: the HTML report does not say %q", extra, verdict)
		}
		return r
	}
	r := verify(exitOK, "--all")
	if r.Rejected == nil || !r.Rejected.Counted || r.Rejected.Cells != wantRejected || r.Rejected.ByRun != wantRejected ||
		r.Rejected.Unaccounted != 0 || r.Rejected.RunFileCells != wantRejected {
		t.Fatalf("--all: rejected %+v; want %d counted, all rejected by the run", r.Rejected, wantRejected)
	}
	if r.Summary.Entities != 100 || r.Summary.Mismatched != 0 {
		t.Errorf("--all: %+v; want the 100 users that fit, all matching", r.Summary)
	}
	// Every staged cell was compared, so every byte of the staged HFiles
	// was read (the report said 0 B, counting from after their opening).
	var staged int64
	filepath.WalkDir(filepath.Join(staging, "hfiles"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			staged += fi.Size()
		}
		return err
	})
	if staged == 0 || r.Summary.NewBytesRead != staged {
		t.Errorf("--all: new side read %d bytes, the staged HFiles hold %d", r.Summary.NewBytesRead, staged)
	}
	// Without a pass over the snapshot only the run's files are counted.
	r = verify(exitOK)
	if r.Rejected == nil || r.Rejected.Counted || r.Rejected.RunFileCells != wantRejected {
		t.Errorf("sampled: rejected %+v; want the run's %d, not counted", r.Rejected, wantRejected)
	}
	// The same text report says it too.
	code, text, _ := runRekey(t, "verify", job, "--staging", staging, "--all")
	if code != exitOK || !strings.Contains(text, "rejected keys:") {
		t.Errorf("text report (exit %d) says nothing of rejected keys:\n%.2000s", code, text)
	}
	// The text lists mismatches only, and how many matched; --verbose
	// lists every entity.
	if strings.Contains(text, " match\n") || !strings.Contains(text, "100 entities match (--verbose lists each)") {
		t.Errorf("text report without --verbose:\n%.2000s", text)
	}
	if _, text, _ = runRekey(t, "verify", job, "--staging", staging, "--all", "--verbose"); strings.Count(text, " match\n") != 100 {
		t.Errorf("--verbose lists %d matching entities, want 100:\n%.1000s", strings.Count(text, " match\n"), text)
	}

	// One split's reject file lost: its cells are in no reject file.
	files, err := filepath.Glob(filepath.Join(dir, "rejects.rekey", "rejects", "*.tsv"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no per-split reject files under %s (%v)", filepath.Join(dir, "rejects.rekey", "rejects"), err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	lost := int64(strings.Count(string(b), "\n"))
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	r = verify(exitProblems, "--all")
	if r.Rejected == nil || r.Rejected.Unaccounted != lost || r.Rejected.ByRun != wantRejected-lost || len(r.Rejected.Examples) == 0 {
		t.Fatalf("a reject file lost: rejected %+v; want %d unaccounted", r.Rejected, lost)
	}
	// --rejects names another place; one that is not there is refused.
	if code, _, errOut := runRekey(t, "verify", job, "--staging", staging, "--all", "--rejects", filepath.Join(dir, "nowhere")); code != exitUsage || !strings.Contains(errOut, "--rejects") {
		t.Errorf("--rejects of nothing: exit %d: %s", code, errOut)
	}
}
