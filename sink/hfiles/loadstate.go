package hfiles

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/rekeyhq/rekey/vfs"
)

// The load's state (what was sent, loaded, and under which bulk tokens) is
// saved under a name that carries the lease generation of the attempt that
// saved it: load/state-gNNNNNNNNNNNNNNNN.json. One shared name let an
// attempt that lost the load to a forced takeover, paused between its
// fence check and its rename, put its stale state over the winner's after
// the winner had loaded regions. The next load then knew nothing of those
// loads and, where the region servers copy the files rather than move
// them, loaded a region twice (TestWholeSchedules, seed
// 1796684002966320982). With a name per generation the stale write lands
// beside the winner's state, and readers take the newest generation's.
// load/state.json is still read when no such file exists (a folder staged
// by an earlier rekey, or a load without a lease).
const loadStatePrefix = "state-g"

// loadStateName is the load's state file saved under lease generation gen,
// relative to the staging folder.
func loadStateName(gen int64) string {
	return path.Join(loadRoot, fmt.Sprintf("%s%016d.json", loadStatePrefix, gen))
}

// loadStateGen parses the generation out of a load state file's name.
func loadStateGen(name string) (int64, bool) {
	if !strings.HasPrefix(name, loadStatePrefix) || !strings.HasSuffix(name, ".json") {
		return 0, false
	}
	digits := strings.TrimSuffix(strings.TrimPrefix(name, loadStatePrefix), ".json")
	if len(digits) != 16 {
		return 0, false
	}
	gen, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || gen < 0 {
		return 0, false
	}
	return gen, true
}

// loadStateFiles lists the load's state files under root: the newest
// generation's name ("" when there is none) and every older one.
func loadStateFiles(fsys vfs.FS, root string) (newest string, older []string, err error) {
	dir := path.Join(root, loadRoot)
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		if notExist(err) {
			return "", nil, nil
		}
		return "", nil, fmt.Errorf("hfiles: list %s: %w", dir, err)
	}
	best := int64(-1)
	for _, e := range ents {
		gen, ok := loadStateGen(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		name := path.Join(loadRoot, e.Name())
		if gen > best {
			if newest != "" {
				older = append(older, newest)
			}
			best, newest = gen, name
		} else {
			older = append(older, name)
		}
	}
	return newest, older, nil
}

// readLoadState reads the load's state under root into st: the newest lease
// generation's, or load/state.json when no generation saved one. A damaged
// newest state is an error, never a fall back to an older one, which would
// forget loads the newer one recorded.
func readLoadState(fsys vfs.FS, root string, st *finishState) (bool, error) {
	newest, _, err := loadStateFiles(fsys, root)
	if err != nil {
		return false, err
	}
	if newest == "" {
		newest = Task{Phase: PhaseLoad}.stateFile()
	}
	return readJSON(fsys, path.Join(root, newest), st)
}
