package state

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/vfs"
)

// Each change of a remote lease is one compare-and-swap: the exclusive
// create of the next generation. These tests drive the protocol by hand
// (no renewal goroutine) over an in-memory file system whose exclusive
// create is atomic, as the NameNode's and the object stores' are, with a
// clock the test moves.

// fakeClock is a clock a test sets.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// casFixture is one lease folder on an in-memory file system.
type casFixture struct {
	t     *testing.T
	fs    vfs.ExclusiveFS
	dir   string
	clock *fakeClock
	log   logLines
}

func newCASFixture(t *testing.T, fsys vfs.ExclusiveFS) *casFixture {
	if fsys == nil {
		fsys = vfs.NewMem()
	}
	return &casFixture{t: t, fs: fsys, dir: "/job/checkpoint.lease", clock: newFakeClock()}
}

func (f *casFixture) take(force bool) (*fileLease, error) {
	loc := &vfs.Location{FS: f.fs, Path: f.dir, URL: "mem://" + f.dir}
	return acquireFile(f.fs, loc, "checkpoint /job/checkpoint.json", LeaseOptions{TTL: time.Minute, Force: force, Logf: f.log.Logf, Clock: f.clock.now})
}

func (f *casFixture) mustTake(force bool) *fileLease {
	f.t.Helper()
	l, err := f.take(force)
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// holder is the current generation and its record.
func (f *casFixture) holder() (int64, leaseRecord) {
	f.t.Helper()
	g, lf, err := currentLease(f.fs, f.dir, time.Minute)
	if err != nil || lf == nil {
		f.t.Fatalf("no current lease: %v", err)
	}
	return g, lf.rec
}

func lostErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrLeaseLost) {
		t.Errorf("%s: want ErrLeaseLost, got %v", what, err)
	}
}

// TestLeaseCASRenewMovesToNextGeneration: a renewal creates the next
// generation with a later expiry and removes the ones below it.
func TestLeaseCASRenewMovesToNextGeneration(t *testing.T) {
	f := newCASFixture(t, nil)
	a := f.mustTake(false)
	f.clock.add(20 * time.Second)
	if err := a.renew(); err != nil {
		t.Fatal(err)
	}
	g, rec := f.holder()
	if g != 2 || rec.Token != a.rec.Token || rec.Generation != 2 || !rec.Expires.Equal(f.clock.now().Add(time.Minute)) {
		t.Errorf("after a renewal: generation %d, %+v", g, rec)
	}
	if gens, _ := leaseGens(f.fs, f.dir); len(gens) != 1 {
		t.Errorf("generations left: %v", gens)
	}
	if err := a.stillHeld(); err != nil {
		t.Errorf("the renewed lease: %v", err)
	}
}

// TestLeaseCASLateRenewCannotOverwriteTakeover: the owner stalled at its
// renewal while another run took the lease with --force-takeover; the
// renewal, landing late, finds the next generation taken, the takeover
// stands, and the old owner's fence refuses its writes.
func TestLeaseCASLateRenewCannotOverwriteTakeover(t *testing.T) {
	f := newCASFixture(t, nil)
	a := f.mustTake(false)
	b := f.mustTake(true)
	if !f.log.Has("took over the lease", "--force-takeover") {
		t.Errorf("takeover not logged:\n%s", &f.log)
	}
	lostErr(t, "the late renewal", a.renew())
	if g, rec := f.holder(); g != 2 || rec.Token != b.rec.Token || rec.TookOver != a.rec.Token {
		t.Errorf("after the late renewal: generation %d held by %+v", g, rec)
	}
	lostErr(t, "the old owner's fence", a.stillHeld())
	if err := b.stillHeld(); err != nil {
		t.Errorf("the new owner's fence: %v", err)
	}
}

// TestLeaseCASLateRenewAfterSweep: when the new owner renewed and removed
// the generations below its own, the old owner's late renewal can create
// the generation it aims at again; it still loses, as a higher one is
// there, and the new owner keeps the lease.
func TestLeaseCASLateRenewAfterSweep(t *testing.T) {
	f := newCASFixture(t, nil)
	a := f.mustTake(false)
	b := f.mustTake(true)
	for range 2 {
		if err := b.renew(); err != nil {
			t.Fatal(err)
		}
	}
	if gens, _ := leaseGens(f.fs, f.dir); len(gens) != 1 || gens[0] != 4 {
		t.Fatalf("generations after two renewals: %v", gens)
	}
	lostErr(t, "the late renewal", a.renew())
	if g, rec := f.holder(); g != 4 || rec.Token != b.rec.Token {
		t.Errorf("after the late renewal: generation %d held by %+v", g, rec)
	}
	if err := b.stillHeld(); err != nil {
		t.Errorf("the new owner's fence: %v", err)
	}
	if err := b.renew(); err != nil {
		t.Errorf("the new owner's next renewal: %v", err)
	}
}

