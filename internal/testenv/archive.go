package testenv

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ArchiveMember is one entry of a corpus archive, read into memory.
type ArchiveMember struct {
	Name  string // slash-separated path inside the archive
	IsDir bool
	Data  []byte // nil for directories
}

// ReadArchive returns the directories and regular files of a .zip, .tar,
// or gzipped tar (.tgz, .tar.gz), in archive order. Corpus archives are
// read in place this way so nothing from them lands in the repository.
func ReadArchive(t testing.TB, path string) []ArchiveMember {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []ArchiveMember
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, f := range zr.File {
			if f.FileInfo().IsDir() {
				out = append(out, ArchiveMember{Name: f.Name, IsDir: true})
				continue
			}
			rc, err := f.Open()
			if err != nil {
				t.Fatalf("%s: %s: %v", path, f.Name, err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatalf("%s: %s: %v", path, f.Name, err)
			}
			out = append(out, ArchiveMember{Name: f.Name, Data: b})
		}
		return out
	}
	var r io.Reader = bytes.NewReader(raw)
	if strings.HasSuffix(path, "gz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out = append(out, ArchiveMember{Name: h.Name, IsDir: true})
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("%s: %s: %v", path, h.Name, err)
			}
			out = append(out, ArchiveMember{Name: h.Name, Data: b})
		}
	}
}

// ExtractArchive unpacks an archive (as ReadArchive reads it) into a
// temporary directory and returns that directory. macOS AppleDouble "._"
// entries and the archive's own root entry ("./") are skipped; an entry
// whose path would leave the directory fails the test.
func ExtractArchive(t testing.TB, path string) string {
	t.Helper()
	dir := t.TempDir()
	for _, m := range ReadArchive(t, path) {
		if strings.HasPrefix(filepath.Base(m.Name), "._") {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(m.Name))
		if dst == dir {
			continue
		}
		if !strings.HasPrefix(dst, dir+string(os.PathSeparator)) {
			t.Fatalf("%s: entry %q escapes the extraction directory", path, m.Name)
		}
		if m.IsDir {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, m.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
