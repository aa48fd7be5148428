package s3test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/azure"
)

// Azurite's well-known development account: its name and key are public,
// documented for the emulator only.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite is an Azurite Blob service on 127.0.0.1 (in memory), started for
// one test, with one container.
type Azurite struct {
	// Endpoint is the path-style Blob endpoint, http://127.0.0.1:PORT/devstoreaccount1.
	Endpoint  string
	Container string
}

// StartAzurite starts Azurite's Blob service (installed by
// testenv/bin/azurite-install into bin/azurite) on a free loopback port and
// creates a container; it stops the server when the test ends. If the
// emulator is not installed or does not start, the test is skipped saying
// why, or fails when REKEY_REQUIRE_CLUSTER=1.
func StartAzurite(t testing.TB) *Azurite {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("REKEY_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("Azurite: "+format, args...)
		}
		t.Skipf("Azure test skipped: Azurite: "+format, args...)
	}
	repo, err := testenv.RepoRoot()
	if err != nil {
		fail("%v", err)
	}
	bin := filepath.Join(repo, "bin", "azurite", "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(bin); err != nil {
		fail("not installed (run testenv/bin/azurite-install): %v", err)
	}
	cmd := exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence", "--skipApiVersionCheck", "--disableProductStyleUrl")
	out, err := cmd.StdoutPipe()
	if err != nil {
		fail("%v", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		fail("did not start: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := listening(out)
	if url == "" {
		fail("did not say where it listens")
	}
	a := &Azurite{Endpoint: url + "/" + AzuriteAccount, Container: "rekey-test"}
	c, err := container.NewClientFromConnectionString(a.ConnectionString(), a.Container, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(context.Background(), nil); err != nil {
		t.Fatalf("creating the container: %v", err)
	}
	return a
}

var listensOn = regexp.MustCompile(`successfully listens on (http://127\.0\.0\.1:\d+)`)

// listening reads the server's output up to the line naming its address,
// and drains the rest in the background.
func listening(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := listensOn.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, r)
			return m[1]
		}
	}
	return ""
}

// ConnectionString is the emulator's, with its Blob endpoint.
func (a *Azurite) ConnectionString() string {
	return "DefaultEndpointsProtocol=http;AccountName=" + AzuriteAccount + ";AccountKey=" + AzuriteKey + ";BlobEndpoint=" + a.Endpoint + ";"
}

// UseEnv points abfs:// and wasbs:// URLs at the emulator the way Azure's
// tools are pointed at it, with AZURE_STORAGE_CONNECTION_STRING, and
// leaves no Hadoop configuration to say otherwise.
func (a *Azurite) UseEnv(t *testing.T) {
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", a.ConnectionString())
	t.Setenv("HADOOP_CONF_DIR", t.TempDir())
}

// URL is the abfs:// URL of path p in the emulator's container.
func (a *Azurite) URL(p string) string {
	return "abfs://" + a.Container + "@" + AzuriteAccount + ".dfs.core.windows.net" + p
}

// Dial opens the container directly, with the development key.
func (a *Azurite) Dial(t testing.TB) *azure.FS {
	t.Helper()
	fsys, err := azure.DialWith(a.Container, azure.Options{Account: AzuriteAccount, Key: AzuriteKey, Endpoint: a.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// Stored downloads the blob at name with the SDK directly, not through
// the backend: the server's answer for its bytes.
func (a *Azurite) Stored(t testing.TB, name string) []byte {
	t.Helper()
	c, err := container.NewClientFromConnectionString(a.ConnectionString(), a.Container, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.NewBlobClient(strings.TrimPrefix(name, "/")).DownloadStream(context.Background(), nil)
	if err != nil {
		t.Fatalf("the emulator has no blob %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Upload copies the local tree under dir to the blobs under dst through
// fsys and checks that the emulator stored every file byte for byte.
func (a *Azurite) Upload(t testing.TB, fsys vfs.WriteFS, dir, dst string) int {
	t.Helper()
	return UploadChecked(t, fsys, dir, dst, func(name string) []byte { return a.Stored(t, name) })
}
