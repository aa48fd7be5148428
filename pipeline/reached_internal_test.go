package pipeline

import (
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/state"
)

// TestReachedBesideGivenCheckpoint: the reached record, written by a run
// that brings its target to its snapshot and read by a catch-up, lies
// beside the checkpoint given on the command line when there is one, not
// beside the job's own; and a catch-up's own checkpoint and job record
// are named after --since beside the given checkpoint too, so that the
// whole run (which left its checkpoint there) does not refuse it.
func TestReachedBesideGivenCheckpoint(t *testing.T) {
	dir := t.TempDir()
	given := filepath.Join(dir, "elsewhere", "ck.json")
	for _, tc := range []struct {
		name                              string
		o                                 Options
		wantReached, wantCkpt, wantJobRec string
	}{
		{"whole run, given", Options{Checkpoint: given},
			filepath.Join(dir, "elsewhere", "ck.reached.json"), given, state.RecordBeside(given)},
		{"catch-up, given", Options{Checkpoint: given, Since: "snap-a"},
			filepath.Join(dir, "elsewhere", "ck.reached.json"), filepath.Join(dir, "elsewhere", "ck.since-snap-a.json"),
			state.RecordBeside(filepath.Join(dir, "elsewhere", "ck.since-snap-a.json"))},
		{"whole run, the job's", Options{},
			filepath.Join(dir, "job", "checkpoint.reached.json"), filepath.Join(dir, "job", "checkpoint.json"),
			state.RecordBeside(filepath.Join(dir, "job", "checkpoint.json"))},
		{"catch-up, the job's", Options{Since: "snap-a"},
			filepath.Join(dir, "job", "checkpoint.reached.json"), filepath.Join(dir, "job", "checkpoint.since-snap-a.json"),
			state.RecordBeside(filepath.Join(dir, "job", "checkpoint.since-snap-a.json"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := job.Load(filepath.Join("..", "configs", "demo.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			j.Run.Checkpoint = filepath.Join(dir, "job", "checkpoint.json")
			r := &Run{j: j}
			defer r.close()
			tc.o.Workers = 1
			if err := r.settle(tc.o); err != nil {
				t.Fatal(err)
			}
			if got := r.reachedPath(); got != tc.wantReached {
				t.Errorf("reached record at %s, want %s", got, tc.wantReached)
			}
			if r.o.Checkpoint != tc.wantCkpt {
				t.Errorf("checkpoint %s, want %s", r.o.Checkpoint, tc.wantCkpt)
			}
			if got := r.jobStatePath(); got != tc.wantJobRec {
				t.Errorf("job record %s, want %s", got, tc.wantJobRec)
			}
		})
	}
}
