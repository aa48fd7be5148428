package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestMergeRefusesWithoutTheJobRecord: two spill shards of the demo job
// commit (offline, local staging), one commit then loses a split's record
// and the job record is removed: the merge is refused (ErrCoverage,
// naming the missing record and --fresh). Before, with no record to
// check against, the merge staged 30,057 of the snapshot's 31,413 cells
// and succeeded (TestPhaseSchedules, seed 1796672995949900733).
func TestMergeRefusesWithoutTheJobRecord(t *testing.T) {
	ctx := context.Background()
	s := localState(t)
	for i := range 2 {
		j, o := demoRun(t, s)
		j.Run.Checkpoint = filepath.Join(filepath.Dir(s.Checkpoint), fmt.Sprintf("c%d.json", i))
		o.Phase, o.Shard, o.Workers, o.SplitBytes = hfiles.PhaseSpill, pipeline.Shard{Index: i, Count: 2}, 2, 40000
		if sum, err := pipeline.Execute(ctx, j, o); err != nil || !sum.Finished {
			t.Fatalf("spill shard %d/2: %v", i, err)
		}
	}
	commit := filepath.Join(s.Staging, "spill", "shard-0000-of-0002.json")
	b, err := os.ReadFile(commit)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	splits, _ := c["splits"].([]any)
	if len(splits) < 2 {
		t.Fatalf("shard 0's commit holds %d splits", len(splits))
	}
	c["splits"] = splits[1:]
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(commit, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(s.Staging, hfiles.JobRecordFile)); err != nil {
		t.Fatal(err)
	}
	j, _ := demoRun(t, s)
	_, err = pipeline.RunTask(ctx, j, pipeline.TaskOptions{Phase: hfiles.PhaseMerge, Part: pipeline.Shard{Index: 0, Count: 1}, Workers: 2})
	if !errors.Is(err, pipeline.ErrCoverage) || !strings.Contains(err.Error(), "no job record") || !strings.Contains(err.Error(), "--fresh") {
		t.Fatalf("merge without the job record: %v, want ErrCoverage naming the record and --fresh", err)
	}
}
