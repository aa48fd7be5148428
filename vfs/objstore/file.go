// Package objstore holds what the object-store backends (vfs/s3, vfs/gcs,
// vfs/azure) share: ranged reads of one version of an object, with
// streams for read-ahead that survive bodies cut mid-way; whole-object
// writes buffered in parts; object names as paths, directories as name
// prefixes; and the FileInfo they describe objects with, which carries
// the version (ETag) they pin reads to. Each store supplies only the
// requests.
package objstore

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/vfs"
)

// ReadRetries is how many times a ranged GET whose body was cut is
// reissued from the offset reached, without progress in between, before
// the read fails. (The SDKs retry a request that fails; a body that breaks
// after the answer began is the reader's to resume.)
const ReadRetries = 4

// Get starts a read of an object's bytes from off on: to the end of the
// object when n < 0, else n bytes. A store's Get asks for the version of
// the object that was opened (its ETag or generation), so an object
// replaced while it is read fails the read instead of mixing versions.
type Get func(off, n int64) (io.ReadCloser, error)

// File is an object open for ranged reads: it turns a store's Get into
// positional reads and read-ahead streams (vfs.Streamer) that survive
// bodies cut mid-way.
type File struct {
	store string // "s3a://bucket", "gs://bucket": for messages
	name  string
	size  int64
	get   Get
}

// Open returns the object name of store (named as in messages, "s3a://bucket"),
// size bytes long, read through get.
func Open(store, name string, size int64, get Get) *File {
	return &File{store: store, name: name, size: size, get: get}
}

var _ vfs.Streamer = (*File)(nil)

// Size implements vfs.File.
func (f *File) Size() int64 { return f.size }

// Name implements vfs.File.
func (f *File) Name() string { return f.name }

// Close implements vfs.File: an open object holds nothing.
func (f *File) Close() error { return nil }

// ReadAt implements io.ReaderAt with one ranged GET for p. A body cut
// before its end is asked for again from the offset reached, up to
// ReadRetries times without progress.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
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
		if fails > ReadRetries {
			return got, fmt.Errorf("vfs: read %s%s at %d: %w", f.store, f.name, off+int64(got), err)
		}
	}
	return got, short
}

// Stream implements vfs.Streamer: one GET from off to the object's end, which
// vfs.ReadAhead consumes in chunks. A body cut mid-way is reopened from the
// offset reached.
func (f *File) Stream(off int64) (io.ReadCloser, error) {
	return &stream{f: f, off: off}, nil
}

// stream reads an object front to back through as few GETs as the
// connection allows.
type stream struct {
	f     *File
	off   int64
	body  io.ReadCloser
	fails int
}

func (s *stream) Read(p []byte) (int, error) {
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
	if s.fails > ReadRetries {
		return n, fmt.Errorf("vfs: stream %s%s at %d: %w", s.f.store, s.f.name, s.off, err)
	}
	return n, nil
}

func (s *stream) Close() error {
	if s.body != nil {
		err := s.body.Close()
		s.body = nil
		return err
	}
	return nil
}

// Stat is Stat of an object store: the root is a directory; name is
// the object stat finds (its metadata), else a directory if some object
// lies under its prefix (isDir), else fs.ErrNotExist as stat said.
func Stat(name string, stat func(string) (iofs.FileInfo, error), isDir func(string) (bool, error)) (iofs.FileInfo, error) {
	if Key(name) == "" {
		return Dir("/"), nil
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
	return Dir(path.Base(name)), nil
}

// Listed ends ReadDir of an object store: a prefix nothing lay under is
// "not a directory" when name is an object (stat finds it), else
// fs.ErrNotExist; what was listed comes back sorted by name.
func Listed(fsName, name, prefix string, found bool, out []iofs.FileInfo, stat func(string) (iofs.FileInfo, error)) ([]iofs.FileInfo, error) {
	if !found && prefix != "" {
		if _, err := stat(name); err == nil {
			return nil, &iofs.PathError{Op: "readdir", Path: fsName + name, Err: errors.New("not a directory")}
		}
		return nil, &iofs.PathError{Op: "readdir", Path: fsName + name, Err: iofs.ErrNotExist}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Key turns a path into an object name.
func Key(name string) string { return strings.TrimPrefix(path.Clean("/"+name), "/") }

// DirPrefix is the name prefix of the directory name ("" for the root).
func DirPrefix(name string) string {
	k := Key(name)
	if k == "" {
		return ""
	}
	return k + "/"
}

// DefaultAttempts bounds a store SDK's attempts per request unless the
// backend's options say otherwise: more than the SDKs' usual 3, since a
// throttled bucket (S3's SlowDown, GCS's 429, Azure's ServerBusy) may
// need several backed-off tries while a long scan must not fail.
const DefaultAttempts = 8

// Info is a file or directory of an object store, as Stat and ReadDir
// describe it.
type Info struct {
	name  string
	size  int64
	mtime time.Time
	etag  string
	dir   bool
}

// Object describes an object: its base name, length, time of last
// modification and ETag (the store's version of it, quotes included).
func Object(name string, size int64, mtime time.Time, etag string) Info {
	return Info{name: name, size: size, mtime: mtime, etag: etag}
}

// Dir describes a directory: a name prefix some object lies under.
func Dir(name string) Info { return Info{name: name, dir: true} }

// Name implements fs.FileInfo.
func (i Info) Name() string { return i.name }

// Size implements fs.FileInfo.
func (i Info) Size() int64 { return i.size }

// ModTime implements fs.FileInfo.
func (i Info) ModTime() time.Time { return i.mtime }

// IsDir implements fs.FileInfo.
func (i Info) IsDir() bool { return i.dir }

// Mode implements fs.FileInfo.
func (i Info) Mode() iofs.FileMode {
	if i.dir {
		return iofs.ModeDir | 0o755
	}
	return 0o644
}

// Sys returns the object's ETag (a string, quotes included), "" for a
// directory.
func (i Info) Sys() any { return i.etag }

// ETag returns the ETag of an object as Stat or ReadDir on an object
// store described it, or "" for anything else.
func ETag(fi iofs.FileInfo) string {
	if i, ok := fi.(Info); ok {
		return i.etag
	}
	return ""
}
