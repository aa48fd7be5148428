package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	rkstate "github.com/rekeyhq/rekey/state"
)

// TestSinceLast: --since last takes the snapshot the reached record names,
// and reads the record beside the checkpoint given on the command line
// (not the job's own, which holds another record here): a record there
// naming the job's own snapshot is refused as "already there", one naming
// an earlier snapshot starts the catch-up from it (the run then opens
// that snapshot, missing from the demo's root), none at all is ErrNotAt, and --assume-at
// last is refused.
func TestSinceLast(t *testing.T) {
	dir := t.TempDir()
	load := func(t *testing.T) *job.Job {
		t.Helper()
		j, err := job.Load(filepath.Join("..", "configs", "demo.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		j.Sink.Kind = job.SinkDryRun
		j.Run.Checkpoint = filepath.Join(dir, "job", "checkpoint.json")
		return j
	}
	record := func(t *testing.T, checkpoint, snap string) {
		t.Helper()
		name := rkstate.ReachedBeside(checkpoint)
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		b := `{"format":1,"snapshot":"` + snap + `","table":"default:t","created_ms":1,"ttl_time_ms":1,"job":"f00","written":"2026-12-07T00:00:00Z"}`
		if err := os.WriteFile(name, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prepare := func(t *testing.T, j *job.Job, o pipeline.Options) error {
		t.Helper()
		o.Workers = 1
		r, err := pipeline.Prepare(context.Background(), j, o)
		if err == nil {
			r.Close()
			t.Fatal("Prepare succeeded on a source root that does not exist")
		}
		return err
	}
	j := load(t)
	given := filepath.Join(dir, "given", "ck.json")
	// The job's own checkpoint says the target is at "elsewhere": a run
	// given another checkpoint must not read it.
	record(t, j.Run.Checkpoint, "elsewhere")

	err := prepare(t, j, pipeline.Options{Since: pipeline.SinceLast, Checkpoint: given})
	if !errors.Is(err, pipeline.ErrNotAt) || !strings.Contains(err.Error(), filepath.Join(dir, "given", "ck.reached.json")) {
		t.Fatalf("no record beside the given checkpoint: %v, want ErrNotAt naming it", err)
	}

	record(t, given, j.Source.Name)
	err = prepare(t, j, pipeline.Options{Since: pipeline.SinceLast, Checkpoint: given})
	if !errors.Is(err, pipeline.ErrInvalid) || !strings.Contains(err.Error(), "at the job's snapshot "+j.Source.Name+" already") {
		t.Fatalf("a record at the job's own snapshot: %v, want ErrInvalid saying so", err)
	}

	record(t, given, "nightly-1")
	err = prepare(t, j, pipeline.Options{Since: pipeline.SinceLast, Checkpoint: given})
	if err == nil || !strings.Contains(err.Error(), "--since snapshot") || !strings.Contains(err.Error(), `"nightly-1"`) {
		t.Fatalf("a record at an earlier snapshot: %v, want snapshot nightly-1 opened as --since (and missing)", err)
	}

	err = prepare(t, j, pipeline.Options{Since: pipeline.SinceLast, AssumeAt: true, Checkpoint: given})
	if !errors.Is(err, pipeline.ErrInvalid) || !strings.Contains(err.Error(), "--assume-at") {
		t.Fatalf("--assume-at last: %v, want ErrInvalid", err)
	}
}
