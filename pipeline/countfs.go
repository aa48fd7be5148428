package pipeline

import (
	"context"
	"io"
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
	mf := &meteredFile{File: f, fs: m}
	if st, ok := f.(vfs.Streamer); ok {
		// Keep the file streaming (HDFS read-ahead), metered too.
		return &meteredStreamFile{meteredFile: mf, s: st}, nil
	}
	return mf, nil
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

type meteredStreamFile struct {
	*meteredFile
	s vfs.Streamer
}

func (f *meteredStreamFile) Stream(off int64) (io.ReadCloser, error) {
	rc, err := f.s.Stream(off)
	if err != nil {
		return nil, err
	}
	return &meteredStream{rc: rc, fs: f.fs}, nil
}

type meteredStream struct {
	rc io.ReadCloser
	fs *meteredFS
}

func (m *meteredStream) Read(p []byte) (int, error) {
	if err := m.fs.lim.wait(m.fs.ctx, float64(len(p))); err != nil {
		return 0, err
	}
	n, err := m.rc.Read(p)
	m.fs.read.Add(int64(n))
	return n, err
}

func (m *meteredStream) Close() error { return m.rc.Close() }
