package main

import (
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
)

// TestInspectSnapshotGCS copies an HBase-written snapshot (a split
// parent and its daughters' references) into the GCS emulator's bucket:
// `rekey inspect snapshot gs://… --cells` prints the oracle's dump, and with
// the parent's HFile removed it fails naming that file.
func TestInspectSnapshotGCS(t *testing.T) {
	g := s3test.StartGCS(t)
	g.UseEmulatorEnv(t)
	fsys := g.Dial(t)
	dir := fixtureDir(t, "split_refs")
	const prefix = "/inspect"
	g.Upload(t, fsys, filepath.Join(dir, "split_refs"), prefix)
	root := "gs://" + g.Bucket + prefix
	inspectMatchesOracle(t, root, dir)

	victim := prefix + "/data/default/split_refs/a9ce7dda58a5943fa05b3a7c92d22669/f/6d40fc0753e641289aa706b3e940f6f3"
	if err := fsys.Remove(victim); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runInspectSnapshotCLI(t, root, "split_refs", "--cells")
	if code == 0 || !strings.Contains(errOut, path.Base(victim)) || !strings.Contains(errOut, "missing") {
		t.Errorf("with %s removed: exit %d, stderr %s; want a failure naming it", victim, code, errOut)
	}
}
