package cell

import "errors"

// Iterator is the one contract every cell source in rekey follows:
// hfile.Iterator (one HFile), snapshot.Scanner (one split, merged, with
// HBase's read semantics) and hbase.Scanner (a live scan). It is a pull
// iterator in the style of pebble's:
//
//   - Positioning. A new iterator stands before its first cell. Next moves
//     to the next cell (the first one on the first call) and reports
//     whether there is one. Sources that can seek (hfile.Iterator's First
//     and SeekGE) position the same way: true means a cell is current.
//   - Cell returns the current cell, or nil when Next last returned false.
//     Its slices may point into the source's buffers (a decoded block, an
//     RPC response) and stay valid only until the next positioning call or
//     Close; a consumer that keeps a cell calls Cell.Clone.
//   - End or failure. Next returns false both at the end and on failure;
//     Err tells them apart: nil at a clean end (exhaustion is not an
//     error), the error otherwise. Once Next has returned false it keeps
//     returning false.
//   - Close is required, also after an error or an early stop. It releases
//     buffers, files and server-side resources, and returns the first error
//     the iterator met (the one Err reports), or an error of its own
//     releasing; a second Close returns the same. After Close, Next returns
//     false.
//
// So the whole of a careful read is:
//
//	for it.Next() {
//		use(it.Cell())
//	}
//	return it.Close() // the read's error, if any
//
// or ForEach, which does that and also stops early on request.
type Iterator interface {
	Next() bool
	Cell() *Cell
	Err() error
	Close() error
}

// ErrStop, returned by a ForEach callback, ends the walk early; ForEach
// then returns nil (or the iterator's own error).
var ErrStop = errors.New("cell: stop iterating")

// ForEach calls fn with each cell of it, from its current position to the
// end, then closes it. It returns the first error met: fn's (other than
// ErrStop), the iterator's, or Close's. The cell passed to fn is only valid
// during the call.
func ForEach(it Iterator, fn func(*Cell) error) error {
	var ferr error
	for it.Next() {
		if err := fn(it.Cell()); err != nil {
			if !errors.Is(err, ErrStop) {
				ferr = err
			}
			break
		}
	}
	cerr := it.Close()
	if ferr != nil {
		return ferr
	}
	return cerr
}
