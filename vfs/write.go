package vfs

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// WriteFS is a file system rekey can also write: checkpoints, reject files,
// spilled runs and staged HFiles. Snapshot roots are only ever opened
// through FS; nothing in package snapshot asks for a WriteFS.
type WriteFS interface {
	FS
	// Create creates or truncates name for writing. Its parent must exist.
	Create(name string) (WriteFile, error)
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(name string) error
	// Rename moves oldname to newname, replacing newname if it exists. On
	// local disks and HDFS the replacement is atomic: a reader sees the old
	// file or the new one, never a mix.
	Rename(oldname, newname string) error
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// RemoveAll deletes name and everything under it; a missing name is not
	// an error.
	RemoveAll(name string) error
}

// WriteFile is a file open for writing. Sync makes what was written durable
// (fsync locally, hflush on HDFS) before Close returns; Close without Sync
// gives no durability promise beyond the implementation's.
type WriteFile interface {
	io.Writer
	io.Closer
	// Sync makes the bytes written so far durable.
	Sync() error
	// Name is the path the file was created with.
	Name() string
}

var tmpSeq atomic.Uint64

// WriteFileAtomic writes data to name so that a reader (or a crash) sees
// either the old content or all of the new one, never a torn file: it
// writes a temporary file beside name, syncs it, and renames it over name.
// On an object store (WritesWhole) it writes name directly: the object
// appears whole at Close or not at all, and there is no rename to save.
func WriteFileAtomic(fsys WriteFS, name string, data []byte) error {
	if WritesWhole(fsys) {
		return writeWhole(fsys, name, data)
	}
	tmp := fmt.Sprintf("%s.tmp-%d-%d-%d", name, os.Getpid(), time.Now().UnixNano(), tmpSeq.Add(1))
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("vfs: create %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("vfs: rename %s to %s: %w", tmp, name, err)
	}
	return nil
}

// writeWhole is WriteFileAtomic on a WholeWriter: one object, whose Close
// makes it visible; a failed write leaves the old object.
func writeWhole(fsys WriteFS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return fmt.Errorf("vfs: create %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("vfs: write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("vfs: close %s: %w", name, err)
	}
	return nil
}

// Create implements WriteFS.
func (Local) Create(name string) (WriteFile, error) {
	f, err := os.OpenFile(filepath.FromSlash(name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &localWriter{f: f, name: name}, nil
}

// MkdirAll implements WriteFS.
func (Local) MkdirAll(name string) error { return os.MkdirAll(filepath.FromSlash(name), 0o755) }

// Rename implements WriteFS. It also syncs the directory that receives the
// new name, so the rename itself survives a power loss.
func (Local) Rename(oldname, newname string) error {
	if err := os.Rename(filepath.FromSlash(oldname), filepath.FromSlash(newname)); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(filepath.FromSlash(newname))); err == nil {
		d.Sync() // best effort: some file systems refuse fsync on directories
		d.Close()
	}
	return nil
}

// Remove implements WriteFS.
func (Local) Remove(name string) error { return os.Remove(filepath.FromSlash(name)) }

// RemoveAll implements WriteFS.
func (Local) RemoveAll(name string) error { return os.RemoveAll(filepath.FromSlash(name)) }

type localWriter struct {
	f    *os.File
	name string
}

func (w *localWriter) Write(p []byte) (int, error) { return w.f.Write(p) }
func (w *localWriter) Sync() error                 { return w.f.Sync() }
func (w *localWriter) Close() error                { return w.f.Close() }
func (w *localWriter) Name() string                { return w.name }

// Create implements WriteFS. HDFS cannot truncate in place, so an existing
// file is removed first. Like every operation here, it waits for a
// NameNode that does not answer (HDFSOptions.NameNodeWait); a create whose
// answer was lost is simply done again, the file it may have made removed
// first.
func (h *HDFS) Create(name string) (WriteFile, error) {
	var w *hdfs.FileWriter
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

// MkdirAll implements WriteFS.
func (h *HDFS) MkdirAll(name string) error {
	return h.nn("mkdir", name, func(bool) error { return h.client.MkdirAll(name, 0o755) })
}

// Rename implements WriteFS (HDFS's rename2 with overwrite: atomic on the
// NameNode). A rename tried again after an attempt whose answer was lost
// is done when the old name is gone and the new one is there.
func (h *HDFS) Rename(oldname, newname string) error {
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

// Remove implements WriteFS. A remove tried again after an attempt whose
// answer was lost is done when the name is gone.
func (h *HDFS) Remove(name string) error {
	return h.nn("remove", name, func(retry bool) error {
		err := h.client.Remove(name)
		if retry && errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return err
	})
}

// RemoveAll implements WriteFS.
func (h *HDFS) RemoveAll(name string) error {
	return h.nn("remove", name, func(bool) error {
		err := h.client.RemoveAll(name)
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return err
	})
}

type hdfsWriter struct {
	h *HDFS
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
		case hdfs.IsErrReplicating(err) && time.Now().Before(deadline):
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

func (h *HDFS) breaksSeen() breaks {
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
func (h *HDFS) onlyNameNodeBroke(seen breaks) bool {
	now := h.breaksSeen()
	return now.nameNode > seen.nameNode && now.dataNode == seen.dataNode
}
func (w *hdfsWriter) Name() string { return w.name }

// Create implements WriteFS: the file becomes visible when it is closed.
func (m *Mem) Create(name string) (WriteFile, error) {
	return &memWriter{m: m, name: path.Clean("/" + name)}, nil
}

// MkdirAll implements WriteFS; directories are implicit in Mem.
func (m *Mem) MkdirAll(string) error { return nil }

// Rename implements WriteFS.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = path.Clean("/"+oldname), path.Clean("/"+newname)
	b, ok := m.files[oldname]
	if !ok {
		return &iofs.PathError{Op: "rename", Path: oldname, Err: iofs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = b
	return nil
}

// RemoveAll implements WriteFS.
func (m *Mem) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean("/" + name)
	for f := range m.files {
		if f == name || (len(f) > len(name) && f[:len(name)+1] == name+"/") {
			delete(m.files, f)
		}
	}
	return nil
}

type memWriter struct {
	m    *Mem
	name string
	buf  []byte
}

func (w *memWriter) Write(p []byte) (int, error) { w.buf = append(w.buf, p...); return len(p), nil }
func (w *memWriter) Sync() error                 { return nil }
func (w *memWriter) Close() error                { w.m.WriteFile(w.name, w.buf); return nil }
func (w *memWriter) Name() string                { return w.name }
