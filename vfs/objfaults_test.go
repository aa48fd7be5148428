package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/vfs"
)

// The fault checks every object store shares. Each runs against the
// store's real server (versitygw, fake-gcs-server, Azurite) through an
// s3test.FaultProxy: the server serves the bytes, the proxy cuts bodies
// and answers for a busy service.

// checkReadCutMidBody writes an object under dir through s (which talks
// through p), then cuts download bodies in p: a positional read and a
// read-ahead stream both return the object's bytes, and the download after
// each cut asks for the range from the offset the cut body reached, not
// from the start. Bodies cut before their first byte, again and again,
// fail the read with an error naming the object, never a short read.
func checkReadCutMidBody(t *testing.T, s vfs.WriteFS, dir string, p *s3test.FaultProxy) {
	t.Helper()
	data := randomBytes(3<<20+5, 3)
	name := dir + "/obj"
	writeObject(t, s, name, data)
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

// checkBusyBacksOff writes an object under dir through s, then has p
// answer a to three requests in a row, twice: the backend backs off and
// retries, so opening and reading the object succeed (and the proxy did
// answer six times). Through few, which allows two attempts, the same
// three answers fail the read with an error naming the object and
// carrying code, the server's error code (so it is the retries that
// carried the first reads, and a store that stays busy fails clearly).
func checkBusyBacksOff(t *testing.T, s, few vfs.WriteFS, dir string, p *s3test.FaultProxy, a s3test.Answer, code string) {
	t.Helper()
	data := randomBytes(70000, 4)
	name := dir + "/obj"
	writeObject(t, s, name, data)
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

// checkRenameKeepsAReplacedSource replaces the source object between
// Rename's server-side copy and its delete (as another run's fresh lease
// replaces a stale one): the delete, conditional on the version copied,
// leaves the new object alone, the rename fails with fs.ErrExist, and the
// copy of the old bytes is taken back. direct writes without the proxy;
// stored is the server's own account of an object's bytes.
func checkRenameKeepsAReplacedSource(t *testing.T, s, direct vfs.WriteFS, dir string, p *s3test.FaultProxy, stored func(name string) []byte) {
	t.Helper()
	writeObject(t, direct, dir+"/lease", []byte("stale"))
	p.AfterCopy(func() { writeObject(t, direct, dir+"/lease", []byte("fresh")) })
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
