package pipeline_test

import (
	"context"
	"testing"

	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

// putsNamed is a dry run that calls itself puts, so that the run takes the
// puts sink's default cut without a cluster.
type putsNamed struct{ sink.DryRun }

func (putsNamed) Name() string { return "puts" }

// resumeEarlier writes the checkpoint base and journal an earlier build
// wrote (testdata/NAME and NAME.journal-1) as j's checkpoint, resumes it
// with opts, and checks that the resume plans the earlier cut's splits
// (splits, done of them done), skips the done ones, finishes with every
// cell of the demo read (the earlier run's included), and counts every
// entity as a run of opts from the start does.
func resumeEarlier(t *testing.T, name string, opts pipeline.Options, splits, done int) {
	t.Helper()
	j := checkpointJob(t)
	writeFile(t, j.Run.Checkpoint, readFile(t, "testdata/"+name))
	writeFile(t, j.Run.Checkpoint+".journal-1", readFile(t, "testdata/"+name+".journal-1"))
	opts.Resume = true
	r, err := pipeline.Prepare(context.Background(), j, opts)
	if err != nil {
		t.Fatalf("resume from %s: %v", name, err)
	}
	if p := r.Outline(); p.Splits != splits || p.Todo != splits-done {
		t.Errorf("from %s: %d splits, %d to do; want the earlier cut's %d and %d", name, p.Splits, p.Todo, splits, splits-done)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum, err := r.Wait()
	if err != nil || !sum.Finished || sum.Skipped != done || sum.Read != demoCells {
		t.Fatalf("resumed run: %v (finished %v, skipped %d, want %d; read %d)", err, sum.Finished, sum.Skipped, done, sum.Read)
	}
	whole := checkpointJob(t)
	opts.Resume = false
	if _, err := pipeline.Execute(context.Background(), whole, opts); err != nil {
		t.Fatal(err)
	}
	sameCounts(t, "sketch resumed from "+name+" against an uninterrupted run's", sketchOf(t, j), sketchOf(t, whole))
}

// TestResumeKeepsGreedyInRowCut: testdata/checkpoint-inrow-greedy.json
// (with its journal) was written by rekey at 8ddde67, before even in-row
// cuts: the demo job through a dry run, split at 8 KiB inside rows by the
// greedy rule, one worker, stopped after 5 splits. Its fingerprint is not
// an even cut's; the resume recognises the greedy rule's, cuts by it (the
// done splits' IDs name its key ranges) and skips the 5.
func TestResumeKeepsGreedyInRowCut(t *testing.T) {
	resumeEarlier(t, "checkpoint-inrow-greedy.json", pipeline.Options{Sink: sink.DryRun{}, Workers: 1, SplitBytes: testSplitBytes}, testSplits, stoppedAfter)
}

// TestResumeKeepsEarlierPutsDefault: testdata/checkpoint-puts-default.json
// was written by rekey at 8ddde67 through a sink named puts with no split
// size, when the puts sink's default cut had the 8 MiB floor (the demo
// snapshot then stayed one split per region, 4), stopped after one split.
// Now the puts floor is a quarter of this small snapshot and cuts it
// finer; the resume recognises the earlier default and keeps its splits.
func TestResumeKeepsEarlierPutsDefault(t *testing.T) {
	opts := pipeline.Options{Sink: putsNamed{}, Workers: 1}
	fresh := checkpointJob(t)
	sum, err := pipeline.Execute(context.Background(), fresh, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.SplitBytes == 0 || sum.Splits <= 4 {
		t.Fatalf("a fresh puts run of the demo: split size %d, %d splits; want the small table's floor to cut it", sum.SplitBytes, sum.Splits)
	}
	resumeEarlier(t, "checkpoint-puts-default.json", opts, 4, 1)
}
