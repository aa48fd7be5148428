package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProbeCreate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, where, says string
	}{
		{"new file in a folder", filepath.Join(dir, "rejects.tsv"), ""},
		{"existing file", file, ""},
		{"file URL", "file://" + filepath.Join(dir, "r.tsv"), ""},
		{"missing folder, created", filepath.Join(dir, "new", "r.tsv"), ""},
		{"folder is a file", filepath.Join(file, "r.tsv"), "is not a folder"},
		{"folder under a file", filepath.Join(file, "sub", "r.tsv"), "not a directory"},
		{"a folder", dir, "is a folder"},
		{"unsupported scheme", "ftp://bucket/r.tsv", "unsupported"},
	} {
		err := ProbeCreate(c.where)
		switch {
		case c.says == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.says != "" && (!errors.Is(err, ErrCannotCreate) || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%s: %v; want ErrCannotCreate saying %q", c.name, err, c.says)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("the folder holds %d entries after the checks, want a-file and new/: the probes must go", len(ents))
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "new")); len(ents) != 0 {
		t.Errorf("new/ holds %d entries, want none", len(ents))
	}
}
