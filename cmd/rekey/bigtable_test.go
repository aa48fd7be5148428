package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
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

// TestBigtablePlanWarnings: the plan of a Bigtable job names every new
// row of its sample past 256 MiB with its size, largest first, the
// first ten one by one and the rest counted; likewise rows past 100,000
// cells; a row just below either bound is not named. The sample is fed
// to the demo job's planner: 12 users with one cell whose value passes
// 256 MiB by 1,000 bytes more for each (user u01000 the least), one
// 200 bytes under it, one user with 100,001 cells in one day and one
// with 100,000. A puts job's plan gets none of these warnings (they are
// the bigtable kind's, asked for through pipeline.PlanWarnings).
func TestBigtablePlanWarnings(t *testing.T) {
	bt, err := job.Load(bigtableDemoJob(t))
	if err != nil {
		t.Fatal(err)
	}
	puts, err := job.Load(demoJob(t))
	if err != nil {
		t.Fatal(err)
	}
	pl := bt.Program.NewPlanner(transform.PlanOptions{})
	// One buffer backs every value: the planner measures cells, it keeps
	// none.
	big := make([]byte, 256<<20+12_000)
	day := int64(1772323200000) // 2026-03-01T00:00:00Z, a day's start
	add := func(user string, ts int64, value []byte) {
		q := make([]byte, 8)
		binary.BigEndian.PutUint64(q, uint64(ts))
		pl.Add(&cell.Cell{Row: []byte(user), Family: []byte("e"), Qualifier: q, Timestamp: ts, Type: cell.Put, Value: value})
	}
	for i := range 12 {
		add(fmt.Sprintf("u%05d", 1000+i), day, big[:256<<20+1000*(i+1)])
	}
	add("u02000", day, big[:256<<20-200])
	for i := range 100_001 {
		add("u03000", day+int64(i), nil)
	}
	for i := range 100_000 {
		add("u03001", day+int64(i), nil)
	}
	rep := pl.Report(false)

	var large, pieces []string
	for _, w := range pipeline.PlanWarnings(bt, rep) {
		switch w.Code {
		case "bigtable-row-too-large":
			large = append(large, w.Message)
		case "bigtable-row-in-pieces":
			pieces = append(pieces, w.Message)
		default:
			t.Errorf("warning %s: %s", w.Code, w.Message)
		}
	}
	if len(large) != 11 || large[10] != "and 2 more new rows of the sample over 256 MiB" {
		t.Fatalf("%d large-row warnings, want 10 rows and a count of 2 more: %q", len(large), large)
	}
	prev := int64(math.MaxInt64)
	for i, m := range large[:10] {
		// Largest first: u01011, u01010, … u01002; each the value's
		// length plus the KeyValue's key and lengths (under 100 bytes).
		user := fmt.Sprintf("u%05d", 1011-i)
		value := int64(256<<20 + 1000*(12-i))
		var n, cells int64
		if _, err := fmt.Sscanf(m[strings.Index(m, " holds "):], " holds %d bytes (%d cells)", &n, &cells); err != nil {
			t.Fatalf("warning %q: %v", m, err)
		}
		if !strings.HasPrefix(m, "new row "+user) || n < value || n > value+100 || n >= prev || cells != 1 {
			t.Errorf("warning %d: %q, want row %s of %d to %d bytes, 1 cell", i, m, user, value, value+100)
		}
		prev = n
	}
	if len(pieces) != 1 || !strings.HasPrefix(pieces[0], "new row u03000") || !strings.Contains(pieces[0], "holds 100001 cells") {
		t.Errorf("rows in pieces: %q, want u03000's alone", pieces)
	}
	if w := pipeline.PlanWarnings(puts, rep); len(w) != 0 {
		t.Errorf("a puts job's plan got %v", w)
	}
}
