package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline/stage"
	"github.com/rekeyhq/rekey/vfs"
)

// A run holds a lease on each piece of state it writes (its checkpoint
// and, when it builds the hfiles sink, the staging folder) from Prepare
// until Wait or Close, so that a second run of the same state (a CronJob
// firing while the last run still goes, a rescheduled pod beside a live
// one, a second terminal) is refused before it reads or writes anything.
//
// On a local path the lease is a lock file held with flock(2): the kernel
// drops the lock when the process ends, however it ends, so a run killed
// with -9 frees its state at once. HDFS has no lock a client holds for
// its lifetime, so there the lease is a file created exclusively (the
// NameNode checks and creates in one step) that names its owner and an
// expiry, rewritten by the owner every third of its lifetime; a lease
// past its expiry belongs to a run that died, and the next run takes it
// over. Expiry is judged by the clocks of the hosts involved, which must
// agree to well within the lease's lifetime (NTP does).

// DefaultLeaseTTL is how long an HDFS lease lasts unless its owner renews
// it, when Options.LeaseTTL is zero: after a crash the next run waits at
// most this long (or is told --force-takeover).
const DefaultLeaseTTL = time.Minute

// stagingLeaseName is the lease file inside a staging folder; the
// underscore makes bulk load tools and OpenStaging pass over it, as they
// pass over Hadoop's _SUCCESS.
const stagingLeaseName = "_rekey.lease"

// ErrLeased is matched by the error (a *LeasedError) of a run refused
// because another run holds its state.
var ErrLeased = errors.New("pipeline: the job's state is in use by another run")

// ErrLeaseLost is matched by the error of a run that lost its HDFS lease
// while it ran: another run took it over (it judged the lease expired, or
// was told --force-takeover), or the lease could not be renewed before it
// expired. The run stops at once; the state is the other run's.
var ErrLeaseLost = errors.New("pipeline: the run lost its lease on the job's state")

// Owner names the run that holds a lease, as its lease file records it.
type Owner struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Version is the owner's rekey build, when the binary records one.
	Version string `json:"version,omitempty"`
}

// String names the owner for a message.
func (o Owner) String() string {
	if o.PID == 0 {
		return "a run whose lease file names no owner yet (it is being written, or its writer died)"
	}
	v := "rekey"
	if o.Version != "" {
		v += " " + o.Version
	}
	return fmt.Sprintf("%s pid %d on host %s, started %s", v, o.PID, o.Host, o.Started.Format(time.RFC3339))
}

// LeasedError is the refusal of a run whose state another run holds.
type LeasedError struct {
	// State is what is held: "checkpoint PATH" or "staging folder PATH".
	State string
	// Lease is the lease (or lock) file.
	Lease string
	// Owner is the run that holds it.
	Owner Owner
	// Expires is when an HDFS lease expires unless its owner renews it;
	// zero for a local lock, which is held until its owner's process ends.
	Expires time.Time
	// Hint, when set, ends the message.
	Hint string
}

// Error names the state, the owner and when the lease ends.
func (e *LeasedError) Error() string {
	until := fmt.Sprintf("lock file %s, held until that process exits", e.Lease)
	if !e.Expires.IsZero() {
		until = fmt.Sprintf("lease %s expires at %s unless renewed; if that run is known to be dead, --force-takeover takes it now", e.Lease, e.Expires.Format(time.RFC3339))
	}
	msg := fmt.Sprintf("%v: %s is held by %s (%s)", ErrLeased, e.State, e.Owner, until)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Unwrap makes the error match ErrLeased.
func (e *LeasedError) Unwrap() error { return ErrLeased }

// leaseRecord is a lease file's content.
type leaseRecord struct {
	Owner
	// Token tells this lease from a later one of the same owner.
	Token string `json:"token"`
	// Renewed and Expires: HDFS leases only.
	Renewed time.Time `json:"renewed,omitzero"`
	Expires time.Time `json:"expires,omitzero"`
}

// processStart stands for the process's start time in its leases.
var processStart = time.Now()

// self is this process as a lease owner.
func self() Owner {
	host, _ := os.Hostname()
	return Owner{Host: host, PID: os.Getpid(), Started: processStart, Version: buildVersion()}
}

// buildVersion is the module version the binary was built as, else its
// VCS revision, else "".
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "revision " + s.Value[:12]
		}
	}
	return ""
}

