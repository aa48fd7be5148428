package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/objstore"
)

// Open implements vfs.FS. It takes the object's size and ETag from a HEAD;
// every later GET asks for that ETag (If-Match), so an object replaced
// while it is read fails the read instead of mixing two versions' bytes.
func (s *FS) Open(name string) (vfs.File, error) {
	fi, err := s.head(name)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			if dir, derr := s.isDir(name); derr == nil && dir {
				return nil, &iofs.PathError{Op: "open", Path: s.name + name, Err: errors.New("is a directory")}
			}
		}
		return nil, err
	}
	f := &s3File{s: s, name: name, key: objstore.Key(name), etag: objstore.ETag(fi)}
	return objstore.Open(s.name, name, fi.Size(), f.get), nil
}

// s3File is the state an object's ranged GETs share.
type s3File struct {
	s    *FS
	name string
	key  string
	etag string
}

// get starts a GET of the bytes from off on: to the end of the object when
// n < 0, else n bytes.
func (f *s3File) get(off, n int64) (io.ReadCloser, error) {
	rng := fmt.Sprintf("bytes=%d-", off)
	if n >= 0 {
		rng = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	in := &awss3.GetObjectInput{Bucket: &f.s.bucket, Key: &f.key, Range: aws.String(rng)}
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
