package vfs

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// ErrUnsupportedScheme is returned by Open for a URL scheme rekey cannot
// read or write (ftp://, ...).
var ErrUnsupportedScheme = errors.New("vfs: unsupported URL scheme")

// ErrBadLocation is matched by Open's errors for a location that is
// malformed as written (empty, unparsable, a file URL with a host or
// without a path): the caller named something wrong, not a damaged file.
var ErrBadLocation = errors.New("vfs: malformed location")

// Location is a file system and an absolute, slash-separated path in it,
// resolved from what a user wrote: a local path, a file:// URL, an
// hdfs:// URL or an s3a:// (s3://) URL.
type Location struct {
	FS   WriteFS
	Path string
	// URL is the location as it was resolved, for messages.
	URL string
	// close releases the file system (an HDFS connection); nil for local.
	close func() error
}

// Close releases the file system connection, if any.
func (l *Location) Close() error {
	if l.close == nil {
		return nil
	}
	return l.close()
}

// Open resolves where into a file system and a path. Local paths are made
// absolute against the working directory. A file:// URL's host must be
// empty or localhost (file://tmp/x is a mistake for file:///tmp/x and is
// refused rather than read as the relative path tmp/x). An hdfs:// URL
// dials the NameNode (see DialHDFS for nameservices and users). An s3a:// or
// s3:// URL names a bucket and a key prefix (see DialS3 for endpoints and
// credentials). A gs:// URL names a GCS bucket and a prefix (see DialGCS).
// An abfs:// or wasbs:// URL (and abfss://, wasb://) names an Azure
// container, account and prefix, CONTAINER@ACCOUNT.dfs.core.windows.net or
// .blob.core.windows.net (see DialAzure). Any other scheme is ErrUnsupportedScheme.
func Open(where string) (*Location, error) {
	if where == "" {
		return nil, fmt.Errorf("%w: empty path", ErrBadLocation)
	}
	if !strings.Contains(where, "://") && !strings.HasPrefix(where, "file:") && !strings.HasPrefix(where, "hdfs:") {
		abs, err := filepath.Abs(where)
		if err != nil {
			return nil, err
		}
		return &Location{FS: Local{}, Path: filepath.ToSlash(abs), URL: abs}, nil
	}
	u, err := url.Parse(where)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrBadLocation, where, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w: %q: a file URL's host must be empty or localhost (did you mean file:///%s%s?)", ErrBadLocation, where, u.Host, u.Path)
		}
		p := u.Path
		if p == "" {
			p = u.Opaque
		}
		if p == "" {
			return nil, fmt.Errorf("%w: %q: no path", ErrBadLocation, where)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		return &Location{FS: Local{}, Path: filepath.ToSlash(abs), URL: where}, nil
	case "s3a", "s3":
		s, err := DialS3(u.Host)
		if err != nil {
			return nil, err
		}
		p := u.Path
		if p == "" {
			p = "/"
		}
		return &Location{FS: s, Path: p, URL: where, close: s.Close}, nil
	case "gs":
		g, err := DialGCS(u.Host)
		if err != nil {
			return nil, err
		}
		p := u.Path
		if p == "" {
			p = "/"
		}
		return &Location{FS: g, Path: p, URL: where, close: g.Close}, nil
	case "abfs", "abfss", "wasb", "wasbs":
		a, err := DialAzure(u.User.Username(), u.Host)
		if err != nil {
			return nil, err
		}
		p := u.Path
		if p == "" {
			p = "/"
		}
		return &Location{FS: a, Path: p, URL: where, close: a.Close}, nil
	case "hdfs":
		h, err := DialHDFS(u.Host)
		if err != nil {
			return nil, err
		}
		p := u.Path
		if p == "" {
			p = "/"
		}
		return &Location{FS: h, Path: p, URL: where, close: h.Close}, nil
	default:
		return nil, fmt.Errorf("%w: %q: scheme %q (want a local path, file://, hdfs://, s3a://, s3://, gs://, abfs:// or wasbs://)", ErrUnsupportedScheme, where, u.Scheme)
	}
}
