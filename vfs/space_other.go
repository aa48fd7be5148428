//go:build !linux && !darwin

package vfs

// Available reports no free-space figure where statfs is not at hand.
func Available(fsys FS, name string) (n int64, ok bool) { return 0, false }
