package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// s3PartSize is the multipart upload's part size: an object up to this
// size is one PUT; a larger one is uploaded in parts of this size while it
// is written, so a writer holds at most one part in memory. (S3's smallest
// part is 5 MiB and an upload has at most 10,000 parts: 80 GiB.)
var s3PartSize = 8 << 20

// s3CopyMax is the largest object one CopyObject copies (S3's limit is
// 5 GiB); a larger one is copied in parts of s3CopyPart by UploadPartCopy.
// (Variables so a test can copy in parts without writing gigabytes.)
var s3CopyMax, s3CopyPart int64 = 5 << 30, 1 << 30

var (
	_ WriteFS     = (*S3)(nil)
	_ ExclusiveFS = (*S3)(nil)
)

// Create implements WriteFS. The object appears whole at Close, or not at
// all: a writer that fails or is never closed leaves nothing under name
// (an incomplete multipart upload is aborted; one a killed process left is
// invisible and is cleaned by the bucket's lifecycle rules). So on S3 a
// caller may write the final name directly (WholeWriter), as the staging
// and WriteFileAtomic do, saving Rename's server-side copy.
func (s *S3) Create(name string) (WriteFile, error) {
	return &s3Writer{s: s, name: name, key: key(name)}, nil
}

// CreateExclusive implements ExclusiveFS with a conditional write
// (If-None-Match: *): the server checks that no object of that name exists
// and stores the new one in one step, under its own lock, so of two
// writers one wins and the other's Close fails with fs.ErrExist (412
// Precondition Failed). A HEAD first answers early for a name that exists.
// Unlike a local file, the name is not taken until Close: a writer still
// writing does not hold it.
func (s *S3) CreateExclusive(name string) (WriteFile, error) {
	if _, err := s.head(name); err == nil {
		return nil, &iofs.PathError{Op: "create", Path: s.name + name, Err: iofs.ErrExist}
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, err
	}
	return &s3Writer{s: s, name: name, key: key(name), exclusive: true}, nil
}

// MkdirAll implements WriteFS by writing the directory's marker object
// ("name/", empty), so that ReadDir of a directory nothing was written to
// yet lists it empty rather than missing. Parents need no marker: the
// child's key lies under them.
func (s *S3) MkdirAll(name string) error {
	p := dirPrefix(name)
	if p == "" {
		return nil
	}
	if fi, err := s.head(name); err == nil && !fi.dir {
		return &iofs.PathError{Op: "mkdir", Path: s.name + name, Err: errors.New("an object of that name exists")}
	}
	_, err := s.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(p), Body: bytes.NewReader(nil), ContentLength: aws.Int64(0)})
	if err != nil {
		return s.explain("mkdir", name, err)
	}
	return nil
}

// Rename implements WriteFS as a server-side copy of oldname to newname
// (asking for the ETag a HEAD just saw, so a source replaced in between
// fails the copy) followed by a delete of oldname. S3 has no rename; what
// this keeps is what the callers rely on: newname appears whole or not at
// all (a copy is atomic), and a crash between the copy and the delete
// leaves both names with the same bytes, which the callers' temporary
// names tolerate (a leftover temporary is removed or overwritten).
// The delete is conditional on the copied ETag (If-Match), so a source
// replaced between the copy and the delete survives and the rename fails.
// What it does not keep: two renames of one unchanged source at once can
// both succeed, so a rename is no lock; the lease's takeover still ends in
// CreateExclusive, which is (see docs/objectstores.md). An object over 5 GiB (one CopyObject's limit) is
// copied by a multipart upload of ranged part copies, completed only when
// every part is in. Directories cannot be renamed.
func (s *S3) Rename(oldname, newname string) error {
	fi, err := s.head(oldname)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			if dir, derr := s.isDir(oldname); derr == nil && dir {
				return &iofs.PathError{Op: "rename", Path: s.name + oldname, Err: errors.New("renaming a directory is not supported on S3")}
			}
		}
		return err
	}
	if err := s.copyObject(oldname, newname, fi); err != nil {
		return s.explain("rename", oldname, err)
	}
	// The delete asks for the ETag that was copied: a source replaced
	// since (another run's fresh lease where a stale one was) is left
	// alone, and the copy of the old bytes is taken back.
	del := &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(key(oldname))}
	if fi.etag != "" {
		del.IfMatch = aws.String(fi.etag)
	}
	if _, err := s.client.DeleteObject(context.Background(), del); err != nil {
		err = s.explain("rename", oldname, err)
		if errors.Is(err, iofs.ErrExist) {
			s.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(key(newname))})
			return fmt.Errorf("vfs: %s%s was replaced while it was renamed to %s: %w", s.name, oldname, newname, err)
		}
		return err
	}
	return nil
}

