package hdfs

import (
	"errors"
	"io"
	iofs "io/fs"
	"time"

	gohdfs "github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/vfs"
)

var (
	_ vfs.ExclusiveFS = (*FS)(nil)
	_ vfs.Appender    = (*FS)(nil)
)

// Create implements vfs.WriteFS. HDFS cannot truncate in place, so an existing
// file is removed first. Like every operation here, it waits for a
// NameNode that does not answer (Options.NameNodeWait); a create whose
// answer was lost is simply done again, the file it may have made removed
// first.
func (h *FS) Create(name string) (vfs.WriteFile, error) {
	var w *gohdfs.FileWriter
	err := h.nn("create", name, func(bool) error {
		if err := h.client.Remove(name); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
		var err error
		w, err = h.client.Create(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &hdfsWriter{h: h, w: w, name: name}, nil
}

// MkdirAll implements vfs.WriteFS.
func (h *FS) MkdirAll(name string) error {
	return h.nn("mkdir", name, func(bool) error { return h.client.MkdirAll(name, 0o755) })
}

// Rename implements vfs.WriteFS (HDFS's rename2 with overwrite: atomic on the
// NameNode). A rename tried again after an attempt whose answer was lost
// is done when the old name is gone and the new one is there.
func (h *FS) Rename(oldname, newname string) error {
	return h.nn("rename", oldname, func(retry bool) error {
		err := h.client.Rename(oldname, newname)
		if retry && errors.Is(err, iofs.ErrNotExist) {
			if _, serr := h.client.Stat(newname); serr == nil {
				return nil
			}
		}
		return err
	})
}

// Remove implements vfs.WriteFS. A remove tried again after an attempt whose
// answer was lost is done when the name is gone.
func (h *FS) Remove(name string) error {
	return h.nn("remove", name, func(retry bool) error {
		err := h.client.Remove(name)
		if retry && errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return err
	})
}

// RemoveAll implements vfs.WriteFS.
func (h *FS) RemoveAll(name string) error {
	return h.nn("remove", name, func(bool) error {
		err := h.client.RemoveAll(name)
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return err
	})
}

type hdfsWriter struct {
	h *FS
	w interface {
		io.WriteCloser
		Flush() error
	}
	name string
}

// Write writes p. The first write of each block asks the NameNode for
// the block; that ask, which writes nothing, waits for a NameNode that
// does not answer. Bytes go to the DataNodes, which do not need it.
func (w *hdfsWriter) Write(p []byte) (int, error) {
	nn := nameNodeRetry{h: w.h}
	for {
		seen := w.h.breaksSeen()
		n, err := w.w.Write(p)
		if err == nil || n > 0 {
			return n, err
		}
		if again, gerr := nn.again("write", w.name, err, w.h.onlyNameNodeBroke(seen)); !again {
			return n, gerr
		}
	}
}

// Sync flushes the written bytes to the DataNodes' pipeline (hflush); Close
// then completes the file on the NameNode.
func (w *hdfsWriter) Sync() error { return w.w.Flush() }

// Close finishes the last block on its DataNodes and completes the file
// on the NameNode. The client's Close can be called again after either
// NameNode call failed (the block's end is not sent twice), so a NameNode
// that does not answer is waited for.
func (w *hdfsWriter) Close() error {
	// The NameNode answers "not yet" (ErrReplicating) while the last block
	// has fewer live replicas than the minimum; the file's bytes are all
	// written by then, and asking again completes it.
	// Poll often: the answer changes when a DataNode's block report
	// arrives, which a doubling back-off would overshoot by as much again.
	nn := nameNodeRetry{h: w.h}
	seen := w.h.breaksSeen()
	err := w.w.Close()
	for deadline := time.Now().Add(60 * time.Second); err != nil; {
		switch again, gerr := nn.again("close", w.name, err, w.h.onlyNameNodeBroke(seen)); {
		case again:
		case gohdfs.IsErrReplicating(err) && time.Now().Before(deadline):
			time.Sleep(25 * time.Millisecond)
		default:
			return gerr
		}
		seen = w.h.breaksSeen()
		err = w.w.Close()
	}
	return nil
}

// breaks is how many DataNode and NameNode connections had broken when
// a writer's call began.
type breaks struct{ dataNode, nameNode int64 }

func (h *FS) breaksSeen() breaks {
	return breaks{h.stats.failures.Load(), h.stats.nnBreaks.Load()}
}

// onlyNameNodeBroke reports whether, since seen, a NameNode connection
// broke and no DataNode connection did. Then a broken-connection error
// (EOF, a reset) of a writer's call came from the NameNode, which the call
// may wait for; one from a DataNode must not be retried: the client
// marks the block finished before it knows the DataNodes acknowledged it,
// so a second Close would complete the file without its last bytes.
// A DataNode failure anywhere in the process during the call counts,
// which errs on the side of not retrying.
func (h *FS) onlyNameNodeBroke(seen breaks) bool {
	now := h.breaksSeen()
	return now.nameNode > seen.nameNode && now.dataNode == seen.dataNode
}
func (w *hdfsWriter) Name() string { return w.name }

// Append implements vfs.Appender with HDFS's append: Close completes the file
// on the NameNode again, after which readers see the new length.
func (h *FS) Append(name string) (vfs.WriteFile, error) {
	w, err := h.client.Append(name)
	if err != nil {
		return nil, err
	}
	return &hdfsWriter{h: h, w: w, name: name}, nil
}

// CreateExclusive implements vfs.ExclusiveFS. The client asks the NameNode to
// create the file with the CREATE flag alone (no OVERWRITE); the NameNode
// checks and creates under its namespace lock, and answers
// FileAlreadyExistsException for a file that exists, or
// AlreadyBeingCreatedException for one another client is writing, both of
// which the client reports as fs.ErrExist. (The client's own look-up
// before the create only answers early; it decides nothing.)
func (h *FS) CreateExclusive(name string) (vfs.WriteFile, error) {
	w, err := h.client.Create(name)
	if err != nil {
		return nil, err
	}
	return &hdfsWriter{h: h, w: w, name: name}, nil
}
