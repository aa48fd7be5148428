package vfs

import (
	"errors"
	iofs "io/fs"
	"path/filepath"
	"testing"
)

// TestLocalAppend: Append adds at the end of an existing file, and a
// missing file is fs.ErrNotExist, not created.
func TestLocalAppend(t *testing.T) {
	p := filepath.ToSlash(filepath.Join(t.TempDir(), "j"))
	var fsys Appender = Local{}
	if _, err := fsys.Append(p); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("append to a missing file: %v, want fs.ErrNotExist", err)
	}
	f, err := fsys.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("head;"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, rec := range []string{"one;", "two;"} {
		w, err := fsys.Append(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(rec)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := ReadFile(fsys, p)
	if err != nil || string(b) != "head;one;two;" {
		t.Fatalf("after two appends: %q, %v; want %q", b, err, "head;one;two;")
	}
}
