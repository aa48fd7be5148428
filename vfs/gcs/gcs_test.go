package gcs_test

import (
	"errors"
	iofs "io/fs"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/gcs"
)

// TestGCSFileSystem checks the GCS backend against fake-gcs-server, opened
// the way a user opens it (vfs.Open of a gs:// URL, the endpoint from
// core-site.xml's fs.gs.storage.root.url): objects written (one chunk, and
// a resumable upload of two chunks) are stored byte for byte; Stat gives
// size and ETag; ReadDir lists files and directories under a prefix and an
// empty MkdirAll directory; ranged reads return the stored bytes; Rename
// moves an object; CreateExclusive refuses a name that exists, and of two
// exclusive writers only the first to close stores its bytes; Remove and
// RemoveAll delete.
func TestGCSFileSystem(t *testing.T) {
	g := s3test.StartGCS(t)
	g.UseHadoopConf(t)
	dir := "/vfs-gcs"
	loc, err := vfs.Open("gs://" + g.Bucket + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	fsys := loc.FS
	if loc.Path != dir || fsys.String() != "gs://"+g.Bucket {
		t.Fatalf("path %q on %s, want %q on gs://%s", loc.Path, fsys, dir, g.Bucket)
	}
	s3test.CheckObjectStore(t, fsys, dir, func(name string) []byte { return g.Stored(t, name) })
}

// TestGCSOpenRefusesMissingBucket checks that a gs:// URL naming a bucket
// the server does not have fails at Open, naming it.
func TestGCSOpenRefusesMissingBucket(t *testing.T) {
	g := s3test.StartGCS(t)
	g.UseEmulatorEnv(t)
	_, err := vfs.Open("gs://no-such-bucket/x")
	if !errors.Is(err, iofs.ErrNotExist) || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Errorf("Open of a missing bucket: %v; want ErrNotExist naming it", err)
	}
}

// dialGCSThrough opens the emulator's bucket through the fault proxy p.
func dialGCSThrough(t *testing.T, g *s3test.GCS, p *s3test.FaultProxy, attempts int) *gcs.FS {
	s, err := gcs.DialWith(g.Bucket, gcs.Options{Endpoint: p.Endpoint(g.Endpoint()), Anonymous: true, MaxAttempts: attempts, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestGCSRenameKeepsAReplacedSource replaces the source object between
// Rename's server-side copy (rewrite) and its delete: the delete, of the
// copied generation only, leaves the new object alone (see
// checkRenameKeepsAReplacedSource).
func TestGCSRenameKeepsAReplacedSource(t *testing.T) {
	g := s3test.StartGCS(t)
	p := s3test.StartFaultProxy(t, g.URL, s3test.GCSProtocol)
	s3test.CheckRenameKeepsAReplacedSource(t, dialGCSThrough(t, g, p, 0), g.Dial(t), "/r", p, func(name string) []byte { return g.Stored(t, name) })
}

// TestGCSReadPinsGeneration replaces an object after it was opened: the
// next read asks for the generation opened, which is gone, and fails
// naming it rather than returning the new bytes.
func TestGCSReadPinsGeneration(t *testing.T) {
	g := s3test.StartGCS(t)
	s := g.Dial(t)
	s3test.WriteObject(t, s, "/p/obj", []byte("old bytes"))
	f, err := s.Open("/p/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s3test.WriteObject(t, s, "/p/obj", []byte("new bytes"))
	p := make([]byte, 9)
	if n, err := f.ReadAt(p, 0); err == nil || !strings.Contains(err.Error(), "changed or vanished since it was opened") {
		t.Errorf("read of a replaced object: %q, %v; want the change reported", p[:n], err)
	}
}

// TestGCSReadCutMidBody cuts download bodies in a proxy in front of the
// emulator: reads resume from the offset reached (see
// checkReadCutMidBody). (The GCS library's reader reopens a cut body
// itself, from the byte it reached; this checks that what the backend
// builds on it keeps that.)
func TestGCSReadCutMidBody(t *testing.T) {
	g := s3test.StartGCS(t)
	p := s3test.StartFaultProxy(t, g.URL, s3test.GCSProtocol)
	s3test.CheckReadCutMidBody(t, dialGCSThrough(t, g, p, 0), "/c", p)
}

// TestGCSBusyBacksOff answers 429 (rateLimitExceeded) and 503
// (backendError) to the first requests: the library backs off and
// retries, and too few attempts fail with the server's code (see
// checkBusyBacksOff).
func TestGCSBusyBacksOff(t *testing.T) {
	g := s3test.StartGCS(t)
	p := s3test.StartFaultProxy(t, g.URL, s3test.GCSProtocol)
	s, few := dialGCSThrough(t, g, p, 0), dialGCSThrough(t, g, p, 2)
	for _, c := range []struct {
		answer s3test.Answer
		code   string
	}{{s3test.GCSTooManyRequests, "429"}, {s3test.GCSBackendError, "503"}} {
		t.Run(c.code, func(t *testing.T) { s3test.CheckBusyBacksOff(t, s, few, "/b"+c.code, p, c.answer, c.code) })
	}
}
