package vfs

import "errors"

// Aborter is a WriteFile that can be dropped without making what was
// written visible: an object store's writer, whose Close publishes the
// object under its final name. A writer that is not one (a local or HDFS
// file, visible under its name while it is written) is only closed by
// Abort; its caller removes it.
type Aborter interface {
	// Abort drops the file unpublished; a later Close returns an error.
	Abort()
}

// errAborted is the sticky error of a writer dropped by Abort.
var errAborted = errors.New("vfs: the write was aborted")

// Abort drops f unpublished when it is an Aborter, else closes it.
func Abort(f WriteFile) {
	if a, ok := f.(Aborter); ok {
		a.Abort()
		return
	}
	f.Close()
}

var (
	_ Aborter = (*s3Writer)(nil)
	_ Aborter = (*gcsWriter)(nil)
	_ Aborter = (*azureWriter)(nil)
)

// Abort implements Aborter: the multipart upload, if one was started, is
// aborted, and nothing is PUT.
func (w *s3Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.fail(errAborted)
	w.buf = nil
}

// Abort implements Aborter: the upload's context is cancelled before it
// is finalized, so the object is never created.
func (w *gcsWriter) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.fail(errAborted)
}

// Abort implements Aborter: the staged blocks are never committed (the
// service discards uncommitted blocks after a week), and nothing is
// uploaded.
func (w *azureWriter) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	if w.err == nil {
		w.err = errAborted
	}
	w.buf = nil
}
