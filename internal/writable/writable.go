// Package writable decodes the Hadoop Writable encodings that HBase's file
// formats borrow (WritableUtils' variable-length integers), so the HFile
// reader and the snapshot manifest decoder share one implementation.
package writable

import "errors"

// ErrTruncated reports a VLong cut short by the end of its buffer.
var ErrTruncated = errors.New("truncated vlong")

// ReadVLong decodes a Hadoop WritableUtils VLong (VInt is the same
// encoding) at the start of b and returns the value and the bytes it took.
// Values in -112..127 are one byte; otherwise the first byte is a marker
// giving the sign and the count (1-8) of big-endian magnitude bytes that
// follow, and a negative value is stored as its ones' complement.
func ReadVLong(b []byte) (int64, int, error) {
	if len(b) == 0 {
		return 0, 0, ErrTruncated
	}
	first := int8(b[0])
	if first >= -112 {
		return int64(first), 1, nil
	}
	neg := first < -120
	n := int(-112 - int(first)) // magnitude bytes after the marker
	if neg {
		n = int(-120 - int(first))
	}
	if n > len(b)-1 {
		return 0, 0, ErrTruncated
	}
	var u uint64
	for i := 1; i <= n; i++ {
		u = u<<8 | uint64(b[i])
	}
	if neg {
		u = ^u
	}
	return int64(u), n + 1, nil
}
