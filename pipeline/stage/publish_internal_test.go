package stage

import (
	"bytes"
	"testing"

	"github.com/rekeyhq/rekey/vfs"
)

// lateFS plays an object store's exclusive create on a memory file
// system: the name is taken at Close, not at create (vfs.S3, GCS, Azure).
type lateFS struct{ *vfs.Mem }

func (l lateFS) CreateExclusive(name string) (vfs.WriteFile, error) {
	return &lateWriter{fs: l.Mem, name: name}, nil
}

type lateWriter struct {
	fs   *vfs.Mem
	name string
	buf  bytes.Buffer
}

func (w *lateWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *lateWriter) Sync() error                 { return nil }
func (w *lateWriter) Name() string                { return w.name }
func (w *lateWriter) Close() error {
	f, err := w.fs.CreateExclusive(w.name)
	if err != nil {
		return err
	}
	f.Write(w.buf.Bytes())
	return f.Close()
}

// TestPublishPlanRaceOnObjectStore: of two spill shards publishing the
// plan on an object store, the second learns it lost at Close (412); it
// must take the winner's plan, never remove it (which left the winner's
// shards without the plan they partitioned by).
func TestPublishPlanRaceOnObjectStore(t *testing.T) {
	fs := lateFS{vfs.NewMem()}
	first, err := PlanFromSplitKeys("t", [][]byte{[]byte("m")})
	if err != nil {
		t.Fatal(err)
	}
	second, _ := PlanFromSplitKeys("t", [][]byte{[]byte("k"), []byte("p")})
	if _, err := publishPlan(fs, "/plan.json", first); err != nil {
		t.Fatal(err)
	}
	got, err := publishPlan(fs, "/plan.json", second)
	if err != nil || len(got.Regions) != 2 {
		t.Fatalf("the second publish: %v, %+v; want the first plan (2 regions)", err, got)
	}
	if ok, _ := vfs.Exists(fs, "/plan.json"); !ok {
		t.Fatal("the winner's plan.json was removed by the loser")
	}
}
