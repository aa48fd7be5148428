package pipeline

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path"
	"sort"
	"strings"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/vfs"
)

// rejectDir keeps one reject file per split beside the checkpoint, so a
// redone split rewrites its own rejects instead of adding them twice; the
// job's reject file is their concatenation, rebuilt at the end of a run.
type rejectDir struct {
	fs  vfs.WriteFS
	dir string
	// kerberos is who to log in as for a reject file on a kerberized HDFS.
	kerberos *krb.Identity
}

// splitFile is the reject file of one split.
func (r *rejectDir) splitFile(id string) string {
	return path.Join(r.dir, strings.NewReplacer("/", "_", "@", "_at_").Replace(id)+".tsv")
}

// rejectWriter writes one split's rejected cells, one line each: the cell
// in the canonical dump format, a tab, and the reason.
type rejectWriter struct {
	r    *rejectDir
	id   string
	f    vfs.WriteFile
	w    *bufio.Writer
	line []byte
}

func (r *rejectDir) open(id string) *rejectWriter { return &rejectWriter{r: r, id: id} }

func (w *rejectWriter) add(c *cell.Cell, reason error) error {
	if w.f == nil {
		if err := w.r.fs.MkdirAll(w.r.dir); err != nil {
			return fmt.Errorf("reject files %s: %w", w.r.dir, err)
		}
		f, err := w.r.fs.Create(w.r.splitFile(w.id) + ".tmp")
		if err != nil {
			return fmt.Errorf("reject file: %w", err)
		}
		w.f, w.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	w.line = transform.AppendReject(w.line[:0], c, reason)
	_, err := w.w.Write(w.line)
	return err
}

// commit makes the split's rejects durable under their final name (or
// removes an old file when the split rejected nothing this time).
func (w *rejectWriter) commit() error {
	final := w.r.splitFile(w.id)
	if w.f == nil {
		if err := w.r.fs.Remove(final); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := w.w.Flush(); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	w.f = nil
	return w.r.fs.Rename(final+".tmp", final)
}

func (w *rejectWriter) abort() {
	if w.f != nil {
		w.f.Close()
		w.r.fs.Remove(w.r.splitFile(w.id) + ".tmp")
		w.f = nil
	}
}

// gather writes every split's rejects, in split order, to dst.
func (r *rejectDir) gather(dst string, ids []string) (int64, error) {
	loc, err := vfs.OpenWith(dst, vfs.Options{Kerberos: r.kerberos})
	if err != nil {
		return 0, err
	}
	defer loc.Close()
	sort.Strings(ids)
	out, err := loc.FS.Create(loc.Path + ".tmp")
	if err != nil {
		return 0, fmt.Errorf("reject file %s: %w", dst, err)
	}
	var n int64
	for _, id := range ids {
		f, err := r.fs.Open(r.splitFile(id))
		if errors.Is(err, iofs.ErrNotExist) {
			continue
		}
		if err != nil {
			out.Close()
			return 0, err
		}
		k, err := io.Copy(out, io.NewSectionReader(f, 0, f.Size()))
		f.Close()
		n += k
		if err != nil {
			out.Close()
			return 0, fmt.Errorf("reject file %s: %w", dst, err)
		}
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return 0, err
	}
	if err := out.Close(); err != nil {
		return 0, err
	}
	return n, loc.FS.Rename(loc.Path+".tmp", loc.Path)
}
