package state

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLocalLockRemovedAndExclusive: a local lease's lock file is removed
// when its holder lets go (runs and failed starts left *.lease files
// behind), and removal does not let two lockers in: tasks that open the
// file just before its holder removes it lock a file no longer at the
// path, and must notice. Eight lockers take and drop the lock a few
// thousand times with random pauses (seeded); at most one holds it at any
// moment, and no file is left.
func TestLocalLockRemovedAndExclusive(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.lease")
	var holders, took atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 1))
			for range 400 {
				l, err := lockLocal(p, "checkpoint")
				var le *LeasedError
				if errors.As(err, &le) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if n := holders.Add(1); n != 1 {
					errs <- errors.New("two lockers hold the lease at once")
				}
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
	if took.Load() < 100 {
		t.Fatalf("the lock was taken %d times in 3,200 tries: the test proves little", took.Load())
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("the lock file is left after every holder let go: %v", err)
	}
}