// TestLeaseCASLateReleaseKeepsTakeover: a release by the owner whose
// lease was taken leaves the new owner's lease in place.
func TestLeaseCASLateReleaseKeepsTakeover(t *testing.T) {
	f := newCASFixture(t, nil)
	a := f.mustTake(false)
	b := f.mustTake(true)
	if err := a.giveBack(); err != nil {
		t.Fatal(err)
	}
	if g, rec := f.holder(); g != 2 || rec.Token != b.rec.Token || rec.Released {
		t.Errorf("after the late release: generation %d, %+v", g, rec)
	}
	if err := b.stillHeld(); err != nil {
		t.Errorf("the new owner's fence: %v", err)
	}
}

// TestLeaseCASReleaseFreesAtOnce: a released lease is taken by the next
// run without waiting and without a takeover.
func TestLeaseCASReleaseFreesAtOnce(t *testing.T) {
	f := newCASFixture(t, nil)
	a := f.mustTake(false)
	if err := a.giveBack(); err != nil {
		t.Fatal(err)
	}
	if _, rec := f.holder(); !rec.Released {
		t.Fatalf("after release: %+v", rec)
	}
	b := f.mustTake(false)
	if g, rec := f.holder(); g != 3 || rec.Token != b.rec.Token || rec.TookOver != "" {
		t.Errorf("taken after the release: generation %d, %+v", g, rec)
	}
	if f.log.Has("took over") {
		t.Errorf("a free lease logged as taken over:\n%s", &f.log)
	}
}

// TestLeaseCASExpiry: a lease is refused until it expires, then taken
// over without force; the old owner's fence refuses its writes past the
// expiry even before anyone took it.
func TestLeaseCASExpiry(t *testing.T) {
	f := newCASFixture(t, nil)
	a := f.mustTake(false)
	f.clock.add(59 * time.Second)
	var le *LeasedError
	if _, err := f.take(false); !errors.As(err, &le) || le.Owner.PID == 0 {
		t.Fatalf("a live lease: %v", err)
	}
	f.clock.add(time.Second)
	lostErr(t, "the fence of an expired lease", a.stillHeld())
	b := f.mustTake(false)
	if !f.log.Has("took over the lease", "expired at") {
		t.Errorf("takeover not logged:\n%s", &f.log)
	}
	if err := b.stillHeld(); err != nil {
		t.Error(err)
	}
}

// answerLost is a file system whose exclusive creates land but whose
// next answer is lost, as a create retried through a NameNode failover
// can be.
type answerLost struct {
	*vfs.Mem
	lose bool
}

func (a *answerLost) CreateExclusive(name string) (vfs.WriteFile, error) {
	w, err := a.Mem.CreateExclusive(name)
	if err != nil || !a.lose {
		return w, err
	}
	a.lose = false
	return &lostClose{w}, nil
}

type lostClose struct{ vfs.WriteFile }

func (c *lostClose) Close() error {
	if err := c.WriteFile.Close(); err != nil {
		return err
	}
	return errors.New("connection reset (the create was done)")
}

// TestLeaseCASRenewWhoseAnswerWasLost: a renewal whose create landed but
// whose answer was lost is an error, not a loss; the next try finds its
// own generation there and goes on from it (it does not skip one).
func TestLeaseCASRenewWhoseAnswerWasLost(t *testing.T) {
	fsys := &answerLost{Mem: vfs.NewMem()}
	f := newCASFixture(t, fsys)
	a := f.mustTake(false)
	fsys.lose = true
	if err := a.renew(); err == nil || errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a renewal whose answer was lost: %v", err)
	}
	if err := a.renew(); err != nil {
		t.Fatalf("the next try: %v", err)
	}
	if g, rec := f.holder(); g != 2 || rec.Token != a.rec.Token {
		t.Errorf("generation %d, %+v", g, rec)
	}
	if err := a.stillHeld(); err != nil {
		t.Error(err)
	}
}

