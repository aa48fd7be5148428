package pipeline_test

import (
	"context"
	"testing"

	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

// BenchmarkDryRunDemo runs the demo job over the bundled snapshot through
// the dry-run sink: the runner's own cost per cell on top of the scan and
// the transform. One op is the whole snapshot (31413 cells).
func BenchmarkDryRunDemo(b *testing.B) {
	for i := 0; i < b.N; i++ {
		j := demoJob(&testing.T{})
		j.Run.Checkpoint = b.TempDir() + "/ck.json"
		sum, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Workers: 1})
		if err != nil || sum.Read != 31413 {
			b.Fatal(err, sum.Read)
		}
	}
	b.ReportMetric(float64(31413*b.N)/b.Elapsed().Seconds(), "cells/s")
}
