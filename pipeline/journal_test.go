package pipeline

import (
	"errors"
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
func testStore(dir string, fsys vfs.WriteFS) *checkpointStore {
	p := filepath.ToSlash(filepath.Join(dir, "checkpoint.json"))
	return &checkpointStore{loc: &vfs.Location{FS: fsys, Path: p}, url: p}
}

// startedStore is a store with its first base and journal written, as a
// run's start leaves them, and the state it holds.
func startedStore(t *testing.T, dir string, fsys vfs.WriteFS) (*checkpointStore, *Checkpoint) {
	t.Helper()
	s := testStore(dir, fsys)
	c := &Checkpoint{Fingerprint: "fp", Splits: map[string]*SplitStats{}}
	if err := s.compact(c); err != nil {
		t.Fatal(err)
	}
	return s, c
}

func done(id string) *SplitStats { return &SplitStats{ID: id, Done: true, Attempts: 1} }

// doneIDs lists the splits a loaded checkpoint records done.
func doneIDs(l *loadedCheckpoint) string {
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
				if err := s.record(c.Splits[id], nil); err != nil {
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
			if err := s.compact(c); !errors.Is(err, errCrash) {
				t.Fatalf("compaction stopped at %s: %v", step, err)
			}
			fs.fail = nil
			want := "a,b"
			if step == "remove" {
				want = "a,b,c" // the new base was in place
			}
			l, err := testStore(dir, fs).load()
			if err != nil {
				t.Fatalf("load after a compaction stopped at %s: %v", step, err)
			}
			if got := doneIDs(l); got != want {
				t.Errorf("after a compaction stopped at %s: done %s, want %s", step, got, want)
			}
			// The next run compacts again: one journal is left, of the
			// base's generation.
			s2 := testStore(dir, fs)
			l, _ = s2.load()
			if err := s2.compact(l.Checkpoint); err != nil {
				t.Fatal(err)
			}
			m, _ := filepath.Glob(filepath.Join(dir, "checkpoint.json.journal-*"))
			if len(m) != 1 || !strings.HasSuffix(m[0], s2.journalPath(s2.gen)[len(dir):]) {
				t.Errorf("journals after the next compaction: %v, want only generation %d's", m, s2.gen)
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
	if err := s.record(done("a"), nil); !errors.Is(err, errCrash) {
		t.Fatalf("append failing: %v", err)
	}
	fs.fail = nil
	if err := s.record(done("b"), nil); err == nil {
		t.Fatal("an append behind a failed one: no error")
	}
	c.Splits["a"], c.Splits["b"] = done("a"), done("b")
	if err := s.compact(c); err != nil {
		t.Fatal(err)
	}
	if err := s.record(done("d"), nil); err != nil {
		t.Fatalf("append after the compaction: %v", err)
	}
	l, err := testStore(dir, fs).load()
	if err != nil {
		t.Fatal(err)
	}
	if got := doneIDs(l); got != "a,b,d" {
		t.Errorf("done after the compaction and an append: %s, want a,b,d", got)
	}
}
