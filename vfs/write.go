package vfs

import (
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"time"
)

// WriteFS is a file system rekey can also write: checkpoints, reject files,
// spilled runs and staged HFiles. Snapshot roots are only ever opened
// through FS; nothing in package snapshot asks for a WriteFS.
type WriteFS interface {
	FS
	// Create creates or truncates name for writing. Its parent must exist.
	Create(name string) (WriteFile, error)
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(name string) error
	// Rename moves oldname to newname, replacing newname if it exists. On
	// local disks and HDFS the replacement is atomic: a reader sees the old
	// file or the new one, never a mix.
	Rename(oldname, newname string) error
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// RemoveAll deletes name and everything under it; a missing name is not
	// an error.
	RemoveAll(name string) error
}

// WriteFile is a file open for writing. Sync makes what was written durable
// (fsync locally, hflush on HDFS) before Close returns; Close without Sync
// gives no durability promise beyond the implementation's.
type WriteFile interface {
	io.Writer
	io.Closer
	// Sync makes the bytes written so far durable.
	Sync() error
	// Name is the path the file was created with.
	Name() string
}

var tmpSeq atomic.Uint64

// WriteFileAtomic writes data to name so that a reader (or a crash) sees
// either the old content or all of the new one, never a torn file: it
// writes a temporary file beside name, syncs it, and renames it over name.
// On an object store (WritesWhole) it writes name directly: the object
// appears whole at Close or not at all, and there is no rename to save.
func WriteFileAtomic(fsys WriteFS, name string, data []byte) error {
	if WritesWhole(fsys) {
		return writeWhole(fsys, name, data)
	}
	tmp := fmt.Sprintf("%s.tmp-%d-%d-%d", name, os.Getpid(), time.Now().UnixNano(), tmpSeq.Add(1))
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("vfs: create %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: rename %s to %s: %w", tmp, name, err)
	}
	return nil
}

// writeWhole is WriteFileAtomic on a WholeWriter: one object, whose Close
// makes it visible; a failed write leaves the old object.
func writeWhole(fsys WriteFS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return fmt.Errorf("vfs: create %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("vfs: write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("vfs: close %s: %w", name, err)
	}
	return nil
}

// Create implements WriteFS.
func (Local) Create(name string) (WriteFile, error) {
	f, err := os.OpenFile(filepath.FromSlash(name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &localWriter{f: f, name: name}, nil
}

// MkdirAll implements WriteFS.
func (Local) MkdirAll(name string) error { return os.MkdirAll(filepath.FromSlash(name), 0o755) }

// Rename implements WriteFS. It also syncs the directory that receives the
// new name, so the rename itself survives a power loss.
func (Local) Rename(oldname, newname string) error {
	if err := os.Rename(filepath.FromSlash(oldname), filepath.FromSlash(newname)); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(filepath.FromSlash(newname))); err == nil {
		d.Sync() // best effort: some file systems refuse fsync on directories
		d.Close()
	}
	return nil
}

// Remove implements WriteFS.
func (Local) Remove(name string) error { return os.Remove(filepath.FromSlash(name)) }

// RemoveAll implements WriteFS.
func (Local) RemoveAll(name string) error { return os.RemoveAll(filepath.FromSlash(name)) }

type localWriter struct {
	f    *os.File
	name string
}

func (w *localWriter) Write(p []byte) (int, error) { return w.f.Write(p) }
func (w *localWriter) Sync() error                 { return w.f.Sync() }
func (w *localWriter) Close() error                { return w.f.Close() }
func (w *localWriter) Name() string                { return w.name }

// Create implements WriteFS: the file becomes visible when it is closed.
func (m *Mem) Create(name string) (WriteFile, error) {
	return &memWriter{m: m, name: path.Clean("/" + name)}, nil
}

// MkdirAll implements WriteFS; directories are implicit in Mem.
func (m *Mem) MkdirAll(string) error { return nil }

// Rename implements WriteFS.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = path.Clean("/"+oldname), path.Clean("/"+newname)
	b, ok := m.files[oldname]
	if !ok {
		return &iofs.PathError{Op: "rename", Path: oldname, Err: iofs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = b
	return nil
}

// RemoveAll implements WriteFS.
func (m *Mem) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean("/" + name)
	for f := range m.files {
		if f == name || (len(f) > len(name) && f[:len(name)+1] == name+"/") {
			delete(m.files, f)
		}
	}
	return nil
}

type memWriter struct {
	m    *Mem
	name string
	buf  []byte
}

func (w *memWriter) Write(p []byte) (int, error) { w.buf = append(w.buf, p...); return len(p), nil }
func (w *memWriter) Sync() error                 { return nil }
func (w *memWriter) Close() error                { w.m.WriteFile(w.name, w.buf); return nil }
func (w *memWriter) Name() string                { return w.name }
