package s3test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/objstore"
)

// The fault checks every object store shares. Each runs against the
// store's real server (versitygw, fake-gcs-server, Azurite) through a
// FaultProxy: the server serves the bytes, the proxy cuts bodies
// and answers for a busy service.

// CheckReadCutMidBody writes an object under dir through s (which talks
// through p), then cuts download bodies in p: a positional read and a
// read-ahead stream both return the object's bytes, and the download after
// each cut asks for the range from the offset the cut body reached, not
// from the start. Bodies cut before their first byte, again and again,
// fail the read with an error naming the object, never a short read.
func CheckReadCutMidBody(t *testing.T, s vfs.WriteFS, dir string, p *FaultProxy) {
	t.Helper()
	data := RandomBytes(3<<20+5, 3)
	name := dir + "/obj"
	WriteObject(t, s, name, data)
	f, err := s.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	const cut = 100 << 10
	p.CutReads(cut, 2)
	got := make([]byte, len(data)-10)
	if n, err := f.ReadAt(got, 10); err != nil || n != len(got) {
		t.Fatalf("ReadAt: n %d, %v", n, err)
	}
	if !bytes.Equal(got, data[10:]) {
		t.Fatal("ReadAt across cut bodies returned other bytes")
	}
	checkResumed(t, "ReadAt", p.Ranges(), 10, cut, 3)

	p.CutReads(cut, 3)
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
	checkResumed(t, "stream", p.Ranges()[1:], 4096, cut, 3) // after the positional read (its cut had no effect)

	p.CutReads(0, 1000)
	defer p.CutReads(0, 0)
	short := make([]byte, 5000)
	if n, err := f.ReadAt(short, 100); err == nil || !strings.Contains(err.Error(), name) {
		t.Errorf("ReadAt against bodies cut before their first byte: n %d, %v; want an error naming %s", n, err, name)
	}
}

// checkResumed checks the downloads' ranges after cut bodies: the first
// starts at first, and each later one where the previous body was cut,
// that is past the previous start and at most cut bytes on (the proxy
// loses what it had buffered when it aborts), all to the same end.
func checkResumed(t *testing.T, what string, ranges []string, first int64, cut int64, want int) {
	t.Helper()
	if len(ranges) != want {
		t.Fatalf("%s: download ranges %q, want %d downloads", what, ranges, want)
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
			t.Errorf("%s: first download %q, want it to start at %d", what, r, first)
		case i > 0 && (start <= prev || start > prev+cut):
			t.Errorf("%s: download %q after a cut at most %d bytes past %d: not resumed from the offset reached", what, r, cut, prev)
		case i > 0 && rest != end:
			t.Errorf("%s: download %q ends elsewhere than %q", what, r, end)
		}
		prev, end = start, rest
	}
}

// CheckBusyBacksOff writes an object under dir through s, then has p
// answer a to three requests in a row, twice: the backend backs off and
// retries, so opening and reading the object succeed (and the proxy did
// answer six times). Through few, which allows two attempts, the same
// three answers fail the read with an error naming the object and
// carrying code, the server's error code (so it is the retries that
// carried the first reads, and a store that stays busy fails clearly).
func CheckBusyBacksOff(t *testing.T, s, few vfs.WriteFS, dir string, p *FaultProxy, a Answer, code string) {
	t.Helper()
	data := RandomBytes(70000, 4)
	name := dir + "/obj"
	WriteObject(t, s, name, data)
	before := p.Refused()
	p.Refuse(3, a)
	f, err := s.Open(name) // metadata: refused three times, then the object
	if err != nil {
		t.Fatalf("Open after three %d answers: %v", a.Status, err)
	}
	defer f.Close()
	p.Refuse(3, a)
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAt after three %d answers: %v", a.Status, err)
	}
	if n := p.Refused() - before; n != 6 {
		t.Errorf("the proxy answered %d %d times, want 6", a.Status, n)
	}

	g, err := few.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	p.Refuse(3, a)
	defer p.Refuse(0, a)
	_, err = g.ReadAt(got, 0)
	if err == nil || !strings.Contains(err.Error(), code) || !strings.Contains(err.Error(), name) {
		t.Errorf("two attempts against three %d answers: %v, want an error naming %s with %s", a.Status, err, name, code)
	}
}

// CheckRenameKeepsAReplacedSource replaces the source object between
// Rename's server-side copy and its delete (as another run's fresh lease
// replaces a stale one): the delete, conditional on the version copied,
// leaves the new object alone, the rename fails with fs.ErrExist, and the
// copy of the old bytes is taken back. direct writes without the proxy;
// stored is the server's own account of an object's bytes.
func CheckRenameKeepsAReplacedSource(t *testing.T, s, direct vfs.WriteFS, dir string, p *FaultProxy, stored func(name string) []byte) {
	t.Helper()
	WriteObject(t, direct, dir+"/lease", []byte("stale"))
	p.AfterCopy(func() { WriteObject(t, direct, dir+"/lease", []byte("fresh")) })
	defer p.AfterCopy(nil)
	err := s.Rename(dir+"/lease", dir+"/aside")
	if err == nil || !errors.Is(err, iofs.ErrExist) {
		t.Errorf("Rename of a source replaced mid-way: %v, want a failed precondition", err)
	}
	if got := stored(dir + "/lease"); string(got) != "fresh" {
		t.Errorf("the source holds %q, want the replacement kept", got)
	}
	if _, err := direct.Stat(dir + "/aside"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("the copy of the replaced bytes is still there: %v", err)
	}
}

// RandomBytes returns n bytes of a fixed pseudo-random sequence of seed.
func RandomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// WriteObject writes data to name through fsys, failing the test on error.
func WriteObject(t *testing.T, fsys vfs.WriteFS, name string, data []byte) {
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

// Listing renders ReadDir of name as "name:dir:size ...".
func Listing(t *testing.T, fsys vfs.FS, name string) string {
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

// CheckObjectStore runs the checks TestGCSFileSystem and
// TestAzureFileSystem share on the store fsys under dir; stored gives the
// server's own account of an object's bytes.
func CheckObjectStore(t *testing.T, fsys vfs.WriteFS, dir string, stored func(name string) []byte) {
	small := RandomBytes(1000, 1)
	large := RandomBytes(9<<20+17, 2) // past the 8 MiB chunk: two uploads
	WriteObject(t, fsys, dir+"/a/small", small)
	WriteObject(t, fsys, dir+"/a/b/large", large)
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
	if err != nil || fi.IsDir() || fi.Size() != int64(len(large)) || objstore.ETag(fi) == "" {
		t.Fatalf("stat large: %v, %+v (etag %q)", err, fi, objstore.ETag(fi))
	}
	if fi, err := fsys.Stat(dir + "/a"); err != nil || !fi.IsDir() {
		t.Fatalf("stat a: %v, %+v", err, fi)
	}
	if _, err := fsys.Stat(dir + "/nosuch"); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("stat nosuch: %v", err)
	}
	if got, want := Listing(t, fsys, dir), "a:true:0 empty:true:0"; got != want {
		t.Errorf("readdir %s: %s, want %s", dir, got, want)
	}
	if got, want := Listing(t, fsys, dir+"/a"), "b:true:0 small:false:1000"; got != want {
		t.Errorf("readdir a: %s, want %s", got, want)
	}
	if got := Listing(t, fsys, dir+"/empty"); got != "" {
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
	if got := Listing(t, fsys, dir); got != "lease:false:5" {
		t.Errorf("left under %s: %q, want only the lease", dir, got)
	}
}
