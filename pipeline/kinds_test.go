package pipeline_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

// TestSinkKindsDeclare: every kind a job may name is in this build, and
// each declares what the run used to decide by its name: puts wants a
// smaller floor for a small table, spreads its workers over regions and
// writes a catch-up's deletes; the dry run takes a catch-up and reaches
// no target; hfiles writes a catch-up's deletes into its HFiles, reaches
// the target only when it loads, and keeps a
// job in phases' record in its staging folder; bigtable writes a
// catch-up's removals as deletes of exactly those cells, and alone checks
// family names and warns at plan time.
func TestSinkKindsDeclare(t *testing.T) {
	for _, k := range job.SinkKinds {
		if _, ok := sink.Lookup(k); !ok {
			t.Errorf("sink kind %s is not registered: pipeline/sinks.go lacks its import", k)
		}
	}
	get := func(k job.SinkKind) sink.Kind { kind, _ := sink.Lookup(k); return kind }
	puts, dry, hf, bt := get(job.SinkPuts), get(job.SinkDryRun), get(job.SinkHFiles), get(job.SinkBigtable)
	reaches := func(kind sink.Kind, j *job.Job) bool { return kind.Reaches == nil || kind.Reaches(j) }
	plain, noLoad, offline := &job.Job{}, &job.Job{}, &job.Job{}
	noLoad.Sink.NoLoad, offline.Sink.Offline = true, true
	for _, tc := range []struct {
		what      string
		got, want bool
	}{
		{"puts: split floor", puts.SplitFloor != nil, true},
		{"puts: spread", puts.Spread, true},
		{"puts: deletes", puts.Deletes, true},
		{"puts: reaches", reaches(puts, plain), true},
		{"dry-run: deletes", dry.Deletes, true},
		{"dry-run: reaches", reaches(dry, plain), false},
		{"hfiles: split floor", hf.SplitFloor != nil, false},
		{"hfiles: spread", hf.Spread, false},
		{"hfiles: deletes", hf.Deletes, true},
		{"hfiles: reaches", reaches(hf, plain), true},
		{"hfiles no_load: reaches", reaches(hf, noLoad), false},
		{"hfiles offline: reaches", reaches(hf, offline), false},
		{"hfiles: coverage", hf.Coverage != nil, true},
		{"hfiles: phases", hf.Phases, true},
		{"bigtable: deletes", bt.Deletes, true},
		{"bigtable: spread", bt.Spread, false},
		{"bigtable: reaches", reaches(bt, plain), true},
		{"bigtable: plan families", bt.PlanFamilies != nil, true},
		{"bigtable: plan warnings", bt.PlanWarnings != nil, true},
		{"puts: plan warnings", puts.PlanWarnings != nil, false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, tc.got, tc.want)
		}
	}
}

// TestUnknownSinkRefused: a job naming a sink kind this build does not
// have is refused before anything is opened for writing, as the job's
// mistake (ErrInvalid), with the kinds the build has.
func TestUnknownSinkRefused(t *testing.T) {
	j, err := job.Load(filepath.Join("..", "configs", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j.Sink.Kind = "kafka"
	j.Run.Checkpoint = filepath.Join(t.TempDir(), "checkpoint.json")
	r, err := pipeline.Prepare(context.Background(), j, pipeline.Options{Workers: 1})
	if err == nil {
		r.Close()
		t.Fatal("Prepare took sink kafka")
	}
	if !errors.Is(err, pipeline.ErrInvalid) || !strings.Contains(err.Error(), `sink "kafka"`) || !strings.Contains(err.Error(), "bigtable, dry-run, hfiles, puts") {
		t.Errorf("Prepare: %v; want ErrInvalid naming kafka and the kinds of this build", err)
	}
}
