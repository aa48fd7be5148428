package vfs

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// TestBackendNotIncluded: package vfs's own tests import no backend, as
// a program that imports only the core; a URL of a scheme whose backend
// it lacks is ErrUnsupportedScheme naming the package that serves it and
// vfs/all, not an attempt to read it as something else, and a scheme no
// backend serves lists the ones this program has.
func TestBackendNotIncluded(t *testing.T) {
	for _, tc := range []struct{ url, pkg string }{
		{"s3a://bucket/snapshots", "github.com/rekeyhq/rekey/vfs/s3"},
		{"s3://bucket/x", "github.com/rekeyhq/rekey/vfs/s3"},
		{"hdfs://namenode:8020/hbase", "github.com/rekeyhq/rekey/vfs/hdfs"},
		{"gs://bucket/x", "github.com/rekeyhq/rekey/vfs/gcs"},
		{"abfss://c@account.dfs.core.windows.net/x", "github.com/rekeyhq/rekey/vfs/azure"},
	} {
		u, _ := url.Parse(tc.url)
		dialersMu.RLock()
		_, linked := dialers[u.Scheme]
		dialersMu.RUnlock()
		if linked {
			t.Fatalf("%s:// is registered in vfs's own test: the test would prove nothing", u.Scheme)
		}
		loc, err := Open(tc.url)
		if err == nil {
			loc.Close()
			t.Errorf("Open(%s) succeeded without its backend", tc.url)
			continue
		}
		want := "does not include the " + u.Scheme + " backend (import " + tc.pkg + ", or github.com/rekeyhq/rekey/vfs/all"
		if !errors.Is(err, ErrUnsupportedScheme) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s): %v; want ErrUnsupportedScheme saying %q", tc.url, err, want)
		}
	}
	_, err := Open("ftp://host/x")
	if !errors.Is(err, ErrUnsupportedScheme) || !strings.Contains(err.Error(), `scheme "ftp" (want a local path, file://)`) {
		t.Errorf("Open(ftp://...): %v; want ErrUnsupportedScheme listing only the local schemes", err)
	}
}

// TestRegisterSchemeTwicePanics: two backends for one scheme is a
// mistake in the program; the second Register panics naming the scheme.
func TestRegisterSchemeTwicePanics(t *testing.T) {
	const scheme = "vfstest-twice"
	dial := func(*url.URL, Options) (WriteFS, func() error, error) { return Local{}, nil, nil }
	Register(dial, scheme)
	t.Cleanup(func() {
		dialersMu.Lock()
		delete(dialers, scheme)
		dialersMu.Unlock()
	})
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("a second Register of one scheme did not panic")
		}
		if msg, _ := r.(string); !strings.Contains(msg, scheme) {
			t.Errorf("panic %v does not name the scheme", r)
		}
	}()
	Register(dial, scheme)
}
