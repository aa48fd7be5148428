package snapshot_test

import (
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
)

// TestAzureFixtures copies every committed fixture snapshot (written by the
// mini cluster's HBase) byte for byte into an Azurite container and reads
// it back from its abfs:// root (the account found through
// AZURE_STORAGE_CONNECTION_STRING): the cells equal the oracle's dumps
// (see fixturesMatchOracle). On the same emulator (each start costs
// seconds), MissingStoreFile removes a blob the manifest names: reading
// the snapshot fails with ErrNotFound naming the blob, never fewer cells
// (see missingStoreFileFails).
func TestAzureFixtures(t *testing.T) {
	az := s3test.StartAzurite(t)
	az.UseEnv(t)
	fsys := az.Dial(t)
	fixturesMatchOracle(t, func(t *testing.T, local, dst string) { az.Upload(t, fsys, local, dst) }, az.URL)
	t.Run("MissingStoreFile", func(t *testing.T) {
		missingStoreFileFails(t, fsys, func(local, dst string) { az.Upload(t, fsys, local, dst) }, az.URL)
	})
}
