package state

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// The records of an attempt that lost its lease to a takeover, landed
// late: HDFS cannot refuse a rename or an append, so an attempt that
// passed its last fence check before the takeover can still write. These
// tests play such writes over a checkpoint on the local file system (its
// rename replaces the destination, as HDFS's overwriting rename does),
// with the lease folder on an in-memory file system whose exclusive
// create is atomic, as the NameNode's is.

// stampOf is what the records of the holder of l are stamped with.
func stampOf(l *fileLease) func() (string, int64) {
	return func() (string, int64) {
		g, rec, _ := l.held()
		return rec.Token, g
	}
}

// supersededIn reads the attempts that lost the fixture's lease.
func (f *casFixture) supersededIn() func() (Superseded, error) {
	return func() (Superseded, error) { return ReadSuperseded(f.fs, f.dir) }
}

// TestTakeoverListsTheSupersededAttempt: a takeover adds the token it
// took the lease from to the lease's list of superseded attempts, and
// every later generation (a renewal, a release, the next run's take of a
// released lease) carries the list; a release or an expiry nobody acted
// on supersedes nobody.
func TestTakeoverListsTheSupersededAttempt(t *testing.T) {
	f := newCASFixture(t, nil)
	a := f.mustTake(false)
	sup := func() Superseded {
		t.Helper()
		s, err := f.supersededIn()()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	stampA := Stamp{Token: a.rec.Token, Generation: 1}
	if sup().Of(stampA) {
		t.Fatal("the holder reads as superseded")
	}
	b := f.mustTake(true) // --force-takeover
	if !sup().Of(stampA) {
		t.Fatal("after a forced takeover, the attempt taken from is not superseded")
	}
	f.clock.add(20 * time.Second)
	if err := b.renew(); err != nil {
		t.Fatal(err)
	}
	if err := b.giveBack(); err != nil {
		t.Fatal(err)
	}
	c := f.mustTake(false)
	stampB := Stamp{Token: b.rec.Token, Generation: 2}
	if s := sup(); !s.Of(stampA) || s.Of(stampB) || s.Of(Stamp{Token: c.rec.Token}) || s.Of(Stamp{}) {
		t.Errorf("after a renewal, a release and a take of the released lease: A superseded %v (want true), B %v, C %v, unstamped %v (want false)",
			s.Of(stampA), s.Of(stampB), s.Of(Stamp{Token: c.rec.Token}), s.Of(Stamp{}))
	}
	// An expired lease taken over: its holder is superseded too.
	f.clock.add(2 * time.Minute)
	d := f.mustTake(false)
	if s := sup(); !s.Of(Stamp{Token: c.rec.Token}) || s.Of(Stamp{Token: d.rec.Token}) {
		t.Errorf("after the expired lease was taken over: C superseded %v, D %v", s.Of(Stamp{Token: c.rec.Token}), s.Of(Stamp{Token: d.rec.Token}))
	}
	// No lease folder (a local lock): nothing is superseded.
	if s, err := ReadSuperseded(f.fs, "/no/such.lease"); err != nil || s.Of(stampA) {
		t.Errorf("without a lease folder: %v, %v", s.Of(stampA), err)
	}
}

// renameHook is a checkpoint's file system with a hook called before
// each rename (it may block, as a stalled attempt's rename is sent late).
type renameHook struct {
	vfs.Appender
	before func(newname string)
}

func (h renameHook) Rename(o, n string) error {
	if h.before != nil {
		h.before(n)
	}
	return h.Appender.Rename(o, n)
}

// TestLateBaseRenameAfterTakeoverLeftOut: attempt A stalls in a
// compaction just before it renames its base into place; B takes the
// lease over by force, goes on from A's checkpoint, compacts (removing
// A's journals) and records two more splits; then A's rename lands over
// B's base. The next holder's load leaves A's base out, with a line that
// says so, and goes on from the copy of B's base in B's journal: the
// splits done are the ones B's checkpoint held. Before the stamps, A's
// base was taken as the checkpoint and named a journal B had removed:
// the load refused the checkpoint as damaged. Played on the local disk
// (its rename replaces the destination) with the lease in memory, and on
// the mini cluster's HDFS (rename2 with overwrite), lease and checkpoint
// both there.
func TestLateBaseRenameAfterTakeoverLeftOut(t *testing.T) {
	t.Run("Local", func(t *testing.T) {
		playLateBaseRename(t, newCASFixture(t, nil), vfs.Local{}, t.TempDir())
	})
	t.Run("HDFS", func(t *testing.T) {
		st := testenv.Require(t)
		h, err := hdfs.Dial(st.NameNode)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		dir := fmt.Sprintf("/tmp/%slate-base-%d", os.Getenv("REKEY_TEST_PREFIX"), time.Now().UnixNano())
		t.Cleanup(func() { h.RemoveAll(dir) })
		if err := h.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		f := newCASFixture(t, h)
		f.dir = dir + "/checkpoint.lease"
		start := time.Now()
		playLateBaseRename(t, f, h, dir)
		t.Logf("played on HDFS in %v", time.Since(start).Round(time.Millisecond))
	})
}

func playLateBaseRename(t *testing.T, f *casFixture, fsys vfs.Appender, dir string) {
	a := f.mustTake(false)
	fsA := &renameHook{Appender: fsys}
	sA := testStore(dir, fsA)
	sA.SetLease(stampOf(a), f.supersededIn())
	cA := &Checkpoint{Fingerprint: "fp", Splits: map[string]*SplitStats{}}
	if err := sA.Compact(cA); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2"} {
		cA.Splits[id] = done(id)
		if err := sA.Record(cA.Splits[id], nil); err != nil {
			t.Fatal(err)
		}
	}
	// A's next compaction stalls before its base's rename.
	stalled, land := make(chan struct{}), make(chan struct{})
	base := sA.loc.Path
	fsA.before = func(name string) {
		if name == base {
			close(stalled)
			<-land
		}
	}
	cA.Splits["s3"] = done("s3") // in A's late base only
	compacted := make(chan error, 1)
	go func() { compacted <- sA.Compact(cA) }()
	<-stalled

	b := f.mustTake(true)
	sB := testStore(dir, fsys)
	sB.SetLease(stampOf(b), f.supersededIn())
	lB, err := sB.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := doneIDs(lB); got != "s1,s2" || len(lB.Ignored) != 0 {
		t.Fatalf("B, taking over, goes on from A's checkpoint: done %s, ignored %q; want s1,s2 and nothing left out", got, lB.Ignored)
	}
	if err := sB.Compact(lB.Checkpoint); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s4", "s5"} {
		lB.Splits[id] = done(id)
		if err := sB.Record(lB.Splits[id], nil); err != nil {
			t.Fatal(err)
		}
	}
	close(land)
	if err := <-compacted; err != nil {
		t.Fatalf("A's late compaction: %v", err)
	}
	if err := b.giveBack(); err != nil {
		t.Fatal(err)
	}

	c := f.mustTake(false)
	sC := testStore(dir, fsys)
	sC.SetLease(stampOf(c), f.supersededIn())
	lC, err := sC.Load()
	if err != nil {
		t.Fatalf("the next holder's load after A's late rename: %v", err)
	}
	if got := doneIDs(lC); got != "s1,s2,s4,s5" {
		t.Errorf("after A's late base rename: done %s, want B's s1,s2,s4,s5", got)
	}
	if len(lC.Ignored) != 1 || !strings.Contains(lC.Ignored[0], "left out the base") || !strings.Contains(lC.Ignored[0], "lease generation 1") {
		t.Errorf("the load's account of what it left out: %q", lC.Ignored)
	}
	// And it goes on: its compaction and records load as they should.
	if err := sC.Compact(lC.Checkpoint); err != nil {
		t.Fatal(err)
	}
	lC.Splits["s6"] = done("s6")
	if err := sC.Record(lC.Splits["s6"], nil); err != nil {
		t.Fatal(err)
	}
	l, err := testStore(dir, fsys).Load()
	if err != nil || doneIDs(l) != "s1,s2,s4,s5,s6" {
		t.Errorf("after the next holder's compaction: %v, done %s", err, doneIDs(l))
	}
}

