package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

// Tests of the faults a long run meets in the cluster around it: its
// ZooKeeper session expiring, the HMaster restarting. Each ends with the
// target equal to the preset's rule applied to the oracle's dump of the
// source. They stop parts of the shared cluster (a region server, the
// master), so they do not run in parallel with the package's other tests.

// outcome is what a run started in the background ended with.
type outcome struct {
	sum *pipeline.Summary
	err error
	at  time.Time
}

// running is a run going on in the background.
type running struct {
	// started is closed once the run is prepared and writing; ctl is set
	// before.
	started chan struct{}
	ctl     *pipeline.Control
	done    chan outcome
}

// startRun prepares and starts the job in the background.
func startRun(j *job.Job, o pipeline.Options) *running {
	r := &running{started: make(chan struct{}), done: make(chan outcome, 1)}
	go func() {
		ctx := context.Background()
		run, err := pipeline.Prepare(ctx, j, o)
		if err == nil {
			err = run.Start(ctx)
		}
		if err != nil {
			r.done <- outcome{err: err, at: time.Now()}
			return
		}
		r.ctl = run.Control()
		close(r.started)
		sum, err := run.Wait()
		r.done <- outcome{sum: sum, err: err, at: time.Now()}
	}()
	return r
}

// writing waits until the run is prepared and writing, then d more.
func (r *running) writing(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-r.started:
	case res := <-r.done:
		t.Fatalf("the run ended before it started writing: %v", res.err)
	}
	time.Sleep(d)
}

// finished fails the test unless the run finished with every cell written.
func finished(t *testing.T, what string, res outcome, want int) {
	t.Helper()
	if res.err != nil {
		t.Fatalf("%s: %v", what, res.err)
	}
	s := res.sum
	if !s.Finished || s.Failed != 0 || s.Written != int64(want) {
		t.Fatalf("%s: finished %v, %d/%d splits, written %d (want %d), failed %d; examples %q", what, s.Finished, s.Done, s.Splits, s.Written, want, s.Failed, s.Examples)
	}
}

// metaServerIndex returns the index, in list-regionservers, of the region
// server holding hbase:meta, as HBase's own client locates it.
func metaServerIndex(t *testing.T, st *testenv.State) int {
	t.Helper()
	out := strings.TrimSpace(string(testenv.Oracle(t, "regions", "hbase:meta")))
	f := strings.Split(out, "\t")
	if len(f) != 4 {
		t.Fatalf("oracle regions hbase:meta: %q", out)
	}
	hostPort := strings.Replace(f[3], ":", ",", 1) + ","
	for i, sn := range strings.Fields(strings.TrimPrefix(control(t, st, "list-regionservers"), "ok")) {
		if strings.HasPrefix(sn, hostPort) {
			return i
		}
	}
	t.Fatalf("hbase:meta on %s, which is not a live region server", f[3])
	return -1
}

// TestDestructiveZooKeeperSessionExpiresMidRun: mid-run, the run's ZooKeeper session
// expires (the server ends it) and ZooKeeper stays unreachable for the
// run's client while the region server holding hbase:meta stops, so the
// run must find meta again through ZooKeeper. The client reconnects with
// a new session and the run finishes with every cell written.
func TestDestructiveZooKeeperSessionExpiresMidRun(t *testing.T) {
	st := testenv.RequireDestructive(t)
	src, dst := uniq(t, "zk_src"), uniq(t, "zk_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, bigWide(20, 600), 1)
	want := expect(p, source)

	proxy := testenv.NewProxy(t, st.ZKQuorum)
	j := loadJob(t, p, st, snap, dst)
	j.Target.ZKQuorum = proxy.Addr()
	j.Target.Create.SplitKeys = splitKeys(t, p.newSplits)
	metaIdx := metaServerIndex(t, st)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			control(t, st, "start-regionserver")
		}
	})

	run := startRun(j, pipeline.Options{Workers: 2, Limits: pipeline.Limits{CellsPerSec: 1500}})
	run.writing(t, time.Second)
	testenv.ExpireSession(t, st, proxy)
	t.Log(control(t, st, fmt.Sprintf("stop-regionserver %d", metaIdx)))
	time.Sleep(3 * time.Second)
	if err := proxy.Release(); err != nil {
		t.Fatal(err)
	}
	res := <-run.done
	restarted = true
	t.Log(control(t, st, "start-regionserver"))
	finished(t, "run through an expired ZooKeeper session", res, len(want))
	sameCells(t, "target after the session expired", dumpTable(t, dst, true), want)
}

