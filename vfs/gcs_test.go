package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
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

// gcsHook is a transport in front of the emulator that runs a function
// once a server-side copy (rewrite) was answered, and can cut the bodies
// of media downloads after some bytes.
type gcsHook struct {
	mu        sync.Mutex
	afterCopy func()
	// cutAfter > 0 cuts the next cuts download bodies after that many
	// bytes; ranges are the Range headers of the downloads seen.
	cutAfter, cuts int
	ranges         []string
	// busy is how many requests to answer 503 before passing them on.
	busy, answered503 int
}

func (h *gcsHook) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	busy := h.busy > 0
	if busy {
		h.busy--
		h.answered503++
	}
	h.mu.Unlock()
	if busy {
		body := `{"error":{"code":503,"message":"Backend Error"}}`
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
	}
	media := r.Method == http.MethodGet && r.URL.Query().Get("alt") == "media"
	if media {
		h.mu.Lock()
		h.ranges = append(h.ranges, r.Header.Get("Range"))
		h.mu.Unlock()
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if strings.Contains(r.URL.Path, "/rewriteTo/") && h.afterCopy != nil {
		h.afterCopy()
		h.afterCopy = nil
	}
	if media && h.cuts > 0 {
		h.cuts--
		resp.Body = &cutBody{r: resp.Body, left: h.cutAfter}
	}
	return resp, nil
}

func (h *gcsHook) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ranges...)
}

// dialHooked opens the emulator's bucket through a gcsHook.
func dialHooked(t *testing.T, g *s3test.GCS, h *gcsHook, attempts int) *vfs.GCS {
	s, err := vfs.DialGCSWith(g.Bucket, vfs.GCSOptions{Endpoint: g.Endpoint(), HTTPClient: &http.Client{Transport: h}, MaxAttempts: attempts, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestGCSRenameKeepsAReplacedSource replaces the source object between
// Rename's server-side copy and its delete (as another run's fresh lease
// replaces a stale one): the delete, of the copied generation only, leaves
// the new object alone, the rename fails, and the copy is taken back.
func TestGCSRenameKeepsAReplacedSource(t *testing.T) {
	g := s3test.StartGCS(t)
	direct := g.Dial(t)
	h := &gcsHook{}
	s := dialHooked(t, g, h, 0)
	writeObject(t, direct, "/r/lease", []byte("stale"))
	h.afterCopy = func() {
		g.Fake.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: g.Bucket, Name: "r/lease"}, Content: []byte("fresh")})
	}
	err := s.Rename("/r/lease", "/r/aside")
	if err == nil || !errors.Is(err, iofs.ErrExist) {
		t.Errorf("Rename of a source replaced mid-way: %v, want a failed precondition", err)
	}
	if got := g.Stored(t, "/r/lease"); string(got) != "fresh" {
		t.Errorf("the source holds %q, want the replacement kept", got)
	}
	if _, err := direct.Stat("/r/aside"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("the copy of the replaced bytes is still there: %v", err)
	}
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

// TestGCSReadCutMidBody cuts download bodies in the transport in front of
// the emulator: a positional read and a read-ahead stream both return the
// object's bytes, and the download after each cut asks for the range from
// the offset the cut body reached, not from the start. (The GCS library's
// reader reopens a cut body itself, from the byte it reached; this checks
// that what the backend builds on it keeps that.)
func TestGCSReadCutMidBody(t *testing.T) {
	g := s3test.StartGCS(t)
	h := &gcsHook{}
	s := dialHooked(t, g, h, 0)
	data := randomBytes(3<<20+5, 3)
	writeObject(t, s, "/c/obj", data)
	f, err := s.Open("/c/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	const cut = 100 << 10
	h.mu.Lock()
	h.cutAfter, h.cuts, h.ranges = cut, 2, nil
	h.mu.Unlock()
	got := make([]byte, len(data)-10)
	if n, err := f.ReadAt(got, 10); err != nil || n != len(got) {
		t.Fatalf("ReadAt: n %d, %v", n, err)
	}
	if !bytes.Equal(got, data[10:]) {
		t.Fatal("ReadAt across cut bodies returned other bytes")
	}
	checkResumed(t, "ReadAt", h.seen(), 10, cut, 3)

	h.mu.Lock()
	h.cutAfter, h.cuts, h.ranges = cut, 3, nil
	h.mu.Unlock()
	ra := vfs.NewReadAhead(f, 0, vfs.ReadAheadOptions{Chunk: 1 << 20})
	defer ra.Close()
	streamed := make([]byte, len(data))
	if _, err := ra.ReadAt(streamed[:4096], 0); err != nil { // positional first read
		t.Fatal(err)
	}
	for off := 4096; off < len(data); {
		n := min(64<<10, len(data)-off)
		if _, err := ra.ReadAt(streamed[off:off+n], int64(off)); err != nil {
			t.Fatalf("read-ahead at %d: %v", off, err)
		}
		off += n
	}
	if !bytes.Equal(streamed, data) {
		t.Fatal("read-ahead across cut bodies returned other bytes")
	}
	if st := ra.Stats(); st.Streams == 0 {
		t.Errorf("no stream was used: %+v", st)
	}
	checkResumed(t, "stream", h.seen()[1:], 4096, cut, 3) // after the positional read (its cut had no effect)
}

// TestGCSBusyBacksOff answers 503 to the first requests: the library backs
// off and retries, so opening and reading an object succeed, and with too
// few attempts allowed the same answers fail the read with the server's
// code (so it is the retries that carried it).
func TestGCSBusyBacksOff(t *testing.T) {
	g := s3test.StartGCS(t)
	h := &gcsHook{}
	s := dialHooked(t, g, h, 0)
	data := randomBytes(70000, 4)
	writeObject(t, s, "/b/obj", data)
	h.mu.Lock()
	h.busy = 3
	h.mu.Unlock()
	f, err := s.Open("/b/obj") // metadata: 503 three times, then the object
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.busy = 3
	h.mu.Unlock()
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAt after 503s: %v", err)
	}
	h.mu.Lock()
	n := h.answered503
	h.mu.Unlock()
	if n != 6 {
		t.Errorf("the transport answered 503 %d times, want 6", n)
	}

	few := dialHooked(t, g, h, 2)
	f2, err := few.Open("/b/obj")
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.busy = 3
	h.mu.Unlock()
	if _, err := f2.ReadAt(got, 0); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("two attempts against three 503s: %v, want the 503", err)
	}
}
