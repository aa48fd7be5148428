package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Corpus returns the path of the shared golden corpus (HFiles and snapshots
// written by real HBase in other projects), or skips the test when it is
// absent, as it is in a user's clone. REKEY_CORPUS overrides the default,
// ../shared/corpus beside the repository.
func Corpus(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("REKEY_CORPUS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			t.Skipf("golden corpus skipped: %v", err)
		}
		dir = filepath.Join(root, "..", "shared", "corpus")
	}
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.txt")); err != nil {
		t.Skipf("golden corpus not found at %s (set REKEY_CORPUS to its path); skipping", dir)
	}
	return dir
}