// copyObject copies the object src (described by fi) to dst on the
// server, in one request or, past s3CopyMax, in parts.
func (s *S3) copyObject(src, dst string, fi s3Info) error {
	ctx := context.Background()
	from := aws.String(s.bucket + "/" + escapeKey(key(src)))
	var ifMatch *string
	if fi.etag != "" {
		ifMatch = aws.String(fi.etag)
	}
	if fi.size <= s3CopyMax {
		_, err := s.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: aws.String(key(dst)), CopySource: from, CopySourceIfMatch: ifMatch})
		return err
	}
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(key(dst))})
	if err != nil {
		return err
	}
	var parts []types.CompletedPart
	for off, num := int64(0), int32(1); off < fi.size; off, num = off+s3CopyPart, num+1 {
		end := min(off+s3CopyPart, fi.size) - 1
		out, err := s.client.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: &s.bucket, Key: aws.String(key(dst)), UploadId: up.UploadId, PartNumber: aws.Int32(num),
			CopySource: from, CopySourceIfMatch: ifMatch, CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", off, end))})
		if err != nil {
			s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(key(dst)), UploadId: up.UploadId})
			return err
		}
		parts = append(parts, types.CompletedPart{ETag: out.CopyPartResult.ETag, PartNumber: aws.Int32(num)})
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(key(dst)), UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(key(dst)), UploadId: up.UploadId})
	}
	return err
}

// escapeKey URL-encodes a key for CopySource, keeping its slashes.
func escapeKey(k string) string {
	parts := strings.Split(k, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// Remove implements WriteFS: it deletes an object, or a directory's marker
// when nothing else lies under it. A name that is neither is
// fs.ErrNotExist (S3's DELETE would answer success for it).
func (s *S3) Remove(name string) error {
	if _, err := s.head(name); err == nil {
		_, err := s.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(key(name))})
		if err != nil {
			return s.explain("remove", name, err)
		}
		return nil
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	out, err := s.client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(dirPrefix(name)), MaxKeys: aws.Int32(2)})
	if err != nil {
		return s.explain("remove", name, err)
	}
	switch {
	case len(out.Contents) == 0:
		return &iofs.PathError{Op: "remove", Path: s.name + name, Err: iofs.ErrNotExist}
	case len(out.Contents) > 1 || aws.ToString(out.Contents[0].Key) != dirPrefix(name):
		return &iofs.PathError{Op: "remove", Path: s.name + name, Err: errors.New("directory not empty")}
	}
	_, err = s.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(dirPrefix(name))})
	if err != nil {
		return s.explain("remove", name, err)
	}
	return nil
}

// RemoveAll implements WriteFS: it deletes the object name and every key
// under name's prefix, a thousand per request.
func (s *S3) RemoveAll(name string) error {
	prefix := dirPrefix(name)
	if prefix == "" {
		return &iofs.PathError{Op: "removeall", Path: s.name + name, Err: errors.New("refusing to empty the whole bucket")}
	}
	if _, err := s.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(key(name))}); err != nil {
		if err := s.explain("removeall", name, err); !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
	}
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return s.explain("removeall", name, err)
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			ids[i] = types.ObjectIdentifier{Key: o.Key}
		}
		out, err := s.client.DeleteObjects(context.Background(), &s3.DeleteObjectsInput{Bucket: &s.bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return s.explain("removeall", name, err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return &iofs.PathError{Op: "removeall", Path: s.name + "/" + aws.ToString(e.Key), Err: fmt.Errorf("%s: %s (%d keys not deleted)", aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors))}
		}
	}
	return nil
}

