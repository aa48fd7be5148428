package vfs

import (
	"fmt"
	"io"
	iofs "io/fs"
	"strings"
	"sync"
)

// Fault describes one injected failure.
type Fault struct {
	// PathContains selects the files it applies to (empty = all).
	PathContains string
	// Op is "open", "stat", "readdir" or "read".
	Op string
	// Offset, for reads: the fault fires for a read whose range covers this
	// byte offset.
	Offset int64
	// Short makes a read return fewer bytes than asked with a nil error,
	// breaking the io.ReaderAt contract the way a buggy implementation
	// would; otherwise the operation fails with Err.
	Short bool
	// Err is the error returned (a generic injected error when nil).
	Err error
	// Times limits how often the fault fires (0 = every time).
	Times int
	fired int
}

// ErrInjected is returned by faults without their own Err.
var ErrInjected = fmt.Errorf("vfs: injected fault")

// Faulty wraps an FS and injects the given faults, for testing that
// readers report failures with their location and never pass off partial
// data as complete.
type Faulty struct {
	FS     FS
	mu     sync.Mutex
	faults []Fault
}

// NewFaulty wraps fsys with the faults.
func NewFaulty(fsys FS, faults ...Fault) *Faulty { return &Faulty{FS: fsys, faults: faults} }

// String implements FS.
func (f *Faulty) String() string { return "faulty(" + f.FS.String() + ")" }

func (f *Faulty) find(op, name string, off, n int64) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.faults {
		ft := &f.faults[i]
		if ft.Op != op || !strings.Contains(name, ft.PathContains) {
			continue
		}
		if op == "read" && (ft.Offset < off || ft.Offset >= off+n) {
			continue
		}
		if ft.Times > 0 && ft.fired >= ft.Times {
			continue
		}
		ft.fired++
		return ft
	}
	return nil
}

func (ft *Fault) err(op, name string) error {
	err := ft.Err
	if err == nil {
		err = ErrInjected
	}
	return &iofs.PathError{Op: op, Path: name, Err: err}
}

// Open implements FS.
func (f *Faulty) Open(name string) (File, error) {
	if ft := f.find("open", name, 0, 0); ft != nil {
		return nil, ft.err("open", name)
	}
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

// Stat implements FS.
func (f *Faulty) Stat(name string) (iofs.FileInfo, error) {
	if ft := f.find("stat", name, 0, 0); ft != nil {
		return nil, ft.err("stat", name)
	}
	return f.FS.Stat(name)
}

// ReadDir implements FS.
func (f *Faulty) ReadDir(name string) ([]iofs.FileInfo, error) {
	if ft := f.find("readdir", name, 0, 0); ft != nil {
		return nil, ft.err("readdir", name)
	}
	return f.FS.ReadDir(name)
}

type faultyFile struct {
	File
	fs *Faulty
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	ft := f.fs.find("read", f.Name(), off, int64(len(p)))
	if ft == nil {
		return f.File.ReadAt(p, off)
	}
	if ft.Short {
		n := int(ft.Offset - off)
		m, err := f.File.ReadAt(p[:n], off)
		return m, err
	}
	return 0, ft.err("read", f.Name())
}

// Full wraps a File whose ReadAt may return short reads with a nil error
// (a broken implementation, or a fault injected on purpose) and makes it
// honour the io.ReaderAt contract: it asks again for the rest, and fails
// with io.ErrUnexpectedEOF when the file stops giving bytes.
//
// A File that streams (Streamer) still does after wrapping.
func Full(f File) File {
	if s, ok := f.(Streamer); ok {
		return fullStreamFile{fullFile{f}, s}
	}
	return fullFile{f}
}

type fullFile struct{ File }

type fullStreamFile struct {
	fullFile
	s Streamer
}

func (f fullStreamFile) Stream(off int64) (io.ReadCloser, error) { return f.s.Stream(off) }

func (f fullFile) ReadAt(p []byte, off int64) (int, error) {
	done, stalls := 0, 0
	for done < len(p) {
		n, err := f.File.ReadAt(p[done:], off+int64(done))
		done += n
		if err != nil {
			return done, err
		}
		if n == 0 {
			if stalls++; stalls > 2 {
				return done, fmt.Errorf("%s: read at offset %d: no progress: %w", f.Name(), off+int64(done), io.ErrUnexpectedEOF)
			}
		}
	}
	return done, nil
}
