package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// TestCheckpointOnHANameserviceSurvivesFailover keeps a run's checkpoint
// and its source snapshot on testenv's HA HDFS ha2 (the snapshot tests
// fail ha1 over), addressed as hdfs://NAMESERVICE/... through a
// HADOOP_CONF_DIR that names both NameNodes. As the run's second split
// commits, the active NameNode is shut down and the standby takes over;
// the run records seven splits (through the new active) and is then
// stopped. A resumed run reads the checkpoint back through the
// nameservice: it must skip exactly the eight splits the first run
// recorded, those from after the failover among them, and finish with
// every cell of HBase's dump of the snapshot.
func TestCheckpointOnHANameserviceSurvivesFailover(t *testing.T) {
	st := testenv.Require(t)
	ans := control(t, st, "ha2-start")
	t.Cleanup(func() { control(t, st, "ha2-shutdown") })
	f := strings.Fields(ans)
	if len(f) != 4 {
		t.Fatalf("ha2-start answered %q, want NAMESERVICE CONF_DIR nn1=ADDR nn2=ADDR", ans)
	}
	// Not parallel: the run's vfs finds the nameservice in HADOOP_CONF_DIR.
	t.Setenv("HADOOP_CONF_DIR", f[1])
	first := control(t, st, "ha2-active")

	const failoverAfter, stopAfterSplits = 2, 8
	j := checkpointJob(t)
	// The source snapshot (HBase wrote it) is read through the nameservice
	// too: the runs open its store files before and after the failover.
	fs, err := hdfs.Dial(f[0])
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	dir := "/" + uniq(t, "ckpt")
	upload(t, fs, j.Source.Root, dir+"/source")
	j.Source.Root = "hdfs://" + f[0] + dir + "/source"
	j.Run.Checkpoint = "hdfs://" + f[0] + dir + "/checkpoint.json"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &stopAfter{k: stopAfterSplits, cancel: cancel}
	s.each = func() {
		if s.n.Load()+1 == failoverAfter {
			t.Log(control(t, st, "ha2-kill-active"))
		}
	}
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Sink: s, Workers: 1, SplitBytes: testSplitBytes})
	if sum == nil {
		t.Fatalf("run with its checkpoint on %s: %v", f[0], err)
	}
	if !errors.Is(err, pipeline.ErrInterrupted) || sum.Done != stopAfterSplits {
		t.Fatalf("run across the failover: %v, %d of %d splits done; want ErrInterrupted after %d", err, sum.Done, sum.Splits, stopAfterSplits)
	}
	if active := control(t, st, "ha2-active"); active == first {
		t.Fatalf("after the failover %s is still active", active)
	}

	r, err := resume(j)
	if err != nil {
		t.Fatalf("resuming from the checkpoint on %s: %v", f[0], err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum, err = r.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Finished || sum.Skipped != stopAfterSplits || sum.Done != sum.Splits || sum.Read != demoCells {
		t.Fatalf("resumed run: finished %v, skipped %d (want %d), %d of %d splits, %d cells read (want %d)",
			sum.Finished, sum.Skipped, stopAfterSplits, sum.Done, sum.Splits, sum.Read, demoCells)
	}
	t.Logf("resumed from %s after the failover: %d splits skipped, %d cells in all", j.Run.Checkpoint, sum.Skipped, sum.Read)
}