// s3Writer buffers one part; the first full part starts a multipart
// upload, and Close stores the rest (one PUT when no part was uploaded).
type s3Writer struct {
	s         *S3
	name, key string
	exclusive bool
	buf       []byte
	upload    *string // the multipart upload's id, once started
	parts     []types.CompletedPart
	err       error // sticky
	closed    bool
}

func (w *s3Writer) Name() string { return w.name }

// Sync implements WriteFile. An object store has no partial objects to make
// durable: the bytes are stored, durably, when Close returns nil, and
// nothing before. Callers that record a file as done only after its Close
// (the stage's HFiles and runs, the checkpoint) keep their promise.
func (w *s3Writer) Sync() error { return w.err }

func (w *s3Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, fmt.Errorf("vfs: write %s%s after Close", w.s.name, w.name)
	}
	n := len(p)
	for len(p) > 0 {
		room := s3PartSize - len(w.buf)
		if room > len(p) {
			room = len(p)
		}
		w.buf = append(w.buf, p[:room]...)
		p = p[room:]
		if len(w.buf) == s3PartSize {
			if err := w.uploadPart(); err != nil {
				w.fail(err)
				return n - len(p), w.err
			}
		}
	}
	return n, nil
}

// uploadPart uploads the buffer as the next part, starting the upload on
// the first.
func (w *s3Writer) uploadPart() error {
	ctx := context.Background()
	if w.upload == nil {
		out, err := w.s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key})
		if err != nil {
			return w.s.explain("create", w.name, err)
		}
		w.upload = out.UploadId
	}
	num := int32(len(w.parts) + 1)
	out, err := w.s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &w.s.bucket, Key: &w.key, UploadId: w.upload, PartNumber: aws.Int32(num), Body: bytes.NewReader(w.buf), ContentLength: aws.Int64(int64(len(w.buf)))})
	if err != nil {
		return w.s.explain("write", w.name, err)
	}
	w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	w.buf = w.buf[:0]
	return nil
}

// fail records err and aborts the upload, so no parts linger.
func (w *s3Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	if w.upload != nil {
		w.s.client.AbortMultipartUpload(context.Background(), &s3.AbortMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key, UploadId: w.upload})
		w.upload = nil
	}
}

// Close implements WriteFile: it stores the object, and only then is it
// visible under its name.
func (w *s3Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		w.fail(w.err)
		return w.err
	}
	var err error
	if w.upload == nil {
		err = w.put()
	} else {
		err = w.complete()
	}
	if err != nil {
		w.fail(err)
	}
	w.buf = nil
	return w.err
}

// put stores a small object in one request.
func (w *s3Writer) put() error {
	in := &s3.PutObjectInput{Bucket: &w.s.bucket, Key: &w.key, Body: bytes.NewReader(w.buf), ContentLength: aws.Int64(int64(len(w.buf)))}
	if w.exclusive {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := w.s.client.PutObject(context.Background(), in); err != nil {
		return w.s.explain("create", w.name, err)
	}
	return nil
}

// complete uploads the last part and completes the upload.
func (w *s3Writer) complete() error {
	if len(w.buf) > 0 {
		if err := w.uploadPart(); err != nil {
			return err
		}
	}
	in := &s3.CompleteMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key, UploadId: w.upload, MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts}}
	if w.exclusive {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := w.s.client.CompleteMultipartUpload(context.Background(), in); err != nil {
		return w.s.explain("create", w.name, err)
	}
	w.upload = nil
	return nil
}
