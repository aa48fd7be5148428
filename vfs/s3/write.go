package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/objstore"
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
	_ vfs.WriteFS     = (*FS)(nil)
	_ vfs.ExclusiveFS = (*FS)(nil)
)

// Create implements vfs.WriteFS. The object appears whole at Close, or not at
// all: a writer that fails or is never closed leaves nothing under name
// (an incomplete multipart upload is aborted; one a killed process left is
// invisible and is cleaned by the bucket's lifecycle rules). So on S3 a
// caller may write the final name directly (vfs.WholeWriter), as the staging
// and WriteFileAtomic do, saving Rename's server-side copy.
func (s *FS) Create(name string) (vfs.WriteFile, error) {
	return s.writer(name, false), nil
}

// CreateExclusive implements vfs.ExclusiveFS with a conditional write
// (If-None-Match: *): the server checks that no object of that name exists
// and stores the new one in one step, under its own lock, so of two
// writers one wins and the other's Close fails with fs.ErrExist (412
// Precondition Failed). A HEAD first answers early for a name that exists.
// Unlike a local file, the name is not taken until Close: a writer still
// writing does not hold it.
func (s *FS) CreateExclusive(name string) (vfs.WriteFile, error) {
	if _, err := s.head(name); err == nil {
		return nil, &iofs.PathError{Op: "create", Path: s.name + name, Err: iofs.ErrExist}
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, err
	}
	return s.writer(name, true), nil
}

// MkdirAll implements vfs.WriteFS by writing the directory's marker object
// ("name/", empty), so that ReadDir of a directory nothing was written to
// yet lists it empty rather than missing. Parents need no marker: the
// child's key lies under them.
func (s *FS) MkdirAll(name string) error {
	p := objstore.DirPrefix(name)
	if p == "" {
		return nil
	}
	if fi, err := s.head(name); err == nil && !fi.IsDir() {
		return &iofs.PathError{Op: "mkdir", Path: s.name + name, Err: errors.New("an object of that name exists")}
	}
	_, err := s.client.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(p), Body: bytes.NewReader(nil), ContentLength: aws.Int64(0)})
	if err != nil {
		return s.explain("mkdir", name, err)
	}
	return nil
}

// Rename implements vfs.WriteFS as a server-side copy of oldname to newname
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
func (s *FS) Rename(oldname, newname string) error {
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
	del := &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(oldname))}
	if objstore.ETag(fi) != "" {
		del.IfMatch = aws.String(objstore.ETag(fi))
	}
	if _, err := s.client.DeleteObject(context.Background(), del); err != nil {
		err = s.explain("rename", oldname, err)
		if errors.Is(err, iofs.ErrExist) {
			s.client.DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(newname))})
			return fmt.Errorf("vfs: %s%s was replaced while it was renamed to %s: %w", s.name, oldname, newname, err)
		}
		return err
	}
	return nil
}

// copyObject copies the object src (described by fi) to dst on the
// server, in one request or, past s3CopyMax, in parts.
func (s *FS) copyObject(src, dst string, fi objstore.Info) error {
	ctx := context.Background()
	from := aws.String(s.bucket + "/" + escapeKey(objstore.Key(src)))
	var ifMatch *string
	if objstore.ETag(fi) != "" {
		ifMatch = aws.String(objstore.ETag(fi))
	}
	if fi.Size() <= s3CopyMax {
		_, err := s.client.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(dst)), CopySource: from, CopySourceIfMatch: ifMatch})
		return err
	}
	up, err := s.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(dst))})
	if err != nil {
		return err
	}
	var parts []types.CompletedPart
	for off, num := int64(0), int32(1); off < fi.Size(); off, num = off+s3CopyPart, num+1 {
		end := min(off+s3CopyPart, fi.Size()) - 1
		out, err := s.client.UploadPartCopy(ctx, &awss3.UploadPartCopyInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(dst)), UploadId: up.UploadId, PartNumber: aws.Int32(num),
			CopySource: from, CopySourceIfMatch: ifMatch, CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", off, end))})
		if err != nil {
			s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(dst)), UploadId: up.UploadId})
			return err
		}
		parts = append(parts, types.CompletedPart{ETag: out.CopyPartResult.ETag, PartNumber: aws.Int32(num)})
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(dst)), UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(dst)), UploadId: up.UploadId})
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

