package vfs

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	iofs "io/fs"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// azureBlock is the block size: a blob up to this size is one Put Blob; a
// larger one is staged in blocks of this size while it is written (one
// held in memory per writer) and committed at Close.
const azureBlock = 8 << 20

// azureCopyPoll is the wait between looks at a server-side copy that the
// service reports as still pending.
const azureCopyPoll = 50 * time.Millisecond

var (
	_ WriteFS     = (*Azure)(nil)
	_ ExclusiveFS = (*Azure)(nil)
)

// Create implements WriteFS. The blob appears whole at Close, or not at
// all: blocks staged by a writer that fails or is never closed are never
// committed, and the service discards them.
func (a *Azure) Create(name string) (WriteFile, error) {
	return &azureWriter{a: a, name: name, b: a.c.NewBlockBlobClient(key(name))}, nil
}

// CreateExclusive implements ExclusiveFS with a conditional write
// (If-None-Match: *) at Close: of two writers one wins and the other's
// Close fails with fs.ErrExist. As on S3, the name is not taken until
// Close.
func (a *Azure) CreateExclusive(name string) (WriteFile, error) {
	if _, err := a.props(name); err == nil {
		return nil, &iofs.PathError{Op: "create", Path: a.name + name, Err: iofs.ErrExist}
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, err
	}
	return &azureWriter{a: a, name: name, b: a.c.NewBlockBlobClient(key(name)), exclusive: true}, nil
}

// MkdirAll implements WriteFS by writing the directory's empty marker blob
// "name/".
func (a *Azure) MkdirAll(name string) error {
	p := dirPrefix(name)
	if p == "" {
		return nil
	}
	if _, err := a.props(name); err == nil {
		return &iofs.PathError{Op: "mkdir", Path: a.name + name, Err: errors.New("a blob of that name exists")}
	}
	if _, err := a.c.NewBlockBlobClient(p).Upload(context.Background(), streaming.NopCloser(bytes.NewReader(nil)), nil); err != nil {
		return a.explain("mkdir", name, err)
	}
	return nil
}

// Rename implements WriteFS as a server-side copy of oldname (asking for
// the ETag its properties just showed) to newname, waited for until the
// service reports it done, followed by a delete of oldname conditional on
// that ETag (If-Match). It keeps what S3's Rename keeps (see S3.Rename): a
// source replaced between the copy and the delete survives, the rename
// fails and the copy is taken back. Directories cannot be renamed.
func (a *Azure) Rename(oldname, newname string) error {
	fi, err := a.props(oldname)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			if dir, derr := a.isDir(oldname); derr == nil && dir {
				return &iofs.PathError{Op: "rename", Path: a.name + oldname, Err: errors.New("renaming a directory is not supported on Azure")}
			}
		}
		return err
	}
	if err := a.copyBlob(oldname, newname, azcore.ETag(fi.etag)); err != nil {
		return a.explain("rename", oldname, err)
	}
	etag := azcore.ETag(fi.etag)
	_, err = a.blob(oldname).Delete(context.Background(), &blob.DeleteOptions{AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: &etag}}})
	if err != nil {
		err = a.explain("rename", oldname, err)
		if errors.Is(err, iofs.ErrExist) {
			a.blob(newname).Delete(context.Background(), nil)
			return fmt.Errorf("vfs: %s%s was replaced while it was renamed to %s: %w", a.name, oldname, newname, err)
		}
		return err
	}
	return nil
}

// copyBlob copies the version etag of src to dst on the server and waits
// until the copy is complete.
func (a *Azure) copyBlob(src, dst string, etag azcore.ETag) error {
	ctx := context.Background()
	d := a.blob(dst)
	resp, err := d.StartCopyFromURL(ctx, a.blob(src).URL(), &blob.StartCopyFromURLOptions{SourceModifiedAccessConditions: &blob.SourceModifiedAccessConditions{SourceIfMatch: &etag}})
	if err != nil {
		return err
	}
	status := deref(resp.CopyStatus)
	for status == blob.CopyStatusTypePending {
		time.Sleep(azureCopyPoll)
		p, err := d.GetProperties(ctx, nil)
		if err != nil {
			return err
		}
		status = deref(p.CopyStatus)
	}
	if status != blob.CopyStatusTypeSuccess {
		return fmt.Errorf("server-side copy to %s ended %q", dst, status)
	}
	return nil
}

