package state

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// The lease protocol against the real stores: the exclusive create each
// one offers is what makes a change of hands one compare-and-swap, so
// each is tested here, not only the in-memory one of the simulation.
// HDFS needs the mini cluster (testenv/bin/up), S3 the versitygw server
// (testenv/bin/s3-up), Azure the Azurite emulator
// (testenv/bin/azurite-install); a store that is not there is skipped,
// or fails the test under REKEY_REQUIRE_CLUSTER=1. GCS runs in process
// (fake-gcs-server); a local folder always runs.

// leaseStore is a store a lease folder can live on.
type leaseStore struct {
	name string
	// open returns the store and a fresh folder on it, removed after.
	open func(t *testing.T) (vfs.ExclusiveFS, string)
}

var leaseStores = []leaseStore{
	{"Local", func(t *testing.T) (vfs.ExclusiveFS, string) {
		return vfs.Local{}, t.TempDir()
	}},
	{"HDFS", func(t *testing.T) (vfs.ExclusiveFS, string) {
		st := testenv.Require(t)
		h, err := hdfs.Dial(st.NameNode)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		dir := fmt.Sprintf("/tmp/%slease-store-%d", os.Getenv("REKEY_TEST_PREFIX"), time.Now().UnixNano())
		t.Cleanup(func() { h.RemoveAll(dir) })
		return h, dir
	}},
	{"S3", func(t *testing.T) (vfs.ExclusiveFS, string) {
		s := s3test.Dial(t, testenv.RequireS3(t))
		return s, s3test.Prefix(t, s, "lease-store")
	}},
	{"GCS", func(t *testing.T) (vfs.ExclusiveFS, string) {
		g := s3test.StartGCS(t).Dial(t)
		return g, s3test.Prefix(t, g, "lease-store")
	}},
	{"Azure", func(t *testing.T) (vfs.ExclusiveFS, string) {
		a := s3test.StartAzurite(t).Dial(t)
		return a, s3test.Prefix(t, a, "lease-store")
	}},
}

// stallFS stalls one exclusive create of a run while armed, at the
// request that decides it: the create itself on HDFS and a local disk
// (the name is taken there), the conditional PUT at Close on an object
// store (its HEAD before only answers early). The request is not sent
// until the stall is lifted, as a renewal retried through a NameNode
// outage or held up by a long pause is sent late. refused receives the
// store's answer to it.
type stallFS struct {
	vfs.ExclusiveFS
	mu      sync.Mutex
	armed   bool
	stalled chan struct{} // closed when a create stalls
	lift    chan struct{} // closed to let it go on
	refused chan error    // the stalled request's answer
}

func newStallFS(fsys vfs.ExclusiveFS) *stallFS {
	return &stallFS{ExclusiveFS: fsys, stalled: make(chan struct{}), lift: make(chan struct{}), refused: make(chan error, 1)}
}

func (s *stallFS) CreateExclusive(name string) (vfs.WriteFile, error) {
	s.mu.Lock()
	armed := s.armed
	s.armed = false
	s.mu.Unlock()
	if !armed {
		return s.ExclusiveFS.CreateExclusive(name)
	}
	if vfs.WritesWhole(s.ExclusiveFS) {
		w, err := s.ExclusiveFS.CreateExclusive(name)
		if err != nil {
			s.refused <- err
			return nil, err
		}
		return &stalledPut{WriteFile: w, s: s}, nil
	}
	close(s.stalled)
	<-s.lift
	w, err := s.ExclusiveFS.CreateExclusive(name)
	s.refused <- err
	return w, err
}

// stalledPut stalls an object's conditional PUT (its Close).
type stalledPut struct {
	vfs.WriteFile
	s *stallFS
}

func (p *stalledPut) Close() error {
	close(p.s.stalled)
	<-p.s.lift
	err := p.WriteFile.Close()
	p.s.refused <- err
	return err
}

func (s *stallFS) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

