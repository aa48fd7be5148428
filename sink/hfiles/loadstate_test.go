package hfiles

import (
	"errors"
	"path"
	"testing"

	"github.com/rekeyhq/rekey/vfs"
)

// TestLoadStateNewestGeneration: the load's state is the newest lease
// generation's, whatever was written after it: a stale save by an attempt
// that lost the load (generation 1, written last) must not hide what its
// successor (generation 2) recorded loaded. load/state.json counts only
// when no generation saved a state, and a damaged newest state is an
// error, never a fall back to an older one.
func TestLoadStateNewestGeneration(t *testing.T) {
	fs := vfs.NewMem()
	root := "/staging"
	write := func(name string, st finishState) {
		t.Helper()
		if err := writeJSON(fs, path.Join(root, name), &st); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (*finishState, bool, error) {
		var st finishState
		found, err := readLoadState(fs, root, &st)
		return &st, found, err
	}
	if _, found, err := read(); err != nil || found {
		t.Fatalf("an empty folder: found=%v, %v; want none", found, err)
	}
	write(Task{Phase: PhaseLoad}.stateFile(), finishState{Loaded: map[string]bool{"r00000": true}})
	if st, found, err := read(); err != nil || !found || len(st.Loaded) != 1 {
		t.Fatalf("load/state.json alone: %+v, found=%v, %v", st, found, err)
	}
	write(loadStateName(2), finishState{Loaded: map[string]bool{"r00000": true, "r00001": true, "r00002": true}, LeaseGeneration: 2})
	write(loadStateName(1), finishState{LeaseGeneration: 1}) // the loser's late save
	st, _, err := read()
	if err != nil || st.LeaseGeneration != 2 || len(st.Loaded) != 3 {
		t.Fatalf("read %+v, %v; want generation 2's state with 3 regions loaded", st, err)
	}
	fs.WriteFile(path.Join(root, loadStateName(10)), []byte(`{"loaded": {`))
	var bad *badRecordError
	if _, _, err := read(); !errors.As(err, &bad) {
		t.Fatalf("a damaged newest state: %v; want it refused as damaged", err)
	}
	for _, name := range []string{"state-g1.json", "state-g00000000000000x3.json", "state.json.tmp-1-2-3", "task.json"} {
		if gen, ok := loadStateGen(name); ok {
			t.Errorf("%s taken for the state of generation %d", name, gen)
		}
	}
}
