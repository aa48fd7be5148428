package vfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
)

// ErrCannotCreate is matched by ProbeCreate's errors: no file can be
// created at the path it was given.
var ErrCannotCreate = errors.New("vfs: cannot be written")

// ProbeCreate checks that a file can be created at where (a local path, a
// file:// or an hdfs:// URL): its folder exists, or is created, and takes
// new files, and where is not a folder. It creates and removes a probe
// file beside where, and leaves where itself alone. A job calls it for the
// files it writes only at its end (a reject file, a report), so that a
// path that cannot be written fails before the work rather than after it.
func ProbeCreate(where string) error {
	loc, err := Open(where)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCannotCreate, where, err)
	}
	defer loc.Close()
	if fi, err := loc.FS.Stat(loc.Path); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s is a folder", ErrCannotCreate, where)
	}
	dir := path.Dir(loc.Path)
	fi, err := loc.FS.Stat(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		if err := loc.FS.MkdirAll(dir); err != nil {
			return fmt.Errorf("%w: %s: creating its folder %s: %w", ErrCannotCreate, where, dir, err)
		}
		fi, err = loc.FS.Stat(dir)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCannotCreate, where, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s: %s is not a folder", ErrCannotCreate, where, dir)
	}
	// The probe's name is the pid and a random tag: two tasks of one job
	// probe a shared folder at once, and in containers every task's rekey
	// is pid 1, so a name by pid alone let one remove the other's probe.
	var tag [6]byte
	rand.Read(tag[:])
	probe := path.Join(dir, fmt.Sprintf(".%s.probe-%d-%s", path.Base(loc.Path), os.Getpid(), hex.EncodeToString(tag[:])))
	f, err := loc.FS.Create(probe)
	if err != nil {
		return fmt.Errorf("%w: %s: creating a file in %s: %w", ErrCannotCreate, where, dir, err)
	}
	cerr := f.Close()
	rerr := loc.FS.Remove(probe)
	if err := errors.Join(cerr, rerr); err != nil {
		return fmt.Errorf("%w: %s: probe file %s: %w", ErrCannotCreate, where, probe, err)
	}
	return nil
}
