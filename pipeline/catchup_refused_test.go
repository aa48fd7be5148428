package pipeline_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

// TestCatchupRefusedOptions: what a catch-up cannot do is refused before
// the snapshots are compared or a target is touched: a raw copy (a marker
// that vanished cannot be undone), set_timestamp (a version delete would
// mask the cells written at the same timestamp), a shard, a phase or a
// redo of some ranges (a catch-up runs in one process, whole), the job's
// own snapshot, staged HFiles offline (the target cannot be checked at
// A, nor its load record B), and --assume-at alone. (The Bigtable sink
// carries removals: TestCatchupThroughBigtable.)
func TestCatchupRefusedOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(j *job.Job, o *pipeline.Options)
		want error
		msg  string
	}{
		{"raw", func(j *job.Job, o *pipeline.Options) { j.Source.Scan.Raw = true }, pipeline.ErrInvalid, "raw"},
		{"set_timestamp", func(j *job.Job, o *pipeline.Options) { o.SetTimestamp = 5 }, pipeline.ErrInvalid, "set_timestamp"},
		{"shard", func(j *job.Job, o *pipeline.Options) { o.Shard = pipeline.Shard{Index: 0, Count: 2} }, pipeline.ErrInvalid, "one process"},
		{"own snapshot", func(j *job.Job, o *pipeline.Options) { o.Since = j.Source.Name }, pipeline.ErrInvalid, "own snapshot"},
		{"phase", func(j *job.Job, o *pipeline.Options) { j.Sink.Kind, o.Phase = job.SinkHFiles, pipeline.PhaseSpill }, pipeline.ErrInvalid, "one process"},
		{"only", func(j *job.Job, o *pipeline.Options) {
			o.Only = []pipeline.KeyRange{{Start: []byte("a"), Stop: []byte("b")}}
		}, pipeline.ErrInvalid, "one process"},
		{"hfiles offline", func(j *job.Job, o *pipeline.Options) { j.Sink.Kind, j.Sink.Offline = job.SinkHFiles, true }, pipeline.ErrInvalid, "sink.offline"},
		{"assume-at alone", func(j *job.Job, o *pipeline.Options) { o.Since = "" }, pipeline.ErrInvalid, "--assume-at needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := job.Load(filepath.Join("..", "configs", "demo.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			j.Sink.Kind = job.SinkDryRun
			j.Run.Checkpoint = filepath.Join(t.TempDir(), "checkpoint.json")
			o := pipeline.Options{Workers: 1, Since: "earlier", AssumeAt: true}
			tc.edit(j, &o)
			r, err := pipeline.Prepare(context.Background(), j, o)
			if err == nil {
				r.Close()
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Prepare: %v; want %v saying %q", err, tc.want, tc.msg)
			}
		})
	}
}
