package pipeline

import (
	"context"
	"errors"
	iofs "io/fs"
	"net/url"
	"sync"

	"github.com/rekeyhq/rekey/internal/vfstest"
	"github.com/rekeyhq/rekey/vfs"
)

// The whole-protocol schedule test (schedule_whole_test.go) runs a job's
// tasks over a memory file system served under the simfs:// scheme, one
// store per schedule (the URL's host names it). Each task attempt sees
// the store through its own killFS, which counts the attempt's durable
// writes (a file closed, an exclusive create, a rename, a removal) and,
// at the write the schedule drew, kills the attempt: its context is
// cancelled and every later operation of it fails, as a process that
// died would do nothing more. At another drawn write it may instead
// start a duplicate attempt and wait for it, so the two interleave at
// that write.

// errKilled is what every operation of a killed attempt fails with.
var errKilled = errors.New("simfs: the attempt was killed")

// simStores are the schedules' stores by host.
var simStores = struct {
	sync.Mutex
	m map[string]*simStore
}{m: map[string]*simStore{}}

var registerSimFS sync.Once

// simStore is one schedule's file system.
type simStore struct {
	mem *vfs.Mem
	// objectStore gives the store an object store's semantics: whole
	// objects at Close, and exclusive creates decided at Close
	// (vfstest.LateExclusive); otherwise HDFS's (a name taken at create).
	objectStore bool

	// peer is the store beside it that serves the same attempts: an
	// object-store world keeps its checkpoints (which need appends) on
	// an HDFS-like peer.
	peer *simStore

	mu  sync.Mutex
	cur *simAttempt // the attempt whose opens are being served
}

// newSimStore registers a store under host.
func newSimStore(host string, objectStore bool) *simStore {
	registerSimFS.Do(func() { vfs.Register(dialSim, "simfs") })
	s := &simStore{mem: vfs.NewMem(), objectStore: objectStore}
	simStores.Lock()
	simStores.m[host] = s
	simStores.Unlock()
	return s
}

func dropSimStore(host string) {
	simStores.Lock()
	delete(simStores.m, host)
	simStores.Unlock()
}

func dialSim(u *url.URL, _ vfs.Options) (vfs.WriteFS, func() error, error) {
	simStores.Lock()
	s := simStores.m[u.Host]
	simStores.Unlock()
	if s == nil {
		return nil, nil, &iofs.PathError{Op: "dial", Path: u.String(), Err: iofs.ErrNotExist}
	}
	s.mu.Lock()
	a := s.cur
	s.mu.Unlock()
	if a == nil {
		a = &simAttempt{} // the harness's own look: never killed
	}
	k := &killFS{s: s, a: a}
	if s.objectStore {
		return &killObjFS{k}, nil, nil
	}
	return k, nil, nil
}

// serve makes a the attempt whose opens the store serves, and returns
// the one served before.
func (s *simStore) serve(a *simAttempt) *simAttempt {
	if s.peer != nil {
		s.peer.serve(a)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur
	s.cur = a
	return old
}

// simAttempt is one task attempt's view of its durable writes.
type simAttempt struct {
	// killAt is the durable write (1-based) at which the attempt dies;
	// 0: never. killDone says the write itself lands first.
	killAt   int
	killDone bool
	// dupAt is the write before which dup runs (another attempt, to its
	// end); 0: never.
	dupAt int
	dup   func()
	// cancel cancels the attempt's context.
	cancel func()
	// trace, when set, is told every durable write (-schedule.trace).
	trace func(n int, op string)

	mu     sync.Mutex
	writes int
	dead   bool
	diedAt string
}

func (a *simAttempt) killed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dead
}

func (a *simAttempt) alive() error {
	if a.killed() {
		return errKilled
	}
	return nil
}

func (a *simAttempt) kill(op string) {
	a.mu.Lock()
	a.dead, a.diedAt = true, op
	a.mu.Unlock()
	if a.cancel != nil {
		a.cancel()
	}
}

// durable plays one durable write, op, of the attempt: it may start the
// duplicate first, and kill the attempt before or after it.
func (a *simAttempt) durable(op string, f func() error) error {
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		return errKilled
	}
	a.writes++
	n := a.writes
	a.mu.Unlock()
	if a.trace != nil {
		a.trace(n, op)
	}
	if n == a.dupAt && a.dup != nil {
		a.dup()
	}
	if n == a.killAt && !a.killDone {
		a.kill("before " + op)
		return errKilled
	}
	err := f()
	if n == a.killAt {
		a.kill("after " + op)
	}
	return err
}

// killFS is the store as one attempt sees it.
type killFS struct {
	s *simStore
	a *simAttempt
}

func (k *killFS) String() string { return "simfs" }

func (k *killFS) Open(name string) (vfs.File, error) {
	if err := k.a.alive(); err != nil {
		return nil, err
	}
	f, err := k.s.mem.Open(name)
	if err != nil {
		return nil, err
	}
	return &killFile{File: f, a: k.a}, nil
}

