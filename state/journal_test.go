package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/vfs"
)

// failFS is the local file system with chosen operations failing, as a
// crash at that step would leave the files.
type failFS struct {
	vfs.Local
	fail func(op, name string) error
}

func (f failFS) check(op, name string) error {
	if f.fail == nil {
		return nil
	}
	return f.fail(op, name)
}

func (f failFS) Create(name string) (vfs.WriteFile, error) {
	if err := f.check("create", name); err != nil {
		return nil, err
	}
	return f.Local.Create(name)
}

func (f failFS) Rename(o, n string) error {
	if err := f.check("rename", n); err != nil {
		return err
	}
	return f.Local.Rename(o, n)
}

func (f failFS) Remove(name string) error {
	if err := f.check("remove", name); err != nil {
		return err
	}
	return f.Local.Remove(name)
}

func (f failFS) Append(name string) (vfs.WriteFile, error) {
	if err := f.check("append", name); err != nil {
		return nil, err
	}
	return f.Local.Append(name)
}

var errCrash = errors.New("crash here")

// testStore is a checkpoint store on fsys at dir/checkpoint.json.
func testStore(dir string, fsys vfs.WriteFS) *CheckpointStore {
	p := filepath.ToSlash(filepath.Join(dir, "checkpoint.json"))
	return &CheckpointStore{loc: &vfs.Location{FS: fsys, Path: p}, url: p}
}

// startedStore is a store with its first base and journal written, as a
// run's start leaves them, and the state it holds.
func startedStore(t *testing.T, dir string, fsys vfs.WriteFS) (*CheckpointStore, *Checkpoint) {
	t.Helper()
	s := testStore(dir, fsys)
	c := &Checkpoint{Fingerprint: "fp", Splits: map[string]*SplitStats{}}
	if err := s.Compact(c); err != nil {
		t.Fatal(err)
	}
	return s, c
}

func done(id string) *SplitStats { return &SplitStats{ID: id, Done: true, Attempts: 1} }

// doneIDs lists the splits a loaded checkpoint records done.
func doneIDs(l *LoadedCheckpoint) string {
	var ids []string
	for id, st := range l.Splits {
		if st.Done {
			ids = append(ids, id)
		}
	}
	for i := 1; i < len(ids); i++ {
		for k := i; k > 0 && ids[k] < ids[k-1]; k-- {
			ids[k], ids[k-1] = ids[k-1], ids[k]
		}
	}
	return strings.Join(ids, ",")
}

// TestCompactionCrashSafe: a compaction that stops at any of its steps
// (the new journal not written, the base not renamed, the old journal not
// removed) leaves a base and the journal it names that load to every split
// recorded so far; the next compaction clears what was left.
func TestCompactionCrashSafe(t *testing.T) {
	for _, step := range []string{"create", "rename", "remove"} {
		t.Run("stopped at "+step, func(t *testing.T) {
			dir := t.TempDir()
			fs := &failFS{}
			s, c := startedStore(t, dir, fs)
			for _, id := range []string{"a", "b"} {
				c.Splits[id] = done(id)
				if err := s.Record(c.Splits[id], nil); err != nil {
					t.Fatal(err)
				}
			}
			fs.fail = func(op, name string) error {
				// The journal's create and remove, the base's rename.
				if op == step && strings.Contains(name, ".journal-") == (op != "rename") {
					return errCrash
				}
				return nil
			}
			c.Splits["c"] = done("c") // in the new base only
			if err := s.Compact(c); !errors.Is(err, errCrash) {
				t.Fatalf("compaction stopped at %s: %v", step, err)
			}
			fs.fail = nil
			want := "a,b"
			if step == "remove" {
				want = "a,b,c" // the new base was in place
			}
			l, err := testStore(dir, fs).Load()
			if err != nil {
				t.Fatalf("load after a compaction stopped at %s: %v", step, err)
			}
			if got := doneIDs(l); got != want {
				t.Errorf("after a compaction stopped at %s: done %s, want %s", step, got, want)
			}
			// The next run compacts again: one journal is left, of the
			// base's generation.
			s2 := testStore(dir, fs)
			l, _ = s2.Load()
			if err := s2.Compact(l.Checkpoint); err != nil {
				t.Fatal(err)
			}
			m, _ := filepath.Glob(filepath.Join(dir, "checkpoint.json.journal-*"))
			if len(m) != 1 || !strings.HasSuffix(m[0], s2.journalPath(s2.gen)[len(dir):]) {
				t.Errorf("journals after the next compaction: %v, want only generation %d's", m, s2.gen)
			}
		})
	}
}

