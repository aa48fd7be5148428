package snapshot

import (
	"bytes"
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

// TestSplitsCutAroundHugeRow cuts at rows only (no InRow: the rule of a
// row-level transform, and of checkpoints from before in-row cuts) a
// region whose row "c" holds most of its cells: the pieces tile the region and read every cell once, and the
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

// heavyRowCells is a region of rows "a".."t" of 20 cells each, but row
// "c" holds 600 cells over families f and g (g's in a second store file),
// with two versions of each column, a Put with an empty qualifier, and in
// a newer file of f: a DeleteFamily (masking f's versions at ts 1), a
// DeleteFamilyVersion (ts 2 of f in row c), a DeleteColumn and a Delete.
func heavyRowRegion(t *testing.T) *Snapshot {
	t.Helper()
	var f, g []string
	for _, r := range "abcdefghijklmnopqrst" {
		n := 10
		if r == 'c' {
			n = 150
			f = append(f, "c/f:/5/Put=empty", "c/f:/1/Put=emptyold")
			g = append(g, "c/g:/4/Put=gempty")
		}
		for i := 0; i < n; i++ {
			for _, ts := range []int{3, 2} {
				f = append(f, fmt.Sprintf("%c/f:q%04d/%d/Put=v", r, i, ts))
				g = append(g, fmt.Sprintf("%c/g:q%04d/%d/Put=w", r, i, ts))
			}
		}
	}
	f = append(f, "c/f:q0001/3/Put=new")
	markers := "c/f:/1/DeleteFamily c/f:/2/DeleteFamilyVersion c/f:q0100/3/DeleteColumn c/f:q0120/3/Delete c/g:/2/DeleteFamily b/f:/9/DeleteFamily"
	mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f", "VERSIONS", "3"), family("g", "VERSIONS", "3")}, []testRegion{{enc: "aaaa", files: []testFile{
		{family: "f", cells: strings.Join(f, " "), meta: fileMeta{HasMaxSeqID: true, MaxSeqID: 10}},
		{family: "g", cells: strings.Join(g, " "), meta: fileMeta{HasMaxSeqID: true, MaxSeqID: 10}},
		{family: "f", cells: markers, meta: fileMeta{HasMaxSeqID: true, MaxSeqID: 20}},
		{family: "g", cells: "c/g:q0050/3/DeleteColumn", meta: fileMeta{HasMaxSeqID: true, MaxSeqID: 20}},
	}}})
	s, err := Open(t.Context(), root, "snap", OpenOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// scanAll returns the cells of the splits read one after the other, in
// the short form, and each split's count.
func scanAll(t *testing.T, s *Snapshot, splits []Split, opts ScanOptions) (out []string, per []int) {
	t.Helper()
	for _, sp := range splits {
		sc, err := s.NewScanner(t.Context(), sp, opts)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for sc.Next() {
			out = append(out, formatCell(sc.Cell()))
			n++
		}
		if err := sc.Close(); err != nil {
			t.Fatalf("split %s: %v", sp.ID, err)
		}
		per = append(per, n)
	}
	return out, per
}

// TestSplitsCutInsideHugeRow cuts the heavy row of heavyRowRegion with
// InRow, by the even rule and by the greedy one: row c is cut at column
// starts, several times, never at an empty qualifier; the pieces tile the
// region (each starts where the one before ends); IDs say the rule; and
// read one after the other, in normal mode, raw mode and with one version,
// they return exactly the cells of the whole region read at once, each
// once (which the read-semantics tests hold to HBase's;
// TestInRowCutOnHBase holds the pieces to HBase's own scan).
func TestSplitsCutInsideHugeRow(t *testing.T) {
	for _, rule := range []struct {
		name   string
		greedy bool
		suffix string
	}{{"even", false, "_e"}, {"greedy", true, "_c"}} {
		t.Run(rule.name, func(t *testing.T) { cutInsideHugeRow(t, rule.greedy, rule.suffix) })
	}
}

func cutInsideHugeRow(t *testing.T, greedy bool, suffix string) {
	s := heavyRowRegion(t)
	whole, err := s.Splits(SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target := whole[0].Bytes / 10
	rows, err := s.Splits(SplitOptions{TargetBytes: target})
	if err != nil {
		t.Fatal(err)
	}
	splits, err := s.Splits(SplitOptions{TargetBytes: target, InRow: true, GreedyInRow: greedy})
	if err != nil {
		t.Fatal(err)
	}
	inC := 0
	for i, sp := range splits {
		if !strings.HasSuffix(sp.ID, suffix) {
			t.Errorf("split %s: an in-row piece's ID must end in %s", sp.ID, suffix)
		}
		if sp.StartColumn != nil {
			if string(sp.StartRow) != "c" || len(sp.StartColumn.Qualifier) == 0 {
				t.Errorf("split %s starts at %s/%s:%s, want a non-empty qualifier of row c", sp.ID, sp.StartRow, sp.StartColumn.Family, sp.StartColumn.Qualifier)
			}
			inC++
		}
		if i > 0 {
			p := splits[i-1]
			if !bytes.Equal(p.EndRow, sp.StartRow) || (p.EndColumn == nil) != (sp.StartColumn == nil) || (p.EndColumn != nil && (!bytes.Equal(p.EndColumn.Family, sp.StartColumn.Family) || !bytes.Equal(p.EndColumn.Qualifier, sp.StartColumn.Qualifier))) {
				t.Errorf("split %s does not start where %s ends", sp.ID, p.ID)
			}
		}
	}
	if inC < 3 {
		t.Fatalf("%d pieces start inside row c (%d row-cut pieces), want 3 or more", inC, len(rows))
	}
	for _, opts := range []ScanOptions{{}, {Raw: true}, {MaxVersions: 1}, {StartRow: []byte("c"), StopRow: []byte("d")}} {
		want, _ := scanAll(t, s, whole, opts)
		got, per := scanAll(t, s, splits, opts)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%+v: pieces read %d cells, the whole region %d:\n got %v\nwant %v", opts, len(got), len(want), got, want)
		}
		t.Logf("%+v: %d cells, per piece %v", opts, len(got), per)
		if opts.Raw {
			// Row c is wide in both families: the cut takes both files'
			// offsets, so no piece holds g's share of the row alone.
			for i, n := range per {
				if n > 2*len(got)/len(per) {
					t.Errorf("piece %s holds %d of %d raw cells in %d pieces, more than twice the mean", splits[i].ID, n, len(got), len(per))
				}
			}
		}
	}
	// A piece that starts late in row c seeks there: it reads the row's
	// empty-qualifier column of its family (the family markers) and its
	// own cells, not the row from its start.
	for _, sp := range splits {
		if sp.StartColumn == nil || sp.EndColumn == nil {
			continue
		}
		sc, err := s.NewScanner(t.Context(), sp, ScanOptions{Raw: true})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for sc.Next() {
			n++
		}
		sc.Close()
		if ex := sc.Stats().Examined; ex > int64(n)+10 {
			t.Errorf("split %s examined %d cells to return %d", sp.ID, ex, n)
		}
	}
}