// Remove implements WriteFS: it deletes a blob, or a directory's marker
// when nothing else lies under it. A name that is neither is
// fs.ErrNotExist.
func (a *Azure) Remove(name string) error {
	if _, err := a.props(name); err == nil {
		if _, err := a.blob(name).Delete(context.Background(), nil); err != nil {
			return a.explain("remove", name, err)
		}
		return nil
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	p := dirPrefix(name)
	two := int32(2)
	page, err := a.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &p, MaxResults: &two}).NextPage(context.Background())
	if err != nil {
		return a.explain("remove", name, err)
	}
	items := page.Segment.BlobItems
	switch {
	case len(items) == 0:
		return &iofs.PathError{Op: "remove", Path: a.name + name, Err: iofs.ErrNotExist}
	case len(items) > 1 || deref(items[0].Name) != p:
		return &iofs.PathError{Op: "remove", Path: a.name + name, Err: errors.New("directory not empty")}
	}
	if _, err := a.c.NewBlobClient(p).Delete(context.Background(), nil); err != nil {
		return a.explain("remove", name, err)
	}
	return nil
}

// RemoveAll implements WriteFS: it deletes the blob name and every blob
// under name's prefix.
func (a *Azure) RemoveAll(name string) error {
	prefix := dirPrefix(name)
	if prefix == "" {
		return &iofs.PathError{Op: "removeall", Path: a.name + name, Err: errors.New("refusing to empty the whole container")}
	}
	ctx := context.Background()
	if _, err := a.blob(name).Delete(ctx, nil); err != nil {
		if err := a.explain("removeall", name, err); !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
	}
	p := a.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return a.explain("removeall", name, err)
		}
		for _, b := range page.Segment.BlobItems {
			if _, err := a.c.NewBlobClient(deref(b.Name)).Delete(ctx, nil); err != nil {
				if err := a.explain("removeall", "/"+deref(b.Name), err); !errors.Is(err, iofs.ErrNotExist) {
					return err
				}
			}
		}
	}
	return nil
}

// azureWriter buffers one block; each full block is staged, and Close
// commits the list (or, when nothing was staged, puts the blob whole).
type azureWriter struct {
	a         *Azure
	name      string
	b         *blockblob.Client
	exclusive bool
	buf       []byte
	blocks    []string // staged block ids, in order
	err       error    // sticky
	closed    bool
}

func (w *azureWriter) Name() string { return w.name }

// Sync implements WriteFile. As on S3 (see s3Writer.Sync), nothing is
// stored before Close; Sync reports an earlier failure, if any.
func (w *azureWriter) Sync() error { return w.err }

func (w *azureWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, fmt.Errorf("vfs: write %s%s after Close", w.a.name, w.name)
	}
	n := len(p)
	for len(p) > 0 {
		room := min(azureBlock-len(w.buf), len(p))
		w.buf = append(w.buf, p[:room]...)
		p = p[room:]
		if len(w.buf) == azureBlock {
			if err := w.stage(); err != nil {
				w.err = err
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// stage uploads the buffer as the next block. Block ids are the block's
// number, fixed-width (the service wants ids of one length per blob).
func (w *azureWriter) stage() error {
	id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "block-%08d", len(w.blocks)))
	if _, err := w.b.StageBlock(context.Background(), id, streaming.NopCloser(bytes.NewReader(w.buf)), nil); err != nil {
		return w.a.explain("write", w.name, err)
	}
	w.blocks = append(w.blocks, id)
	w.buf = w.buf[:0]
	return nil
}

// conditions asks, for an exclusive writer, that no blob has the name.
func (w *azureWriter) conditions() *blob.AccessConditions {
	if !w.exclusive {
		return nil
	}
	star := azcore.ETagAny
	return &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &star}}
}

// Close implements WriteFile: it stores the blob, and only then is it
// visible under its name.
func (w *azureWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	ctx := context.Background()
	if len(w.blocks) == 0 {
		_, err := w.b.Upload(ctx, streaming.NopCloser(bytes.NewReader(w.buf)), &blockblob.UploadOptions{AccessConditions: w.conditions()})
		if err != nil {
			w.err = w.a.explain("create", w.name, err)
		}
		w.buf = nil
		return w.err
	}
	if len(w.buf) > 0 {
		if err := w.stage(); err != nil {
			w.err = err
			return err
		}
	}
	if _, err := w.b.CommitBlockList(ctx, w.blocks, &blockblob.CommitBlockListOptions{AccessConditions: w.conditions()}); err != nil {
		w.err = w.a.explain("create", w.name, err)
	}
	w.buf = nil
	return w.err
}
