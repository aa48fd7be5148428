package hfiles

import (
	"context"
	"path"
	"testing"

	"github.com/rekeyhq/rekey/hfile"
)

// TestStagedFilesCarryIDs: every staged HFile carries a file id in its file
// info (FileIDKey), the same id finish.json records for it, 32 hex digits,
// and no two files share one. A load that finds a file missing relies on
// that id to learn whether a region's store holds the file.
func TestStagedFilesCarryIDs(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("g"), []byte("n")}, Memory: 256 << 10, Workers: 2, HFileSize: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeSplit(t, s, "one", genCells(3, 6000))
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st, found, err := s.readFinish()
	if err != nil || !found {
		t.Fatalf("finish.json: found %v, error %v", found, err)
	}
	seen := map[string]string{}
	n := 0
	for _, ps := range st.Parts {
		for _, f := range ps.Files {
			n++
			if len(f.ID) != 32 {
				t.Errorf("%s: recorded id %q is not 32 hex digits", f.Name, f.ID)
			}
			if other, ok := seen[f.ID]; ok {
				t.Errorf("%s and %s share the id %s", f.Name, other, f.ID)
			}
			seen[f.ID] = f.Name
			rd, err := hfile.OpenFile(path.Join(dir, f.Name))
			if err != nil {
				t.Fatal(err)
			}
			got := string(rd.Info().Raw[FileIDKey])
			rd.Close()
			if got != f.ID {
				t.Errorf("%s: file info %s = %q, finish.json records %q", f.Name, FileIDKey, got, f.ID)
			}
		}
	}
	if n < 4 {
		t.Fatalf("staged %d HFiles; the test wants several", n)
	}
}
