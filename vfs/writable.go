package vfs

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
)

// ErrNotWritable is matched by Writable's errors.
var ErrNotWritable = errors.New("vfs: cannot be written")

// Writable checks that a file can be written at where (a local path, a
// file:// or an hdfs:// URL): its folder exists, or is created, and takes
// new files, and where is not a folder. It creates and removes a probe
// file beside where, and leaves where itself alone. A job calls it for the
// files it writes only at its end (a reject file, a report), so that a
// path that cannot be written fails before the work rather than after it.
func Writable(where string) error {
	loc, err := Open(where)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotWritable, where, err)
	}
	defer loc.Close()
	if fi, err := loc.FS.Stat(loc.Path); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s is a folder", ErrNotWritable, where)
	}
	dir := path.Dir(loc.Path)
	fi, err := loc.FS.Stat(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		if err := loc.FS.MkdirAll(dir); err != nil {
			return fmt.Errorf("%w: %s: creating its folder %s: %w", ErrNotWritable, where, dir, err)
		}
		fi, err = loc.FS.Stat(dir)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotWritable, where, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s: %s is not a folder", ErrNotWritable, where, dir)
	}
	probe := path.Join(dir, fmt.Sprintf(".%s.probe-%d", path.Base(loc.Path), os.Getpid()))
	f, err := loc.FS.Create(probe)
	if err != nil {
		return fmt.Errorf("%w: %s: creating a file in %s: %w", ErrNotWritable, where, dir, err)
	}
	cerr := f.Close()
	rerr := loc.FS.Remove(probe)
	if err := errors.Join(cerr, rerr); err != nil {
		return fmt.Errorf("%w: %s: probe file %s: %w", ErrNotWritable, where, probe, err)
	}
	return nil
}
