package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/vfs"
)

// listing renders ReadDir of name as "name:dir:size ...".
func listing(t *testing.T, fsys vfs.FS, name string) string {
	t.Helper()
	ents, err := fsys.ReadDir(name)
	if err != nil {
		t.Fatalf("readdir %s: %v", name, err)
	}
	var s []string
	for _, e := range ents {
		s = append(s, fmt.Sprintf("%s:%v:%d", e.Name(), e.IsDir(), e.Size()))
	}
	return strings.Join(s, " ")
}

// TestGCSFileSystem checks the GCS backend against fake-gcs-server, opened
// the way a user opens it (vfs.Open of a gs:// URL, the endpoint from
// core-site.xml's fs.gs.storage.root.url): objects written (one chunk, and
// a resumable upload of two chunks) are stored byte for byte; Stat gives
// size and ETag; ReadDir lists files and directories under a prefix and an
// empty MkdirAll directory; ranged reads return the stored bytes; Rename
// moves an object; CreateExclusive refuses a name that exists, and of two
// exclusive writers only the first to close stores its bytes; Remove and
// RemoveAll delete.
func TestGCSFileSystem(t *testing.T) {
	g := s3test.StartGCS(t)
	g.UseHadoopConf(t)
	dir := "/vfs-gcs"
	loc, err := vfs.Open("gs://" + g.Bucket + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	fsys := loc.FS
	if loc.Path != dir || fsys.String() != "gs://"+g.Bucket {
		t.Fatalf("path %q on %s, want %q on gs://%s", loc.Path, fsys, dir, g.Bucket)
	}
	checkObjectStore(t, fsys, dir, func(name string) []byte { return g.Stored(t, name) })
}

// checkObjectStore runs the checks TestGCSFileSystem and
// TestAzureFileSystem share on the store fsys under dir; stored gives the
// server's own account of an object's bytes.
func checkObjectStore(t *testing.T, fsys vfs.WriteFS, dir string, stored func(name string) []byte) {
	small := randomBytes(1000, 1)
	large := randomBytes(9<<20+17, 2) // past the 8 MiB chunk: two uploads
	writeObject(t, fsys, dir+"/a/small", small)
	writeObject(t, fsys, dir+"/a/b/large", large)
	if err := fsys.MkdirAll(dir + "/empty"); err != nil {
		t.Fatal(err)
	}
	if got := stored(dir + "/a/small"); !bytes.Equal(got, small) {
		t.Fatalf("server stored %d bytes for small, want %d", len(got), len(small))
	}
	if got := stored(dir + "/a/b/large"); !bytes.Equal(got, large) {
		t.Fatalf("server stored %d bytes for large, want %d", len(got), len(large))
	}

	fi, err := fsys.Stat(dir + "/a/b/large")
	if err != nil || fi.IsDir() || fi.Size() != int64(len(large)) || vfs.ETag(fi) == "" {
		t.Fatalf("stat large: %v, %+v (etag %q)", err, fi, vfs.ETag(fi))
	}
	if fi, err := fsys.Stat(dir + "/a"); err != nil || !fi.IsDir() {
		t.Fatalf("stat a: %v, %+v", err, fi)
	}
	if _, err := fsys.Stat(dir + "/nosuch"); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("stat nosuch: %v", err)
	}
	if got, want := listing(t, fsys, dir), "a:true:0 empty:true:0"; got != want {
		t.Errorf("readdir %s: %s, want %s", dir, got, want)
	}
	if got, want := listing(t, fsys, dir+"/a"), "b:true:0 small:false:1000"; got != want {
		t.Errorf("readdir a: %s, want %s", got, want)
	}
	if got := listing(t, fsys, dir+"/empty"); got != "" {
		t.Errorf("readdir empty: %q", got)
	}
	if _, err := fsys.ReadDir(dir + "/nosuch"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("readdir nosuch: %v", err)
	}
	if _, err := fsys.Open(dir + "/a"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("open a directory: %v", err)
	}

	f, err := fsys.Open(dir + "/a/b/large")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{0, 100}, {8<<20 - 5, 10}, {len(large) - 50, 50}, {12345, 4 << 20}} {
		p := make([]byte, r[1])
		if n, err := f.ReadAt(p, int64(r[0])); err != nil || n != r[1] || !bytes.Equal(p, large[r[0]:r[0]+r[1]]) {
			t.Errorf("ReadAt(%d, %d): n %d, %v, equal %v", r[1], r[0], n, err, bytes.Equal(p[:n], large[r[0]:r[0]+n]))
		}
	}
	p := make([]byte, 100)
	if n, err := f.ReadAt(p, int64(len(large)-40)); err != io.EOF || n != 40 {
		t.Errorf("ReadAt past the end: n %d, %v; want 40, EOF", n, err)
	}
	f.Close()

	if err := fsys.Rename(dir+"/a/small", dir+"/moved"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(dir + "/a/small"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("renamed source still there: %v", err)
	}
	if got := stored(dir + "/moved"); !bytes.Equal(got, small) {
		t.Errorf("renamed object: the server holds %d bytes, want the %d written", len(got), len(small))
	}
	if err := fsys.Rename(dir+"/a/b", dir+"/b"); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("renaming a directory: %v", err)
	}

	ex := fsys.(vfs.ExclusiveFS)
	if _, err := ex.CreateExclusive(dir + "/moved"); !errors.Is(err, iofs.ErrExist) {
		t.Errorf("CreateExclusive of an existing name: %v", err)
	}
	w1, err := ex.CreateExclusive(dir + "/lease")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := ex.CreateExclusive(dir + "/lease")
	if err != nil {
		t.Fatal(err)
	}
	w1.Write([]byte("first"))
	w2.Write([]byte("second"))
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); !errors.Is(err, iofs.ErrExist) {
		t.Errorf("the second exclusive writer's Close: %v, want ErrExist", err)
	}
	if got := stored(dir + "/lease"); string(got) != "first" {
		t.Errorf("lease holds %q, want the first writer's", got)
	}

	if err := fsys.Remove(dir + "/moved"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(dir + "/moved"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("second Remove: %v", err)
	}
	if err := fsys.Remove(dir + "/a"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Remove of a directory with objects: %v", err)
	}
	if err := fsys.Remove(dir + "/empty"); err != nil {
		t.Errorf("Remove of an empty directory: %v", err)
	}
	if err := fsys.RemoveAll(dir + "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(dir + "/a"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("after RemoveAll: %v", err)
	}
	if got := listing(t, fsys, dir); got != "lease:false:5" {
		t.Errorf("left under %s: %q, want only the lease", dir, got)
	}
}

