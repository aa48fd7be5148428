package vfs

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rekeyhq/rekey/internal/krb"
)

// ErrUnsupportedScheme is returned by Open for a URL scheme rekey cannot
// read or write (ftp://, ...), and for a scheme whose backend the program
// did not import (s3a:// without vfs/s3): the message names the package.
var ErrUnsupportedScheme = errors.New("vfs: unsupported URL scheme")

// ErrBadLocation is matched by Open's errors for a location that is
// malformed as written (empty, unparsable, a file URL with a host or
// without a path): the caller named something wrong, not a damaged file.
var ErrBadLocation = errors.New("vfs: malformed location")

// Options carry what opening a location needs besides its URL.
type Options struct {
	// Kerberos is who to log in as when the location's cluster requires
	// Kerberos (HDFS with hadoop.security.authentication=kerberos). It
	// logs in at the first such need, so a run that meets no kerberized
	// cluster never logs in. nil means no login was given: a cluster that
	// requires one is refused, naming what is missing.
	Kerberos *krb.Identity
	// Logf, when set, is told of the retries of a connection that does
	// not answer yet (a NameNode restarting): which server, which attempt,
	// how long until giving up.
	Logf func(format string, args ...any)
	// Wait bounds how long a connection that does not answer is retried
	// before the open fails as unavailable (0: the backend's default, two
	// minutes for an HDFS NameNode).
	Wait time.Duration
}

// Dialer opens the file system a URL of a registered scheme names, with
// the function that releases it (nil when nothing needs releasing).
type Dialer func(u *url.URL, o Options) (fsys WriteFS, close func() error, err error)

var (
	dialersMu sync.RWMutex
	dialers   = map[string]Dialer{}
)

// Register makes Open resolve URLs of the schemes through dial. Backends
// register themselves when imported (vfs/hdfs, vfs/s3, vfs/gcs,
// vfs/azure; vfs/all imports them all), so a program links the backends
// it imports and no others. A scheme registered twice panics: two
// backends for one scheme is a mistake in the program.
func Register(dial Dialer, schemes ...string) {
	dialersMu.Lock()
	defer dialersMu.Unlock()
	for _, s := range schemes {
		if _, dup := dialers[s]; dup {
			panic("vfs: scheme " + s + " registered twice")
		}
		dialers[s] = dial
	}
}

// backendOf names the package that serves each scheme rekey knows, so
// that a program that did not import it is told which one to import.
var backendOf = map[string]string{
	"hdfs":  "github.com/rekeyhq/rekey/vfs/hdfs",
	"s3":    "github.com/rekeyhq/rekey/vfs/s3",
	"s3a":   "github.com/rekeyhq/rekey/vfs/s3",
	"gs":    "github.com/rekeyhq/rekey/vfs/gcs",
	"abfs":  "github.com/rekeyhq/rekey/vfs/azure",
	"abfss": "github.com/rekeyhq/rekey/vfs/azure",
	"wasb":  "github.com/rekeyhq/rekey/vfs/azure",
	"wasbs": "github.com/rekeyhq/rekey/vfs/azure",
}

// schemes lists the schemes Open resolves, for messages.
func schemes() string {
	dialersMu.RLock()
	defer dialersMu.RUnlock()
	out := []string{"a local path", "file://"}
	var reg []string
	for s := range dialers {
		reg = append(reg, s+"://")
	}
	sort.Strings(reg)
	return strings.Join(append(out, reg...), ", ")
}

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

// Open is OpenWith without options: no Kerberos login.
func Open(where string) (*Location, error) { return OpenWith(where, Options{}) }

// OpenWith resolves where into a file system and a path. Local paths are
// made absolute against the working directory. A file:// URL's host must
// be empty or localhost (file://tmp/x is a mistake for file:///tmp/x and
// is refused rather than read as the relative path tmp/x). Any other
// scheme is resolved by the backend registered for it (see Register): an
// hdfs:// URL dials the NameNode (vfs/hdfs), s3a:// or s3:// names a
// bucket and a key prefix (vfs/s3), gs:// a GCS bucket (vfs/gcs), abfs://
// or wasbs:// (and abfss://, wasb://) an Azure container (vfs/azure). A
// scheme no imported backend serves is ErrUnsupportedScheme.
func OpenWith(where string, o Options) (*Location, error) {
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
	if u.Scheme == "file" {
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
	}
	dialersMu.RLock()
	dial := dialers[u.Scheme]
	dialersMu.RUnlock()
	if dial == nil {
		if pkg, known := backendOf[u.Scheme]; known {
			return nil, fmt.Errorf("%w: %q: the program does not include the %s backend (import %s, or github.com/rekeyhq/rekey/vfs/all for every backend)", ErrUnsupportedScheme, where, u.Scheme, pkg)
		}
		return nil, fmt.Errorf("%w: %q: scheme %q (want %s)", ErrUnsupportedScheme, where, u.Scheme, schemes())
	}
	fsys, closer, err := dial(u, o)
	if err != nil {
		return nil, err
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	return &Location{FS: fsys, Path: p, URL: where, close: closer}, nil
}
