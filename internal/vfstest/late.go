// Package vfstest holds file systems for tests that play what a real
// backend does where the local and in-memory ones cannot.
package vfstest

import (
	"bytes"

	"github.com/rekeyhq/rekey/vfs"
)

// LateExclusive plays an object store's exclusive create (S3, GCS,
// Azure: a conditional write) on a memory file system: the name is taken
// when the writer is closed, not when it is created, so of two writers
// the second learns it lost at Close, with an error matching
// fs.ErrExist.
type LateExclusive struct{ *vfs.Mem }

// CreateExclusive returns a writer that takes name at Close.
func (l LateExclusive) CreateExclusive(name string) (vfs.WriteFile, error) {
	return &lateWriter{fs: l.Mem, name: name}, nil
}

type lateWriter struct {
	fs   *vfs.Mem
	name string
	buf  bytes.Buffer
}

func (w *lateWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *lateWriter) Sync() error                 { return nil }
func (w *lateWriter) Name() string                { return w.name }

// Close creates the file exclusively, with every byte written.
func (w *lateWriter) Close() error {
	f, err := w.fs.CreateExclusive(w.name)
	if err != nil {
		return err
	}
	if _, err := f.Write(w.buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
