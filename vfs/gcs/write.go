package gcs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/objstore"
)

var (
	_ vfs.WriteFS     = (*FS)(nil)
	_ vfs.ExclusiveFS = (*FS)(nil)
	_ vfs.Aborter     = (*gcsWriter)(nil)
)

// WritesWholeObjects implements vfs.WholeWriter.
func (*FS) WritesWholeObjects() {}

// Create implements vfs.WriteFS. The object appears whole at Close, or not at
// all: a writer that fails or is never closed leaves nothing under name
// (its unfinished resumable upload expires on the server). The upload is
// retried on transient errors although it carries no precondition: what a
// retry can do twice is store the same bytes under the same name.
func (g *FS) Create(name string) (vfs.WriteFile, error) {
	return g.newWriter(name, g.object(name).Retryer(storage.WithPolicy(storage.RetryAlways))), nil
}

// CreateExclusive implements vfs.ExclusiveFS with a conditional write
// (DoesNotExist, that is ifGenerationMatch=0): the server stores the object
// only if no live object has the name, so of two writers one wins and the
// other's Close fails with fs.ErrExist (412 Precondition Failed). Metadata
// read first answers early for a name that exists. As on S3, the name is
// not taken until Close.
func (g *FS) CreateExclusive(name string) (vfs.WriteFile, error) {
	if _, err := g.attrs(name); err == nil {
		return nil, &iofs.PathError{Op: "create", Path: g.name + name, Err: iofs.ErrExist}
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, err
	}
	return g.newWriter(name, g.object(name).If(storage.Conditions{DoesNotExist: true})), nil
}

func (g *FS) newWriter(name string, obj *storage.ObjectHandle) *gcsWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := obj.NewWriter(ctx)
	w.ChunkSize = gcsChunk
	return &gcsWriter{g: g, name: name, w: w, cancel: cancel}
}

// MkdirAll implements vfs.WriteFS by writing the directory's marker object
// ("name/", empty), so that ReadDir of a directory nothing was written to
// yet lists it empty rather than missing.
func (g *FS) MkdirAll(name string) error {
	p := objstore.DirPrefix(name)
	if p == "" {
		return nil
	}
	if _, err := g.attrs(name); err == nil {
		return &iofs.PathError{Op: "mkdir", Path: g.name + name, Err: errors.New("an object of that name exists")}
	}
	w := g.bucket.Object(p).Retryer(storage.WithPolicy(storage.RetryAlways)).NewWriter(context.Background())
	if err := w.Close(); err != nil {
		return g.explain("mkdir", name, err)
	}
	return nil
}

// Rename implements vfs.WriteFS as a server-side copy (a rewrite, which the
// library repeats until a large object is done) of the generation of
// oldname its metadata just showed, followed by a delete of exactly that
// generation, conditional on it (ifGenerationMatch). It keeps what S3's
// Rename keeps (see the s3 backend's FS.Rename): newname appears whole or not at all, and a
// source replaced between the copy and the delete survives, the rename
// fails and the copy is taken back. Directories cannot be renamed.
func (g *FS) Rename(oldname, newname string) error {
	a, err := g.attrs(oldname)
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			if dir, derr := g.isDir(oldname); derr == nil && dir {
				return &iofs.PathError{Op: "rename", Path: g.name + oldname, Err: errors.New("renaming a directory is not supported on GCS")}
			}
		}
		return err
	}
	ctx := context.Background()
	src := g.object(oldname).Generation(a.Generation)
	copied, err := g.object(newname).CopierFrom(src).Run(ctx)
	if err != nil {
		return g.explain("rename", oldname, err)
	}
	err = src.If(storage.Conditions{GenerationMatch: a.Generation}).Delete(ctx)
	if err == nil {
		return nil
	}
	err = g.explain("rename", oldname, err)
	if g.replaced(oldname, a.Generation, err) {
		g.object(newname).Generation(copied.Generation).Delete(ctx)
		return fmt.Errorf("vfs: %s%s was replaced while it was renamed to %s: %w", g.name, oldname, newname, &iofs.PathError{Op: "rename", Path: g.name + oldname, Err: iofs.ErrExist})
	}
	return err
}

