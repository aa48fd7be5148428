package azure_test

import (
	"errors"
	iofs "io/fs"
	"strings"
	"testing"

	"github.com/colinmarc/hdfs/v2/hadoopconf"
	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/azure"
)

// checkAzureCredentials opens Azurite's container with the account key found
// each way AzureOptionsFromHadoop looks for it, and reads a blob written
// there: fs.azure.account.key.HOST from core-site.xml for the URL's own
// host, the same account's key given for its other endpoint (a blob-host key
// for an abfs:// dfs host), core-site.xml's key winning over a bad
// AZURE_STORAGE_CONNECTION_STRING, and AZURE_STORAGE_ACCOUNT with
// AZURE_STORAGE_KEY. The Blob endpoint the options name is Azure's for the
// account (checked); the test then points it at Azurite, the one thing a
// test must change since nothing leaves the loopback. A wrong key is
// refused by Azurite at Open (ErrPermission). It runs inside
// TestAzureFileSystem, on that test's Azurite (each start costs seconds).
func checkAzureCredentials(t *testing.T, az *s3test.Azurite) {
	s3test.WriteObject(t, az.Dial(t), "/creds/blob", []byte("signed"))
	dfs := s3test.AzuriteAccount + ".dfs.core.windows.net"
	blobHost := s3test.AzuriteAccount + ".blob.core.windows.net"
	badConn := "DefaultEndpointsProtocol=http;AccountName=" + s3test.AzuriteAccount + ";AccountKey=" + strings.Repeat("A", 86) + "==;BlobEndpoint=" + az.Endpoint + ";"
	opens := func(t *testing.T, conf hadoopconf.HadoopConf, host string) error {
		t.Helper()
		o := azure.OptionsFromHadoop(conf, host)
		if o.ConnectionString == "" {
			if o.Endpoint != "https://"+blobHost || o.Account != s3test.AzuriteAccount {
				t.Fatalf("options for %s: account %q, endpoint %q; want %s at https://%s", host, o.Account, o.Endpoint, s3test.AzuriteAccount, blobHost)
			}
			o.Endpoint = az.Endpoint
		}
		a, err := azure.DialWith(az.Container, o)
		if err != nil {
			return err
		}
		got, err := vfs.ReadFile(a, "/creds/blob")
		if err == nil && string(got) != "signed" {
			t.Fatalf("read %q", got)
		}
		return err
	}
	clearEnv := func(t *testing.T) {
		for _, k := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"} {
			t.Setenv(k, "")
		}
	}
	t.Run("CoreSiteKeyOfTheHost", func(t *testing.T) {
		clearEnv(t)
		if err := opens(t, hadoopconf.HadoopConf{"fs.azure.account.key." + dfs: s3test.AzuriteKey}, dfs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("CoreSiteKeyOfTheOtherEndpoint", func(t *testing.T) {
		clearEnv(t)
		if err := opens(t, hadoopconf.HadoopConf{"fs.azure.account.key." + blobHost: s3test.AzuriteKey}, dfs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("CoreSiteWinsOverTheEnvironment", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", badConn)
		if err := opens(t, hadoopconf.HadoopConf{"fs.azure.account.key." + dfs: s3test.AzuriteKey}, dfs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("EnvironmentAccountAndKey", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("AZURE_STORAGE_ACCOUNT", s3test.AzuriteAccount)
		t.Setenv("AZURE_STORAGE_KEY", s3test.AzuriteKey)
		if err := opens(t, hadoopconf.HadoopConf{}, dfs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("WrongKeyRefused", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", badConn)
		err := opens(t, hadoopconf.HadoopConf{}, dfs)
		if !errors.Is(err, iofs.ErrPermission) || !strings.Contains(err.Error(), az.Container) {
			t.Fatalf("a wrong key: %v; want ErrPermission naming the container", err)
		}
	})
}