// TestLateJournalRecordAfterTakeoverLeftOut: a record of a split that an
// attempt which lost the lease appends to the journal the holder's base
// names (as two attempts that number their journals alike would share a
// file) is left out, with a line that says so, while the holder's own
// records count. Before the stamps, the late record counted its split
// done.
func TestLateJournalRecordAfterTakeoverLeftOut(t *testing.T) {
	f := newCASFixture(t, nil)
	dir := t.TempDir()
	a := f.mustTake(false)
	sA := testStore(dir, &failFS{})
	sA.SetLease(stampOf(a), f.supersededIn())
	cA := &Checkpoint{Fingerprint: "fp", Splits: map[string]*SplitStats{}}
	if err := sA.Compact(cA); err != nil {
		t.Fatal(err)
	}
	if err := sA.Record(done("s1"), nil); err != nil {
		t.Fatal(err)
	}
	b := f.mustTake(true)
	sB := testStore(dir, &failFS{})
	sB.SetLease(stampOf(b), f.supersededIn())
	lB, err := sB.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := sB.Compact(lB.Checkpoint); err != nil {
		t.Fatal(err)
	}
	if err := sB.Record(done("s2"), nil); err != nil {
		t.Fatal(err)
	}
	sA.gen = sB.gen // A's late append lands in B's journal
	if err := sA.Record(done("late"), nil); err != nil {
		t.Fatal(err)
	}
	if err := sB.Record(done("s3"), nil); err != nil {
		t.Fatal(err)
	}
	sC := testStore(dir, &failFS{})
	sC.SetLease(stampOf(b), f.supersededIn())
	l, err := sC.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := doneIDs(l); got != "s1,s2,s3" {
		t.Errorf("done %s, want s1,s2,s3 (the late record of split late left out)", got)
	}
	if len(l.Ignored) != 1 || !strings.Contains(l.Ignored[0], "record of split late") {
		t.Errorf("the load's account of what it left out: %q", l.Ignored)
	}
}

