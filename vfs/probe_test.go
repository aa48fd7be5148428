package vfs

import (
	"errors"
	"net/url"
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

// probeRaceFS is a memory store whose first Create runs another
// ProbeCreate of the same file to its end: two tasks of one job, in one
// process here as two containers with one pid are, probing a shared
// folder at once.
type probeRaceFS struct {
	*Mem
	once  bool
	inner error
	names []string
}

func (p *probeRaceFS) Create(name string) (WriteFile, error) {
	p.names = append(p.names, name)
	w, err := p.Mem.Create(name)
	if !p.once {
		p.once = true
		p.inner = ProbeCreate("probetest://h/dir/rejects.tsv")
	}
	return w, err
}

// TestProbeCreateRace: two probes of one file at once use two probe
// files, both succeed, and leave nothing behind. Before, the probe was named by pid alone, so the
// second removed the first's file and the first failed (exit 2 for a
// task of a job on Kubernetes, where every pod's rekey is pid 1).
func TestProbeCreateRace(t *testing.T) {
	fs := &probeRaceFS{Mem: NewMem()}
	Register(func(*url.URL, Options) (WriteFS, func() error, error) { return fs, nil, nil }, "probetest")
	// The scheme is this test's alone: others list the registered ones.
	t.Cleanup(func() {
		dialersMu.Lock()
		delete(dialers, "probetest")
		dialersMu.Unlock()
	})
	fs.WriteFile("/dir/other", []byte("x"))
	if err := ProbeCreate("probetest://h/dir/rejects.tsv"); err != nil {
		t.Errorf("the first probe: %v", err)
	}
	if fs.inner != nil {
		t.Errorf("the second probe: %v", fs.inner)
	}
	if len(fs.names) != 2 || fs.names[0] == fs.names[1] {
		t.Errorf("the probes created %q, want two files of different names", fs.names)
	}
	if ents, _ := fs.ReadDir("/dir"); len(ents) != 1 {
		t.Errorf("the folder holds %d entries after the probes, want 1", len(ents))
	}
}
