package state

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

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
// with -9 frees its state at once. HDFS and the object stores have no
// lock a client holds for its lifetime, so there the lease is a folder of
// generations (see fileLease below), each a file created exclusively that
// names its owner and an expiry; the owner moves it to the next
// generation every third of its lifetime; a lease past its expiry
// belongs to a run that died, and the next run takes it over. Expiry is
// judged by the clocks of the hosts involved, which must agree to well
// within the lease's lifetime (NTP does).
//
// A lease fences: every durable write of the run's state (checkpoint
// journal records and compactions, a spill task's commit, the merge's
// and the load's state) is made only after Leases.Check found every
// lease still this run's, and a run that finds one lost stops with
// ErrLeaseLost (the CLI's exit 4) and writes nothing more. A write that
// passed the check just before a takeover can still land after it (HDFS
// has no conditional rename or append), so the records are stamped with
// the lease (Stamp), a takeover lists the attempt it took the lease from
// (leaseRecord.Superseded), and readers leave out what such an attempt
// stamped (ReadSuperseded).

// DefaultLeaseTTL is how long a remote lease lasts unless its owner
// renews it, when the run gives no lifetime (pipeline.Options.LeaseTTL):
// after a crash the next run waits at most this long (or is told
// --force-takeover).
const DefaultLeaseTTL = time.Minute

// ErrLeased is matched by the error (a *LeasedError) of a run refused
// because another run holds its state.
var ErrLeased = errors.New("state: the job's state is in use by another run")

// ErrLeaseLost is matched by the error of a run that lost its remote
// lease (HDFS or an object store) while it ran: another run took it over
// (it judged the lease expired, or was told --force-takeover), or the
// lease could not be renewed before it expired. The run stops at once
// and writes nothing more; the state is the other run's.
var ErrLeaseLost = errors.New("state: the run lost its lease on the job's state")

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
	// Renewed and Expires: remote leases only.
	Renewed time.Time `json:"renewed,omitzero"`
	Expires time.Time `json:"expires,omitzero"`
	// Generation is the generation the record is the file of (remote
	// leases only; the file's name says it too).
	Generation int64 `json:"generation,omitempty"`
	// Released marks the generation its holder gave back: the state is
	// free.
	Released bool `json:"released,omitempty"`
	// TookOver is the token of the lease this generation took over, for
	// the record (empty for a renewal, or a lease taken when free).
	TookOver string `json:"took_over,omitempty"`
	// Superseded lists the tokens of the attempts that lost this lease to
	// a takeover (expiry or --force-takeover), the latest last, at most
	// maxSuperseded: each generation carries the list of the one it
	// follows, and a takeover adds the token it took from. HDFS has no
	// conditional write, so a record a taken-over attempt wrote after its
	// last fence check can still land; readers leave out the records
	// stamped with these tokens (ReadSuperseded). An attempt that released
	// its lease, or held it when it expired unnoticed by any other, is not
	// listed: the next holder goes on from its records.
	Superseded []string `json:"superseded,omitempty"`
}

// maxSuperseded bounds a lease's list of taken-over attempts: a late
// write lands within a stalled attempt's lifetime, long before this many
// more takeovers of one task.
const maxSuperseded = 64

// supersede returns list with token added (the oldest dropped past
// maxSuperseded); an empty token (a lease file naming no owner) adds
// nothing.
func supersede(list []string, token string) []string {
	if token == "" || slices.Contains(list, token) {
		return list
	}
	out := append(slices.Clone(list), token)
	if len(out) > maxSuperseded {
		out = out[len(out)-maxSuperseded:]
	}
	return out
}

// processStart stands for the process's start time in its leases.
var processStart = time.Now()

// self is this process as a lease owner.
func self() Owner {
	host, _ := os.Hostname()
	return Owner{Host: host, PID: os.Getpid(), Started: processStart, Version: Build()}
}

