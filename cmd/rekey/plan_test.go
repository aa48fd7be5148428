package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

func TestPlanBadJobExits2(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("source: {root: x, name: y}\ntarget: {table: t}\nsource_layout: {row: [{field: k, type: strin}]}\ntarget_layout: {row: [{field: k, type: string}]}\nentity: [k]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runRekey(t, "plan", bad); code != exitUsage {
		t.Errorf("bad job: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := runRekey(t, "plan", filepath.Join(dir, "missing.yaml")); code != exitUsage {
		t.Errorf("missing job: exit %d, want %d", code, exitUsage)
	}
	// A valid job whose snapshot does not exist is a configuration error too.
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(dir, "nosnap.yaml")
	data, err := os.ReadFile(filepath.Join(root, "configs", "salt.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte("root: /hbase"), []byte("root: "+dir), 1)
	if err := os.WriteFile(job, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runRekey(t, "plan", job); code != exitUsage {
		t.Errorf("job with no snapshot: exit %d, want %d", code, exitUsage)
	}
}

// demoSnapshot skips unless the bundled demo snapshot is present.
func demoSnapshot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "testdata", "snapshots", "demo_events", ".hbase-snapshot", "demo_events")); err != nil {
		t.Fatal("testdata/snapshots/demo_events is missing")
	}
	return root
}

// TestPlanDemo runs the demo job over the bundled snapshot (written by a
// real HBase): every cell fits the layouts, every user is an entity, and no
// new row spans two days.
func TestPlanDemo(t *testing.T) {
	root := demoSnapshot(t)
	code, out, _ := runRekey(t, "plan", filepath.Join(root, "configs", "demo.yaml"), "--json", "--sample", "0")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var plan struct {
		SampledCells int64 `json:"sampled_cells"`
		Complete     bool  `json:"complete"`
		Rejected     int64 `json:"rejected"`
		Entities     int   `json:"entities"`
		Regions      int   `json:"source_regions"`
		Heaviest     []struct {
			Entity string
			Cells  int64
		} `json:"heaviest_entities"`
		WorstRow struct {
			Row   string
			Cells int64
		} `json:"worst_row"`
		SplitKeys []string `json:"split_keys"`
		Warnings  []struct{ Code string }
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("plan JSON: %v\n%s", err, out)
	}
	if !plan.Complete || plan.Rejected != 0 || plan.SampledCells == 0 {
		t.Fatalf("sample: %+v", plan)
	}
	// The Java oracle's dump of the same snapshot has one line per cell.
	if dump, err := os.ReadFile(filepath.Join(root, "testdata", "snapshots", "demo_events.cells")); err == nil {
		if n := int64(bytes.Count(dump, []byte("\n"))); n != plan.SampledCells {
			t.Errorf("planned %d cells, the oracle dump has %d", plan.SampledCells, n)
		}
	}
	if plan.Regions != 4 || len(plan.SplitKeys) != 3 {
		t.Errorf("regions %d, split keys %v", plan.Regions, plan.SplitKeys)
	}
	if plan.Entities < 250 || len(plan.Heaviest) == 0 || !strings.HasPrefix(plan.Heaviest[0].Entity, "user=u") {
		t.Errorf("entities %d, heaviest %+v", plan.Entities, plan.Heaviest)
	}
	if plan.WorstRow.Cells == 0 || plan.WorstRow.Cells >= plan.Heaviest[0].Cells && plan.Heaviest[0].Cells > 1000 {
		t.Errorf("worst new row %+v is not smaller than the heaviest user %+v", plan.WorstRow, plan.Heaviest[0])
	}
	for _, w := range plan.Warnings {
		t.Errorf("unexpected warning %s", w.Code)
	}

	code, text, _ := runRekey(t, "plan", filepath.Join(root, "configs", "demo.yaml"), "--sample", "1000")
	if code != exitOK || !strings.Contains(text, "old key -> new key") || !strings.Contains(text, "a sample") {
		t.Fatalf("text plan, exit %d:\n%s", code, text)
	}
}

// TestPlanOffline checks a job against its layouts alone, with no snapshot.
func TestPlanOffline(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := runRekey(t, "plan", "--offline", "--json", filepath.Join(root, "configs", "salt.yaml"))
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var plan struct {
		SplitKeys []string `json:"split_keys_hex"`
		Warnings  []struct{ Code string }
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.SplitKeys) != 15 || plan.SplitKeys[0] != "01" || len(plan.Warnings) != 1 || plan.Warnings[0].Code != "separator-order" {
		t.Fatalf("offline plan: %+v", plan)
	}
}

// TestPlanSinceRefusals: the catch-up estimate's flags and the snapshots
// it names are checked before anything is read: --since cannot be
// --offline, --assume-at and --checkpoint need --since, and a snapshot A
// that is the job's own or does not exist is exit 2, naming it.
func TestPlanSinceRefusals(t *testing.T) {
	root := demoSnapshot(t)
	demo := filepath.Join(root, "configs", "demo.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "a", "--offline"}, "cannot be --offline"},
		{[]string{"--assume-at"}, "go with --since"},
		{[]string{"--checkpoint", "/tmp/c.json"}, "go with --since"},
		{[]string{"--since", "demo_events"}, "names the job's own snapshot"},
		{[]string{"--since", "no_such_snapshot"}, "no_such_snapshot"},
	} {
		code, _, errOut := runRekey(t, append([]string{"plan", demo}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("plan %v: exit %d, %q; want exit %d naming %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}
