package verify

import (
	"slices"
	"testing"

	"github.com/rekeyhq/rekey/vfs"
)

// TestStagedLoadStateNewestGeneration: verify --staging takes the HFiles
// a load's state names from the newest lease generation's state, as the
// load does, not from load/state.json an older rekey wrote, nor from a
// late save of an attempt that lost the load.
func TestStagedLoadStateNewestGeneration(t *testing.T) {
	fs := vfs.NewMem()
	state := func(file string) []byte {
		return []byte(`{"written": true, "parts": {"0/e": {"files": [{"name": "` + file + `"}]}}}`)
	}
	fs.WriteFile("/st/load/state.json", state("hfiles/r00000/e/old"))
	fs.WriteFile("/st/load/state-g0000000000000007.json", state("hfiles/r00000/e/seven"))
	fs.WriteFile("/st/load/state-g0000000000000003.json", state("hfiles/r00000/e/three"))
	fs.WriteFile("/st/load/state-g12.json", state("hfiles/r00000/e/misnamed"))
	got, err := recordedHFiles(&vfs.Location{FS: fs, Path: "/st"})
	if err != nil || !slices.Equal(got, []string{"hfiles/r00000/e/seven"}) {
		t.Fatalf("recorded HFiles %v, %v; want generation 7's", got, err)
	}
}
