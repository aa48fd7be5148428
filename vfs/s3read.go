package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Open implements FS. It takes the object's size and ETag from a HEAD;
// every later GET asks for that ETag (If-Match), so an object replaced
// while it is read fails the read instead of mixing two versions' bytes.
func (s *S3) Open(name string) (File, error) {
	fi, err := s.head(name)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			if dir, derr := s.isDir(name); derr == nil && dir {
				return nil, &iofs.PathError{Op: "open", Path: s.name + name, Err: errors.New("is a directory")}
			}
		}
		return nil, err
	}
	return &s3File{s: s, name: name, key: key(name), size: fi.size, etag: fi.etag}, nil
}

// s3File is an object open for ranged reads.
type s3File struct {
	s    *S3
	name string
	key  string
	size int64
	etag string
}

var _ Streamer = (*s3File)(nil)

func (f *s3File) Size() int64  { return f.size }
func (f *s3File) Name() string { return f.name }
func (f *s3File) Close() error { return nil }

// get starts a GET of the bytes from off on: to the end of the object when
// n < 0, else n bytes.
func (f *s3File) get(off, n int64) (io.ReadCloser, error) {
	rng := fmt.Sprintf("bytes=%d-", off)
	if n >= 0 {
		rng = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	in := &s3.GetObjectInput{Bucket: &f.s.bucket, Key: &f.key, Range: aws.String(rng)}
	if f.etag != "" {
		in.IfMatch = aws.String(f.etag)
	}
	out, err := f.s.client.GetObject(context.Background(), in)
	if err != nil {
		err = f.s.explain("read", f.name, err)
		if errors.Is(err, iofs.ErrExist) { // If-Match failed
			return nil, fmt.Errorf("vfs: %s%s changed since it was opened (ETag %s): %w", f.s.name, f.name, f.etag, err)
		}
		return nil, err
	}
	return out.Body, nil
}

// ReadAt implements io.ReaderAt with one ranged GET for p. A body cut
// before its end is asked for again from the offset reached, up to
// s3ReadRetries times without progress.
func (f *s3File) ReadAt(p []byte, off int64) (int, error) {
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
		if fails > s3ReadRetries {
			return got, fmt.Errorf("vfs: read %s%s at %d: %w", f.s.name, f.name, off+int64(got), err)
		}
	}
	return got, short
}

// Stream implements Streamer: one GET from off to the object's end, which
// vfs.ReadAhead consumes in chunks. A body cut mid-way is reopened from the
// offset reached.
func (f *s3File) Stream(off int64) (io.ReadCloser, error) {
	return &s3Stream{f: f, off: off}, nil
}

// s3Stream reads an object front to back through as few GETs as the
// connection allows.
type s3Stream struct {
	f     *s3File
	off   int64
	body  io.ReadCloser
	fails int
}

func (s *s3Stream) Read(p []byte) (int, error) {
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
	if s.fails > s3ReadRetries {
		return n, fmt.Errorf("vfs: stream %s%s at %d: %w", s.f.s.name, s.f.name, s.off, err)
	}
	return n, nil
}

func (s *s3Stream) Close() error {
	if s.body != nil {
		err := s.body.Close()
		s.body = nil
		return err
	}
	return nil
}
