package vfs

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path"
	"sort"
)

// objReadRetries is how many times a ranged GET whose body was cut is
// reissued from the offset reached, without progress in between, before
// the read fails. (The SDKs retry a request that fails; a body that breaks
// after the answer began is the reader's to resume.)
const objReadRetries = 4

// objFile is an object of an object store (S3, GCS) open for ranged reads.
// The store's backend supplies get, which asks for a byte range of the
// version of the object that was opened; objFile turns it into positional
// reads and read-ahead streams that survive bodies cut mid-way.
type objFile struct {
	store string // "s3a://bucket", "gs://bucket": for messages
	name  string
	size  int64
	// get starts a read of the bytes from off on: to the end of the object
	// when n < 0, else n bytes.
	get func(off, n int64) (io.ReadCloser, error)
}

var _ Streamer = (*objFile)(nil)

func (f *objFile) Size() int64  { return f.size }
func (f *objFile) Name() string { return f.name }
func (f *objFile) Close() error { return nil }

// ReadAt implements io.ReaderAt with one ranged GET for p. A body cut
// before its end is asked for again from the offset reached, up to
// objReadRetries times without progress.
func (f *objFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &iofs.PathError{Op: "readat", Path: f.name, Err: errors.New("negative offset")}
	}
	want := p
	var short error
	if rest := f.size - off; int64(len(p)) > rest {
		if rest <= 0 {
			if len(p) == 0 {
				return 0, nil
			}
			return 0, io.EOF
		}
		want, short = p[:rest], io.EOF
	}
	got, fails := 0, 0
	for got < len(want) {
		body, err := f.get(off+int64(got), int64(len(want)-got))
		if err != nil {
			return got, err
		}
		n, err := io.ReadFull(body, want[got:])
		body.Close()
		got += n
		if err == nil {
			break
		}
		if n == 0 {
			fails++
		} else {
			fails = 0
		}
		if fails > objReadRetries {
			return got, fmt.Errorf("vfs: read %s%s at %d: %w", f.store, f.name, off+int64(got), err)
		}
	}
	return got, short
}

// Stream implements Streamer: one GET from off to the object's end, which
// vfs.ReadAhead consumes in chunks. A body cut mid-way is reopened from the
// offset reached.
func (f *objFile) Stream(off int64) (io.ReadCloser, error) {
	return &objStream{f: f, off: off}, nil
}

// objStream reads an object front to back through as few GETs as the
// connection allows.
type objStream struct {
	f     *objFile
	off   int64
	body  io.ReadCloser
	fails int
}

func (s *objStream) Read(p []byte) (int, error) {
	if s.off >= s.f.size {
		return 0, io.EOF
	}
	if s.body == nil {
		b, err := s.f.get(s.off, -1)
		if err != nil {
			return 0, err
		}
		s.body = b
	}
	n, err := s.body.Read(p)
	s.off += int64(n)
	if n > 0 {
		s.fails = 0
	}
	if err == nil || (err == io.EOF && s.off >= s.f.size) {
		if err == io.EOF && n > 0 {
			err = nil // the next Read answers EOF
		}
		return n, err
	}
	// The body broke (or ended early): drop it and reopen at s.off.
	s.body.Close()
	s.body = nil
	if n == 0 {
		s.fails++
	}
	if s.fails > objReadRetries {
		return n, fmt.Errorf("vfs: stream %s%s at %d: %w", s.f.store, s.f.name, s.off, err)
	}
	return n, nil
}

func (s *objStream) Close() error {
	if s.body != nil {
		err := s.body.Close()
		s.body = nil
		return err
	}
	return nil
}

// statObject is Stat of an object store: the root is a directory; name is
// the object stat finds (its metadata), else a directory if some object
// lies under its prefix (isDir), else fs.ErrNotExist as stat said.
func statObject(name string, stat func(string) (iofs.FileInfo, error), isDir func(string) (bool, error)) (iofs.FileInfo, error) {
	if key(name) == "" {
		return s3Info{name: "/", dir: true}, nil
	}
	fi, err := stat(name)
	if err == nil {
		return fi, nil
	}
	if !errors.Is(err, iofs.ErrNotExist) {
		return nil, err
	}
	dir, derr := isDir(name)
	if derr != nil {
		return nil, derr
	}
	if !dir {
		return nil, err
	}
	return s3Info{name: path.Base(name), dir: true}, nil
}

// listed ends ReadDir of an object store: a prefix nothing lay under is
// "not a directory" when name is an object (stat finds it), else
// fs.ErrNotExist; what was listed comes back sorted by name.
func listed(fsName, name, prefix string, found bool, out []iofs.FileInfo, stat func(string) (iofs.FileInfo, error)) ([]iofs.FileInfo, error) {
	if !found && prefix != "" {
		if _, err := stat(name); err == nil {
			return nil, &iofs.PathError{Op: "readdir", Path: fsName + name, Err: errors.New("not a directory")}
		}
		return nil, &iofs.PathError{Op: "readdir", Path: fsName + name, Err: iofs.ErrNotExist}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}
