package snapshot

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot/manifest"
)

// TestMergeOrder spreads random cells over up to seven store files of one
// region, in random runs (so one file often yields several cells in a row,
// and often not), and checks a raw scan returns every cell once, in cell
// order: the heap merge, whatever the interleaving.
func TestMergeOrder(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7))
		nfiles := 1 + rng.IntN(7)
		files := make([][]string, nfiles)
		var all []cell.Cell
		seen := map[string]bool{}
		f := 0
		for len(all) < 600 {
			row, qual, ts := fmt.Sprintf("r%02d", rng.IntN(40)), fmt.Sprintf("q%d", rng.IntN(4)), 1+rng.IntN(50)
			key := fmt.Sprintf("%s/f:%s/%d", row, qual, ts)
			if seen[key] {
				continue // one cell per key: raw scans drop exact duplicates
			}
			seen[key] = true
			if rng.IntN(3) == 0 {
				f = rng.IntN(nfiles) // runs of cells from one file, of random length
			}
			files[f] = append(files[f], key+"/Put="+fmt.Sprint(len(all)))
			all = append(all, cell.Cell{Row: []byte(row), Family: []byte("f"), Qualifier: []byte(qual), Timestamp: int64(ts), Type: cell.Put})
		}
		var tfs []testFile
		for _, cs := range files {
			if len(cs) > 0 {
				tfs = append(tfs, testFile{family: "f", cells: strings.Join(cs, " ")})
			}
		}
		mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f", "VERSIONS", "100")}, []testRegion{{enc: "aaaa", files: tfs}})
		got, err := readAll(t, mem, root, ScanOptions{Raw: true})
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(all, func(a, b cell.Cell) int { return cell.Compare(&a, &b) })
		if len(got) != len(all) {
			t.Fatalf("seed %d, %d files: %d cells, want %d", seed, len(tfs), len(got), len(all))
		}
		for i := range all {
			g := got[i][:strings.IndexByte(got[i], '=')]
			w := formatCell(&all[i])
			if g != w {
				t.Fatalf("seed %d, %d files: cell %d = %s, want %s", seed, len(tfs), i, g, w)
			}
		}
	}
}
