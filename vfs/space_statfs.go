//go:build linux || darwin

package vfs

import (
	"path/filepath"
	"syscall"
)

// Available returns the bytes an unprivileged writer may still write on the
// local file system holding name (statfs's available blocks); ok is false
// for other file systems, or when statfs fails.
func Available(fsys FS, name string) (n int64, ok bool) {
	if _, local := fsys.(Local); !local {
		return 0, false
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.FromSlash(name), &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
