package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// journalRecords counts the split records in the journal the checkpoint
// at p names.
func journalRecords(t *testing.T, p string) int {
	t.Helper()
	s, err := state.OpenCheckpoint(p, vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if l.Torn != "" {
		t.Fatalf("journal: %s", l.Torn)
	}
	return l.Records
}

// TestRunFencesItsCheckpoint: every checkpoint write of a run (its first
// base, each split's journal record) asks its leases first, and once a
// lease is lost the run records nothing more and ends with ErrLeaseLost.
// The lease here is a fence that fails from its third check on, standing
// for a remote lease another attempt took (lease_cas_internal_test.go and
// lease_sim_internal_test.go test the check itself).
func TestRunFencesItsCheckpoint(t *testing.T) {
	j, err := job.Load("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j.Run.Checkpoint, j.BadKeys.File = filepath.Join(dir, "checkpoint.json"), filepath.Join(dir, "rejects.tsv")
	r, err := Prepare(context.Background(), j, Options{Fresh: true, Sink: sink.DryRun{}, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	passed := 0
	lost := fmt.Errorf("%w: checkpoint %s: taken by another attempt (test)", ErrLeaseLost, j.Run.Checkpoint)
	r.leases.AddFence(func() error {
		mu.Lock()
		defer mu.Unlock()
		if passed == 2 {
			r.leases.Lose(lost)
			return lost
		}
		passed++
		return nil
	})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum, err := r.Wait()
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the run past its fence: %v", err)
	}
	if sum.Finished {
		t.Error("the run past its fence says it finished")
	}
	// The first base, then one split's record; nothing after.
	if n := journalRecords(t, j.Run.Checkpoint); n != 1 {
		t.Errorf("%d split records in the journal, want the 1 made before the lease was lost", n)
	}
}
