package vfs

// WholeWriter is implemented by the object stores (S3, GCS, Azure), whose
// Create writes a whole object: nothing written is visible under the name
// before Close returns without error, and then all of it is, replacing
// whatever the name held; a writer that fails, or a process that dies
// before Close, leaves the name as it was. On such a store writing the
// final name directly is as safe as writing a temporary name and renaming
// it, and saves the rename, which an object store does not have: there it
// is a server-side copy of every byte and a delete.
type WholeWriter interface {
	// WritesWholeObjects marks the store; it does nothing.
	WritesWholeObjects()
}

// WritesWhole reports whether fsys's Create writes whole objects (see
// WholeWriter), so a caller can write final names without a rename. A
// file system wrapped by another type loses the mark, and its callers then
// keep the rename, which is safe everywhere.
func WritesWhole(fsys FS) bool {
	_, ok := fsys.(WholeWriter)
	return ok
}
