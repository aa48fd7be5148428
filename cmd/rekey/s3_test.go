package main

import (
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/s3test"
)

// TestInspectSnapshotS3 copies the split_refs fixture (written by HBase,
// with Reference files) byte for byte into the testenv S3 server:
// `rekey inspect snapshot s3a://… --cells` prints the oracle's dump, normal
// and raw; with the split parent's HFile removed from the bucket (a
// Reference file alone may go: the manifest carries references) it fails
// naming the key, with a non-zero exit code.
func TestInspectSnapshotS3(t *testing.T) {
	st, fsys := s3test.Setup(t)
	dir := fixtureDir(t, "split_refs")
	prefix := s3test.Prefix(t, fsys, "inspect")
	s3test.Upload(t, st, fsys, filepath.Join(dir, "split_refs"), prefix)
	root := "s3a://" + st.Bucket + prefix
	inspectMatchesOracle(t, root, dir)

	// The split parent's HFile, which both daughters' references (carried
	// in the manifest) point at.
	victim := prefix + "/data/default/split_refs/a9ce7dda58a5943fa05b3a7c92d22669/f/6d40fc0753e641289aa706b3e940f6f3"
	if err := fsys.Remove(victim); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runInspectSnapshotCLI(t, root, "split_refs", "--cells")
	if code == 0 || !strings.Contains(errOut, path.Base(victim)) || !strings.Contains(errOut, "missing") {
		t.Errorf("with %s removed: exit %d, stderr %s; want a failure naming it", victim, code, errOut)
	}
	t.Logf("exit %d: %s", code, strings.TrimSpace(errOut))
}
