package vfs

import (
	"errors"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
)

// ExclusiveFS is a WriteFS that creates a file only when no file of that
// name exists, in one step that no other writer can come between: the
// primitive a lease file is built on.
type ExclusiveFS interface {
	WriteFS
	// CreateExclusive creates name for writing, or fails with an error
	// matching fs.ErrExist when name exists (also while another writer is
	// still writing it). Its parent must exist.
	CreateExclusive(name string) (WriteFile, error)
}

var (
	_ ExclusiveFS = Local{}
	_ ExclusiveFS = (*Mem)(nil)
)

// CreateExclusive implements ExclusiveFS with O_CREATE|O_EXCL, which the
// kernel checks and applies as one step.
func (Local) CreateExclusive(name string) (WriteFile, error) {
	f, err := os.OpenFile(filepath.FromSlash(name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &localWriter{f: f, name: name}, nil
}

// CreateExclusive implements ExclusiveFS. The name is taken at once (an
// empty file until the writer is closed), as on a real file system.
func (m *Mem) CreateExclusive(name string) (WriteFile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean("/" + name)
	if _, ok := m.files[name]; ok {
		return nil, &iofs.PathError{Op: "create", Path: name, Err: iofs.ErrExist}
	}
	m.files[name] = nil
	return &memWriter{m: m, name: name}, nil
}

// WriteExclusive writes data to name unless another writer has the name:
// created exclusively, written, synced and closed. won is false, with no
// error, when the name is taken, which a local disk and HDFS say at
// create and an object store only at Close (the name is taken then);
// the other writer's file is never touched. Any other failure removes
// what this call half wrote, so no reader finds it short.
func WriteExclusive(fsys ExclusiveFS, name string, data []byte) (won bool, err error) {
	w, err := fsys.CreateExclusive(name)
	if errors.Is(err, iofs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err = w.Write(data); err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, iofs.ErrExist):
		return false, nil
	}
	fsys.Remove(name)
	return false, err
}
