package s3_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/objstore"
	"github.com/rekeyhq/rekey/vfs/s3"
)

// s3Prefix is a fresh key prefix for one test in the testenv bucket.
func s3Prefix(t *testing.T) string {
	return fmt.Sprintf("/%svfs-%s-%d", os.Getenv("REKEY_TEST_PREFIX"), strings.ToLower(t.Name()), rand.Uint32())
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

	small := s3test.RandomBytes(1000, 1)
	large := s3test.RandomBytes(9<<20+17, 2) // past the 8 MiB part: two parts
	s3test.WriteObject(t, fsys, dir+"/a/small", small)
	s3test.WriteObject(t, fsys, dir+"/a/b/large", large)
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
	if err != nil || fi.IsDir() || fi.Size() != int64(len(large)) || objstore.ETag(fi) == "" {
		t.Fatalf("stat large: %v, %+v (etag %q)", err, fi, objstore.ETag(fi))
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
	restore := s3.SetCopyLimits(6<<20, 5<<20)
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
	if fi, err := fsys.Stat(dir + "/large-moved"); err != nil || !strings.HasSuffix(objstore.ETag(fi), `-2"`) {
		t.Errorf("the copy's ETag %q (%v), want one of a 2-part upload", objstore.ETag(fi), err)
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

// dialThrough opens the bucket through the fault proxy p.
func dialThrough(t *testing.T, st *testenv.S3State, p *s3test.FaultProxy, attempts int) *s3.FS {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	s, err := s3.DialWith(st.Bucket, s3.Options{Endpoint: p.Endpoint(st.Endpoint), PathStyle: true, Region: st.Region, AccessKey: st.AccessKey, SecretKey: st.SecretKey, MaxAttempts: attempts, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestS3ReadCutMidBody cuts ranged GET bodies in a proxy between the
// backend and versitygw: reads resume from the offset reached (see
// checkReadCutMidBody).
func TestS3ReadCutMidBody(t *testing.T) {
	st := testenv.RequireS3(t)
	p := s3test.StartFaultProxy(t, st.Endpoint, s3test.S3Protocol)
	s := dialThrough(t, st, p, 0)
	dir := s3Prefix(t)
	defer s.RemoveAll(dir)
	s3test.CheckReadCutMidBody(t, s, dir, p)
}

// TestS3SlowDownBacksOff answers 503 SlowDown to the first requests: the
// SDK's retryer backs off and retries, and too few attempts fail with
// SlowDown (see checkBusyBacksOff).
func TestS3SlowDownBacksOff(t *testing.T) {
	st := testenv.RequireS3(t)
	p := s3test.StartFaultProxy(t, st.Endpoint, s3test.S3Protocol)
	s := dialThrough(t, st, p, 0)
	dir := s3Prefix(t)
	defer s.RemoveAll(dir)
	s3test.CheckBusyBacksOff(t, s, dialThrough(t, st, p, 2), dir, p, s3test.S3SlowDown, "SlowDown")
}

// TestS3RenameKeepsAReplacedSource replaces the source object between
// Rename's server-side copy and its delete: the delete, conditional on the
// copied ETag, leaves it alone (see checkRenameKeepsAReplacedSource).
func TestS3RenameKeepsAReplacedSource(t *testing.T) {
	st := testenv.RequireS3(t)
	direct := s3test.Dial(t, st)
	p := s3test.StartFaultProxy(t, st.Endpoint, s3test.S3Protocol)
	s := dialThrough(t, st, p, 0)
	dir := s3Prefix(t)
	defer direct.RemoveAll(dir)
	s3test.CheckRenameKeepsAReplacedSource(t, s, direct, dir, p, func(name string) []byte { return s3test.Stored(t, st, name) })
}
