package vfs

import (
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exercise runs the same checks against any FS holding /d/a (5 bytes
// "hello") and /d/e/b.
func exercise(t *testing.T, fsys FS, root string) {
	t.Helper()
	f, err := fsys.Open(root + "/d/a")
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != 5 {
		t.Errorf("size %d", f.Size())
	}
	p := make([]byte, 3)
	if n, err := f.ReadAt(p, 1); n != 3 || err != nil || string(p) != "ell" {
		t.Errorf("ReadAt(1) = %d %v %q", n, err, p)
	}
	if n, err := f.ReadAt(p, 3); n != 2 || err != io.EOF {
		t.Errorf("ReadAt past the end = %d %v, want 2 io.EOF", n, err)
	}
	f.Close()
	if _, err := fsys.Open(root + "/d/missing"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("Open missing: %v", err)
	}
	if _, err := fsys.Stat(root + "/nope"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("Stat missing: %v", err)
	}
	ents, err := fsys.ReadDir(root + "/d")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, n)
	}
	if got := strings.Join(names, ","); got != "a,e/" {
		t.Errorf("ReadDir = %s", got)
	}
	if _, err := fsys.Open(root + "/d/e"); err == nil {
		t.Error("Open of a directory succeeded")
	}
	b, err := ReadFile(fsys, root+"/d/e/b")
	if err != nil || string(b) != "bee" {
		t.Errorf("ReadFile = %q %v", b, err)
	}
}

func TestMem(t *testing.T) {
	m := NewMem()
	m.WriteFile("/d/a", []byte("hello"))
	m.WriteFile("/d/e/b", []byte("bee"))
	exercise(t, m, "")
}

func TestLocal(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "d", "e"), 0o755)
	os.WriteFile(filepath.Join(dir, "d", "a"), []byte("hello"), 0o644)
	os.WriteFile(filepath.Join(dir, "d", "e", "b"), []byte("bee"), 0o644)
	exercise(t, Local{}, filepath.ToSlash(dir))
}

func TestFaulty(t *testing.T) {
	m := NewMem()
	m.WriteFile("/d/a", []byte("hello"))
	m.WriteFile("/d/e/b", []byte("bee"))
	exercise(t, NewFaulty(m), "") // no faults: same behaviour

	f := NewFaulty(m, Fault{PathContains: "/d/a", Op: "read", Offset: 2})
	file, _ := f.Open("/d/a")
	p := make([]byte, 2)
	if _, err := file.ReadAt(p, 0); err != nil {
		t.Errorf("read before the fault: %v", err)
	}
	if _, err := file.ReadAt(p, 1); !errors.Is(err, ErrInjected) {
		t.Errorf("read over the fault: %v", err)
	}
	if _, err := NewFaulty(m, Fault{Op: "open"}).Open("/d/a"); !errors.Is(err, ErrInjected) {
		t.Errorf("open fault: %v", err)
	}
	if _, err := NewFaulty(m, Fault{Op: "readdir"}).ReadDir("/d"); !errors.Is(err, ErrInjected) {
		t.Errorf("readdir fault: %v", err)
	}
}

func TestFullCompletesShortReads(t *testing.T) {
	m := NewMem()
	m.WriteFile("/a", []byte("0123456789"))
	f := NewFaulty(m, Fault{Op: "read", Offset: 4, Short: true, Times: 1})
	raw, _ := f.Open("/a")
	p := make([]byte, 8)
	if n, err := raw.ReadAt(p, 0); n != 4 || err != nil {
		t.Fatalf("the fault should give a short read without error, got %d %v", n, err)
	}
	f = NewFaulty(m, Fault{Op: "read", Offset: 4, Short: true, Times: 1})
	raw, _ = f.Open("/a")
	full := Full(raw)
	if n, err := full.ReadAt(p, 0); n != 8 || err != nil || string(p) != "01234567" {
		t.Fatalf("Full: %d %v %q", n, err, p)
	}
	// A file that never makes progress fails instead of spinning.
	f = NewFaulty(m, Fault{Op: "read", Offset: 4, Short: true})
	raw, _ = f.Open("/a")
	if _, err := Full(raw).ReadAt(p, 0); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("stalled reads: %v, want io.ErrUnexpectedEOF", err)
	}
}