// replaced reports whether the failed delete of generation gen of name
// failed because another generation took its place: GCS answers a failed
// precondition, a server that checks only the generation asked for answers
// that it does not exist while the name still holds an object.
func (g *FS) replaced(name string, gen int64, err error) bool {
	if errors.Is(err, iofs.ErrExist) {
		return true
	}
	if !errors.Is(err, iofs.ErrNotExist) {
		return false
	}
	a, aerr := g.attrs(name)
	return aerr == nil && a.Generation != gen
}

// Remove implements vfs.WriteFS: it deletes an object (the generation its
// metadata showed), or a directory's marker when nothing else lies under
// it. A name that is neither is fs.ErrNotExist.
func (g *FS) Remove(name string) error {
	if a, err := g.attrs(name); err == nil {
		if err := g.object(name).Generation(a.Generation).Delete(context.Background()); err != nil {
			return g.explain("remove", name, err)
		}
		return nil
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	p := objstore.DirPrefix(name)
	it := g.bucket.Objects(context.Background(), &storage.Query{Prefix: p})
	var names []string
	for len(names) < 2 {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return g.explain("remove", name, err)
		}
		names = append(names, a.Name)
	}
	switch {
	case len(names) == 0:
		return &iofs.PathError{Op: "remove", Path: g.name + name, Err: iofs.ErrNotExist}
	case len(names) > 1 || names[0] != p:
		return &iofs.PathError{Op: "remove", Path: g.name + name, Err: errors.New("directory not empty")}
	}
	if err := g.bucket.Object(p).Delete(context.Background()); err != nil {
		return g.explain("remove", name, err)
	}
	return nil
}

// RemoveAll implements vfs.WriteFS: it deletes the object name and every object
// under name's prefix.
func (g *FS) RemoveAll(name string) error {
	prefix := objstore.DirPrefix(name)
	if prefix == "" {
		return &iofs.PathError{Op: "removeall", Path: g.name + name, Err: errors.New("refusing to empty the whole bucket")}
	}
	ctx := context.Background()
	if err := g.object(name).Delete(ctx); err != nil {
		if err := g.explain("removeall", name, err); !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
	}
	it := g.bucket.Objects(ctx, &storage.Query{Prefix: prefix})
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return g.explain("removeall", name, err)
		}
		if err := g.bucket.Object(a.Name).Generation(a.Generation).Delete(ctx); err != nil {
			if err := g.explain("removeall", "/"+a.Name, err); !errors.Is(err, iofs.ErrNotExist) {
				return err
			}
		}
	}
}

// gcsWriter is one object being uploaded: the library's writer sends each
// full chunk as it fills and finalizes the upload at Close.
type gcsWriter struct {
	g      *FS
	name   string
	w      *storage.Writer
	cancel context.CancelFunc
	err    error // sticky
	closed bool
}

func (w *gcsWriter) Name() string { return w.name }

// Sync implements WriteFile. As on S3 (see objstore.Writer.Sync), nothing is
// stored before Close; Sync reports an earlier failure, if any.
func (w *gcsWriter) Sync() error { return w.err }

func (w *gcsWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, fmt.Errorf("vfs: write %s%s after Close", w.g.name, w.name)
	}
	n, err := w.w.Write(p)
	if err != nil {
		w.fail(w.g.explain("write", w.name, err))
	}
	return n, w.err
}

// fail records err and cancels the upload, so it is never finalized.
func (w *gcsWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.cancel()
}

// Close implements WriteFile: it finalizes the upload, and only then is the
// object visible under its name.
func (w *gcsWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		w.fail(w.err)
		return w.err
	}
	if err := w.w.Close(); err != nil {
		w.fail(w.g.explain("create", w.name, err))
		return w.err
	}
	w.cancel()
	return nil
}

// Abort implements vfs.Aborter: the upload's context is cancelled before
// it is finalized, so the object is never created.
func (w *gcsWriter) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.fail(objstore.ErrAborted)
}
