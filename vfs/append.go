package vfs

import (
	"os"
	"path/filepath"
)

// Appender is a WriteFS that can add to the end of an existing file: the
// checkpoint's journal gains one record per finished split this way, so a
// split costs the same whatever the number before it.
//
// A record is durable and visible to a reader that opens the file later
// once Close of the file Append returned has returned nil. Sync alone is
// not enough on HDFS: there a reader sees the length the NameNode records,
// which an open file's hflushed bytes do not reach until it is closed.
type Appender interface {
	WriteFS
	// Append opens name, which must exist, for writing at its end.
	Append(name string) (WriteFile, error)
}

// Append implements Appender. Close syncs first, so a record is on the
// disk when Close returns.
func (Local) Append(name string) (WriteFile, error) {
	f, err := os.OpenFile(filepath.FromSlash(name), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return &syncingWriter{localWriter{f: f, name: name}}, nil
}

// syncingWriter is a local file that syncs before it closes.
type syncingWriter struct{ localWriter }

func (w *syncingWriter) Close() error {
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		return err
	}
	return w.f.Close()
}
