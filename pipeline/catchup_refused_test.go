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
// mask the cells written at the same timestamp), a shard or phase, the
// job's own snapshot, a sink that does not carry deletes yet, and
// --assume-at alone.
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
		{"hfiles", func(j *job.Job, o *pipeline.Options) { j.Sink.Kind = job.SinkHFiles }, pipeline.ErrInvalid, "puts sink"},
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
