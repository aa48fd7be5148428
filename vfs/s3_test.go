package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
)

// s3Prefix is a fresh key prefix for one test in the testenv bucket.
func s3Prefix(t *testing.T) string {
	return fmt.Sprintf("/%svfs-%s-%d", os.Getenv("REKEY_TEST_PREFIX"), strings.ToLower(t.Name()), rand.Uint32())
}

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func writeObject(t *testing.T, fsys vfs.WriteFS, name string, data []byte) {
	t.Helper()
	w, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestS3FileSystem checks the S3 backend against versitygw, opened the way
// a user opens it (vfs.Open of an s3a:// URL, endpoint and keys from
// core-site.xml's fs.s3a.* keys): objects written (one PUT, and a
// multipart upload past the part size) are stored byte for byte; Stat gives
// size and ETag; ReadDir lists files and directories under a prefix and an
// empty MkdirAll directory; ranged reads return the stored bytes; Rename
// moves an object (in one copy, and in ranged part copies past the copy
// limit); CreateExclusive refuses a name that exists; Remove and
// RemoveAll delete.
func TestS3FileSystem(t *testing.T) {
	st := testenv.RequireS3(t)
	st.UseS3Conf(t)
	dir := s3Prefix(t)
	loc, err := vfs.Open("s3a://" + st.Bucket + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	fsys := loc.FS
	defer fsys.RemoveAll(dir)
	if loc.Path != dir {
		t.Fatalf("path %q, want %q", loc.Path, dir)
	}

	small := randomBytes(1000, 1)
	large := randomBytes(9<<20+17, 2) // past the 8 MiB part: two parts
	writeObject(t, fsys, dir+"/a/small", small)
	writeObject(t, fsys, dir+"/a/b/large", large)
	if err := fsys.MkdirAll(dir + "/empty"); err != nil {
		t.Fatal(err)
	}
	if got := s3test.Stored(t, st, dir+"/a/small"); !bytes.Equal(got, small) {
		t.Fatalf("server stored %d bytes for small, want %d", len(got), len(small))
	}
	if got := s3test.Stored(t, st, dir+"/a/b/large"); !bytes.Equal(got, large) {
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
	listing := func(name string) string {
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
	if got, want := listing(dir), "a:true:0 empty:true:0"; got != want {
		t.Errorf("readdir %s: %s, want %s", dir, got, want)
	}
	if got, want := listing(dir+"/a"), "b:true:0 small:false:1000"; got != want {
		t.Errorf("readdir a: %s, want %s", got, want)
	}
	if got := listing(dir + "/empty"); got != "" {
		t.Errorf("readdir empty: %q", got)
	}
	if _, err := fsys.ReadDir(dir + "/nosuch"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("readdir nosuch: %v", err)
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
	if got, err := vfs.ReadFile(fsys, dir+"/moved"); err != nil || !bytes.Equal(got, small) {
		t.Errorf("renamed object: %v, %d bytes", err, len(got))
	}

	// Past the one-request copy limit, Rename copies in ranged parts.
	restore := vfs.SetS3CopyLimits(6<<20, 5<<20)
	err = fsys.Rename(dir+"/a/b/large", dir+"/large-moved")
	restore()
	if err != nil {
		t.Fatal(err)
	}
	if got := s3test.Stored(t, st, dir+"/large-moved"); !bytes.Equal(got, large) {
		t.Errorf("copied in parts: the server stored %d bytes, want the %d written", len(got), len(large))
	}
	if _, err := fsys.Stat(dir + "/a/b/large"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("source of the multipart copy still there: %v", err)
	}
	// A multipart object's ETag ends in -PARTS: two part copies made it.
	if fi, err := fsys.Stat(dir + "/large-moved"); err != nil || !strings.HasSuffix(vfs.ETag(fi), `-2"`) {
		t.Errorf("the copy's ETag %q (%v), want one of a 2-part upload", vfs.ETag(fi), err)
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
	if got := s3test.Stored(t, st, dir+"/lease"); string(got) != "first" {
		t.Errorf("lease holds %q, want the first writer's", got)
	}

	if err := fsys.Remove(dir + "/moved"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(dir + "/moved"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("second Remove: %v", err)
	}
	if err := fsys.RemoveAll(dir + "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(dir + "/a"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("after RemoveAll: %v", err)
	}
}

// faultProxy is a loopback HTTP proxy in front of the S3 server that can
// cut the bodies of ranged GETs and answer 503 SlowDown. It forwards the
// Host header as received, so the client's signature (made for the
// proxy's address) still verifies.
type faultProxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	// cutAfter > 0 cuts the next cuts GET bodies after that many bytes.
	cutAfter, cuts int
	// slowDowns is how many requests to answer 503 SlowDown.
	slowDowns int
	// afterCopy, when set, runs once a server-side copy was answered.
	afterCopy func()
	// ranges are the Range headers of the GETs seen; answered503 counts.
	ranges      []string
	answered503 int
}

func newFaultProxy(t *testing.T, endpoint string) *faultProxy {
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if resp.Request.Header.Get("X-Amz-Copy-Source") != "" && p.afterCopy != nil {
			p.afterCopy()
		}
		if resp.Request.Method == http.MethodGet && p.cuts > 0 && resp.StatusCode == http.StatusPartialContent {
			p.cuts--
			resp.Body = &cutBody{r: resp.Body, left: p.cutAfter}
		}
		return nil
	}
	rp.ErrorLog = log.New(io.Discard, "", 0) // the cuts are meant
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
			p.ranges = append(p.ranges, r.Header.Get("Range"))
		}
		slow := p.slowDowns > 0
		if slow {
			p.slowDowns--
			p.answered503++
		}
		p.mu.Unlock()
		if slow {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *faultProxy) set(f func(p *faultProxy)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *faultProxy) seen() (ranges []string, answered503 int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ranges...), p.answered503
}

// cutBody passes left bytes, then fails, as a connection reset mid-body
// does: the proxy then aborts the response, and the client reads a body
// shorter than its Content-Length.
type cutBody struct {
	r    io.ReadCloser
	left int
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("cut by the test")
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= n
	return n, err
}

func (c *cutBody) Close() error { return c.r.Close() }

// dialThrough opens the bucket through the proxy.
func dialThrough(t *testing.T, st *testenv.S3State, p *faultProxy, attempts int) *vfs.S3 {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	s, err := vfs.DialS3With(st.Bucket, vfs.S3Options{Endpoint: p.srv.URL, PathStyle: true, Region: st.Region, AccessKey: st.AccessKey, SecretKey: st.SecretKey, MaxAttempts: attempts, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestS3ReadCutMidBody cuts ranged GET bodies in a proxy between the
// backend and versitygw: a positional read and a read-ahead stream both
// return the object's bytes, and the GET after each cut asks for the range
// from the offset the cut body reached, not from the start.
func TestS3ReadCutMidBody(t *testing.T) {
	st := testenv.RequireS3(t)
	p := newFaultProxy(t, st.Endpoint)
	s := dialThrough(t, st, p, 0)
	dir := s3Prefix(t)
	defer s.RemoveAll(dir)
	data := randomBytes(3<<20+5, 3)
	writeObject(t, s, dir+"/obj", data)
	f, err := s.Open(dir + "/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	const cut = 100 << 10
	p.set(func(p *faultProxy) { p.cutAfter, p.cuts, p.ranges = cut, 2, nil })
	got := make([]byte, len(data)-10)
	if n, err := f.ReadAt(got, 10); err != nil || n != len(got) {
		t.Fatalf("ReadAt: n %d, %v", n, err)
	}
	if !bytes.Equal(got, data[10:]) {
		t.Fatal("ReadAt across cut bodies returned other bytes")
	}
	ranges, _ := p.seen()
	checkResumed(t, "ReadAt", ranges, 10, cut, 3)

	p.set(func(p *faultProxy) { p.cutAfter, p.cuts, p.ranges = cut, 3, nil })
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
	ranges, _ = p.seen()
	checkResumed(t, "stream", ranges[1:], 4096, cut, 3) // after the positional read (its cut had no effect)
}

// checkResumed checks the GETs' ranges after cut bodies: the first starts
// at first, and each later one where the previous body was cut, that is
// past the previous start and at most cut bytes on (the proxy loses what
// it had buffered when it aborts), all to the same end.
func checkResumed(t *testing.T, what string, ranges []string, first int64, cut int64, want int) {
	t.Helper()
	if len(ranges) != want {
		t.Fatalf("%s: GET ranges %v, want %d GETs", what, ranges, want)
	}
	var prev int64 = -1
	var end string
	for i, r := range ranges {
		var start int64
		var rest string
		if _, err := fmt.Sscanf(strings.Replace(r, "-", " ", 1), "bytes=%d %s", &start, &rest); err != nil && !(err == io.ErrUnexpectedEOF || err == io.EOF) {
			t.Fatalf("%s: range %q: %v", what, r, err)
		}
		switch {
		case i == 0 && start != first:
			t.Errorf("%s: first GET %q, want it to start at %d", what, r, first)
		case i > 0 && (start <= prev || start > prev+cut):
			t.Errorf("%s: GET %q after a cut at most %d bytes past %d: not resumed from the offset reached", what, r, cut, prev)
		case i > 0 && rest != end:
			t.Errorf("%s: GET %q ends elsewhere than %q", what, r, end)
		}
		prev, end = start, rest
	}
}

// TestS3SlowDownBacksOff answers 503 SlowDown to the first requests: the
// SDK's retryer backs off and retries, so opening and reading an object
// succeed, and with too few attempts allowed the same answers fail the
// read with the server's code (so it is the retries that carried it).
func TestS3SlowDownBacksOff(t *testing.T) {
	st := testenv.RequireS3(t)
	p := newFaultProxy(t, st.Endpoint)
	s := dialThrough(t, st, p, 0)
	dir := s3Prefix(t)
	defer s.RemoveAll(dir)
	data := randomBytes(70000, 4)
	writeObject(t, s, dir+"/obj", data)

	p.set(func(p *faultProxy) { p.slowDowns = 3 })
	f, err := s.Open(dir + "/obj") // HEAD: 503 three times, then the object
	if err != nil {
		t.Fatal(err)
	}
	p.set(func(p *faultProxy) { p.slowDowns = 3 })
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAt after SlowDown: %v", err)
	}
	if _, n := p.seen(); n != 6 {
		t.Errorf("the proxy answered SlowDown %d times, want 6", n)
	}

	few := dialThrough(t, st, p, 2)
	g, err := few.Open(dir + "/obj")
	if err != nil {
		t.Fatal(err)
	}
	p.set(func(p *faultProxy) { p.slowDowns = 3 })
	if _, err := g.ReadAt(got, 0); err == nil || !strings.Contains(err.Error(), "SlowDown") {
		t.Errorf("two attempts against three SlowDowns: %v, want the SlowDown error", err)
	}
}

// TestS3RenameKeepsAReplacedSource replaces the source object between
// Rename's server-side copy and its delete (as another run's fresh lease
// replaces a stale one): the delete, conditional on the copied ETag, leaves
// the new object alone, the rename fails, and the copy of the old bytes is
// taken back.
func TestS3RenameKeepsAReplacedSource(t *testing.T) {
	st := testenv.RequireS3(t)
	direct := s3test.Dial(t, st)
	p := newFaultProxy(t, st.Endpoint)
	s := dialThrough(t, st, p, 0)
	dir := s3Prefix(t)
	defer direct.RemoveAll(dir)
	writeObject(t, direct, dir+"/lease", []byte("stale"))
	p.set(func(p *faultProxy) {
		p.afterCopy = func() { writeObject(t, direct, dir+"/lease", []byte("fresh")) }
	})
	err := s.Rename(dir+"/lease", dir+"/aside")
	if err == nil || !errors.Is(err, iofs.ErrExist) {
		t.Errorf("Rename of a source replaced mid-way: %v, want a failed precondition", err)
	}
	if got := s3test.Stored(t, st, dir+"/lease"); string(got) != "fresh" {
		t.Errorf("the source holds %q, want the replacement kept", got)
	}
	if _, err := direct.Stat(dir + "/aside"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("the copy of the replaced bytes is still there: %v", err)
	}
}
