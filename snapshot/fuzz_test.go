package snapshot

import (
	"errors"
	"testing"

	"github.com/rekeyhq/rekey/snapshot/manifest"
	"github.com/rekeyhq/rekey/vfs"
)

// FuzzOpen feeds arbitrary data.manifest bytes to Open and, when it
// succeeds, lists splits and opens scanners: nothing may panic, and every
// failure must be one of the package's error classes.
func FuzzOpen(f *testing.F) {
	mem, root := buildSnapshot(f, []*manifest.ColumnFamilySchema{family("f", "VERSIONS", "3", "TTL", "100")}, []testRegion{
		{enc: "aaaa", end: "m", files: []testFile{{family: "f", name: "abcd", cells: "a/f:q/1/Put=v"}}},
		{enc: "bbbb", start: "m", files: []testFile{{family: "f", name: "beef", cells: "s/f:q/1/Put=v s/f:q/2/Delete"}}},
	})
	good, _ := vfs.ReadFile(mem, root+"/.hbase-snapshot/snap/data.manifest")
	if got, err := readAll(f, mem, root, ScanOptions{Now: now10s}); err != nil || joinCells(got) != "a/f:q/1/Put=v s/f:q/1/Put=v" {
		f.Fatalf("seed snapshot reads %v, %v", got, err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m := vfs.NewMem()
		info, _ := vfs.ReadFile(mem, root+"/.hbase-snapshot/snap/.snapshotinfo")
		m.WriteFile(root+"/.hbase-snapshot/snap/.snapshotinfo", info)
		m.WriteFile(root+"/.hbase-snapshot/snap/data.manifest", b)
		s, err := Open(t.Context(), root, "snap", OpenOptions{FS: m})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrNotFound) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		defer s.Close()
		splits, err := s.Splits(SplitOptions{})
		if err != nil {
			return
		}
		for _, sp := range splits {
			if sc, err := s.NewScanner(t.Context(), sp, ScanOptions{}); err == nil {
				for sc.Next() {
				}
				sc.Close()
			}
		}
	})
}
