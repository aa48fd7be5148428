package s3test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/gcs"
)

// GCS is a GCS emulator (fsouza/fake-gcs-server, in memory) serving the
// JSON API on 127.0.0.1 in the test's process, with one bucket.
type GCS struct {
	Fake   *fakestorage.Server
	Bucket string
	// URL is the server's root ("http://127.0.0.1:PORT").
	URL string
}

// StartGCS starts the emulator with a bucket, and stops it when the test
// ends. If it cannot start, the test is skipped with the reason, or fails
// when REKEY_REQUIRE_CLUSTER=1 (as testenv.Require does for the cluster).
func StartGCS(t testing.TB) *GCS {
	t.Helper()
	// Host 127.0.0.1 with no port: httptest's loopback listener on a free
	// port.
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Writer: io.Discard})
	if err != nil {
		if os.Getenv("REKEY_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("the GCS emulator (fake-gcs-server) did not start: %v", err)
		}
		t.Skipf("GCS test skipped: the emulator (fake-gcs-server) did not start: %v", err)
	}
	t.Cleanup(srv.Stop)
	g := &GCS{Fake: srv, Bucket: "rekey-test", URL: srv.URL()}
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: g.Bucket})
	return g
}

// Endpoint is the JSON API's base URL.
func (g *GCS) Endpoint() string { return g.URL + "/storage/v1/" }

// UseEmulatorEnv points the GCS library at the emulator the way its users
// do, with STORAGE_EMULATOR_HOST (which also turns credentials off), and
// leaves no Hadoop configuration to say otherwise.
func (g *GCS) UseEmulatorEnv(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(g.URL, "http://"))
	t.Setenv("HADOOP_CONF_DIR", t.TempDir())
}

// UseHadoopConf writes a core-site.xml naming the emulator with the keys of
// Hadoop's GCS connector (fs.gs.storage.root.url, fs.gs.auth.type
// UNAUTHENTICATED) and points HADOOP_CONF_DIR at it, with
// STORAGE_EMULATOR_HOST unset, so gs:// URLs resolve through those keys.
func (g *GCS) UseHadoopConf(t *testing.T) {
	dir := t.TempDir()
	site := `<?xml version="1.0"?>
<configuration>
  <property><name>fs.gs.storage.root.url</name><value>` + g.URL + `/</value></property>
  <property><name>fs.gs.auth.type</name><value>UNAUTHENTICATED</value></property>
</configuration>
`
	if err := os.WriteFile(filepath.Join(dir, "core-site.xml"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADOOP_CONF_DIR", dir)
	t.Setenv("STORAGE_EMULATOR_HOST", "")
}

// Dial opens the bucket directly, without credentials.
func (g *GCS) Dial(t testing.TB) *gcs.FS {
	t.Helper()
	fsys, err := gcs.DialWith(g.Bucket, gcs.Options{Endpoint: g.Endpoint(), Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

// Stored reads what the emulator holds for the object at name ("/key"):
// its own account of the bytes, not the client's.
func (g *GCS) Stored(t testing.TB, name string) []byte {
	t.Helper()
	o, err := g.Fake.GetObject(g.Bucket, strings.TrimPrefix(name, "/"))
	if err != nil {
		t.Fatalf("the emulator has no object %s: %v", name, err)
	}
	return o.Content
}

// Upload copies the local tree under dir to the objects under dst through
// fsys and checks that the emulator stored every file byte for byte. It
// returns the number of files.
func (g *GCS) Upload(t testing.TB, fsys vfs.WriteFS, dir, dst string) int {
	t.Helper()
	return UploadChecked(t, fsys, dir, dst, func(name string) []byte { return g.Stored(t, name) })
}
