package testenv

import (
	"strings"
	"testing"
)

// StoreFiles counts a table's store files per region and family folder
// ("REGION/FAMILY"), as HBase's file system lists them (the oracle's
// files command): what a bulk load or a flush left in each store.
func StoreFiles(t *testing.T, table string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(Oracle(t, "files", table))), "\n") {
		if l == "" {
			continue
		}
		p, _, _ := strings.Cut(l, "\t")
		parts := strings.Split(p, "/")
		if len(parts) < 3 {
			t.Fatalf("oracle files: %q is no store file path", l)
		}
		out[strings.Join(parts[len(parts)-3:len(parts)-1], "/")]++
	}
	return out
}

// OneStoreFileEach fails t unless table's stores are exactly the folders
// stores of them ("REGION/FAMILY") and each holds one store file.
func OneStoreFileEach(t *testing.T, table string, stores int) {
	t.Helper()
	files := StoreFiles(t, table)
	if len(files) != stores {
		t.Errorf("%s: store files in %d region/family folders, want %d: %v", table, len(files), stores, files)
	}
	for k, n := range files {
		if n != 1 {
			t.Errorf("%s: %s holds %d store files, want 1", table, k, n)
		}
	}
}