// TestFirstCompactionCrashSafe: a run's first compaction has no earlier
// base to fall back on. Stopped at any step before its base is in place,
// it leaves no checkpoint (nothing was recorded), not one that refuses to
// load; the next run starts, and its compaction clears the leftovers.
func TestFirstCompactionCrashSafe(t *testing.T) {
	steps := map[string]func(op, name string) bool{
		"the journal's create": func(op, name string) bool { return op == "create" && strings.Contains(name, ".journal-") },
		"the journal's rename": func(op, name string) bool { return op == "rename" && strings.Contains(name, ".journal-") },
		"the base's create":    func(op, name string) bool { return op == "create" && !strings.Contains(name, ".journal-") },
		"the base's rename":    func(op, name string) bool { return op == "rename" && !strings.Contains(name, ".journal-") },
	}
	for step, at := range steps {
		t.Run("stopped at "+step, func(t *testing.T) {
			dir := t.TempDir()
			fs := &failFS{}
			// Twice: a crash in the first compaction, then in the next
			// run's, which leaves two journals and still no base.
			for range 2 {
				fs.fail = func(op, name string) error {
					if at(op, name) {
						return errCrash
					}
					return nil
				}
				c := &Checkpoint{Fingerprint: "fp", Splits: map[string]*SplitStats{}}
				if err := testStore(dir, fs).Compact(c); !errors.Is(err, errCrash) {
					t.Fatalf("first compaction stopped at %s: %v", step, err)
				}
				fs.fail = nil
				l, err := testStore(dir, fs).Load()
				if err != nil || l != nil {
					t.Fatalf("load after the first compaction stopped at %s: %v, %v; want no checkpoint", step, l, err)
				}
			}
			s, c := startedStore(t, dir, fs)
			c.Splits["a"] = done("a")
			if err := s.Record(c.Splits["a"], nil); err != nil {
				t.Fatal(err)
			}
			l, err := testStore(dir, fs).Load()
			if err != nil || doneIDs(l) != "a" {
				t.Fatalf("after the next run's start and one split: %v, %v", l, err)
			}
			m, _ := filepath.Glob(filepath.Join(dir, "checkpoint.json.journal-*"))
			if len(m) != 1 {
				t.Errorf("journals after the next run's compaction: %v, want one", m)
			}
		})
	}
}

// TestOrphanJournalRefused: a journal without its base is taken for
// nothing done only when it holds its header alone and that header says
// the base recorded nothing. A base that recorded splits, or a journal
// with records, went missing otherwise: the load refuses it.
func TestOrphanJournalRefused(t *testing.T) {
	cases := map[string]func(t *testing.T, s *CheckpointStore, c *Checkpoint){
		"a base with splits": func(t *testing.T, s *CheckpointStore, c *Checkpoint) {
			c.Splits["a"] = done("a")
			if err := s.Compact(c); err != nil {
				t.Fatal(err)
			}
		},
		"a base of a finished sink": func(t *testing.T, s *CheckpointStore, c *Checkpoint) {
			c.SinkFinished = true
			if err := s.Compact(c); err != nil {
				t.Fatal(err)
			}
		},
		"an empty base, the journal with a record": func(t *testing.T, s *CheckpointStore, c *Checkpoint) {
			if err := s.Record(done("a"), nil); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, c := startedStore(t, dir, vfs.Local{})
			setup(t, s, c)
			if err := os.Remove(filepath.Join(dir, "checkpoint.json")); err != nil {
				t.Fatal(err)
			}
			l, err := testStore(dir, vfs.Local{}).Load()
			if !errors.Is(err, ErrCheckpointDamaged) || !strings.Contains(err.Error(), "is missing") {
				t.Fatalf("load with the base removed: %v, %v; want ErrCheckpointDamaged", l, err)
			}
		})
	}
}

// TestAppendFailureStopsTheJournal: after an append fails (the journal
// may end in part of a record), no record is appended behind it until a
// compaction has written a new base and journal.
func TestAppendFailureStopsTheJournal(t *testing.T) {
	dir := t.TempDir()
	fs := &failFS{}
	s, c := startedStore(t, dir, fs)
	fs.fail = func(op, _ string) error {
		if op == "append" {
			return errCrash
		}
		return nil
	}
	if err := s.Record(done("a"), nil); !errors.Is(err, errCrash) {
		t.Fatalf("append failing: %v", err)
	}
	fs.fail = nil
	if err := s.Record(done("b"), nil); err == nil {
		t.Fatal("an append behind a failed one: no error")
	}
	c.Splits["a"], c.Splits["b"] = done("a"), done("b")
	if err := s.Compact(c); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(done("d"), nil); err != nil {
		t.Fatalf("append after the compaction: %v", err)
	}
	l, err := testStore(dir, fs).Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := doneIDs(l); got != "a,b,d" {
		t.Errorf("done after the compaction and an append: %s, want a,b,d", got)
	}
}
