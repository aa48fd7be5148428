// Package s3test holds the helpers the object-store tests share: opening
// testenv's S3 server, starting the GCS and Azure emulators, fresh key
// prefixes, copying local trees (HBase's snapshots) into a bucket with the
// server's own account of the bytes checked, and FaultProxy, which puts
// cut bodies and throttling answers between a backend and a real server.
package s3test

import (
	"bytes"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/s3"
)

// Dial opens the server's bucket with its keys.
func Dial(t testing.TB, s *testenv.S3State) *s3.FS {
	t.Helper()
	fsys, err := s3.DialWith(s.Bucket, s3.Options{Endpoint: s.Endpoint, PathStyle: true, Region: s.Region, AccessKey: s.AccessKey, SecretKey: s.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// Prefix is a fresh key prefix ("/…", no trailing slash) for one test; it
// removes everything under it when the test ends.
func Prefix(t testing.TB, fsys vfs.WriteFS, what string) string {
	t.Helper()
	p := fmt.Sprintf("/%s%s-%d", os.Getenv("REKEY_TEST_PREFIX"), what, time.Now().UnixNano())
	t.Cleanup(func() { fsys.RemoveAll(p) })
	return p
}

// Stored reads what the server stored for the object at name ("/key"):
// versitygw's posix backend keeps an object as the file BUCKET/KEY in its
// folder, so this is the server's account of the bytes, not the client's.
func Stored(t testing.TB, s *testenv.S3State, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(s.ConfDir), "data", s.Bucket, filepath.FromSlash(strings.TrimPrefix(name, "/"))))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Upload copies the local tree under dir to the keys under dst ("/…")
// through fsys, and checks that the server stored every file byte for
// byte. It returns the number of files.
func Upload(t testing.TB, s *testenv.S3State, fsys vfs.WriteFS, dir, dst string) int {
	t.Helper()
	return UploadChecked(t, fsys, dir, dst, func(name string) []byte { return Stored(t, s, name) })
}

// UploadChecked is Upload for any store: stored gives the server's own
// account of the bytes of the object at name.
func UploadChecked(t testing.TB, fsys vfs.WriteFS, dir, dst string, stored func(name string) []byte) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		name := path.Join(dst, filepath.ToSlash(rel))
		w, err := fsys.Create(name)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			w.Close()
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		if !bytes.Equal(stored(name), data) {
			return fmt.Errorf("the server stored other bytes for %s than %s holds", name, p)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("uploading %s to %s: %v", dir, dst, err)
	}
	return n
}

// Files lists every object under dir ("/…"), depth first in name order,
// leaving out directory markers.
func Files(t testing.TB, fsys vfs.FS, dir string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		if e.IsDir() {
			out = append(out, Files(t, fsys, p)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// Setup is what an object-store test starts with: the S3 server (or a
// skip), HADOOP_CONF_DIR pointing at its core-site.xml (so s3a:// URLs
// resolve as on a Hadoop client), and the bucket opened.
func Setup(t *testing.T) (*testenv.S3State, *s3.FS) {
	t.Helper()
	st := testenv.RequireS3(t)
	st.UseS3Conf(t)
	return st, Dial(t, st)
}
