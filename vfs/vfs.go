// Package vfs is the small file system interface the snapshot reader, the
// sinks and the job's state work through: its core holds the interfaces,
// the local and in-memory file systems and a wrapper that injects faults
// for tests, and Open finds a URL's file system in the scheme registry
// each backend package (vfs/hdfs, vfs/s3, vfs/gcs, vfs/azure) joins when a
// program imports it, so this package links no backend's SDK.
//
// Paths are slash-separated and absolute within the file system ("/hbase/
// data/default/t/..."). Missing files are reported with errors that satisfy
// errors.Is(err, fs.ErrNotExist), whichever implementation produced them.
//
// File.ReadAt never returns a partial read without an error: n < len(p)
// means err != nil (io.EOF when the read ran past the end of the file).
// Implementations that could return short reads loop until p is full.
package vfs

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// FS is a read-only file system.
type FS interface {
	// Open opens a file for random-access reads.
	Open(name string) (File, error)
	// Stat describes a file or directory.
	Stat(name string) (iofs.FileInfo, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]iofs.FileInfo, error)
	// String names the file system in error messages ("local",
	// "hdfs://nn:8020").
	String() string
}

// File is an open file. ReadAt is safe for concurrent use.
type File interface {
	io.ReaderAt
	io.Closer
	// Size is the file's length in bytes when it was opened.
	Size() int64
	// Name is the path it was opened with.
	Name() string
}

// ReadFile reads a whole file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n := f.Size()
	if n < 0 || n > 1<<31 {
		return nil, fmt.Errorf("vfs: %s: size %d too large to read whole", name, n)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !(err == io.EOF && n == 0) {
		return nil, fmt.Errorf("vfs: read %s: %w", name, err)
	}
	return b, nil
}

// Exists reports whether name exists; other errors than "not found" are
// returned.
func Exists(fsys FS, name string) (bool, error) {
	_, err := fsys.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, iofs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// Local is the local file system. Names are used as given (absolute or
// relative to the working directory) after converting slashes.
type Local struct{}

// String implements FS.
func (Local) String() string { return "local" }

// ErrNotRegular is matched by errors for a path that names a FIFO, a
// device, a socket or anything else but a regular file or directory:
// opening a FIFO would block and a device reads endless bytes, so Open
// refuses them before opening.
var ErrNotRegular = errors.New("vfs: not a regular file")

// Open implements FS. It refuses directories and anything that is not a
// regular file, checked before the open (a FIFO blocks in open) and again
// on the opened file.
func (Local) Open(name string) (File, error) {
	p := filepath.FromSlash(name)
	if st, err := os.Stat(p); err != nil {
		return nil, err
	} else if err := regular(name, st); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := regular(name, st); err != nil {
		f.Close()
		return nil, err
	}
	return &localFile{f: f, size: st.Size(), name: name}, nil
}

// regular refuses directories and non-regular files.
func regular(name string, st iofs.FileInfo) error {
	if st.IsDir() {
		return &iofs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	if !st.Mode().IsRegular() {
		return &iofs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, st.Mode().Type())}
	}
	return nil
}

// Stat implements FS.
func (Local) Stat(name string) (iofs.FileInfo, error) { return os.Stat(filepath.FromSlash(name)) }

// ReadDir implements FS.
func (Local) ReadDir(name string) ([]iofs.FileInfo, error) {
	ents, err := os.ReadDir(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	out := make([]iofs.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				continue // removed while listing
			}
			return nil, err
		}
		out = append(out, fi)
	}
	return out, nil
}

type localFile struct {
	f    *os.File
	size int64
	name string
}

// os.File.ReadAt already loops until p is full or an error occurs.
func (l *localFile) ReadAt(p []byte, off int64) (int, error) { return l.f.ReadAt(p, off) }
func (l *localFile) Close() error                            { return l.f.Close() }
func (l *localFile) Size() int64                             { return l.size }
func (l *localFile) Name() string                            { return l.name }

// Mem is an in-memory file system for tests. Directories exist implicitly
// as the parents of files. The zero value is not usable; call NewMem.
type Mem struct {
	mu    sync.RWMutex
	files map[string][]byte
}

// NewMem returns an empty in-memory file system.
func NewMem() *Mem { return &Mem{files: map[string][]byte{}} }

// String implements FS.
func (m *Mem) String() string { return "mem" }

// WriteFile stores data (copied) under name, replacing any file there.
func (m *Mem) WriteFile(name string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path.Clean("/"+name)] = append([]byte(nil), data...)
}

// Remove implements WriteFS: it deletes a file, or reports
// fs.ErrNotExist.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean("/" + name)
	if _, ok := m.files[name]; !ok {
		return &iofs.PathError{Op: "remove", Path: name, Err: iofs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

// Open implements FS.
func (m *Mem) Open(name string) (File, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	b, ok := m.files[path.Clean("/"+name)]
	if !ok {
		return nil, &iofs.PathError{Op: "open", Path: name, Err: iofs.ErrNotExist}
	}
	return &memFile{b: b, name: name}, nil
}

// Stat implements FS.
func (m *Mem) Stat(name string) (iofs.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	name = path.Clean("/" + name)
	if b, ok := m.files[name]; ok {
		return memInfo{name: path.Base(name), size: int64(len(b))}, nil
	}
	prefix := name + "/"
	if name == "/" {
		prefix = "/"
	}
	for f := range m.files {
		if len(f) > len(prefix) && f[:len(prefix)] == prefix {
			return memInfo{name: path.Base(name), dir: true}, nil
		}
	}
	return nil, &iofs.PathError{Op: "stat", Path: name, Err: iofs.ErrNotExist}
}

// ReadDir implements FS.
func (m *Mem) ReadDir(name string) ([]iofs.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	name = path.Clean("/" + name)
	prefix := name + "/"
	if name == "/" {
		prefix = "/"
	}
	seen := map[string]iofs.FileInfo{}
	for f, b := range m.files {
		if len(f) <= len(prefix) || f[:len(prefix)] != prefix {
			continue
		}
		rest := f[len(prefix):]
		if i := indexByte(rest, '/'); i >= 0 {
			seen[rest[:i]] = memInfo{name: rest[:i], dir: true}
		} else {
			seen[rest] = memInfo{name: rest, size: int64(len(b))}
		}
	}
	if len(seen) == 0 {
		if _, ok := m.files[name]; ok {
			return nil, &iofs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
		}
		return nil, &iofs.PathError{Op: "readdir", Path: name, Err: iofs.ErrNotExist}
	}
	out := make([]iofs.FileInfo, 0, len(seen))
	for _, fi := range seen {
		out = append(out, fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

type memFile struct {
	b    []byte
	name string
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &iofs.PathError{Op: "readat", Path: f.name, Err: errors.New("negative offset")}
	}
	if off >= int64(len(f.b)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (f *memFile) Close() error { return nil }
func (f *memFile) Size() int64  { return int64(len(f.b)) }
func (f *memFile) Name() string { return f.name }

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() iofs.FileMode {
	if i.dir {
		return iofs.ModeDir | 0o555
	}
	return 0o444
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
