package snapshot_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"
)

// TestGCSFixtures copies every committed fixture snapshot (written by the
// mini cluster's HBase) byte for byte into a bucket of the GCS emulator
// (fake-gcs-server, found through STORAGE_EMULATOR_HOST as the GCS library
// finds it) and reads it back from its gs:// root: the cells equal the
// oracle's dumps (see fixturesMatchOracle).
func TestGCSFixtures(t *testing.T) {
	g := s3test.StartGCS(t)
	g.UseEmulatorEnv(t)
	fsys := g.Dial(t)
	fixturesMatchOracle(t, func(t *testing.T, local, dst string) { g.Upload(t, fsys, local, dst) },
		func(dst string) string { return "gs://" + g.Bucket + dst })
}

// TestGCSSnapshotMissingStoreFile removes from the bucket a store file the
// manifest names: opening and scanning the snapshot fails with ErrNotFound
// naming the object, instead of yielding fewer cells (see
// missingStoreFileFails).
func TestGCSSnapshotMissingStoreFile(t *testing.T) {
	g := s3test.StartGCS(t)
	g.UseEmulatorEnv(t)
	fsys := g.Dial(t)
	missingStoreFileFails(t, fsys, func(local, dst string) { g.Upload(t, fsys, local, dst) }, func(dst string) string { return "gs://" + g.Bucket + dst })
}

// missingStoreFileFails uploads the fixture enc_none to the store under
// /missing, removes one of its store files, and checks that reading the
// snapshot from root("/missing") fails with ErrNotFound naming the
// removed object.
func missingStoreFileFails(t *testing.T, fsys vfs.WriteFS, upload func(local, dst string), root func(dst string) string) {
	t.Helper()
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const name = "enc_none"
	upload(filepath.Join(repo, "testdata", "snapshots", name), "/missing")
	gone := storeFiles(t, fsys, "/missing")[0]
	if err := fsys.Remove(gone); err != nil {
		t.Fatal(err)
	}
	err = scanAll(t, root("/missing"), name)
	if !errors.Is(err, snapshot.ErrNotFound) || !strings.Contains(err.Error(), gone) {
		t.Errorf("a missing store file: %v; want ErrNotFound naming %s", err, gone)
	}
}

// scanAll opens the snapshot at root and scans every split to its end.
func scanAll(t *testing.T, root, name string) error {
	s, err := snapshot.Open(t.Context(), root, name, snapshot.OpenOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	splits, err := s.Splits(snapshot.SplitOptions{})
	if err != nil {
		return err
	}
	for _, sp := range splits {
		sc, err := s.NewScanner(t.Context(), sp, snapshot.ScanOptions{})
		if err != nil {
			return err
		}
		for sc.Next() {
		}
		if err := sc.Close(); err != nil {
			return err
		}
	}
	return nil
}
