package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/vfs"
)

// The HDFS lease protocol (create exclusively, renew, expire, take over),
// run here over a local folder, which gives the same exclusive create; the
// mini cluster's HDFS runs it in pipeline/lease_test.go.

const testTTL = 600 * time.Millisecond

// logLines collects what a lease logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

// Logf is a Logf for Options.
func (l *logLines) Logf(f string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
}

// Has reports whether one line holds every part.
func (l *logLines) Has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		return true
	}
	return false
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// leaseFixture is one lease file that tests take in turn.
type leaseFixture struct {
	t   *testing.T
	p   string
	log logLines
}

func newLeaseFixture(t *testing.T) *leaseFixture {
	return &leaseFixture{t: t, p: filepath.Join(t.TempDir(), "c.lease")}
}

// take takes the lease file and starts renewing it; lost receives the
// loss, if any.
func (f *leaseFixture) take(force bool) (l *fileLease, lost chan error, err error) {
	f.t.Helper()
	loc, err := vfs.Open(f.p)
	if err != nil {
		f.t.Fatal(err)
	}
	l, err = acquireFile(vfs.Local{}, loc, "checkpoint "+f.p, LeaseOptions{TTL: testTTL, Force: force, Logf: f.log.Logf})
	if err != nil {
		return nil, nil, err
	}
	lost = make(chan error, 1)
	l.onLost = func(err error) { lost <- err }
	go l.keep()
	return l, lost, nil
}

// mustTake is take that fails the test on an error.
func (f *leaseFixture) mustTake(force bool) (*fileLease, chan error) {
	f.t.Helper()
	l, lost, err := f.take(force)
	if err != nil {
		f.t.Fatal(err)
	}
	return l, lost
}

// die stops a lease's renewal without giving it back, as kill -9 would;
// the lease must not be released after.
func die(l *fileLease) { l.halt() }

// TestFileLeaseRefusedWhileRenewed: a lease its owner renews is refused
// to a second taker past its first expiry, naming the owner and the
// expiry.
func TestFileLeaseRefusedWhileRenewed(t *testing.T) {
	f := newLeaseFixture(t)
	a, lost := f.mustTake(false)
	defer a.release()
	time.Sleep(2 * testTTL)
	_, _, err := f.take(false)
	var le *LeasedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLeased) {
		t.Fatalf("second taker of a renewed lease: %v", err)
	}
	if le.Owner.PID != os.Getpid() || !le.Expires.After(time.Now()) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("refusal names %+v, expiring %v: %v", le.Owner, le.Expires, err)
	}
	select {
	case err := <-lost:
		t.Errorf("the owner lost a lease nobody took: %v", err)
	default:
	}
}

// TestFileLeaseTakenOverAfterExpiry: the lease of an owner that stopped
// renewing is refused until it expires, then taken over, and the takeover
// logged; the old owner, if it comes back, finds the lease lost.
func TestFileLeaseTakenOverAfterExpiry(t *testing.T) {
	f := newLeaseFixture(t)
	a, _ := f.mustTake(false)
	die(a)
	_, rec, _ := a.held()
	expires := rec.Expires
	var b *fileLease
	var err error
	for {
		b, _, err = f.take(false)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrLeased) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer b.release()
	if now := time.Now(); now.Before(expires) {
		t.Errorf("taken over at %v, before the lease expired at %v", now, expires)
	}
	if !f.log.Has("took over the lease", "expired at") {
		t.Errorf("takeover not logged:\n%s", &f.log)
	}
	if err := a.renew(); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the old owner renewing after the takeover: %v", err)
	}
}

// TestFileLeaseForceTakeover: force takes a live lease at once; its
// owner's next renewal finds it lost and reports it.
func TestFileLeaseForceTakeover(t *testing.T) {
	f := newLeaseFixture(t)
	a, lost := f.mustTake(false)
	defer a.release()
	b, _ := f.mustTake(true)
	if !f.log.Has("took over the lease", "--force-takeover") {
		t.Errorf("forced takeover not logged:\n%s", &f.log)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "is now held by") {
			t.Errorf("loss reported as %v", err)
		}
	case <-time.After(testTTL):
		t.Fatal("the owner did not notice within a lifetime that its lease was taken")
	}
	if err := b.release(); err != nil {
		t.Fatal(err)
	}
	if _, cur, err := currentLease(vfs.Local{}, f.p, testTTL); err != nil || cur == nil || !cur.rec.Released {
		t.Errorf("the current generation after release: %+v, %v", cur, err)
	}
}

// TestFileLeaseWithoutOwner: a lease file whose writer died before it
// wrote the record counts as held from its creation until the lifetime
// passed.
func TestFileLeaseWithoutOwner(t *testing.T) {
	f := newLeaseFixture(t)
	if err := os.MkdirAll(f.p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.p, leaseGenName(1)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	_, _, err := f.take(false)
	var le *LeasedError
	if !errors.As(err, &le) || le.Owner.PID != 0 || !strings.Contains(err.Error(), "names no owner") {
		t.Fatalf("a lease file with no record: %v", err)
	}
	time.Sleep(time.Until(created.Add(testTTL + 50*time.Millisecond)))
	b, _, err := f.take(false)
	if err != nil {
		t.Fatalf("after its lifetime: %v", err)
	}
	b.release()
}

// TestConfirmTurnsATakeoverIntoALostLease: a run that failed a write
// (another run, taking its state over by force, swept its temporary
// files) before anything noticed the takeover ends with the lost lease,
// not the write's error: Confirm asks the fence while the leases are
// held, and Explain then reports the loss over the write's error. A
// failure with every lease still held stays what it was.
func TestConfirmTurnsATakeoverIntoALostLease(t *testing.T) {
	writeErr := errors.New("close checkpoint.json.tmp-1: FileNotFoundException")
	taken := fmt.Errorf("%w: another run holds it now", ErrLeaseLost)

	held := NewLeases(LeaseOptions{})
	held.AddFence(func() error { return nil })
	if got := held.Explain(held.Confirm(writeErr)); got != writeErr {
		t.Errorf("a failure under held leases became %v", got)
	}

	lost := NewLeases(LeaseOptions{})
	lost.AddFence(func() error { return taken })
	got := lost.Explain(lost.Confirm(writeErr))
	if !errors.Is(got, ErrLeaseLost) || !strings.Contains(got.Error(), "FileNotFoundException") {
		t.Errorf("a failure after a takeover ended as %v, want the lost lease, naming the write's error", got)
	}
}
