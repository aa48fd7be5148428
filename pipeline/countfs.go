package pipeline

import (
	"context"
	iofs "io/fs"
	"sync/atomic"

	"github.com/rekeyhq/rekey/vfs"
)

// meteredFS counts the bytes read from the snapshot's file system and
// holds reads to the run's read limit. Only ReadAt is metered: listing and
// stat calls are small.
type meteredFS struct {
	vfs.FS
	read *atomic.Int64
	lim  *limiter
	ctx  context.Context
}

func (m *meteredFS) Open(name string) (vfs.File, error) {
	f, err := m.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &meteredFile{File: f, fs: m}, nil
}

func (m *meteredFS) Stat(name string) (iofs.FileInfo, error)      { return m.FS.Stat(name) }
func (m *meteredFS) ReadDir(name string) ([]iofs.FileInfo, error) { return m.FS.ReadDir(name) }

type meteredFile struct {
	vfs.File
	fs *meteredFS
}

func (f *meteredFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.lim.wait(f.fs.ctx, float64(len(p))); err != nil {
		return 0, err
	}
	n, err := f.File.ReadAt(p, off)
	f.fs.read.Add(int64(n))
	return n, err
}
