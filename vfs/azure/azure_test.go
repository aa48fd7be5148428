package azure_test

import (
	"errors"
	iofs "io/fs"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/azure"
)

// TestAzureFileSystem checks the Azure backend against Azurite, opened the
// way a user opens it (vfs.Open of an abfs:// URL, the account's endpoint
// and key from AZURE_STORAGE_CONNECTION_STRING): the checks of
// checkObjectStore (writes of one Put Blob and of two staged blocks stored
// byte for byte, stat with size and ETag, listings, ranged reads, rename,
// exclusive create with two writers, remove), and a wasbs:// URL of the
// same container reads the same blobs; the account key is found in each
// place a Hadoop or Azure client looks (checkAzureCredentials).
func TestAzureFileSystem(t *testing.T) {
	az := s3test.StartAzurite(t)
	az.UseEnv(t)
	dir := "/vfs-azure"
	loc, err := vfs.Open(az.URL(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	if loc.Path != dir {
		t.Fatalf("path %q, want %q", loc.Path, dir)
	}
	s3test.CheckObjectStore(t, loc.FS, dir, func(name string) []byte { return az.Stored(t, name) })

	wasb, err := vfs.Open("wasbs://" + az.Container + "@" + s3test.AzuriteAccount + ".blob.core.windows.net" + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer wasb.Close()
	if got, err := vfs.ReadFile(wasb.FS, dir+"/lease"); err != nil || string(got) != "first" {
		t.Errorf("the lease through wasbs://: %q, %v", got, err)
	}
	if _, err := vfs.Open("abfs://no-such-container@" + s3test.AzuriteAccount + ".dfs.core.windows.net/x"); !errors.Is(err, iofs.ErrNotExist) || !strings.Contains(err.Error(), "no-such-container") {
		t.Errorf("Open of a missing container: %v; want ErrNotExist naming it", err)
	}
	t.Run("Credentials", func(t *testing.T) { checkAzureCredentials(t, az) })
}

// TestAzureReadPinsETag replaces a blob after it was opened: the next read
// asks for the ETag opened (If-Match) and fails rather than return the new
// bytes.
func TestAzureReadPinsETag(t *testing.T) {
	az := s3test.StartAzurite(t)
	s := az.Dial(t)
	s3test.WriteObject(t, s, "/p/obj", []byte("old bytes"))
	f, err := s.Open("/p/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s3test.WriteObject(t, s, "/p/obj", []byte("new bytes"))
	p := make([]byte, 9)
	if n, err := f.ReadAt(p, 0); err == nil || !strings.Contains(err.Error(), "changed since it was opened") {
		t.Errorf("read of a replaced blob: %q, %v; want the change reported", p[:n], err)
	}
}

// dialAzureThrough opens the emulator's container through the fault proxy
// p, with the development key.
func dialAzureThrough(t *testing.T, az *s3test.Azurite, p *s3test.FaultProxy, attempts int) *azure.FS {
	s, err := azure.DialWith(az.Container, azure.Options{Account: s3test.AzuriteAccount, Key: s3test.AzuriteKey, Endpoint: p.Endpoint(az.Endpoint), MaxAttempts: attempts, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAzureFaults runs the fault checks against one Azurite through a
// proxy in front of it (one emulator: each start costs seconds):
// download bodies cut mid-way resume from the offset reached
// (checkReadCutMidBody); 503 ServerBusy and 500 OperationTimedOut are
// backed off and retried by the SDK's retry policy, and too few attempts
// fail with the service's error code (checkBusyBacksOff); a source blob
// replaced between Rename's server-side copy and its delete is left alone,
// the delete being conditional on the copied ETag
// (checkRenameKeepsAReplacedSource).
func TestAzureFaults(t *testing.T) {
	az := s3test.StartAzurite(t)
	p := s3test.StartFaultProxy(t, az.Endpoint, s3test.AzureProtocol)
	s, few := dialAzureThrough(t, az, p, 0), dialAzureThrough(t, az, p, 2)
	t.Run("ReadCutMidBody", func(t *testing.T) { s3test.CheckReadCutMidBody(t, s, "/c", p) })
	for _, c := range []struct {
		answer s3test.Answer
		code   string
	}{{s3test.AzureServerBusy, "ServerBusy"}, {s3test.AzureOperationTimedOut, "OperationTimedOut"}} {
		t.Run(c.code, func(t *testing.T) { s3test.CheckBusyBacksOff(t, s, few, "/b"+c.code, p, c.answer, c.code) })
	}
	t.Run("RenameKeepsAReplacedSource", func(t *testing.T) {
		s3test.CheckRenameKeepsAReplacedSource(t, s, az.Dial(t), "/r", p, func(name string) []byte { return az.Stored(t, name) })
	})
}