// Remove implements vfs.WriteFS: it deletes an object, or a directory's marker
// when nothing else lies under it. A name that is neither is
// fs.ErrNotExist (S3's DELETE would answer success for it).
func (s *FS) Remove(name string) error {
	if _, err := s.head(name); err == nil {
		_, err := s.client.DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(name))})
		if err != nil {
			return s.explain("remove", name, err)
		}
		return nil
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	out, err := s.client.ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(objstore.DirPrefix(name)), MaxKeys: aws.Int32(2)})
	if err != nil {
		return s.explain("remove", name, err)
	}
	switch {
	case len(out.Contents) == 0:
		return &iofs.PathError{Op: "remove", Path: s.name + name, Err: iofs.ErrNotExist}
	case len(out.Contents) > 1 || aws.ToString(out.Contents[0].Key) != objstore.DirPrefix(name):
		return &iofs.PathError{Op: "remove", Path: s.name + name, Err: errors.New("directory not empty")}
	}
	_, err = s.client.DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(objstore.DirPrefix(name))})
	if err != nil {
		return s.explain("remove", name, err)
	}
	return nil
}

// RemoveAll implements vfs.WriteFS: it deletes the object name and every key
// under name's prefix, a thousand per request.
func (s *FS) RemoveAll(name string) error {
	prefix := objstore.DirPrefix(name)
	if prefix == "" {
		return &iofs.PathError{Op: "removeall", Path: s.name + name, Err: errors.New("refusing to empty the whole bucket")}
	}
	if _, err := s.client.DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(objstore.Key(name))}); err != nil {
		if err := s.explain("removeall", name, err); !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
	}
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(prefix)})
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
		out, err := s.client.DeleteObjects(context.Background(), &awss3.DeleteObjectsInput{Bucket: &s.bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
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

// WritesWholeObjects implements vfs.WholeWriter.
func (*FS) WritesWholeObjects() {}

// writer returns a whole-object writer of name: one PUT for an object up
// to a part, else a multipart upload started at the first full part and
// completed at Close. An exclusive writer's PUT or completion asks that
// no object has the name (If-None-Match: *).
func (s *FS) writer(name string, exclusive bool) *objstore.Writer {
	return objstore.NewWriter(s.name, name, s3PartSize, &s3Parts{s: s, name: name, key: objstore.Key(name), exclusive: exclusive})
}

// s3Parts stores an object's parts as a multipart upload.
type s3Parts struct {
	s         *FS
	name, key string
	exclusive bool
	upload    *string // the multipart upload's id, once started
	parts     []types.CompletedPart
}

// Part uploads data as part num, starting the upload at the first.
func (w *s3Parts) Part(num int, data []byte) error {
	ctx := context.Background()
	if w.upload == nil {
		out, err := w.s.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key})
		if err != nil {
			return w.s.explain("create", w.name, err)
		}
		w.upload = out.UploadId
	}
	out, err := w.s.client.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &w.s.bucket, Key: &w.key, UploadId: w.upload, PartNumber: aws.Int32(int32(num)), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
	if err != nil {
		return w.s.explain("write", w.name, err)
	}
	w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(num))})
	return nil
}

// Abort aborts the upload, if one was started, so no parts linger.
func (w *s3Parts) Abort() {
	if w.upload != nil {
		w.s.client.AbortMultipartUpload(context.Background(), &awss3.AbortMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key, UploadId: w.upload})
		w.upload = nil
	}
}

// Put stores a small object in one request.
func (w *s3Parts) Put(data []byte) error {
	in := &awss3.PutObjectInput{Bucket: &w.s.bucket, Key: &w.key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))}
	if w.exclusive {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := w.s.client.PutObject(context.Background(), in); err != nil {
		return w.s.explain("create", w.name, err)
	}
	return nil
}

// Complete completes the upload.
func (w *s3Parts) Complete() error {
	in := &awss3.CompleteMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key, UploadId: w.upload, MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts}}
	if w.exclusive {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := w.s.client.CompleteMultipartUpload(context.Background(), in); err != nil {
		return w.s.explain("create", w.name, err)
	}
	w.upload = nil
	return nil
}
