package pipeline_test

import (
	"context"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

// TestSummarySplitTimes checks the summary's split times against the rule
// written out here over its own per-split records: the mean and the
// largest Seconds of the finished splits, and their ratio.
func TestSummarySplitTimes(t *testing.T) {
	j := checkpointJob(t)
	sum, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Workers: 1, SplitBytes: testSplitBytes})
	if err != nil {
		t.Fatal(err)
	}
	var total, longest float64
	var slowest string
	n := 0
	for _, st := range sum.PerSplit {
		if !st.Done {
			continue
		}
		n++
		total += st.Seconds
		if slowest == "" || st.Seconds > longest {
			longest, slowest = st.Seconds, st.ID
		}
	}
	got := sum.SplitTimes
	if n != testSplits || got.Splits != n || got.MaxSeconds != longest || got.Slowest != slowest {
		t.Fatalf("split times %+v; want %d splits, slowest %s at %g s", got, testSplits, slowest, longest)
	}
	if mean := total / float64(n); got.MeanSeconds != mean || got.MaxToMean != longest/mean {
		t.Errorf("split times %+v; want mean %g s, max/mean %g", got, mean, longest/mean)
	}
	if sum.SplitBytes != testSplitBytes {
		t.Errorf("summary split_bytes %d, want %d", sum.SplitBytes, testSplitBytes)
	}
}

// TestSplitBytesDefaultAndOff checks how the split size is settled: the
// demo snapshot is far below the default cut's floor, so the default cuts
// nothing (split_bytes 0 in the summary, one split per region, as with
// "off"), and an explicit size still cuts.
func TestSplitBytesDefaultAndOff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opt, file int64
		cut       bool
	}{
		{"default", 0, 0, false},
		{"off in the job", 0, job.SplitBytesOff, false},
		{"off as an option", job.SplitBytesOff, testSplitBytes, false},
		{"job's size", 0, testSplitBytes, true},
	} {
		j := checkpointJob(t)
		j.Run.SplitBytes = tc.file
		sum, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Workers: 1, SplitBytes: tc.opt})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		regions := map[string]bool{}
		for _, st := range sum.PerSplit {
			regions[st.Region] = true
		}
		if cut := sum.Splits > len(regions); cut != tc.cut || (sum.SplitBytes > 0) != tc.cut || sum.Read != demoCells {
			t.Errorf("%s: %d splits of %d regions, split_bytes %d, %d cells; want cut=%v and %d cells", tc.name, sum.Splits, len(regions), sum.SplitBytes, sum.Read, tc.cut, demoCells)
		}
	}
}