// newToken returns n random bytes in hex.
func newToken(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// leases are the leases a run holds. The first one lost ends the run.
type leases struct {
	held     []func() error
	lost     chan struct{}
	released chan struct{}
	once     sync.Once
	err      error
}

func newLeases() *leases {
	return &leases{lost: make(chan struct{}), released: make(chan struct{})}
}

// takeLeases leases the run's state before anything reads or writes it:
// the checkpoint, and the staging folder when the run builds the hfiles
// sink itself (a given sink owns its own output). The leases are released
// when the run is closed.
func (r *Run) takeLeases() error {
	r.leases = newLeases()
	r.closers = append(r.closers, r.leases.release)
	type state struct{ what, where, lease string }
	todo := []state{{"checkpoint", r.o.Checkpoint, checkpointLeasePath(r.o.Checkpoint)}}
	if name, err := r.sinkName(); err == nil && r.o.Sink == nil && name == string(job.SinkHFiles) {
		st := r.j.StagingPath()
		if err := stage.CheckKind(st, r.o.spillTask()); err != nil {
			return err
		}
		todo = append(todo, state{"staging folder", st, stagingLeasePath(st, r.o.spillTask())})
		if d := r.spillDir(); d != "" {
			// Two jobs given one spill_dir would remove each other's runs
			// as strays.
			todo = append(todo, state{"spill folder", d, path.Join(d, stagingLeaseName)})
		}
	}
	for _, s := range todo {
		err := r.leases.take(s.lease, s.what+" "+s.where, r.leaseOptions())
		var le *LeasedError
		if errors.As(err, &le) && s.what == "staging folder" && r.o.Shard.Count > 1 && r.o.Phase == stage.PhaseAll {
			le.Hint = "every shard of a job needs its own --staging folder"
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *Run) leaseOptions() leaseOptions {
	ttl := r.o.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return leaseOptions{ttl: ttl, force: r.o.ForceTakeover, logf: r.logf}
}

// stagingLeasePath is the lease file of a task's share of the staging
// folder st: the whole folder in one process, the task's own folder in a
// job in phases (each spill shard and merge part holds its own).
func stagingLeasePath(st string, t stage.Task) string {
	p := strings.TrimSuffix(st, "/")
	if d := t.Dir(); d != "" {
		p += "/" + d
	}
	return p + "/" + stagingLeaseName
}

// checkpointLeasePath is the lease file of a checkpoint: beside it, named
// after it, so each shard's and each redo's checkpoint has its own.
func checkpointLeasePath(checkpoint string) string {
	return strings.TrimSuffix(checkpoint, ".json") + ".lease"
}

type leaseOptions struct {
	ttl   time.Duration
	force bool
	logf  func(string, ...any)
}

// take leases the state named what through the lease file at where (a
// local path or hdfs:// URL).
func (s *leases) take(where, what string, o leaseOptions) error {
	loc, err := vfs.Open(where)
	if err != nil {
		return fmt.Errorf("lease for %s: %w", what, err)
	}
	if err := loc.FS.MkdirAll(path.Dir(loc.Path)); err != nil {
		loc.Close()
		return fmt.Errorf("lease for %s: %w", what, err)
	}
	if _, ok := loc.FS.(vfs.Local); ok {
		l, err := lockLocal(loc.Path, what)
		if err != nil {
			return err
		}
		s.held = append(s.held, l.release)
		return nil
	}
	ex, ok := loc.FS.(vfs.ExclusiveFS)
	if !ok {
		loc.Close()
		return fmt.Errorf("lease for %s: %s cannot create a file exclusively", what, loc.FS)
	}
	l, err := acquireFile(ex, loc, what, o)
	if err != nil {
		loc.Close()
		return err
	}
	l.onLost = s.lose
	go l.keep()
	s.held = append(s.held, l.release)
	return nil
}

// lose records the first lease lost and ends the run (see bind).
func (s *leases) lose(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.lost)
	})
}

// lostErr is the first lease lost, or nil.
func (s *leases) lostErr() error {
	if s == nil {
		return nil
	}
	select {
	case <-s.lost:
		return s.err
	default:
		return nil
	}
}

// bind returns ctx, ended with the lease's error when a lease is lost:
// the run then stops as it would on an interrupt.
func (s *leases) bind(ctx context.Context) context.Context {
	if s == nil {
		return ctx
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		defer cancel(nil)
		select {
		case <-s.lost:
			cancel(s.lostErr())
		case <-ctx.Done():
		case <-s.released:
		}
	}()
	return ctx
}

// explain returns the error a run ends with: a lost lease, which stopped
// it, over the interrupt it caused.
func (s *leases) explain(err error) error {
	if s == nil || err == nil {
		return err
	}
	if lost := s.lostErr(); lost != nil {
		return fmt.Errorf("%w (the run stopped: %v)", lost, err)
	}
	return err
}

