package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bucketJob is the demo job re-keyed into buckets of unit (day or hour):
// two jobs over one snapshot and one table whose staged cells differ.
func bucketJob(t *testing.T, dir, unit string) string {
	t.Helper()
	snap, err := filepath.Abs("../../testdata/snapshots/demo_events")
	if err != nil {
		t.Fatal(err)
	}
	y := `source: {root: ` + snap + `, name: demo_events}
target: {table: events_by_bucket}
source_layout:
  row:
    - {field: user, type: string}
  qualifier:
    - {field: ts, type: int, width: 8}
target_layout:
  row:
    - {field: user, type: fixed, width: 6}
    - {field: b, type: time_bucket, of: ts, unit: ` + unit + `}
  qualifier:
    - {type: offset, of: ts, bucket: b}
entity: [user]
`
	p := filepath.Join(dir, unit+".yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStagingFolderNamesItsJob: a staged run records in its folder which
// job's output it holds (identity.json); a verify, a run or a load of
// another job on that folder is refused with exit 2 naming what differs (before, the
// verify reported every entity mismatched and the run staged beside the
// first job's files), while the job that staged it verifies clean.
func TestStagingFolderNamesItsJob(t *testing.T) {
	dir := t.TempDir()
	day, hour := bucketJob(t, dir, "day"), bucketJob(t, dir, "hour")
	staging := filepath.Join(dir, "staging")
	if code, _, errOut := runRekey(t, "run", day, "--sink", "hfiles", "--offline", "--staging", staging, "--progress", "none"); code != exitOK {
		t.Fatalf("staged run: exit %d: %s", code, errOut)
	}
	record, err := os.ReadFile(filepath.Join(staging, "identity.json"))
	if err != nil {
		t.Fatalf("the staged run recorded no identity: %v", err)
	}
	if code, out, errOut := runRekey(t, "verify", day, "--staging", staging, "--find-worst"); code != exitOK {
		t.Fatalf("verify of the job that staged it: exit %d: %s\n%.2000s", code, errOut, out)
	}
	code, _, errOut := runRekey(t, "verify", hour, "--staging", staging, "--find-worst")
	if code != exitUsage || !strings.Contains(errOut, "new key layout") || !strings.Contains(errOut, "day.yaml") {
		t.Errorf("verify of another job on the folder: exit %d, want %d naming the layout and the job that staged it:\n%s", code, exitUsage, errOut)
	}
	code, _, errOut = runRekey(t, "run", hour, "--sink", "hfiles", "--offline", "--staging", staging, "--progress", "none")
	if code != exitUsage || !strings.Contains(errOut, "new key layout") {
		t.Errorf("run of another job into the folder: exit %d, want %d naming the layout:\n%s", code, exitUsage, errOut)
	}
	code, _, errOut = runRekey(t, "load", hour, "--staging", staging)
	if code != exitUsage || !strings.Contains(errOut, "new key layout") {
		t.Errorf("load of another job's folder: exit %d, want %d naming the layout:\n%s", code, exitUsage, errOut)
	}
	if after, _ := os.ReadFile(filepath.Join(staging, "identity.json")); string(after) != string(record) {
		t.Errorf("the refused run changed the folder's identity:\n%s", after)
	}
}
