package pipeline_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/hfiles"
)

// TestSpillResumedAfterItsCommitCommitsAgain: a spill shard staged on
// HDFS commits, then runs again with --resume (a Kubernetes Job's retried
// pod after a duplicate of it finished the shard: the Kubernetes suite's
// TestK8sDuplicatePod). The second attempt finds every split done and the
// sink finished, but it took the shard's lease, so the first commit is now
// of a superseded lease; it must commit again under its own, or the merge
// waits for that shard for good (ErrNotReady, which --wait-ready retries
// until it runs out).
func TestSpillResumedAfterItsCommitCommitsAgain(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	dir := t.TempDir()
	s := state{Checkpoint: filepath.Join(dir, "checkpoint.json"), Staging: "hdfs://" + st.NameNode + "/tmp/" + uniq(t, "respill") + "/staging",
		Rejects: filepath.Join(dir, "rejects.tsv")}
	j, o := demoRun(t, s)
	o.Phase, o.Shard, o.Workers = hfiles.PhaseSpill, pipeline.Shard{Index: 0, Count: 1}, 2
	sum, err := pipeline.Execute(ctx, j, o)
	if err != nil || !sum.Finished {
		t.Fatalf("spill shard 0/1: %v %+v", err, sum)
	}
	o.Fresh, o.Resume = false, true
	sum, err = pipeline.Execute(ctx, j, o)
	if err != nil || !sum.Finished || sum.Skipped != sum.Splits {
		t.Fatalf("spill shard 0/1 again, resumed: %v; finished %v, %d of %d splits skipped (want all)", err, sum.Finished, sum.Skipped, sum.Splits)
	}
	if _, err := pipeline.RunTask(ctx, j, pipeline.TaskOptions{Phase: hfiles.PhaseMerge, Part: pipeline.Shard{Index: 0, Count: 1}, Workers: 2}); err != nil {
		t.Fatalf("merge after the resumed spill: %v", err)
	}
}
