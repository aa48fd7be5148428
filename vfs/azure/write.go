package azure

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

	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/objstore"
)

// azureBlock is the block size: a blob up to this size is one Put Blob; a
// larger one is staged in blocks of this size while it is written (one
// held in memory per writer) and committed at Close.
const azureBlock = 8 << 20

// azureCopyPoll is the wait between looks at a server-side copy that the
// service reports as still pending.
const azureCopyPoll = 50 * time.Millisecond

var (
	_ vfs.WriteFS     = (*FS)(nil)
	_ vfs.ExclusiveFS = (*FS)(nil)
)

// WritesWholeObjects implements vfs.WholeWriter.
func (*FS) WritesWholeObjects() {}

// Create implements vfs.WriteFS. The blob appears whole at Close, or not at
// all: blocks staged by a writer that fails or is never closed are never
// committed, and the service discards them.
func (a *FS) Create(name string) (vfs.WriteFile, error) {
	return a.writer(name, false), nil
}

// CreateExclusive implements vfs.ExclusiveFS with a conditional write
// (If-None-Match: *) at Close: of two writers one wins and the other's
// Close fails with fs.ErrExist. As on S3, the name is not taken until
// Close.
func (a *FS) CreateExclusive(name string) (vfs.WriteFile, error) {
	if _, err := a.props(name); err == nil {
		return nil, &iofs.PathError{Op: "create", Path: a.name + name, Err: iofs.ErrExist}
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, err
	}
	return a.writer(name, true), nil
}

// MkdirAll implements vfs.WriteFS by writing the directory's empty marker blob
// "name/".
func (a *FS) MkdirAll(name string) error {
	p := objstore.DirPrefix(name)
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

// Rename implements vfs.WriteFS as a server-side copy of oldname (asking for
// the ETag its properties just showed) to newname, waited for until the
// service reports it done, followed by a delete of oldname conditional on
// that ETag (If-Match). It keeps what S3's Rename keeps (see the s3 backend's FS.Rename): a
// source replaced between the copy and the delete survives, the rename
// fails and the copy is taken back. Directories cannot be renamed.
func (a *FS) Rename(oldname, newname string) error {
	fi, err := a.props(oldname)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			if dir, derr := a.isDir(oldname); derr == nil && dir {
				return &iofs.PathError{Op: "rename", Path: a.name + oldname, Err: errors.New("renaming a directory is not supported on Azure")}
			}
		}
		return err
	}
	if err := a.copyBlob(oldname, newname, azcore.ETag(objstore.ETag(fi))); err != nil {
		return a.explain("rename", oldname, err)
	}
	etag := azcore.ETag(objstore.ETag(fi))
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
func (a *FS) copyBlob(src, dst string, etag azcore.ETag) error {
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

// Remove implements vfs.WriteFS: it deletes a blob, or a directory's marker
// when nothing else lies under it. A name that is neither is
// fs.ErrNotExist.
func (a *FS) Remove(name string) error {
	if _, err := a.props(name); err == nil {
		if _, err := a.blob(name).Delete(context.Background(), nil); err != nil {
			return a.explain("remove", name, err)
		}
		return nil
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	p := objstore.DirPrefix(name)
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

// RemoveAll implements vfs.WriteFS: it deletes the blob name and every blob
// under name's prefix.
func (a *FS) RemoveAll(name string) error {
	prefix := objstore.DirPrefix(name)
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

// writer returns a whole-object writer of name: one Put Blob for a blob
// up to a block, else blocks staged as they fill and committed at Close.
// An exclusive writer's put or commit asks that no blob has the name
// (If-None-Match: *).
func (a *FS) writer(name string, exclusive bool) *objstore.Writer {
	return objstore.NewWriter(a.name, name, azureBlock, &azureParts{a: a, name: name, b: a.c.NewBlockBlobClient(objstore.Key(name)), exclusive: exclusive})
}

// azureParts stores a blob's blocks.
type azureParts struct {
	a         *FS
	name      string
	b         *blockblob.Client
	exclusive bool
	blocks    []string // staged block ids, in order
}

// Part stages data as the next block. Block ids are the block's number,
// fixed-width (the service wants ids of one length per blob).
func (w *azureParts) Part(num int, data []byte) error {
	id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "block-%08d", num-1))
	if _, err := w.b.StageBlock(context.Background(), id, streaming.NopCloser(bytes.NewReader(data)), nil); err != nil {
		return w.a.explain("write", w.name, err)
	}
	w.blocks = append(w.blocks, id)
	return nil
}

// Abort does nothing: staged blocks are never committed, and the service
// discards uncommitted blocks after a week.
func (w *azureParts) Abort() {}

// conditions asks, for an exclusive writer, that no blob has the name.
func (w *azureParts) conditions() *blob.AccessConditions {
	if !w.exclusive {
		return nil
	}
	star := azcore.ETagAny
	return &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &star}}
}

// Put stores the blob whole.
func (w *azureParts) Put(data []byte) error {
	_, err := w.b.Upload(context.Background(), streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{AccessConditions: w.conditions()})
	if err != nil {
		return w.a.explain("create", w.name, err)
	}
	return nil
}

// Complete commits the staged blocks.
func (w *azureParts) Complete() error {
	if _, err := w.b.CommitBlockList(context.Background(), w.blocks, &blockblob.CommitBlockListOptions{AccessConditions: w.conditions()}); err != nil {
		return w.a.explain("create", w.name, err)
	}
	return nil
}
