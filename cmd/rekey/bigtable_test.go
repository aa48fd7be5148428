package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/transform"
)

// bigtableDemoJob is the demo job with a Bigtable target and the
// bigtable sink; edit replaces text in it first.
func bigtableDemoJob(t *testing.T, edit ...string) string {
	t.Helper()
	p := demoJob(t)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "  table: events_by_day", "  table: events_by_day\n  bigtable: {project: p, instance: i}", 1) + "sink: {type: bigtable}\n"
	for i := 0; i+1 < len(edit); i += 2 {
		if !strings.Contains(s, edit[i]) {
			t.Fatalf("no %q in the demo job", edit[i])
		}
		s = strings.Replace(s, edit[i], edit[i+1], 1)
	}
	out := filepath.Join(t.TempDir(), "bt.yaml")
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlanBigtableJob: rekey plan takes a job with a Bigtable target
// (its family e is a Bigtable family name), and refuses with exit 2 and
// the line a job whose sink and target do not match, a ZooKeeper quorum
// beside a Bigtable target, or a family renamed to a name Bigtable
// refuses; --sink bigtable on a job without target.bigtable is exit 2.
func TestPlanBigtableJob(t *testing.T) {
	if code, out, errOut := runRekey(t, "plan", bigtableDemoJob(t), "--sample", "100"); code != exitOK {
		t.Fatalf("plan of a Bigtable job: exit %d\n%s%s", code, out, errOut)
	}
	for _, tc := range []struct {
		name, want string
		edit       []string
	}{
		{"sink puts", "target.bigtable: a Bigtable target needs sink.type: bigtable", []string{"sink: {type: bigtable}", "sink: {type: puts}"}},
		{"zookeeper", "target.zookeeper: not allowed with target.bigtable", []string{"  table: events_by_day", "  table: events_by_day\n  zookeeper: zk:2181"}},
		{"family", `families.e: job: not a Bigtable family name: "e:1"`, []string{"entity: [user]", "entity: [user]\nfamilies: {e: \"e:1\"}"}},
	} {
		code, out, errOut := runRekey(t, "plan", bigtableDemoJob(t, tc.edit...), "--sample", "100")
		if code != exitUsage || !strings.Contains(out+errOut, tc.want) || !strings.Contains(out+errOut, "bt.yaml:") {
			t.Errorf("%s: exit %d, want 2 saying %q\n%s%s", tc.name, code, tc.want, out, errOut)
		}
	}
	code, _, errOut := runRekey(t, "run", demoJob(t), "--sink", "bigtable", "--progress", "none")
	if code != exitUsage || !strings.Contains(errOut, "sink bigtable needs target.bigtable") {
		t.Errorf("--sink bigtable without target.bigtable: exit %d\n%s", code, errOut)
	}
}

// TestBigtablePlanWarnings: the plan of a Bigtable job warns of a new
// row past 256 MiB and of one past 100,000 cells, and of neither below;
// the warnings are the bigtable kind's, which plan asks for through
// pipeline.PlanWarnings: a puts job's plan gets none of them.
func TestBigtablePlanWarnings(t *testing.T) {
	bt, err := job.Load(bigtableDemoJob(t))
	if err != nil {
		t.Fatal(err)
	}
	puts, err := job.Load(demoJob(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cells, bytes int64
		want         []string
	}{
		{100_000, 256 << 20, nil},
		{100_001, 1 << 20, []string{"bigtable-row-in-pieces"}},
		{10, 256<<20 + 1, []string{"bigtable-row-too-large"}},
		{200_000, 1 << 30, []string{"bigtable-row-too-large", "bigtable-row-in-pieces"}},
	} {
		rep := &transform.PlanReport{WorstRow: transform.RowSize{Row: "r", Cells: tc.cells, Bytes: tc.bytes}}
		var got []string
		for _, w := range pipeline.PlanWarnings(bt, rep) {
			got = append(got, w.Code)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%d cells, %d bytes: warnings %v, want %v", tc.cells, tc.bytes, got, tc.want)
		}
		if w := pipeline.PlanWarnings(puts, rep); len(w) != 0 {
			t.Errorf("%d cells, %d bytes: a puts job's plan got %v", tc.cells, tc.bytes, w)
		}
	}
}