// Build names the rekey build this binary is, as a lease's owner and a
// job record's publisher record it: the module version it was built as,
// else its VCS revision, else "".
func Build() string {
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

// Leases are the leases a run (or a task of a job in phases) holds, all
// taken with one LeaseOptions. The first one lost ends the run.
type Leases struct {
	o    LeaseOptions
	held []func() error
	// fences are the remote leases' stillHeld checks (a local lock needs
	// none: the kernel holds it for the process's lifetime).
	fences []func() error
	// remote are the remote leases by the where they were taken at.
	remote   map[string]*fileLease
	lost     chan struct{}
	released chan struct{}
	once     sync.Once
	err      error
}

// NewLeases returns a run's leases, none taken yet, each to be taken and
// kept as o says.
func NewLeases(o LeaseOptions) *Leases {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return &Leases{o: o, lost: make(chan struct{}), released: make(chan struct{})}
}

// LeaseOptions are how a run's leases are taken and kept.
type LeaseOptions struct {
	// TTL is how long a remote lease lasts unless renewed; it is renewed
	// every third of that.
	TTL time.Duration
	// Force takes over a remote lease that has not expired yet (its
	// owner is known to be dead).
	Force bool
	// Logf receives takeovers and failed renewals (nil: discarded).
	Logf func(string, ...any)
	// Open opens the lease's file system: who to log in as for a lease
	// on a kerberized HDFS.
	Open vfs.Options
	// Clock is the time leases are judged by; nil is time.Now (the
	// randomized schedule tests give theirs).
	Clock func() time.Time
	// Await is how a fence check waits for the renewal in flight to be
	// decided; nil receives from ch (the randomized schedule tests hand
	// control to their scheduler while it waits).
	Await func(ch <-chan struct{})
}

// Take leases the state named what through the lease at where: a local
// lock file, or a remote lease folder (an hdfs://, s3://, gs:// or Azure
// URL).
func (s *Leases) Take(where, what string) error {
	o := s.o
	loc, err := vfs.OpenWith(where, o.Open)
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
	l.onLost = s.Lose
	go l.keep()
	s.held = append(s.held, l.release)
	s.fences = append(s.fences, l.stillHeld)
	if s.remote == nil {
		s.remote = map[string]*fileLease{}
	}
	s.remote[where] = l
	return nil
}

// Stamp returns what the records made under the remote lease taken at
// where are stamped with (its token and the generation held at the
// time), or nil for a local lock or a lease not taken.
func (s *Leases) Stamp(where string) func() (string, int64) {
	if s == nil {
		return nil
	}
	l := s.remote[where]
	if l == nil {
		return nil
	}
	return func() (string, int64) {
		g, rec, _ := l.held()
		return rec.Token, g
	}
}

// LeaseHolder reads the token of the current generation of the remote
// lease folder p: who holds the state, or last held it (a released
// generation names its giver). It reports false where there is no lease
// folder (a local lock file, or no lease yet). It is hfiles.Options.Holder.
func LeaseHolder(fsys vfs.FS, p string) (string, bool, error) {
	fi, err := fsys.Stat(p)
	if errors.Is(err, iofs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("lease %s: %w", p, err)
	}
	if !fi.IsDir() {
		return "", false, nil
	}
	_, lf, err := currentLease(fsys, p, DefaultLeaseTTL)
	if err != nil {
		return "", false, fmt.Errorf("lease %s: %w", p, err)
	}
	if lf == nil || lf.rec.Token == "" {
		return "", false, nil
	}
	return lf.rec.Token, true, nil
}

// Stamp is the lease a durable record was written under: the token of
// the attempt that held it and the generation it held. Records of a
// remote lease carry it; a local lock's (the kernel's, with no
// generations) carry none, and so are never left out.
type Stamp struct {
	Token      string `json:"lease_token,omitempty"`
	Generation int64  `json:"lease_generation,omitempty"`
}

// Stamped returns the stamp of the lease that stamp (Leases.Stamp) reads,
// or none when stamp is nil (a local lock).
func Stamped(stamp func() (string, int64)) Stamp {
	if stamp == nil {
		return Stamp{}
	}
	t, g := stamp()
	return Stamp{Token: t, Generation: g}
}

// Superseded is the set of attempts that lost a remote lease to a
// takeover, as the lease's current generation lists them: the records
// they stamped are left out by every reader that resumes from them or
// proves coverage with them. The zero value (no lease folder, a local
// lock) supersedes nothing.
type Superseded struct {
	tokens map[string]bool
	// lease names the lease folder, for messages.
	lease string
	// tookOver is the token of the attempt the reading run took the lease
	// over from ("" if it took it free, or reads another's lease).
	tookOver string
}

// TakenFrom reports whether the run that reads took the lease over from
// the attempt that stamped st. The records that attempt left are the
// run's inheritance when it opens the state (it goes on from them and
// stamps them anew, as its own); those that land afterwards are late.
func (s Superseded) TakenFrom(st Stamp) bool {
	return st.Token != "" && st.Token == s.tookOver
}

// Of reports whether the attempt that stamped st lost the lease to
// another: an unstamped record (a local run's, or one of a rekey from
// before stamps) never did.
func (s Superseded) Of(st Stamp) bool {
	return st.Token != "" && s.tokens[st.Token]
}

// Why says, for a log line, why a record stamped st is left out.
func (s Superseded) Why(st Stamp) string {
	return fmt.Sprintf("it was written under lease generation %d by an attempt another took the lease %s from", st.Generation, s.lease)
}

// ReadSuperseded reads which attempts lost the remote lease folder p to a
// takeover. A path that is no lease folder (a local lock file, or no
// lease yet) supersedes nothing.
func ReadSuperseded(fsys vfs.FS, p string) (Superseded, error) {
	out := Superseded{lease: p}
	fi, err := fsys.Stat(p)
	if errors.Is(err, iofs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("lease %s: %w", p, err)
	}
	if !fi.IsDir() {
		return out, nil
	}
	_, lf, err := currentLease(fsys, p, DefaultLeaseTTL)
	if err != nil {
		return out, fmt.Errorf("lease %s: %w", p, err)
	}
	if lf != nil && len(lf.rec.Superseded) > 0 {
		out.tokens = map[string]bool{}
		for _, t := range lf.rec.Superseded {
			out.tokens[t] = true
		}
	}
	return out, nil
}

// Superseded returns a reader of the attempts that lost the remote lease
// taken at where (ReadSuperseded, through the lease's own file system),
// or nil for a local lock or a lease not taken.
func (s *Leases) Superseded(where string) func() (Superseded, error) {
	if s == nil {
		return nil
	}
	l := s.remote[where]
	if l == nil {
		return nil
	}
	return func() (Superseded, error) {
		sup, err := ReadSuperseded(l.fs, l.loc.Path)
		sup.lease, sup.tookOver = l.loc.URL, l.tookOver
		return sup, err
	}
}

// LeaseLive reports whether the lease file p is held by a live run,
// without taking it (a status poll must never make a task's start fail):
// on HDFS or an object store, a current generation neither released nor
// past its expiry; on a local folder, a lock file whose owner process is
// alive on this host.
func LeaseLive(fsys vfs.FS, p string) bool {
	if _, ok := fsys.(vfs.Local); ok {
		b, err := os.ReadFile(p)
		var rec leaseRecord
		if err != nil || json.Unmarshal(b, &rec) != nil || rec.PID == 0 {
			return false
		}
		return rec.Host == self().Host && processAlive(rec.PID)
	}
	if fi, err := fsys.Stat(p); err == nil && !fi.IsDir() {
		// The single lease file of a rekey from before generations.
		lf, err := readLeaseFile(fsys, p, DefaultLeaseTTL)
		return err == nil && lf.rec.Token != "" && time.Now().Before(lf.rec.Expires)
	}
	_, lf, err := currentLease(fsys, p, DefaultLeaseTTL)
	return err == nil && lf != nil && lf.rec.Token != "" && !lf.rec.Released && time.Now().Before(lf.rec.Expires)
}

// processAlive reports whether a process with this PID exists here.
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// Check is the fence of the run's durable state writes: nil while the run
// holds every lease it took, else the loss (an error matching
// ErrLeaseLost, which also stops the run) or the error that kept a lease
// from being checked. A nil *Leases (a run holding none) holds nothing
// to lose.
func (s *Leases) Check() error {
	if s == nil {
		return nil
	}
	if err := s.Lost(); err != nil {
		return err
	}
	for _, f := range s.fences {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// AddFence adds check to what Check asks, as a remote lease's own check
// is: a test stands one in for a lease another run takes, to prove the
// run asks the fence before every write.
func (s *Leases) AddFence(check func() error) {
	s.fences = append(s.fences, check)
}

// Lose records the first lease lost and ends the run (see Bind): the run
// calls it too, when a write shows that another run took its state.
func (s *Leases) Lose(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.lost)
	})
}

