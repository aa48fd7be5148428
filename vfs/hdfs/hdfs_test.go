package hdfs_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// TestHDFSFileReusesReaders checks, on the mini cluster's HDFS, that an
// open file serves its positional reads and streams from reused client
// FileReaders: a store file's trailer read, then its scan's stream, open
// one FileReader (NameNode lookups once, not per stream), while streams
// and positional reads at the same time each get one of their own and
// every read returns the file's bytes.
func TestHDFSFileReusesReaders(t *testing.T) {
	st := testenv.Require(t)
	u, err := url.Parse(st.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hdfs.Dial(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	dir := fmt.Sprintf("%s/%svfs-readers-%d", u.Path, os.Getenv("REKEY_TEST_PREFIX"), rand.Uint32())
	if err := h.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	defer h.RemoveAll(dir)
	data := make([]byte, 3<<20+123)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	w, err := h.Create(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	readers := func() int64 { return h.Stats().FileReaders }
	before := readers()
	f, err := h.Open(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	tail := make([]byte, 4096)
	if _, err := f.ReadAt(tail, f.Size()-4096); err != nil || !bytes.Equal(tail, data[len(data)-4096:]) {
		t.Fatalf("ReadAt of the tail: %v or other bytes", err)
	}
	streamAll := func(off int64) {
		t.Helper()
		s, err := f.(vfs.Streamer).Stream(off)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(s)
		if err != nil || !bytes.Equal(got, data[off:]) {
			t.Fatalf("stream from %d: %v, %d bytes, or other bytes than the file's", off, err, len(got))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	streamAll(0)
	streamAll(1 << 20)
	if _, err := f.ReadAt(tail, 12345); err != nil || !bytes.Equal(tail, data[12345:12345+4096]) {
		t.Fatalf("ReadAt after the streams: %v or other bytes", err)
	}
	if n := readers() - before; n != 1 {
		t.Errorf("open, positional reads and two streams one after the other opened %d FileReaders, want 1", n)
	}

	// Side by side: a stream and positional reads each need a reader.
	s, err := f.(vfs.Streamer).Stream(0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 10000)
			for i := range 20 {
				off := int64((g*20 + i) * 30011)
				if _, err := f.ReadAt(p, off); err != nil || !bytes.Equal(p, data[off:off+int64(len(p))]) {
					errs <- fmt.Errorf("concurrent ReadAt at %d: %v or other bytes", off, err)
					return
				}
			}
		}()
	}
	got, err := io.ReadAll(s)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stream beside positional reads: %v or other bytes", err)
	}
	// Closing the file first: the stream still closes cleanly after.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(tail, 0); err == nil {
		t.Error("ReadAt on a closed file succeeded")
	}
}
