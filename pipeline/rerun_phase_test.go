package pipeline

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/rekeyhq/rekey/sink/hfiles"
)

// TestPhaseTaskRerunKeepsItsCommit: on a store with leases of their own
// (HDFS, object stores: the lease is a folder of generations, each with a
// token), a spill shard or merge part run again after it finished takes
// the task's lease under a new token. The merge and the load count a
// spill commit or a part's state only under the token of the task's last
// attempt, so the attempt run again must make them again under its own;
// before, it left them as they were (the run skipped a finished sink, a
// merged part skipped its save), and the job never merged or loaded
// again without --fresh ("spill shards 0 ... are being redone"). Found by
// TestWholeSchedules (seed 1796665717974884620).
func TestPhaseTaskRerunKeepsItsCommit(t *testing.T) {
	ref := reference(t)
	st := newSimStore("rerun", false)
	defer dropSimStore("rerun")
	st.peer = newSimStore("rerun-hdfs", false)
	defer dropSimStore("rerun-hdfs")
	dir, err := os.MkdirTemp(simTmp(), "rekey-rerun")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w := &wholeWorld{t: t, rng: rand.New(rand.NewPCG(1, 2)), host: "rerun", st: st, ref: ref, n: 1, parts: 1, rejects: dir + "/rejects.tsv"}
	w.cluster = &fakeCluster{st: st, table: demoJobForSim(t).Target.Table}
	for _, k := range []wholeTask{
		{phase: hfiles.PhaseSpill, count: 1},
		{phase: hfiles.PhaseSpill, count: 1}, // run again: a new lease token
		{phase: hfiles.PhaseMerge, count: 1},
		{phase: hfiles.PhaseMerge, count: 1}, // run again
		{phase: hfiles.PhaseLoad},
	} {
		err, p := w.play(k, 0)
		if p != "" || err != nil {
			t.Fatalf("%s: %v %s\n%v", k, err, p, w.log)
		}
	}
}
