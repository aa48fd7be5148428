package objstore

import (
	"errors"
	"fmt"

	"github.com/rekeyhq/rekey/vfs"
)

// ErrAborted is the sticky error of a writer dropped by Abort.
var ErrAborted = errors.New("vfs: the write was aborted")

// Parts is how a store writes one object: whole in one request, or in
// parts stored one by one and made the object at the end. Nothing is
// visible under the object's name before Put or Complete returns nil.
type Parts interface {
	// Put stores data as the whole object.
	Put(data []byte) error
	// Part stores data as part num (1, 2, ...) of the object, starting
	// the upload at the first.
	Part(num int, data []byte) error
	// Complete makes the parts stored so far the object.
	Complete() error
	// Abort drops the parts stored so far, if the store keeps them until
	// told (an S3 multipart upload); the object is not created.
	Abort()
}

// Writer is a whole-object vfs.WriteFile over a store's Parts: it holds
// one part in memory, stores each full part as it fills, and at Close
// makes them the object (or, when the object fits in one part, puts it
// whole). A failure is sticky and drops the parts stored.
type Writer struct {
	store, name string
	parts       Parts
	size        int // of a part
	buf         []byte
	stored      int   // parts stored
	err         error // sticky
	closed      bool
}

var (
	_ vfs.WriteFile = (*Writer)(nil)
	_ vfs.Aborter   = (*Writer)(nil)
)

// NewWriter returns a writer of the object name of store (named as in
// messages, "s3a://bucket") in parts of partSize bytes.
func NewWriter(store, name string, partSize int, p Parts) *Writer {
	return &Writer{store: store, name: name, parts: p, size: partSize}
}

// Name implements vfs.WriteFile.
func (w *Writer) Name() string { return w.name }

// Sync implements vfs.WriteFile. An object store has no partial objects
// to make durable: the bytes are stored, durably, when Close returns nil,
// and nothing before. Callers that record a file as done only after its
// Close (the stage's HFiles and runs, the checkpoint) keep their promise.
// Sync reports an earlier failure, if any.
func (w *Writer) Sync() error { return w.err }

// Write implements vfs.WriteFile: it buffers p, storing each part that
// fills.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, fmt.Errorf("vfs: write %s%s after Close", w.store, w.name)
	}
	n := len(p)
	for len(p) > 0 {
		room := min(w.size-len(w.buf), len(p))
		w.buf = append(w.buf, p[:room]...)
		p = p[room:]
		if len(w.buf) == w.size {
			if err := w.part(); err != nil {
				w.fail(err)
				return n - len(p), w.err
			}
		}
	}
	return n, nil
}

// part stores the buffer as the next part.
func (w *Writer) part() error {
	if err := w.parts.Part(w.stored+1, w.buf); err != nil {
		return err
	}
	w.stored++
	w.buf = w.buf[:0]
	return nil
}

// fail records err and drops the parts stored, so none linger.
func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.parts.Abort()
}

// Close implements vfs.WriteFile: it stores the object, and only then is
// it visible under its name.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		w.fail(w.err)
		return w.err
	}
	var err error
	if w.stored == 0 {
		err = w.parts.Put(w.buf)
	} else {
		if len(w.buf) > 0 {
			err = w.part()
		}
		if err == nil {
			err = w.parts.Complete()
		}
	}
	if err != nil {
		w.fail(err)
	}
	w.buf = nil
	return w.err
}

// Abort implements vfs.Aborter: the parts stored, if any, are dropped and
// nothing is made the object.
func (w *Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.fail(ErrAborted)
	w.buf = nil
}
