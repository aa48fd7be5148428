package s3

// SetCopyLimits sets the size past which Rename copies in parts, and the
// part size, until the returned function restores them.
func SetCopyLimits(max, part int64) (restore func()) {
	m, p := s3CopyMax, s3CopyPart
	s3CopyMax, s3CopyPart = max, part
	return func() { s3CopyMax, s3CopyPart = m, p }
}