func (k *killFS) Stat(name string) (iofs.FileInfo, error) {
	if err := k.a.alive(); err != nil {
		return nil, err
	}
	return k.s.mem.Stat(name)
}

func (k *killFS) ReadDir(name string) ([]iofs.FileInfo, error) {
	if err := k.a.alive(); err != nil {
		return nil, err
	}
	return k.s.mem.ReadDir(name)
}

func (k *killFS) Create(name string) (vfs.WriteFile, error) {
	if err := k.a.alive(); err != nil {
		return nil, err
	}
	w, err := k.s.mem.Create(name)
	if err != nil {
		return nil, err
	}
	return &killWriter{WriteFile: w, a: k.a, op: "close " + name}, nil
}

func (k *killFS) CreateExclusive(name string) (vfs.WriteFile, error) {
	if err := k.a.alive(); err != nil {
		return nil, err
	}
	if k.s.objectStore {
		// The name is taken at Close: the write that counts is the close.
		w, err := vfstest.LateExclusive{Mem: k.s.mem}.CreateExclusive(name)
		if err != nil {
			return nil, err
		}
		return &killWriter{WriteFile: w, a: k.a, op: "exclusive close " + name}, nil
	}
	// HDFS takes the name at create: a name that exists is refused at
	// once. A writer killed between the create and the close leaves an
	// empty file, which every later task meets as a record not whole
	// (after a wait of 10 s each: hfiles' identityWait, kindWait,
	// regionMapWait; --fresh does not remove identity.json); the
	// schedules leave that case out to stay fast, and play the create
	// and the close as one durable write at the close.
	if _, err := k.s.mem.Stat(name); err == nil {
		return nil, &iofs.PathError{Op: "create", Path: name, Err: iofs.ErrExist}
	}
	w, err := vfstest.LateExclusive{Mem: k.s.mem}.CreateExclusive(name)
	if err != nil {
		return nil, err
	}
	return &killWriter{WriteFile: w, a: k.a, op: "exclusive create+close " + name}, nil
}

// Append implements vfs.Appender (HDFS semantics): what is written is
// added at Close, the write that counts.
func (k *killFS) Append(name string) (vfs.WriteFile, error) {
	if err := k.a.alive(); err != nil {
		return nil, err
	}
	if k.s.objectStore {
		return nil, &iofs.PathError{Op: "append", Path: name, Err: errors.ErrUnsupported}
	}
	if _, err := k.s.mem.Stat(name); err != nil {
		return nil, err
	}
	return &appendWriter{k: k, name: name}, nil
}

type appendWriter struct {
	k    *killFS
	name string
	buf  []byte
}

func (w *appendWriter) Name() string { return w.name }
func (w *appendWriter) Sync() error  { return w.k.a.alive() }
func (w *appendWriter) Write(p []byte) (int, error) {
	if err := w.k.a.alive(); err != nil {
		return 0, err
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *appendWriter) Close() error {
	return w.k.a.durable("append "+w.name, func() error {
		old, err := vfs.ReadFile(w.k.s.mem, w.name)
		if err != nil {
			return err
		}
		w.k.s.mem.WriteFile(w.name, append(old, w.buf...))
		return nil
	})
}

func (k *killFS) MkdirAll(name string) error {
	if err := k.a.alive(); err != nil {
		return err
	}
	return k.s.mem.MkdirAll(name)
}

func (k *killFS) Rename(oldname, newname string) error {
	return k.a.durable("rename "+oldname+" "+newname, func() error { return k.s.mem.Rename(oldname, newname) })
}

func (k *killFS) Remove(name string) error {
	return k.a.durable("remove "+name, func() error { return k.s.mem.Remove(name) })
}

func (k *killFS) RemoveAll(name string) error {
	return k.a.durable("remove all "+name, func() error { return k.s.mem.RemoveAll(name) })
}

// killObjFS is killFS on an object store: Create writes whole objects.
type killObjFS struct{ *killFS }

// WritesWholeObjects marks the store as an object store (vfs.WholeWriter).
func (killObjFS) WritesWholeObjects() {}

type killFile struct {
	vfs.File
	a *simAttempt
}

func (f *killFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.a.alive(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

type killWriter struct {
	vfs.WriteFile
	a  *simAttempt
	op string
}

func (w *killWriter) Write(p []byte) (int, error) {
	if err := w.a.alive(); err != nil {
		return 0, err
	}
	return w.WriteFile.Write(p)
}

func (w *killWriter) Sync() error { return w.a.alive() }

func (w *killWriter) Close() error {
	return w.a.durable(w.op, w.WriteFile.Close)
}

// attemptContext gives a the cancel of a new context.
func attemptContext(a *simAttempt) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	return ctx, cancel
}
