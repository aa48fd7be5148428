package snapshot

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/snapshot/manifest"
)

// TestDefaultSplitBytesRule checks the default cut's rule on region sizes:
// the mean region, at most 1/16 of the snapshot, at least the floor, and 0
// (nothing cut) when no region is above it.
func TestDefaultSplitBytesRule(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		name  string
		sizes []int64
		floor int64
		want  int64
	}{
		{"no regions", nil, 8 * MiB, 0},
		{"small table: every region under the floor", []int64{3 * MiB, 7 * MiB, 1 * MiB}, 8 * MiB, 0},
		// 6 regions, 33 MiB: mean 5.5, 1/16 = 2.06, so the floor 8 MiB; the
		// 18 MiB region is above it (the bench's SIZE=default shape).
		{"one heavy region, floor", []int64{18 * MiB, 2 * MiB, 2 * MiB, 5 * MiB, 2 * MiB, 4 * MiB}, 8 * MiB, 8 * MiB},
		// 8 regions, 800 MiB: mean 100, 1/16 = 50.
		{"many workers' share", []int64{450 * MiB, 50 * MiB, 50 * MiB, 50 * MiB, 50 * MiB, 50 * MiB, 50 * MiB, 50 * MiB}, 8 * MiB, 50 * MiB},
		// 40 even regions of 100 MiB and one of 1 GiB: 5 GiB in all, mean
		// 124.9 MiB, 1/16 = 320: the mean.
		{"mean region", append(even(40, 100*MiB), 1024*MiB), 8 * MiB, (40*100*MiB + 1024*MiB) / 41},
		// Even regions of the mean size: nothing above it, nothing cut.
		{"even regions", even(40, 100*MiB), 8 * MiB, 0},
		{"one region", []int64{160 * MiB}, 8 * MiB, 10 * MiB},
	} {
		if got := defaultSplitBytes(tc.sizes, tc.floor); got != tc.want {
			t.Errorf("%s: defaultSplitBytes = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func even(n int, size int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = size
	}
	return out
}

// TestSplitsCutAroundHugeRow cuts a region whose row "c" holds most of its
// cells: the pieces tile the region and read every cell once, and the
// piece holding "c" is estimated the largest, at least half the region, so
// a run's largest-first order starts it first (an even share per piece
// would put it last among equals).
func TestSplitsCutAroundHugeRow(t *testing.T) {
	var cells []string
	want := 0
	for _, r := range "abcdefghijklmnopqrst" {
		n := 20
		if r == 'c' {
			n = 600
		}
		for i := 0; i < n; i++ {
			cells = append(cells, fmt.Sprintf("%c/f:q%04d/1/Put=v", r, i))
		}
		want += n
	}
	s := oneRegion(t, cells)
	whole := s.Regions()[0].Bytes()
	splits, err := s.Splits(SplitOptions{TargetBytes: whole / 6})
	if err != nil {
		t.Fatal(err)
	}
	got, heavy := 0, -1
	for i, sp := range splits {
		sc, err := s.NewScanner(t.Context(), sp, ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			got++
			if string(sc.Cell().Row) == "c" {
				heavy = i
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		sc.Close()
	}
	if got != want || heavy < 0 || len(splits) < 3 {
		t.Fatalf("%d splits read %d cells (row c in split %d), want %d cells in 3 or more", len(splits), got, heavy, want)
	}
	for i, sp := range splits {
		if i != heavy && sp.Bytes >= splits[heavy].Bytes {
			t.Errorf("split %s estimated %d bytes, not below %s's %d, which holds row c", sp.ID, sp.Bytes, splits[heavy].ID, splits[heavy].Bytes)
		}
	}
	if b := splits[heavy].Bytes; b < whole/2 {
		t.Errorf("the piece holding row c estimated %d bytes of %d, want half or more", b, whole)
	}
}

// oneRegion opens a snapshot of one region (encoded name aaaa) with one
// store file of family f holding cells (in joinCells' notation); the test
// closes it at its end.
func oneRegion(t *testing.T, cells []string) *Snapshot {
	t.Helper()
	mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f")}, []testRegion{{enc: "aaaa", files: []testFile{{family: "f", cells: strings.Join(cells, " ")}}}})
	s, err := Open(t.Context(), root, "snap", OpenOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
