package state

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLocalLockRemovedAndExclusive: a local lease's lock file is removed
// when its holder lets go (runs and failed starts left *.lease files
// behind), and removal does not let two lockers in: tasks that open the
// file just before its holder removes it lock a file no longer at the
// path, and must notice. Eight lockers each take and drop the lock 50
// times with random pauses (seeded), trying again when another holds it;
// at most one holds it at any moment, and no file is left.
//
// Each locker counts the times it took the lock, not its tries: bounded
// by tries, a loaded machine (CI) let the other lockers spend all theirs
// while one holder was descheduled, and the lock was taken 37 times in
// 3,200 tries, too few to prove anything.
func TestLocalLockRemovedAndExclusive(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.lease")
	const lockers, takes = 8, 50
	var holders, took, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, lockers)
	deadline := time.Now().Add(2 * time.Minute)
	for w := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 1))
			for n := 0; n < takes; {
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("locker %d took the lock %d times of %d in 2 minutes", w, n, takes)
					return
				}
				l, err := lockLocal(p, "checkpoint")
				var le *LeasedError
				if errors.As(err, &le) {
					refused.Add(1)
					runtime.Gosched()
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if h := holders.Add(1); h != 1 {
					errs <- errors.New("two lockers hold the lease at once")
				}
				n++
				took.Add(1)
				if rng.Intn(4) == 0 {
					time.Sleep(time.Duration(rng.Intn(50)) * time.Microsecond)
				}
				holders.Add(-1)
				if err := l.release(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Exclusion proven only where lockers met a held lock.
	if took.Load() != lockers*takes || refused.Load() == 0 {
		t.Fatalf("the lock was taken %d times (want %d) and refused %d times: the lockers never met", took.Load(), lockers*takes, refused.Load())
	}
	t.Logf("taken %d times, refused %d times", took.Load(), refused.Load())
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("the lock file is left after every holder let go: %v", err)
	}
}
