package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/verify"
)

// verifiesBothWays checks a correct run's target with rekey verify, every
// entity, by both methods: each entity matches by the inverse (the new
// cells read back to the old ones) and by the forward mapping, with the
// old side's cell count the same for both.
func verifiesBothWays(t *testing.T, j *job.Job) {
	t.Helper()
	ctx := context.Background()
	old, ch := censusOf(t, ctx, j)
	client, err := hbase.NewClient(hbase.Config{ZKQuorum: j.Target.ZKQuorum, ZNodeParent: j.Target.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	res, err := verify.Compare(ctx, verify.Config{Program: j.Program, Old: old, New: verify.NewTableReader(client, j.Target.Table), Method: verify.Both, Retries: -1}, ch.Targets())
	if err != nil {
		t.Fatal(err)
	}
	n := ch.Len()
	if len(res) != 2*n || n == 0 {
		t.Fatalf("%d results for %d entities, two methods", len(res), n)
	}
	for i, r := range res {
		want := verify.Inverse
		if i >= n {
			want = verify.Forward
		}
		if r.Method != want || !r.Match || r.Old.Cells != res[i%n].Old.Cells {
			t.Errorf("verify %s %s: match %v, %v %v", r.Method, r.Entity, r.Match, r.Mismatches, r.First)
		}
	}
}

// censusOf opens the job's old snapshot for verify (closed when the test
// ends) and chooses every entity of it, as verify --all does.
func censusOf(t *testing.T, ctx context.Context, j *job.Job) (*verify.SnapshotReader, *verify.Choice) {
	t.Helper()
	old, err := verify.OpenSnapshot(ctx, j.Source.Root, j.Source.Name, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	cs, err := verify.Count(ctx, old, j.Program, verify.CountOptions{K: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ch verify.Choice
	if err := ch.AddCensus(cs, 0, 0, true); err != nil {
		t.Fatal(err)
	}
	return old, &ch
}
