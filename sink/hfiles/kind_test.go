package hfiles

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/vfs"
)

// TestKindClaimedBeforeEitherWrites: a one-process run and a spill task
// that check an empty folder one after the other, before either wrote a
// file of its own, no longer both find it empty: the first claims the
// folder, the second is refused. Looking for the other kind's files alone
// passed both.
func TestKindClaimedBeforeEitherWrites(t *testing.T) {
	dir := t.TempDir()
	if err := CheckKind(dir, Task{Phase: PhaseAll}, vfs.Options{}); err != nil {
		t.Fatalf("the first task on an empty folder: %v", err)
	}
	err := CheckKind(dir, Task{Phase: PhaseSpill, Index: 1, Count: 2}, vfs.Options{})
	if !errors.Is(err, ErrOtherKind) {
		t.Fatalf("a spill task after a one-process run claimed the folder: %v, want ErrOtherKind", err)
	}
	// The same kind again (a retry, another shard) is welcome.
	if err := CheckKind(dir, Task{Phase: PhaseAll}, vfs.Options{}); err != nil {
		t.Fatalf("the same kind again: %v", err)
	}
	// The load loads either kind and claims nothing.
	if err := CheckKind(t.TempDir(), Task{Phase: PhaseLoad}, vfs.Options{}); err != nil {
		t.Fatalf("load: %v", err)
	}
}

// TestKindClaimRace: tasks of both kinds claiming one folder at the same
// time all agree on one kind, on a local disk and in memory.
func TestKindClaimRace(t *testing.T) {
	for _, c := range []struct {
		name string
		fs   vfs.WriteFS
		root string
	}{{"local", vfs.Local{}, t.TempDir()}, {"mem", vfs.NewMem(), "/staging"}} {
		t.Run(c.name, func(t *testing.T) {
			for round := 0; round < 20; round++ {
				root := path.Join(c.root, fmt.Sprint(round))
				got := make([]string, 8)
				errs := make([]error, 8)
				var wg sync.WaitGroup
				for i := range got {
					wg.Add(1)
					go func() {
						defer wg.Done()
						kind := kindPhases
						if i%2 == 0 {
							kind = kindOneProcess
						}
						got[i], errs[i] = claimKind(c.fs, root, kind)
					}()
				}
				wg.Wait()
				for i := range got {
					if errs[i] != nil {
						t.Fatalf("round %d, task %d: %v", round, i, errs[i])
					}
					if got[i] != got[0] {
						t.Fatalf("round %d: tasks see kinds %q", round, got)
					}
				}
			}
		})
	}
}

// TestKindFileForeign: a kind file that names no kind of job is an error
// naming the file, not a claim for either kind.
func TestKindFileForeign(t *testing.T) {
	dir := t.TempDir()
	if err := vfs.WriteFileAtomic(vfs.Local{}, path.Join(dir, kindFile), []byte("spark\n")); err != nil {
		t.Fatal(err)
	}
	err := CheckKind(dir, Task{Phase: PhaseAll}, vfs.Options{})
	if err == nil || errors.Is(err, ErrOtherKind) {
		t.Fatalf("a foreign kind file: %v", err)
	}
}
