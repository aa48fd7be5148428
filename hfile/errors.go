package hfile

import (
	"errors"
	"fmt"
)

// ErrCorrupt is matched (errors.Is) by every error that reports bytes
// which are not a valid HFile: bad magic, checksum mismatch, a length that
// runs past its block, an index that points outside the file. The message
// of the wrapping error names the file, the block offset and type, and what
// was wrong.
var ErrCorrupt = errors.New("hfile: corrupt file")

// ErrUnsupported is matched by errors for valid HFiles this package does not
// read: format v1 and v2 before minor 2, encrypted files, PREFIX_TREE
// encoding, LZO and other codecs without a Go decoder, files whose keys are
// not KeyValue keys.
var ErrUnsupported = errors.New("hfile: unsupported")

// corruptf builds an ErrCorrupt error located at a block. off < 0 means the
// problem is not inside one block (trailer, sizes).
func corruptf(name string, off int64, bt BlockType, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if off < 0 {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, name, msg)
	}
	return fmt.Errorf("%w: %s: %s block at offset %d: %s", ErrCorrupt, name, bt, off, msg)
}

// unsupportedf builds an ErrUnsupported error for a file.
func unsupportedf(name string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrUnsupported, name, fmt.Sprintf(format, args...))
}

// decodeError is what the block-level decoders return: a plain description
// that the caller wraps with the file and block it came from.
type decodeError struct{ msg string }

func (e *decodeError) Error() string { return e.msg }

func errDecode(format string, args ...any) error {
	return &decodeError{fmt.Sprintf(format, args...)}
}