// TestGCSOpenRefusesMissingBucket checks that a gs:// URL naming a bucket
// the server does not have fails at Open, naming it.
func TestGCSOpenRefusesMissingBucket(t *testing.T) {
	g := s3test.StartGCS(t)
	g.UseEmulatorEnv(t)
	_, err := vfs.Open("gs://no-such-bucket/x")
	if !errors.Is(err, iofs.ErrNotExist) || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Errorf("Open of a missing bucket: %v; want ErrNotExist naming it", err)
	}
}

// dialGCSThrough opens the emulator's bucket through the fault proxy p.
func dialGCSThrough(t *testing.T, g *s3test.GCS, p *s3test.FaultProxy, attempts int) *vfs.GCS {
	s, err := vfs.DialGCSWith(g.Bucket, vfs.GCSOptions{Endpoint: p.Endpoint(g.Endpoint()), Anonymous: true, MaxAttempts: attempts, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestGCSRenameKeepsAReplacedSource replaces the source object between
// Rename's server-side copy (rewrite) and its delete: the delete, of the
// copied generation only, leaves the new object alone (see
// checkRenameKeepsAReplacedSource).
func TestGCSRenameKeepsAReplacedSource(t *testing.T) {
	g := s3test.StartGCS(t)
	p := s3test.StartFaultProxy(t, g.URL, s3test.GCSProtocol)
	checkRenameKeepsAReplacedSource(t, dialGCSThrough(t, g, p, 0), g.Dial(t), "/r", p, func(name string) []byte { return g.Stored(t, name) })
}

// TestGCSReadPinsGeneration replaces an object after it was opened: the
// next read asks for the generation opened, which is gone, and fails
// naming it rather than returning the new bytes.
func TestGCSReadPinsGeneration(t *testing.T) {
	g := s3test.StartGCS(t)
	s := g.Dial(t)
	writeObject(t, s, "/p/obj", []byte("old bytes"))
	f, err := s.Open("/p/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeObject(t, s, "/p/obj", []byte("new bytes"))
	p := make([]byte, 9)
	if n, err := f.ReadAt(p, 0); err == nil || !strings.Contains(err.Error(), "changed or vanished since it was opened") {
		t.Errorf("read of a replaced object: %q, %v; want the change reported", p[:n], err)
	}
}

// TestGCSReadCutMidBody cuts download bodies in a proxy in front of the
// emulator: reads resume from the offset reached (see
// checkReadCutMidBody). (The GCS library's reader reopens a cut body
// itself, from the byte it reached; this checks that what the backend
// builds on it keeps that.)
func TestGCSReadCutMidBody(t *testing.T) {
	g := s3test.StartGCS(t)
	p := s3test.StartFaultProxy(t, g.URL, s3test.GCSProtocol)
	checkReadCutMidBody(t, dialGCSThrough(t, g, p, 0), "/c", p)
}

// TestGCSBusyBacksOff answers 429 (rateLimitExceeded) and 503
// (backendError) to the first requests: the library backs off and
// retries, and too few attempts fail with the server's code (see
// checkBusyBacksOff).
func TestGCSBusyBacksOff(t *testing.T) {
	g := s3test.StartGCS(t)
	p := s3test.StartFaultProxy(t, g.URL, s3test.GCSProtocol)
	s, few := dialGCSThrough(t, g, p, 0), dialGCSThrough(t, g, p, 2)
	for _, c := range []struct {
		answer s3test.Answer
		code   string
	}{{s3test.GCSTooManyRequests, "429"}, {s3test.GCSBackendError, "503"}} {
		t.Run(c.code, func(t *testing.T) { checkBusyBacksOff(t, s, few, "/b"+c.code, p, c.answer, c.code) })
	}
}