// Lost is the first lease lost, or nil.
func (s *Leases) Lost() error {
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

// Bind returns ctx, ended with the lease's error when a lease is lost:
// the run then stops as it would on an interrupt.
func (s *Leases) Bind(ctx context.Context) context.Context {
	if s == nil {
		return ctx
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		defer cancel(nil)
		select {
		case <-s.lost:
			cancel(s.Lost())
		case <-ctx.Done():
		case <-s.released:
		}
	}()
	return ctx
}

// Confirm asks the leases, while the run still holds them, whether a
// failure was a takeover in disguise: a run whose state another run took
// over by force can fail a write before any renewal or fence has noticed
// (the new holder swept the old one's temporary files as strays), and
// must then end as a lost lease (a retry for a scheduler) rather than
// with the write's error. When the check finds a lease lost, it records
// the loss (Lose), which Explain then reports; err is returned as it is.
// Call it before Release: a released lease reads as not held.
func (s *Leases) Confirm(err error) error {
	if s == nil || err == nil || s.Lost() != nil || errors.Is(err, ErrLeaseLost) {
		return err
	}
	if c := s.Check(); errors.Is(c, ErrLeaseLost) {
		s.Lose(c)
	}
	return err
}

// Explain returns the error a run ends with: a lost lease, which stopped
// it, over the interrupt it caused.
func (s *Leases) Explain(err error) error {
	if s == nil || err == nil {
		return err
	}
	if lost := s.Lost(); lost != nil {
		return fmt.Errorf("%w (the run stopped: %v)", lost, err)
	}
	return err
}

// Release gives every lease back, the last taken first.
func (s *Leases) Release() error {
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

// lockLocal holds the lock file p with flock. Its holder removes the file
// when it lets go (so a run, or a start that failed, leaves no lock file
// behind), which a locker must allow for: it may open the file just before
// the holder removes it and lock a file no longer at p while a third run
// creates and locks a new one. So once locked, the file must still be the
// one at p (same inode), else the lock is dropped and taken again.
func lockLocal(p, what string) (*localLease, error) {
	name := filepath.FromSlash(p)
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
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
		held, err := os.Stat(name)
		mine, ferr := f.Stat()
		if ferr != nil {
			f.Close()
			return nil, fmt.Errorf("lease for %s: %w", what, ferr)
		}
		if err != nil || !os.SameFile(held, mine) {
			// Removed (and maybe made anew) by the holder that let go
			// between our open and our lock: take the one at p now.
			f.Close()
			if attempt == 100 {
				return nil, fmt.Errorf("lease for %s: %s keeps changing under the lock; another process is creating and removing it", what, p)
			}
			continue
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
		return &localLease{f: f, name: name}, nil
	}
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

// localLease is a held flock on the file at name.
type localLease struct {
	f    *os.File
	name string
}

// release removes the lock file while it still holds the lock (lockLocal
// checks that the file it locked is still the one at the path), then
// drops the lock by closing the file.
func (l *localLease) release() error {
	err := os.Remove(l.name)
	if errors.Is(err, iofs.ErrNotExist) {
		err = nil
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// The remote lease is a folder of generations. Its path (the lease file's
// name in earlier rekeys) is a folder holding files g0000000000000001,
// g0000000000000002, ..., each a leaseRecord written once and never
// changed: the highest generation says who holds the state. Every change
// of hands is one compare-and-swap, the exclusive create of the next
// generation (the NameNode's create without overwrite on HDFS,
// If-None-Match: * on S3 and Azure, ifGenerationMatch=0 on GCS):
//
//   - a renewal by the holder of generation N creates N+1 with a later
//     expiry;
//   - a takeover by another run, when N expired or it was told
//     --force-takeover, creates N+1 naming the token it took over;
//   - a release creates N+1 marked released, which the next run takes at
//     once.
//
// Of two runs that race for N+1 exactly one creates it; the other finds
// it there and knows it lost. So a renewal that stalled (its client
// retried through a NameNode outage) and lands after a takeover finds
// N+1 taken and cannot overwrite it, and a release that lands late cannot
// remove the new holder's lease: neither writes anything over another
// run's generation. (The first protocol rewrote one file with temp and
// rename, and HDFS's rename replaces its destination: it could not
// refuse.)
//
// Old generations are removed by the holder after each change, so the
// folder holds a few files. A removed generation could be created again
// by a run that stalled before it was taken from it, so a create alone
// does not prove a win: the creator then lists the folder, and a higher
// generation there (removal only ever happens below one) means its file
// is a stray, and that it lost. For the same reason stillHeld, the fence
// every durable state write checks first, lists the folder: the state is
// this run's while its generation is the highest there.

// leaseGenPrefix starts a generation's file name; the number is
// zero-padded so names sort as numbers do.
const leaseGenPrefix = "g"

// leaseGenName is generation g's file name.
func leaseGenName(g int64) string { return fmt.Sprintf("%s%016d", leaseGenPrefix, g) }

// parseLeaseGen is the generation a file name in a lease folder names,
// or 0 for another name (a temporary file, say).
func parseLeaseGen(name string) int64 {
	rest, ok := strings.CutPrefix(name, leaseGenPrefix)
	if !ok || len(rest) != 16 {
		return 0
	}
	g, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || g <= 0 {
		return 0
	}
	return g
}

// leaseGens lists the generations in the lease folder dir, lowest first;
// a missing folder has none.
func leaseGens(fsys vfs.FS, dir string) ([]int64, error) {
	infos, err := fsys.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list lease folder %s: %w", dir, err)
	}
	var gens []int64
	for _, fi := range infos {
		if g := parseLeaseGen(fi.Name()); g > 0 && !fi.IsDir() {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// currentLease reads the highest generation in the lease folder dir: its
// number and file, or 0 and nil when the folder holds none.
func currentLease(fsys vfs.FS, dir string, ttl time.Duration) (int64, *leaseFile, error) {
	for range 5 {
		gens, err := leaseGens(fsys, dir)
		if err != nil || len(gens) == 0 {
			return 0, nil, err
		}
		g := gens[len(gens)-1]
		lf, err := readLeaseFile(fsys, path.Join(dir, leaseGenName(g)), ttl)
		if errors.Is(err, iofs.ErrNotExist) {
			continue // a holder removed it below a newer one just listed after
		}
		if err != nil {
			return 0, nil, err
		}
		return g, lf, nil
	}
	return 0, nil, fmt.Errorf("lease folder %s changed five times while it was read", dir)
}

// fileLease is a held remote lease (a folder of generations), renewed
// until released.
type fileLease struct {
	fs     vfs.ExclusiveFS
	loc    *vfs.Location // loc.Path is the lease folder
	what   string
	o      LeaseOptions
	onLost func(error)

	// mu guards what the renewal changes and stillHeld reads from the
	// run's writers: the generation held, its record, and the loss.
	mu   sync.Mutex
	gen  int64
	rec  leaseRecord
	lost error
	// changing is closed when the change of generation in flight (a
	// renewal or a release) is decided; nil while none is. A fence
	// check that finds a generation above its own waits for it: that
	// may be this run's own renewal, landed but not yet counted.
	changing chan struct{}

	stop, done chan struct{}
	stopOnce   sync.Once

	// tookOver is the token of the attempt this run took the lease from,
	// when it took it over (set once, on taking it).
	tookOver string
}

// leaseFile is a lease file as read: its record and its bytes.
type leaseFile struct {
	rec leaseRecord
	raw []byte
}

// now is the lease's clock: time.Now unless a test gives another.
func (o LeaseOptions) now() time.Time {
	if o.Clock != nil {
		return o.Clock()
	}
	return time.Now()
}

// acquireFile takes the lease in the folder loc.Path: it creates the next
// generation exclusively when the folder holds none, a released one, or
// one that expired (or any, when o.Force says so); a live lease of
// another run is refused.
func acquireFile(fsys vfs.ExclusiveFS, loc *vfs.Location, what string, o LeaseOptions) (*fileLease, error) {
	l := &fileLease{fs: fsys, loc: loc, what: what, o: o, stop: make(chan struct{}), done: make(chan struct{})}
	l.rec = leaseRecord{Owner: self(), Token: newToken(16)}
	if err := l.retireSingleFile(); err != nil {
		return nil, err
	}
	if err := fsys.MkdirAll(loc.Path); err != nil {
		return nil, fmt.Errorf("lease for %s: %w", what, err)
	}
	// o.Force takes the lease from the run that held it at the first
	// look, also after that run renewed it; a run that took the lease
	// meanwhile is not taken from again, or two runs told
	// --force-takeover (a YARN retry beside its first attempt) would take
	// it from each other in turn.
	var forceOver *string
	for i := range 5 {
		g, cur, err := currentLease(fsys, loc.Path, o.TTL)
		if err != nil {
			return nil, fmt.Errorf("lease for %s: %w", what, err)
		}
		live := cur != nil && !cur.rec.Released
		if i == 0 && live && o.Force {
			forceOver = &cur.rec.Token
		}
		var took *leaseFile
		if live {
			forced := forceOver != nil && cur.rec.Token == *forceOver
			if !forced && o.now().Before(cur.rec.Expires) {
				return nil, &LeasedError{State: what, Lease: loc.URL, Owner: cur.rec.Owner, Expires: cur.rec.Expires}
			}
			took = cur
		}
		rec := l.rec
		if cur != nil {
			rec.Superseded = cur.rec.Superseded
		}
		if took != nil {
			rec.TookOver = took.rec.Token
			rec.Superseded = supersede(rec.Superseded, took.rec.Token)
		}
		won, err := l.cas(g, rec)
		if err != nil {
			return nil, fmt.Errorf("lease for %s: %w", what, err)
		}
		if !won {
			continue // another run got g+1 first: judge its lease
		}
		if took != nil {
			l.tookOver = took.rec.Token
			l.logTakeover(took)
		}
		l.sweep()
		return l, nil
	}
	return nil, fmt.Errorf("lease for %s: %s changed hands five times while this run tried to take it; try again", what, loc.URL)
}

// retireSingleFile deals with a lease an earlier rekey left: a single
// file where the folder goes. A live one (its owner may still run, and
// knows nothing of generations) is refused like any live lease, or taken
// with o.Force; an expired or forced one is removed. That removal is not
// a compare-and-swap (the earlier rekey's own takeover was not either);
// two new runs removing it at once both go on to race for generation 1,
// which one wins.
func (l *fileLease) retireSingleFile() error {
	fi, err := l.fs.Stat(l.loc.Path)
	if errors.Is(err, iofs.ErrNotExist) || (err == nil && fi.IsDir()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lease for %s: %w", l.what, err)
	}
	old, err := readLeaseFile(l.fs, l.loc.Path, l.o.TTL)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lease for %s: %w", l.what, err)
	}
	if !l.o.Force && l.o.now().Before(old.rec.Expires) {
		return &LeasedError{State: l.what, Lease: l.loc.URL, Owner: old.rec.Owner, Expires: old.rec.Expires,
			Hint: "the lease file is of a rekey from before lease generations"}
	}
	if err := l.fs.Remove(l.loc.Path); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("lease for %s: removing the earlier rekey's lease file %s: %w", l.what, l.loc.URL, err)
	}
	l.logTakeover(old)
	return nil
}

// genPath is generation g's file in the lease folder.
func (l *fileLease) genPath(g int64) string { return path.Join(l.loc.Path, leaseGenName(g)) }

// cas is the compare-and-swap every change of the lease is: it creates
// generation g+1 holding rec (its generation and times set here), and
// reports whether this run made it the current generation. False means
// another run holds g+1 or a later generation; only errors of the file
// system are errors. On a win the lease holds g+1 and rec.
func (l *fileLease) cas(g int64, rec leaseRecord) (bool, error) {
	done := make(chan struct{})
	l.mu.Lock()
	l.changing = done
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.changing = nil
		l.mu.Unlock()
		close(done)
	}()
	next := g + 1
	now := l.o.now()
	rec.Generation, rec.Renewed, rec.Expires = next, now, now.Add(l.o.TTL)
	err := l.create(l.genPath(next), rec)
	if errors.Is(err, iofs.ErrExist) {
		// Ours, when an earlier try's answer was lost (the create landed);
		// a file naming no owner (its writer is still writing, or died)
		// is another run's.
		lf, rerr := readLeaseFile(l.fs, l.genPath(next), l.o.TTL)
		if rerr != nil || lf.rec.Token != l.rec.Token || lf.rec.Released != rec.Released {
			return false, nil
		}
		rec = lf.rec
	} else if err != nil {
		return false, fmt.Errorf("create %s: %w", l.genPath(next), err)
	}
	// A generation removed below a newer one can be created again by a
	// run that stalled: then the newer one is still there.
	gens, err := leaseGens(l.fs, l.loc.Path)
	if err != nil {
		return false, err
	}
	if len(gens) > 0 && gens[len(gens)-1] > next {
		return false, nil
	}
	l.mu.Lock()
	l.gen, l.rec = next, rec
	l.mu.Unlock()
	return true, nil
}

// create writes rec to the new file p, if no file p is there.
func (l *fileLease) create(p string, rec leaseRecord) error {
	b, _ := json.Marshal(rec)
	w, err := l.fs.CreateExclusive(p)
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

// sweep removes the generations below the one held. Failing to is
// harmless: the next change of the lease sweeps again.
func (l *fileLease) sweep() {
	l.mu.Lock()
	held := l.gen
	l.mu.Unlock()
	gens, err := leaseGens(l.fs, l.loc.Path)
	if err != nil {
		return
	}
	for _, g := range gens {
		if g < held {
			l.fs.Remove(l.genPath(g))
		}
	}
}

// logTakeover says whose lease this run took over, and why it could.
func (l *fileLease) logTakeover(old *leaseFile) {
	why := fmt.Sprintf("it expired at %s", old.rec.Expires.Format(time.RFC3339))
	if l.o.Force && l.o.now().Before(old.rec.Expires) {
		why = "--force-takeover"
	}
	l.o.Logf("took over the lease on %s (%s) from %s: %s", l.what, l.loc.URL, old.rec.Owner, why)
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
	t := time.NewTimer(l.o.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		err := l.renew()
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			err = l.lostIfExpired(err)
		}
		switch {
		case err == nil:
			t.Reset(l.o.TTL / 3)
		case errors.Is(err, ErrLeaseLost):
			l.onLost(l.setLost(err))
			return
		default:
			l.o.Logf("renewing the lease %s: %v (trying again)", l.loc.URL, err)
			t.Reset(max(l.o.TTL/20, 50*time.Millisecond))
		}
	}
}

// setLost records the loss (the first one stays) and returns it.
func (l *fileLease) setLost(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = err
	}
	return l.lost
}

// held is the generation held and its record, or the loss.
func (l *fileLease) held() (int64, leaseRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen, l.rec, l.lost
}

// renew moves the lease to the next generation with a new expiry, if the
// generation this run holds is still the current one. Finding the next
// generation another run's is ErrLeaseLost; an error of the file system
// is returned as it is (keep tries again while the lease lasts).
func (l *fileLease) renew() error {
	g, rec, lost := l.held()
	if lost != nil {
		return lost
	}
	rec.TookOver = ""
	won, err := l.cas(g, rec)
	if err != nil {
		return err
	}
	if !won {
		return l.lostTo(g)
	}
	l.sweep()
	return nil
}

// lostTo is the ErrLeaseLost of a run whose generation g is no longer the
// current one, naming the holder when it can be read.
func (l *fileLease) lostTo(g int64) error {
	cur, lf, err := currentLease(l.fs, l.loc.Path, l.o.TTL)
	switch {
	case err == nil && lf != nil && lf.rec.Released:
		return fmt.Errorf("%w: %s: another run took the lease %s (generation %d) after this run's generation %d and has released it", ErrLeaseLost, l.what, l.loc.URL, cur, g)
	case err == nil && lf != nil:
		return fmt.Errorf("%w: %s is now held by %s (lease %s, generation %d; this run held %d)", ErrLeaseLost, l.what, lf.rec.Owner, l.loc.URL, cur, g)
	}
	return fmt.Errorf("%w: %s: another run took the lease %s after this run's generation %d", ErrLeaseLost, l.what, l.loc.URL, g)
}

// stillHeld is the fence a durable state write checks first: nil while
// this run's generation is the highest in the lease folder, else
// ErrLeaseLost (reported to onLost too, which stops the run). A lease
// past its expiry unrenewed is lost as well: another run may take it
// over at any moment. An error listing the folder is returned as it is;
// the write must not go ahead then either. The generation above this
// run's while its own renewal is in flight may be that renewal's: it
// counts when its record names this run, and one whose record is not
// written yet is waited for.
func (l *fileLease) stillHeld() error {
	// mine is a generation above the one counted held, found to be this
	// run's renewal, landed: held while it is the highest. (The verdict
	// is the listing's, which is why a listing always comes last.)
	var mine int64
	for {
		g, rec, lost := l.held()
		if lost != nil {
			return lost
		}
		if rec.Released {
			return fmt.Errorf("%w: %s: this run released its lease %s", ErrLeaseLost, l.what, l.loc.URL)
		}
		if !l.o.now().Before(rec.Expires) {
			err := l.setLost(fmt.Errorf("%w: %s: lease %s (generation %d) expired at %s before it was renewed", ErrLeaseLost, l.what, l.loc.URL, g, rec.Expires.Format(time.RFC3339Nano)))
			l.report(err)
			return err
		}
		gens, err := leaseGens(l.fs, l.loc.Path)
		if err != nil {
			return fmt.Errorf("checking the lease on %s: %w", l.what, err)
		}
		var top int64
		if len(gens) > 0 {
			top = gens[len(gens)-1]
		}
		l.mu.Lock()
		cur, released, changing := l.gen, l.rec.Released, l.changing
		l.mu.Unlock()
		if top == cur && released {
			continue // this run's release was decided meanwhile: judged above
		}
		if top == cur || (mine != 0 && top == mine) {
			return nil // a renewal decided during the listing counts
		}
		if changing != nil && top == cur+1 {
			// This run's renewal creates cur+1: landed (its record names
			// this run) it is this run's, if still the highest at the
			// next listing; being written (no owner yet, on HDFS) it is
			// either run's, which the renewal decides.
			lf, err := readLeaseFile(l.fs, l.genPath(top), l.o.TTL)
			switch {
			case err == nil && lf.rec.Token == l.rec.Token && !lf.rec.Released:
				mine = top
				continue
			case err == nil && lf.rec.Token != "":
				// another run's: lost, whatever the renewal finds
			case err == nil || errors.Is(err, iofs.ErrNotExist):
				if l.o.Await != nil {
					l.o.Await(changing)
				} else {
					<-changing
				}
				continue
			default:
				return fmt.Errorf("checking the lease on %s: %w", l.what, err)
			}
		}
		err = l.setLost(l.lostTo(cur))
		l.report(err)
		return err
	}
}

// report passes a loss to onLost, when the lease has one.
func (l *fileLease) report(err error) {
	if l.onLost != nil {
		l.onLost(err)
	}
}

// lostIfExpired returns ErrLeaseLost when the lease is (all but) expired
// and could not be renewed: past its expiry another run may take it over,
// so the run must stop before then. A tenth of the lifetime is kept in
// hand for the clocks of two hosts to disagree. Otherwise it returns err.
func (l *fileLease) lostIfExpired(err error) error {
	_, rec, _ := l.held()
	if l.o.now().Before(rec.Expires.Add(-l.o.TTL / 10)) {
		return err
	}
	return fmt.Errorf("%w: %s: lease %s: it expired before it could be renewed: %v", ErrLeaseLost, l.what, l.loc.URL, err)
}

// halt stops the renewal, once.
func (l *fileLease) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// release stops the renewal and gives the lease back: the next generation,
// marked released, if the generation held is still the current one. A
// lease another run took is left alone.
func (l *fileLease) release() error {
	l.halt()
	defer l.loc.Close()
	return l.giveBack()
}

// giveBack is release without the renewal to stop.
func (l *fileLease) giveBack() error {
	g, rec, lost := l.held()
	if lost != nil {
		return nil // another run's now: nothing of ours to give back
	}
	rec.Released, rec.TookOver = true, ""
	won, err := l.cas(g, rec)
	if err != nil {
		return fmt.Errorf("releasing the lease %s: %w", l.loc.URL, err)
	}
	if won {
		l.sweep()
	}
	return nil
}