// TestDestructiveHMasterRestartsDuringRun: the HMaster stops and a new one starts
// while runs go on. A puts run starts while there is no master: its admin
// calls (does the target exist, create it, wait until it is enabled) wait
// for the new one. A staged run loses the master after it started
// spilling (it is paused meanwhile, so that it cannot end while a slow
// master takes its time to stop); its merge and bulk load go on without
// one.
func TestDestructiveHMasterRestartsDuringRun(t *testing.T) {
	st := testenv.RequireDestructive(t)
	src := uniq(t, "hm_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, bigWide(20, 400), 1)
	want := expect(p, source)
	masterUp := true
	t.Cleanup(func() {
		if !masterUp {
			control(t, st, "start-master")
		}
	})

	t.Run("puts", func(t *testing.T) {
		dst := uniq(t, "hm_puts")
		testenv.DropAfter(t, dst, "")
		j := loadJob(t, p, st, snap, dst)
		j.Target.Create.SplitKeys = splitKeys(t, p.newSplits)
		t.Log(control(t, st, "stop-master"))
		masterUp = false
		stopped := time.Now()
		run := startRun(j, pipeline.Options{Workers: 2, Limits: pipeline.Limits{CellsPerSec: 3000}})
		time.Sleep(3 * time.Second)
		t.Log(control(t, st, "start-master"))
		masterUp = true
		res := <-run.done
		t.Logf("run ended %v after the master stopped", res.at.Sub(stopped).Round(time.Millisecond))
		finished(t, "puts run started with no master", res, len(want))
		sameCells(t, "target of the puts run", dumpTable(t, dst, true), want)
	})

	t.Run("hfiles", func(t *testing.T) {
		dst := uniq(t, "hm_hfiles")
		testenv.DropAfter(t, dst, "")
		j := loadJob(t, p, st, snap, dst)
		j.Target.Create.SplitKeys = splitKeys(t, p.newSplits)
		j.Sink.Kind = job.SinkHFiles
		j.Sink.Staging = "hdfs://" + st.NameNode + "/tmp/" + dst
		run := startRun(j, pipeline.Options{Workers: 2, Memory: 4 << 20, Limits: pipeline.Limits{CellsPerSec: 3000}})
		run.writing(t, 500*time.Millisecond)
		// Stopping the master took minutes on a loaded machine, longer than
		// the whole run: paused, the run is still spilling when the master
		// is gone, however long that takes.
		run.ctl.Pause()
		select {
		case res := <-run.done:
			t.Fatalf("the staged run ended before it could be paused: nothing was tested (error %v)", res.err)
		default:
		}
		t.Log(control(t, st, "stop-master"))
		masterUp = false
		stopped := time.Now()
		run.ctl.Resume()
		res := <-run.done
		if !res.at.After(stopped) {
			t.Fatal("the staged run ended before the master stopped: nothing was tested")
		}
		t.Log(control(t, st, "start-master"))
		masterUp = true
		finished(t, "staged run that lost the master", res, len(want))
		if stats, ok := res.sum.Staged(); !ok || stats.RegionsLoaded == 0 {
			t.Fatalf("no region bulk loaded: %+v", stats)
		}
		sameCells(t, "bulk-loaded target", dumpTable(t, dst, true), want)
	})
}