// TestLeaseCASEarlierRekeysFile: the single lease file of a rekey from
// before generations is refused while live, naming why, and removed and
// taken over once expired.
func TestLeaseCASEarlierRekeysFile(t *testing.T) {
	mem := vfs.NewMem()
	f := newCASFixture(t, mem)
	old := `{"host":"h1","pid":4242,"started":"2026-12-07T02:00:00Z","token":"0ld","renewed":"2026-12-07T02:59:50Z","expires":"2026-12-07T03:00:50Z"}`
	mem.WriteFile(f.dir, []byte(old))
	_, err := f.take(false)
	var le *LeasedError
	if !errors.As(err, &le) || le.Owner.PID != 4242 || !strings.Contains(err.Error(), "before lease generations") {
		t.Fatalf("a live lease file of an earlier rekey: %v", err)
	}
	f.clock.add(time.Minute)
	b := f.mustTake(false)
	if g, rec := f.holder(); g != 1 || rec.Token != b.rec.Token {
		t.Errorf("generation %d, %+v", g, rec)
	}
	if !f.log.Has("took over the lease", "pid 4242") {
		t.Errorf("takeover not logged:\n%s", &f.log)
	}
}

// hookFS runs before once, before the first exclusive create it is asked
// for: another run's step, landing between a run's look at the lease and
// its create.
type hookFS struct {
	*vfs.Mem
	before func()
}

func (h *hookFS) CreateExclusive(name string) (vfs.WriteFile, error) {
	if f := h.before; f != nil {
		h.before = nil
		f()
	}
	return h.Mem.CreateExclusive(name)
}

// TestLeaseCASForceTakesOnlyFromTheHolderSeen: --force-takeover takes the
// lease from the run that held it at the first look; when a third run
// took it meanwhile (another attempt also told --force-takeover), the
// lease is refused rather than taken from that run in turn, so two
// forced attempts do not take it from each other without end.
func TestLeaseCASForceTakesOnlyFromTheHolderSeen(t *testing.T) {
	mem := vfs.NewMem()
	f := newCASFixture(t, mem)
	f.mustTake(false) // the first holder, stalled
	var b *fileLease
	hook := &hookFS{Mem: mem}
	hook.before = func() { b = f.mustTake(true) }
	loc := &vfs.Location{FS: hook, Path: f.dir, URL: "mem://" + f.dir}
	_, err := acquireFile(hook, loc, "checkpoint /job/checkpoint.json", LeaseOptions{TTL: time.Minute, Force: true, Logf: f.log.Logf, Clock: f.clock.now})
	var le *LeasedError
	if !errors.As(err, &le) {
		t.Fatalf("a forced take that lost the race to another forced take: %v", err)
	}
	if g, rec := f.holder(); g != 2 || rec.Token != b.rec.Token {
		t.Errorf("generation %d, %+v; want the other forced taker's", g, rec)
	}
}

// TestLeaseHolderNamesTheLastHolder: the holder a reader of the staging
// folder is told (hfiles.Options.Holder) is the current generation's
// token: the holder's, the taker's after a takeover, and the giver's
// after a release; a single file (a local lock) is no lease folder.
func TestLeaseHolderNamesTheLastHolder(t *testing.T) {
	mem := vfs.NewMem()
	f := newCASFixture(t, mem)
	holder := func() string {
		t.Helper()
		tok, ok, err := LeaseHolder(mem, f.dir)
		if err != nil || !ok {
			t.Fatalf("leaseHolder: %q %v %v", tok, ok, err)
		}
		return tok
	}
	if _, ok, err := LeaseHolder(mem, f.dir); ok || err != nil {
		t.Errorf("no lease yet: %v %v", ok, err)
	}
	a := f.mustTake(false)
	if holder() != a.rec.Token {
		t.Error("not the holder's token")
	}
	b := f.mustTake(true)
	if holder() != b.rec.Token {
		t.Error("not the taker's token")
	}
	if err := b.giveBack(); err != nil {
		t.Fatal(err)
	}
	if holder() != b.rec.Token {
		t.Error("not the giver's token after its release")
	}
	mem.WriteFile("/local.lock", []byte(`{"token":"x"}`))
	if _, ok, err := LeaseHolder(mem, "/local.lock"); ok || err != nil {
		t.Errorf("a lock file: %v %v", ok, err)
	}
}
