package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/hfiles"
)

// TestLocalSpillLostThenFound: a one-process staged run with its
// checkpoint on a local disk and its staging folder on HDFS spills its
// runs beside the checkpoint (CHECKPOINT.spill), not to HDFS. A first run
// stops in the merge (the staging folder's bound, which the local runs do
// not count against, is met by the HFiles) with every split recorded done.
// Resumed without the spill folder (moved away: another machine, or
// removed), the run refuses with ErrCheckpointDamaged naming the folder
// and --fresh, and loads nothing; resumed with the folder back, it
// finishes, and the target equals the rule applied to the oracle's dump of
// the source, each cell once.
func TestLocalSpillLostThenFound(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	src, dst := uniq(t, "spill_src"), uniq(t, "spill_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, incompressible(40, 200), 1)
	want := expect(p, source)
	j := loadJob(t, p, st, snap, dst)
	j.Target.Create.SplitKeys = splitKeys(t, p.newSplits)
	j.Sink.Kind = job.SinkHFiles
	j.Sink.Staging = "hdfs://" + st.NameNode + "/tmp/" + dst
	j.Sink.MaxStagingBytes = 64 << 10
	j.Sink.NoDirect = true // the preset keeps the old order: its splits would write HFiles, not runs
	spill := strings.TrimSuffix(j.Run.Checkpoint, ".json") + ".spill"
	if got := j.SpillDirFor(j.Run.Checkpoint); got != spill {
		t.Fatalf("spill folder %q, want %q beside the local checkpoint", got, spill)
	}
	o := pipeline.Options{Workers: 2, Memory: 4 << 20, SplitBytes: 64 << 10}

	sum, err := pipeline.Execute(ctx, j, o)
	if !errors.Is(err, hfiles.ErrStagingFull) {
		t.Fatalf("first run: %v; want the staging bound met in the merge", err)
	}
	if sum == nil || sum.Done != sum.Splits {
		t.Fatalf("first run stopped before every split was done: %+v", sum)
	}
	stats, _ := sum.Staged()
	t.Logf("first run: %d splits, %d runs (%d bytes) in %s; %v", sum.Splits, stats.Runs, stats.RunBytes, stats.LocalRuns, err)
	if stats.Runs == 0 || stats.LocalRuns != spill {
		t.Fatalf("%d runs spilled to %q; want some, in %s", stats.Runs, stats.LocalRuns, spill)
	}
	if stats.PeakStaging >= stats.RunBytes {
		t.Errorf("the staging folder held %d bytes at its peak, as much as the runs' %d: were they spilled there?", stats.PeakStaging, stats.RunBytes)
	}
	n := 0
	filepath.WalkDir(filepath.Join(spill, "runs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".run") {
			n++
		}
		return nil
	})
	if int64(n) != stats.Runs {
		t.Errorf("%d run files in %s, the summary counts %d", n, spill, stats.Runs)
	}

	j.Sink.MaxStagingBytes = 0
	o.Resume = true
	away := spill + ".away"
	if err := os.Rename(spill, away); err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Execute(ctx, j, o)
	if !errors.Is(err, pipeline.ErrCheckpointDamaged) {
		t.Fatalf("resume without the spill folder: %v; want ErrCheckpointDamaged", err)
	}
	for _, s := range []string{spill, "--fresh"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not name %q: %v", s, err)
		}
	}
	if got := dumpTable(t, dst, true); len(got) != 0 {
		t.Fatalf("the target holds %d cells after the refused resume", len(got))
	}

	os.RemoveAll(spill) // what the refused run made of it
	if err := os.Rename(away, spill); err != nil {
		t.Fatal(err)
	}
	sum, err = pipeline.Execute(ctx, j, o)
	if err != nil {
		t.Fatalf("resume with the spill folder back: %v", err)
	}
	// The splits that spilled were recorded done and are kept; those the
	// first run held in memory were never durable and are redone.
	if sum.Skipped == 0 || !sum.Finished {
		t.Errorf("resume: %d of %d splits skipped, finished %v; want the spilled splits kept from the first run", sum.Skipped, sum.Splits, sum.Finished)
	}
	t.Logf("resume: %d of %d splits kept from the first run", sum.Skipped, sum.Splits)
	sameCells(t, "target after a resume with the spill folder back (raw)", dumpTable(t, dst, true), want)
	if left, _ := os.ReadDir(filepath.Join(spill, "runs")); len(left) != 0 {
		t.Errorf("%d entries left under %s/runs after the merge", len(left), spill)
	}
}
