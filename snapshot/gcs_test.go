package snapshot_test

import (
	"errors"
	"os"
	"path"
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
// oracle's dumps, normal and raw, whole and cut into splits, with
// read-ahead on (the default for object stores) and off.
func TestGCSFixtures(t *testing.T) {
	g := s3test.StartGCS(t)
	g.UseEmulatorEnv(t)
	fsys := g.Dial(t)
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "testdata", "snapshots")
	for _, name := range hbase1Names(t, dir) {
		t.Run(name, func(t *testing.T) {
			dst := path.Join("/snapshot-fixtures", name)
			g.Upload(t, fsys, filepath.Join(dir, name), dst)
			root := "gs://" + g.Bucket + dst
			for _, mode := range dumpModes(name) {
				want, err := os.ReadFile(filepath.Join(dir, mode.file))
				if os.IsNotExist(err) {
					continue
				} else if err != nil {
					t.Fatal(err)
				}
				if d := diffDumps(dumpSnapshot(t, root, name, mode.opts), want); d != "" {
					t.Errorf("%s: %s", mode.file, d)
				}
				if d := diffDumps(dumpSplits(t, root, name, mode.opts, snapshot.SplitOptions{TargetBytes: 16 << 10}), want); d != "" {
					t.Errorf("%s, 16 KiB splits: %s", mode.file, d)
				}
				off := snapshot.OpenOptions{ReadAhead: vfs.ReadAheadOptions{Off: true}}
				if d := diffDumps(dumpWith(t, root, name, off, mode.opts, snapshot.SplitOptions{}), want); d != "" {
					t.Errorf("%s, read-ahead off: %s", mode.file, d)
				}
			}
		})
	}
}

// TestGCSSnapshotMissingStoreFile removes from the bucket a store file the
// manifest names: opening and scanning the snapshot fails with ErrNotFound
// naming the object, instead of yielding fewer cells.
func TestGCSSnapshotMissingStoreFile(t *testing.T) {
	g := s3test.StartGCS(t)
	g.UseEmulatorEnv(t)
	fsys := g.Dial(t)
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const name = "enc_none"
	g.Upload(t, fsys, filepath.Join(repo, "testdata", "snapshots", name), "/missing")
	gone := storeFiles(t, fsys, "/missing")[0]
	if err := fsys.Remove(gone); err != nil {
		t.Fatal(err)
	}
	err = scanAll(t, "gs://"+g.Bucket+"/missing", name)
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
