package snapshot_test

import (
	"errors"
	"fmt"
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

// TestS3Fixtures copies every committed fixture snapshot (written by the
// mini cluster's HBase) byte for byte into the testenv S3 server's bucket
// and reads it back from its s3a:// root: the cells equal the oracle's
// dumps, normal and raw, whole and cut into splits, read through the
// read-ahead streams S3 files get by default and with read-ahead off.
func TestS3Fixtures(t *testing.T) {
	st, fsys := s3test.Setup(t)
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "testdata", "snapshots")
	prefix := s3test.Prefix(t, fsys, "snapshot-fixtures")
	for _, name := range hbase1Names(t, dir) {
		t.Run(name, func(t *testing.T) {
			dst := path.Join(prefix, name)
			s3test.Upload(t, st, fsys, filepath.Join(dir, name), dst)
			root := "s3a://" + st.Bucket + dst
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

// storeFiles lists the HFiles of a snapshot root on S3: the objects at
// data/NS/TABLE/REGION/FAMILY/ (not the region's own dot files).
func storeFiles(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	var out []string
	for _, p := range s3test.Files(t, fsys, dir+"/data") {
		rel := strings.TrimPrefix(p, dir+"/data/")
		if strings.Count(rel, "/") == 4 && !strings.Contains(rel, "/.") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no store files under %s/data", dir)
	}
	return out
}

// TestS3SnapshotConsistency checks that a bucket that disagrees with the
// snapshot's manifest fails the read instead of yielding fewer cells: a
// store file the manifest names that is missing from the bucket fails
// with ErrNotFound naming its key, and one whose size is not the
// manifest's fails with ErrCorrupt naming its key and both sizes.
func TestS3SnapshotConsistency(t *testing.T) {
	st, fsys := s3test.Setup(t)
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const name = "enc_none"
	local := filepath.Join(repo, "testdata", "snapshots", name)
	prefix := s3test.Prefix(t, fsys, "snapshot-consistency")
	read := func(dst string) error { return scanAll(t, "s3a://"+st.Bucket+dst, name) }

	missing := path.Join(prefix, "missing")
	s3test.Upload(t, st, fsys, local, missing)
	if err := read(missing); err != nil {
		t.Fatalf("the intact copy: %v", err)
	}
	gone := storeFiles(t, fsys, missing)[0]
	if err := fsys.Remove(gone); err != nil {
		t.Fatal(err)
	}
	err = read(missing)
	if !errors.Is(err, snapshot.ErrNotFound) || !strings.Contains(err.Error(), gone) {
		t.Errorf("a missing store file: %v; want ErrNotFound naming %s", err, gone)
	}

	short := path.Join(prefix, "short")
	s3test.Upload(t, st, fsys, local, short)
	cut := storeFiles(t, fsys, short)[0]
	b, err := vfs.ReadFile(fsys, cut)
	if err != nil {
		t.Fatal(err)
	}
	w, err := fsys.Create(cut)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b[:len(b)-1])
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	err = read(short)
	if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "manifest records") || !strings.Contains(err.Error(), cut) ||
		!strings.Contains(err.Error(), fmt.Sprintf("is %d bytes", len(b)-1)) || !strings.Contains(err.Error(), fmt.Sprintf("records %d bytes", len(b))) {
		t.Errorf("a store file one byte short: %v; want ErrCorrupt naming its key %s and both sizes", err, cut)
	}
}
