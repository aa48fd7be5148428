package verify

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/vfs"
)

// The page cache under the snapshot side returns exactly the file's bytes
// for any range, from many goroutines at once, and fetches each page once.
func TestPageCacheReadsExactly(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 5*pageSize+123) // a short last page
	r := rand.New(rand.NewPCG(1, 1))
	for i := range data {
		data[i] = byte(r.IntN(256))
	}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCountingFS(vfs.Local{})
	f, err := c.Open(filepath.ToSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 2))
			for i := 0; i < 300; i++ {
				off := r.Int64N(int64(len(data)))
				n := r.IntN(3 * pageSize)
				buf := make([]byte, n)
				got, err := f.ReadAt(buf, off)
				want := min(n, len(data)-int(off))
				if got != want || !bytes.Equal(buf[:got], data[off:off+int64(got)]) {
					t.Errorf("ReadAt(%d bytes at %d) = %d, want %d bytes of the file", n, off, got, want)
					return
				}
				if got < n && err == nil {
					t.Errorf("short read at %d without an error", off)
					return
				}
			}
		}(uint64(g))
	}
	wg.Wait()
	if got := c.n.Load(); got != int64(len(data)) {
		t.Errorf("fetched %d bytes, want each page once: %d", got, len(data))
	}
}

// A failed fetch is an error for the read that asked, is not cached, and a
// later read tries again.
func TestPageCacheDoesNotKeepFailures(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789"), pageSize)
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCountingFS(vfs.NewFaulty(vfs.Local{}, vfs.Fault{Op: "read", Offset: 2 * pageSize, Times: 1}))
	f, err := c.Open(filepath.ToSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, err := f.ReadAt(buf, 2*pageSize+10); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("first read: %v, want the injected fault", err)
	}
	n, err := f.ReadAt(buf, 2*pageSize+10)
	if err != nil || n != 100 || !bytes.Equal(buf, data[2*pageSize+10:2*pageSize+110]) {
		t.Fatalf("second read: %d, %v", n, err)
	}
}