// TestUnstampedCheckpointStillLoads: a checkpoint written without a
// lease (a local run, or a rekey before stamps) loads with a lease reader
// given, and a stamped one loads without (a local copy of it): stamps
// leave out only what a superseded attempt wrote.
func TestUnstampedCheckpointStillLoads(t *testing.T) {
	f := newCASFixture(t, nil)
	dir := t.TempDir()
	s, c := startedStore(t, dir, &failFS{})
	c.Splits["s1"] = done("s1")
	if err := s.Record(c.Splits["s1"], nil); err != nil {
		t.Fatal(err)
	}
	a := f.mustTake(false)
	f.mustTake(true) // a is superseded: stamps of its token are left out
	sA := testStore(dir, &failFS{})
	sA.SetLease(stampOf(a), f.supersededIn())
	l, err := sA.Load()
	if err != nil || doneIDs(l) != "s1" || len(l.Ignored) != 0 {
		t.Fatalf("an unstamped checkpoint with a lease reader: %v, done %s, ignored %q", err, doneIDs(l), l.Ignored)
	}
	if err := sA.Compact(l.Checkpoint); err != nil {
		t.Fatal(err)
	}
	l, err = testStore(dir, &failFS{}).Load()
	if err != nil || doneIDs(l) != "s1" || l.Lease.Token != a.rec.Token {
		t.Errorf("a stamped checkpoint without a lease reader: %v, done %s, stamp %+v", err, doneIDs(l), l.Lease)
	}
	if sA.gen != journalSpan {
		t.Errorf("a compaction under lease generation 1 numbered its journal %d, want %d", sA.gen, int64(journalSpan))
	}
}

// TestLateShardCommitAfterTakeoverLeftOut: shard 1's attempt A is taken
// over by B (--force-takeover, starting the shard over) and A's commit
// lands after: the coverage proof leaves it out, with a line that says
// so, so the job is not complete until B commits; then it is. A's commit
// landing again over B's is left out again (the shard counts as not
// committed until its holder commits once more: a wait, not a
// difference); an unstamped commit (a local run's) counts. Before the
// stamps, A's late commit made the job complete while B was redoing the
// shard.
func TestLateShardCommitAfterTakeoverLeftOut(t *testing.T) {
	fs := vfs.NewMem()
	j := testJob()
	clock := newFakeClock()
	lease := func(dir string) *casFixture { return &casFixture{t: t, fs: fs, dir: dir, clock: clock} }
	l0, l1 := lease("/job/c.shard-0-of-2.lease"), lease("/job/c.shard-1-of-2.lease")
	commit := func(h *fileLease, f *casFixture, shard int, splits ...string) {
		t.Helper()
		c := ShardCommit{Shard: shard, Count: 2, Record: j.Digest(), Splits: splits}
		if h != nil {
			c.Lease, c.LeaseFile = Stamped(stampOf(h)), f.dir
		}
		if err := CommitShard(fs, "/job/c.shards", c); err != nil {
			t.Fatal(err)
		}
	}
	proven := func() (bool, []string) {
		t.Helper()
		cs, err := ReadShardCommits(fs, "/job/c.shards", j.Digest(), 2)
		if err != nil {
			t.Fatal(err)
		}
		kept, ignored, err := LeaveOutSuperseded(cs, func(p string) (Superseded, error) { return ReadSuperseded(fs, p) })
		if err != nil {
			t.Fatal(err)
		}
		return j.Cover(Commits(kept)) == nil, ignored
	}
	commit(l0.mustTake(false), l0, 0, "a", "c")
	a := l1.mustTake(false)
	b := l1.mustTake(true)
	commit(a, l1, 1, "b") // late: A passed its fence before B took over
	if ok, ignored := proven(); ok || len(ignored) != 1 || !strings.Contains(ignored[0], "commit of shard 1/2") {
		t.Errorf("A's late commit while B redoes shard 1: job complete %v, left out %q; want not complete, A's commit left out", ok, ignored)
	}
	commit(b, l1, 1, "b")
	if ok, ignored := proven(); !ok || len(ignored) != 0 {
		t.Errorf("B committed shard 1: job complete %v, left out %q", ok, ignored)
	}
	commit(a, l1, 1, "b")
	if ok, _ := proven(); ok {
		t.Errorf("A's commit landed again over B's: the job reads as complete on A's commit")
	}
	commit(nil, nil, 1, "b")
	if ok, ignored := proven(); !ok || len(ignored) != 0 {
		t.Errorf("an unstamped commit: job complete %v, left out %q", ok, ignored)
	}
}