// release gives every lease back, the last taken first.
func (s *leases) release() error {
	var first error
	for i := len(s.held) - 1; i >= 0; i-- {
		if err := s.held[i](); err != nil && first == nil {
			first = err
		}
	}
	s.held = nil
	select {
	case <-s.released:
	default:
		close(s.released)
	}
	return first
}

// lockLocal holds the lock file p with flock. The file stays when the
// lock is released: removing it would let a run that opened it just
// before lock a file no longer there while a third locks a new one.
func lockLocal(p, what string) (*localLease, error) {
	f, err := os.OpenFile(filepath.FromSlash(p), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lease for %s: %w", what, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LeasedError{State: what, Lease: p, Owner: lockOwner(f)}
		}
		return nil, fmt.Errorf("lease for %s: flock %s: %w", what, p, err)
	}
	b, _ := json.Marshal(leaseRecord{Owner: self(), Token: newToken(16)})
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("lease for %s: %w", what, err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("lease for %s: %w", what, err)
	}
	return &localLease{f: f}, nil
}

// lockOwner reads the owner a held lock file names. The owner writes it
// just after it locks, so an empty file is read again a few times.
func lockOwner(f *os.File) Owner {
	var rec leaseRecord
	for range 20 {
		st, err := f.Stat()
		if err == nil && st.Size() > 0 {
			b := make([]byte, st.Size())
			if n, _ := f.ReadAt(b, 0); json.Unmarshal(b[:n], &rec) == nil && rec.PID != 0 {
				return rec.Owner
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return Owner{}
}

// localLease is a held flock.
type localLease struct{ f *os.File }

// release drops the lock (closing the file does).
func (l *localLease) release() error { return l.f.Close() }

// fileLease is a held HDFS lease file, renewed until released.
type fileLease struct {
	fs     vfs.ExclusiveFS
	loc    *vfs.Location
	what   string
	o      leaseOptions
	onLost func(error)

	rec        leaseRecord
	stop, done chan struct{}
}

// leaseFile is a lease file as read: its record and its bytes.
type leaseFile struct {
	rec leaseRecord
	raw []byte
}

// acquireFile creates the lease file exclusively; when another run's
// lease is there, it refuses, or takes the lease over when it expired or
// o.force says so.
func acquireFile(fsys vfs.ExclusiveFS, loc *vfs.Location, what string, o leaseOptions) (*fileLease, error) {
	l := &fileLease{fs: fsys, loc: loc, what: what, o: o, stop: make(chan struct{}), done: make(chan struct{})}
	l.rec = leaseRecord{Owner: self(), Token: newToken(16)}
	var tookOver *leaseFile
	for range 5 {
		err := l.create()
		if err == nil {
			if tookOver != nil {
				l.logTakeover(tookOver)
			}
			return l, nil
		}
		if !errors.Is(err, iofs.ErrExist) {
			return nil, fmt.Errorf("lease for %s: create %s: %w", what, loc.URL, err)
		}
		cur, err := readLeaseFile(fsys, loc.Path, o.ttl)
		if errors.Is(err, iofs.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("lease for %s: %w", what, err)
		}
		if !o.force && time.Now().Before(cur.rec.Expires) {
			return nil, &LeasedError{State: what, Lease: loc.URL, Owner: cur.rec.Owner, Expires: cur.rec.Expires}
		}
		moved, ok, err := l.moveAside(cur)
		if err != nil {
			return nil, fmt.Errorf("lease for %s: taking over %s: %w", what, loc.URL, err)
		}
		if !ok {
			return nil, &LeasedError{State: what, Lease: loc.URL, Owner: moved.rec.Owner, Expires: moved.rec.Expires}
		}
		tookOver = cur
	}
	return nil, fmt.Errorf("lease for %s: %s changed hands five times while this run tried to take it; try again", what, loc.URL)
}

// logTakeover says whose lease this run took over, and why it could.
func (l *fileLease) logTakeover(old *leaseFile) {
	why := fmt.Sprintf("it expired at %s", old.rec.Expires.Format(time.RFC3339))
	if l.o.force && time.Now().Before(old.rec.Expires) {
		why = "--force-takeover"
	}
	l.o.logf("took over the lease on %s (%s) from %s: %s", l.what, l.loc.URL, old.rec.Owner, why)
}

// create writes this run's lease file, if none is there.
func (l *fileLease) create() error {
	now := time.Now()
	l.rec.Renewed, l.rec.Expires = now, now.Add(l.o.ttl)
	b, _ := json.Marshal(l.rec)
	w, err := l.fs.CreateExclusive(l.loc.Path)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		w.Close()
		return err
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// moveAside moves the stale lease cur out of the way. It renames the file
// first, so of two runs taking over at once only one moves it, then reads
// what it moved: when that is not cur (another run took over in between
// and wrote a fresh lease), it puts that lease back and reports false.
func (l *fileLease) moveAside(cur *leaseFile) (*leaseFile, bool, error) {
	aside := l.loc.Path + ".stale-" + l.rec.Token
	if err := l.fs.Rename(l.loc.Path, aside); err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return nil, true, nil // gone already: try to create
		}
		return nil, false, err
	}
	defer l.fs.Remove(aside)
	moved, err := readLeaseFile(l.fs, aside, l.o.ttl)
	if err != nil {
		return nil, false, err
	}
	if moved.rec.Token == cur.rec.Token {
		return moved, true, nil
	}
	if w, err := l.fs.CreateExclusive(l.loc.Path); err == nil {
		w.Write(moved.raw)
		w.Sync()
		w.Close()
	}
	return moved, false, nil
}

// readLeaseFile reads a lease file. One that names no owner (its writer
// is still writing it, or died before it finished) counts as a lease of
// an unknown run that expires ttl after the file was created.
func readLeaseFile(fsys vfs.FS, name string, ttl time.Duration) (*leaseFile, error) {
	b, err := vfs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	lf := &leaseFile{raw: b}
	if json.Unmarshal(b, &lf.rec) == nil && lf.rec.Token != "" && !lf.rec.Expires.IsZero() {
		return lf, nil
	}
	st, err := fsys.Stat(name)
	if err != nil {
		return nil, err
	}
	lf.rec = leaseRecord{Expires: st.ModTime().Add(ttl)}
	return lf, nil
}

// keep renews the lease every third of its lifetime (more often after a
// failed renewal) until it is released or lost.
func (l *fileLease) keep() {
	defer close(l.done)
	t := time.NewTimer(l.o.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		err := l.renew()
		switch {
		case err == nil:
			t.Reset(l.o.ttl / 3)
		case errors.Is(err, ErrLeaseLost):
			l.onLost(err)
			return
		default:
			l.o.logf("renewing the lease %s: %v (trying again)", l.loc.URL, err)
			t.Reset(max(l.o.ttl/20, 50*time.Millisecond))
		}
	}
}

// renew rewrites the lease with a new expiry, if it is still this run's.
// A lease another run holds now, or one that expired before it could be
// renewed (another run may have taken it over meanwhile), is lost.
func (l *fileLease) renew() error {
	cur, err := readLeaseFile(l.fs, l.loc.Path, l.o.ttl)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("%w: %s: its lease %s was removed", ErrLeaseLost, l.what, l.loc.URL)
	case err != nil:
		return l.lostIfExpired(err)
	case cur.rec.Token != l.rec.Token:
		return fmt.Errorf("%w: %s is now held by %s (lease %s)", ErrLeaseLost, l.what, cur.rec.Owner, l.loc.URL)
	}
	if err := l.lostIfExpired(nil); err != nil {
		return err
	}
	next := l.rec
	now := time.Now()
	next.Renewed, next.Expires = now, now.Add(l.o.ttl)
	b, _ := json.Marshal(next)
	if err := vfs.WriteFileAtomic(l.fs, l.loc.Path, b); err != nil {
		return l.lostIfExpired(err)
	}
	l.rec = next
	return nil
}

// lostIfExpired returns ErrLeaseLost when the lease is (all but) expired:
// past it another run may judge the lease stale, so renewing could
// overwrite that run's lease. A tenth of the lifetime is kept in hand for
// the clocks of two hosts to disagree. Otherwise it returns err.
func (l *fileLease) lostIfExpired(err error) error {
	if time.Now().Before(l.rec.Expires.Add(-l.o.ttl / 10)) {
		return err
	}
	why := "it expired before it could be renewed"
	if err != nil {
		why += ": " + err.Error()
	}
	return fmt.Errorf("%w: %s: lease %s: %s", ErrLeaseLost, l.what, l.loc.URL, why)
}

// release stops the renewal and removes the lease file if it is still
// this run's.
func (l *fileLease) release() error {
	close(l.stop)
	<-l.done
	defer l.loc.Close()
	cur, err := readLeaseFile(l.fs, l.loc.Path, l.o.ttl)
	if err != nil || cur.rec.Token != l.rec.Token {
		return nil // gone or another run's: nothing of ours to remove
	}
	if err := l.fs.Remove(l.loc.Path); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("releasing the lease %s: %w", l.loc.URL, err)
	}
	return nil
}
