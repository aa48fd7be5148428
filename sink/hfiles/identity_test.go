package hfiles

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// TestIdentityClaimRace: runs of two jobs (different target tables) that
// claim one empty staging folder at once: every run of exactly one job is
// let in, every run of the other refused with state.ErrMismatch, in each
// of 20 rounds on a local disk.
func TestIdentityClaimRace(t *testing.T) {
	jobs := []*job.Job{{Path: "a.yaml", Target: job.Target{Table: "a"}}, {Path: "b.yaml", Target: job.Target{Table: "b"}}}
	for round := 0; round < 20; round++ {
		dir := filepath.Join(t.TempDir(), "staging")
		const claimers = 8
		errs := make([]error, claimers)
		var wg sync.WaitGroup
		for i := 0; i < claimers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs[i] = CheckIdentity(dir, jobs[i%2], vfs.Options{})
			}(i)
		}
		wg.Wait()
		in := map[int]int{}
		for i, err := range errs {
			switch {
			case err == nil:
				in[i%2]++
			case !errors.Is(err, state.ErrMismatch):
				t.Fatalf("round %d, claimer %d: %v", round, i, err)
			}
		}
		if len(in) != 1 || (in[0] != claimers/2 && in[1] != claimers/2) {
			t.Fatalf("round %d: let in by job %v, want every run of exactly one job", round, in)
		}
	}
}
