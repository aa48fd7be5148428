package snapshot_test

import (
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"
)

// fixturesMatchOracle uploads every committed fixture snapshot to the
// object store (upload copies a local tree to a path and checks the
// server's bytes; root gives the URL of a path) and checks that the cells
// read from there equal the oracle's dumps, normal and raw, whole, cut
// into splits, and with read-ahead off.
func fixturesMatchOracle(t *testing.T, upload func(t *testing.T, local, dst string), root func(dst string) string) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "testdata", "snapshots")
	for _, name := range hbase1Names(t, dir) {
		t.Run(name, func(t *testing.T) {
			dst := path.Join("/snapshot-fixtures", name)
			upload(t, filepath.Join(dir, name), dst)
			url := root(dst)
			for _, mode := range dumpModes(name) {
				want, err := os.ReadFile(filepath.Join(dir, mode.file))
				if os.IsNotExist(err) {
					continue
				} else if err != nil {
					t.Fatal(err)
				}
				if d := diffDumps(dumpSnapshot(t, url, name, mode.opts), want); d != "" {
					t.Errorf("%s: %s", mode.file, d)
				}
				if d := diffDumps(dumpSplits(t, url, name, mode.opts, snapshot.SplitOptions{TargetBytes: 16 << 10}), want); d != "" {
					t.Errorf("%s, 16 KiB splits: %s", mode.file, d)
				}
				off := snapshot.OpenOptions{ReadAhead: vfs.ReadAheadOptions{Off: true}}
				if d := diffDumps(dumpWith(t, url, name, off, mode.opts, snapshot.SplitOptions{}), want); d != "" {
					t.Errorf("%s, read-ahead off: %s", mode.file, d)
				}
			}
		})
	}
}
