package vfs_test

import (
	"errors"
	iofs "io/fs"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/vfs"
)

// TestAzureFileSystem checks the Azure backend against Azurite, opened the
// way a user opens it (vfs.Open of an abfs:// URL, the account's endpoint
// and key from AZURE_STORAGE_CONNECTION_STRING): the checks of
// checkObjectStore (writes of one Put Blob and of two staged blocks stored
// byte for byte, stat with size and ETag, listings, ranged reads, rename,
// exclusive create with two writers, remove), and a wasbs:// URL of the
// same container reads the same blobs.
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
	checkObjectStore(t, loc.FS, dir, func(name string) []byte { return az.Stored(t, name) })

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
}

// TestAzureReadPinsETag replaces a blob after it was opened: the next read
// asks for the ETag opened (If-Match) and fails rather than return the new
// bytes.
func TestAzureReadPinsETag(t *testing.T) {
	az := s3test.StartAzurite(t)
	s := az.Dial(t)
	writeObject(t, s, "/p/obj", []byte("old bytes"))
	f, err := s.Open("/p/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeObject(t, s, "/p/obj", []byte("new bytes"))
	p := make([]byte, 9)
	if n, err := f.ReadAt(p, 0); err == nil || !strings.Contains(err.Error(), "changed since it was opened") {
		t.Errorf("read of a replaced blob: %q, %v; want the change reported", p[:n], err)
	}
}