// TestLeaseStalledRenewalOnEveryStore: the owner stalls at its renewal;
// another attempt takes the lease with --force-takeover. The old owner's
// fenced writes are refused (ErrLeaseLost) while its renewal still
// hangs, so it writes nothing more; its renewal, let go, lands after the
// takeover, cannot replace it and reports the loss; its release leaves
// the new owner's lease alone. The new owner holds the task throughout
// and renews and releases it.
func TestLeaseStalledRenewalOnEveryStore(t *testing.T) {
	for _, st := range leaseStores {
		t.Run(st.name, func(t *testing.T) {
			fsys, dir := st.open(t)
			var log logLines
			o := LeaseOptions{TTL: 3 * time.Second, Logf: log.Logf}
			where := dir + "/task.lease"
			stall := newStallFS(fsys)
			// The old owner, with its renewal and its fence as a run has
			// them (Leases.Take, with the store wrapped).
			old := NewLeases(o)
			a, err := acquireFile(stall, &vfs.Location{FS: stall, Path: where, URL: st.name + ":" + where}, "task", o)
			if err != nil {
				t.Fatal(err)
			}
			a.onLost = old.Lose
			old.AddFence(a.stillHeld)
			stall.arm()
			renewed := make(chan error, 1)
			go func() { renewed <- a.renew() }() // keep's step, by hand
			select {
			case <-stall.stalled:
			case <-time.After(10 * time.Second):
				t.Fatal("the renewal never came")
			}
			state := dir + "/state"
			write := func(ls *Leases, name string) error {
				if err := ls.Check(); err != nil {
					return err
				}
				return vfs.WriteFileAtomic(fsys, state+"-"+name, []byte(name))
			}

			fo := o
			fo.Force = true
			b, err := acquireFile(fsys, &vfs.Location{FS: fsys, Path: where, URL: st.name + ":" + where}, "task", fo)
			if err != nil {
				t.Fatalf("forced takeover: %v", err)
			}
			if !log.Has("took over the lease", "--force-takeover") {
				t.Errorf("takeover not logged:\n%s", &log)
			}
			if err := write(old, "old"); !errors.Is(err, ErrLeaseLost) {
				t.Errorf("the old owner's write while its renewal hangs: %v", err)
			}
			if ok, _ := vfs.Exists(fsys, state+"-old"); ok {
				t.Error("the old owner wrote its state after the takeover")
			}
			if !errors.Is(old.Lost(), ErrLeaseLost) {
				t.Errorf("the old owner's run was not stopped: %v", old.Lost())
			}

			close(stall.lift) // the renewal lands now, late
			if err := <-stall.refused; !errors.Is(err, iofs.ErrExist) {
				t.Errorf("%s answered the late renewal's exclusive create with %v, want a refusal (fs.ErrExist)", st.name, err)
			}
			if err := <-renewed; !errors.Is(err, ErrLeaseLost) {
				t.Errorf("the late renewal: %v", err)
			}
			if err := a.giveBack(); err != nil {
				t.Errorf("the old owner's release: %v", err)
			}
			g, cur, err := currentLease(fsys, where, o.TTL)
			if err != nil || cur == nil || cur.rec.Token != b.rec.Token || cur.rec.Released || g != b.gen {
				t.Fatalf("after the late renewal and release: generation %d %+v (%v); want the new owner's %d", g, cur, err, b.gen)
			}
			if err := b.stillHeld(); err != nil {
				t.Errorf("the new owner's fence: %v", err)
			}
			if err := b.renew(); err != nil {
				t.Errorf("the new owner's renewal: %v", err)
			}
			if err := b.giveBack(); err != nil {
				t.Fatal(err)
			}
			if _, cur, _ := currentLease(fsys, where, o.TTL); cur == nil || !cur.rec.Released {
				t.Errorf("after the new owner's release: %+v", cur)
			}
			if gens, _ := leaseGens(fsys, where); len(gens) > 2 {
				t.Errorf("generations left behind: %v", gens)
			}
		})
	}
}
