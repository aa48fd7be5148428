package vfs

import (
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileAtomicReplacesWholeFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		fsys WriteFS
		dir  string
	}{
		{"local", Local{}, filepath.ToSlash(t.TempDir())},
		{"mem", NewMem(), "/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.dir + "/ckpt.json"
			if err := WriteFileAtomic(tc.fsys, p, []byte("first")); err != nil {
				t.Fatal(err)
			}
			if err := WriteFileAtomic(tc.fsys, p, []byte("second, longer")); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFile(tc.fsys, p)
			if err != nil || string(got) != "second, longer" {
				t.Fatalf("read back %q, %v", got, err)
			}
			ents, err := tc.fsys.ReadDir(tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 1 {
				t.Fatalf("temporary files left behind: %d entries", len(ents))
			}
		})
	}
}

func TestWriteFSRemoveAndRename(t *testing.T) {
	dir := filepath.ToSlash(t.TempDir())
	var fsys WriteFS = Local{}
	if err := fsys.MkdirAll(dir + "/a/b"); err != nil {
		t.Fatal(err)
	}
	w, err := fsys.Create(dir + "/a/b/f")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := fsys.Rename(dir+"/a/b/f", dir+"/a/g"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(dir + "/a/b/f"); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("remove of a renamed file: %v, want not exist", err)
	}
	if err := fsys.RemoveAll(dir + "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/a"); !os.IsNotExist(err) {
		t.Fatalf("RemoveAll left %s/a", dir)
	}
	if err := fsys.RemoveAll(dir + "/nothing"); err != nil {
		t.Fatalf("RemoveAll of a missing path: %v", err)
	}
}

func TestOpenURLs(t *testing.T) {
	wd, _ := os.Getwd()
	for _, tc := range []struct {
		in, path, err string
	}{
		{in: "/tmp/x", path: "/tmp/x"},
		{in: "rel/x", path: filepath.ToSlash(filepath.Join(wd, "rel/x"))},
		{in: "file:///tmp/x", path: "/tmp/x"},
		{in: "file://localhost/tmp/x", path: "/tmp/x"},
		{in: "file://tmp/x", err: "host must be empty or localhost"},
		{in: "ftp://bucket/x", err: `scheme "ftp"`},
		{in: "", err: "empty path"},
	} {
		loc, err := Open(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Open(%q) = %v, want an error containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || loc.Path != tc.path {
			t.Errorf("Open(%q) = %+v, %v; want path %s", tc.in, loc, err, tc.path)
		}
	}
	if _, err := Open("ftp://b/k"); !errors.Is(err, ErrUnsupportedScheme) {
		t.Errorf("ftp error is not ErrUnsupportedScheme: %v", err)
	}
}
