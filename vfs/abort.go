package vfs

// Aborter is a WriteFile that can be dropped without making what was
// written visible: an object store's writer, whose Close publishes the
// object under its final name. A writer that is not one (a local or HDFS
// file, visible under its name while it is written) is only closed by
// Abort; its caller removes it.
type Aborter interface {
	// Abort drops the file unpublished; a later Close returns an error.
	Abort()
}

// Abort drops f unpublished when it is an Aborter, else closes it.
func Abort(f WriteFile) {
	if a, ok := f.(Aborter); ok {
		a.Abort()
		return
	}
	f.Close()
}
