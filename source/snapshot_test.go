package source_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/source"
)

// fixture is a snapshot the tests read: a root and a name.
type fixture struct{ root, name string }

// fixtures are the snapshots committed under testdata/snapshots (written
// by the real mini cluster) and, when the shared corpus is there, those
// of the Bigtable HBase client's tests.
func fixtures(t *testing.T) []fixture {
	t.Helper()
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "testdata", "snapshots")
	dumps, _ := filepath.Glob(filepath.Join(dir, "*.raw.cells"))
	var out []fixture
	for _, d := range dumps {
		name := strings.TrimSuffix(filepath.Base(d), ".raw.cells")
		out = append(out, fixture{filepath.Join(dir, name), name})
	}
	if len(out) == 0 {
		t.Fatalf("no snapshot fixtures under %s", dir)
	}
	if dir := os.Getenv("REKEY_CORPUS"); dir != "" || corpusThere(repo) {
		corpus := testenv.Corpus(t)
		root := filepath.Join(corpus, "bigtable", "src-test-integration-test-data-2022")
		for _, name := range []string{"test-snapshot", "snappy-compressed-snapshot", "demo-snapshot"} {
			out = append(out, fixture{root, name})
		}
	}
	return out
}

// corpusThere says the shared corpus sits beside the repository, where
// testenv.Corpus looks for it (it skips the whole test when it does not).
func corpusThere(repo string) bool {
	_, err := os.Stat(filepath.Join(repo, "..", "shared", "corpus", "SOURCES.txt"))
	return err == nil
}

// cuts are the ways the tests cut a snapshot: whole regions, pieces at
// rows, and pieces inside rows by both rules.
var cuts = []struct {
	name string
	opts source.CutOptions
}{
	{"regions", source.CutOptions{}},
	{"16KiB", source.CutOptions{TargetBytes: 16 << 10}},
	{"16KiB in rows", source.CutOptions{TargetBytes: 16 << 10, InRow: true}},
	{"16KiB in rows greedy", source.CutOptions{TargetBytes: 16 << 10, InRow: true, GreedyInRow: true}},
}

func open(t *testing.T, f fixture) (*source.Snapshot, *snapshot.Snapshot) {
	t.Helper()
	src, err := source.OpenSnapshot(t.Context(), f.root, f.name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	snap, err := snapshot.Open(t.Context(), f.root, f.name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	return src, snap
}

// TestSnapshotSplitsAreTheSnapshots: the source's splits are the
// snapshot's own, field for field (IDs, regions, bounds, bytes), so the
// run's checkpoints and job records name the same splits as before.
func TestSnapshotSplitsAreTheSnapshots(t *testing.T) {
	for _, f := range fixtures(t) {
		src, snap := open(t, f)
		for _, c := range cuts {
			got, err := src.Splits(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			want, err := snap.Splits(snapshot.SplitOptions{TargetBytes: c.opts.TargetBytes, InRow: c.opts.InRow, GreedyInRow: c.opts.GreedyInRow})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%s, %s: %d splits, the snapshot has %d", f.name, c.name, len(got), len(want))
			}
			for i := range got {
				g, w := &got[i], &want[i]
				same := g.ID == w.ID && g.Region == w.Region.EncodedName && bytes.Equal(g.StartRow, w.StartRow) &&
					bytes.Equal(g.EndRow, w.EndRow) && sameColumn(g.StartColumn, w.StartColumn) &&
					sameColumn(g.EndColumn, w.EndColumn) && g.Bytes == w.Bytes && bytes.Equal(g.StopRow(), w.StopRow())
				if !same {
					t.Errorf("%s, %s: split %d is %+v, the snapshot's %+v", f.name, c.name, i, *g, *w)
				}
			}
		}
	}
}

func sameColumn(a *source.Column, b *snapshot.Column) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return bytes.Equal(a.Family, b.Family) && bytes.Equal(a.Qualifier, b.Qualifier)
}

// TestSnapshotSplitsTile: the splits of every cut cover the key space once,
// in key order: the first starts at the first row, each starts where the
// one before ends (at a row, or at a column inside it), the last runs to
// the end, and no two share an ID.
func TestSnapshotSplitsTile(t *testing.T) {
	cutInside := false
	for _, f := range fixtures(t) {
		src, _ := open(t, f)
		for _, c := range cuts {
			splits, err := src.Splits(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(splits) == 0 {
				t.Fatalf("%s, %s: no splits", f.name, c.name)
			}
			ids := map[string]bool{}
			for i, sp := range splits {
				if ids[sp.ID] {
					t.Errorf("%s, %s: split ID %s twice", f.name, c.name, sp.ID)
				}
				ids[sp.ID] = true
				if i == 0 {
					if len(sp.StartRow) != 0 || sp.StartColumn != nil {
						t.Errorf("%s, %s: the first split starts at %q, not the first row", f.name, c.name, sp.StartRow)
					}
					continue
				}
				prev := splits[i-1]
				if !bytes.Equal(prev.EndRow, sp.StartRow) || !sameCol(prev.EndColumn, sp.StartColumn) {
					t.Errorf("%s, %s: split %s ends at %q %v, the next (%s) starts at %q %v", f.name, c.name, prev.ID, prev.EndRow, prev.EndColumn, sp.ID, sp.StartRow, sp.StartColumn)
				}
				cutInside = cutInside || sp.StartColumn != nil
			}
			if last := splits[len(splits)-1]; len(last.EndRow) != 0 || last.EndColumn != nil {
				t.Errorf("%s, %s: the last split ends at %q, not the end", f.name, c.name, last.EndRow)
			}
		}
	}
	if !cutInside {
		t.Error("no fixture was cut inside a row: the in-row cases prove nothing")
	}
}

func sameCol(a, b *source.Column) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return bytes.Equal(a.Family, b.Family) && bytes.Equal(a.Qualifier, b.Qualifier)
}

// dump renders every cell of the splits, read through src, in the
// canonical dump format.
func dump(t *testing.T, src source.Source, splits []source.Split, scan source.ScanOptions) []byte {
	t.Helper()
	var out []byte
	for _, sp := range splits {
		sc, err := src.Open(t.Context(), sp, scan)
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			out = cell.AppendDump(out, sc.Cell())
		}
		if err := sc.Close(); err != nil {
			t.Fatalf("split %s: %v", sp.ID, err)
		}
	}
	return out
}

// dumpDirect is dump for the snapshot read with its own scanners.
func dumpDirect(t *testing.T, snap *snapshot.Snapshot, opts snapshot.SplitOptions, scan snapshot.ScanOptions) []byte {
	t.Helper()
	splits, err := snap.Splits(opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, sp := range splits {
		sc, err := snap.NewScanner(t.Context(), sp, scan)
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			out = cell.AppendDump(out, sc.Cell())
		}
		if err := sc.Close(); err != nil {
			t.Fatalf("split %s: %v", sp.ID, err)
		}
	}
	return out
}

// TestSnapshotCellsAreTheScanners: the cells read through the source are
// those the snapshot's scanners return, in the same order, for every cut
// and for normal and raw scans; for the committed fixtures they are also
// the Java oracle's dump.
func TestSnapshotCellsAreTheScanners(t *testing.T) {
	for _, f := range fixtures(t) {
		src, snap := open(t, f)
		for _, scan := range []struct {
			name string
			opts source.ScanOptions
			dump string
		}{
			{"normal", source.ScanOptions{}, ".cells"},
			{"raw", source.ScanOptions{Raw: true}, ".raw.cells"},
		} {
			whole := dumpDirect(t, snap, snapshot.SplitOptions{}, scan.opts)
			if len(whole) == 0 && scan.name == "normal" {
				t.Fatalf("%s: no cells", f.name)
			}
			if oracle, err := os.ReadFile(filepath.Join(filepath.Dir(f.root), f.name+scan.dump)); err == nil && len(oracle) > 0 {
				if d := testenv.DiffDumps(whole, oracle); d != "" {
					t.Errorf("%s, %s, the snapshot's scanners against the oracle: %s", f.name, scan.name, d)
				}
			}
			for _, c := range cuts {
				splits, err := src.Splits(c.opts)
				if err != nil {
					t.Fatal(err)
				}
				got := dump(t, src, splits, scan.opts)
				want := dumpDirect(t, snap, snapshot.SplitOptions{TargetBytes: c.opts.TargetBytes, InRow: c.opts.InRow, GreedyInRow: c.opts.GreedyInRow}, scan.opts)
				if d := testenv.DiffDumps(got, want); d != "" {
					t.Errorf("%s, %s, %s: %s", f.name, scan.name, c.name, d)
				}
				if d := testenv.DiffDumps(got, whole); d != "" {
					t.Errorf("%s, %s, %s against the whole regions: %s", f.name, scan.name, c.name, d)
				}
			}
		}
	}
}

// TestSnapshotOpenClips: a row range in the scan options clips a split's
// cells (a redo of some key ranges), exactly as the snapshot's scanner
// does.
func TestSnapshotOpenClips(t *testing.T) {
	f := fixtures(t)[0]
	for _, g := range fixtures(t) {
		if g.name == "demo_events" {
			f = g
		}
	}
	src, snap := open(t, f)
	splits, err := src.Splits(source.CutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all := dump(t, src, splits, source.ScanOptions{})
	lines := bytes.Split(bytes.TrimSuffix(all, []byte("\n")), []byte("\n"))
	if len(lines) < 3 {
		t.Fatalf("%s: %d cells, too few to clip", f.name, len(lines))
	}
	// Rows from the middle cell's row up to (not into) the last cell's.
	row := func(line []byte) []byte {
		hexRow, _, _ := bytes.Cut(line, []byte("\t"))
		return decodeHex(t, hexRow)
	}
	clip := source.ScanOptions{StartRow: row(lines[len(lines)/2]), StopRow: row(lines[len(lines)-1])}
	got := dump(t, src, splits, clip)
	want := dumpDirect(t, snap, snapshot.SplitOptions{}, clip)
	if len(got) == 0 || len(got) >= len(all) {
		t.Fatalf("the clip kept %d of %d dump bytes: not a clip", len(got), len(all))
	}
	if d := testenv.DiffDumps(got, want); d != "" {
		t.Error(d)
	}
}

func decodeHex(t *testing.T, h []byte) []byte {
	t.Helper()
	out := make([]byte, len(h)/2)
	for i := range out {
		var b byte
		for _, c := range h[2*i : 2*i+2] {
			switch {
			case c >= '0' && c <= '9':
				b = b<<4 | (c - '0')
			case c >= 'a' && c <= 'f':
				b = b<<4 | (c - 'a' + 10)
			default:
				t.Fatalf("not hex: %q", h)
			}
		}
		out[i] = b
	}
	return out
}

// TestSnapshotScannerIsTheSnapshots: Open hands out the snapshot's own
// scanner, so the run's calls per cell reach it with no layer between.
func TestSnapshotScannerIsTheSnapshots(t *testing.T) {
	src, _ := open(t, fixtures(t)[0])
	splits, err := src.Splits(source.CutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := src.Open(t.Context(), splits[0], source.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if _, ok := sc.(*snapshot.Scanner); !ok {
		t.Errorf("Open returned a %T, not the *snapshot.Scanner", sc)
	}
}

// TestSnapshotOpenRefusesForeignSplits: a split made by hand, or by
// another source, is refused with its ID named, not read as some other
// range.
func TestSnapshotOpenRefusesForeignSplits(t *testing.T) {
	src, _ := open(t, fixtures(t)[0])
	_, err := src.Open(t.Context(), source.Split{ID: "made_by_hand"}, source.ScanOptions{})
	if err == nil || !strings.Contains(err.Error(), "made_by_hand") {
		t.Fatalf("err = %v, want a refusal naming the split", err)
	}
	src.Prepare(source.Split{ID: "made_by_hand"}, source.ScanOptions{}) // a hint: no panic, nothing reported
}

// TestSnapshotDescribe: the identity is the snapshot's, and its fields
// are, name for name, those job records written before sources hold.
func TestSnapshotDescribe(t *testing.T) {
	f := fixtures(t)[0]
	src, snap := open(t, f)
	id, info := src.Describe(), snap.Info()
	if id.Kind != source.KindSnapshot || id.Name != info.Name || id.Table != info.Table || !id.Created.Equal(info.CreationTime) || len(id.More) != 0 {
		t.Fatalf("Describe() = %+v, the snapshot is %+v", id, info)
	}
	var names []string
	for _, fl := range id.Fields() {
		names = append(names, fl.Name)
	}
	if got, want := strings.Join(names, "|"), "source snapshot|source table|snapshot creation time"; got != want {
		t.Errorf("Fields names %s, want %s", got, want)
	}
	other := id
	other.Kind, other.More = "catch-up", []source.Field{{Name: "since snapshot", Value: "a"}}
	if n := len(other.Fields()); n != 5 {
		t.Errorf("another kind's identity lists %d fields, want its kind and More besides the three", n)
	}
	if src.Bytes() != snap.Bytes() || src.DefaultSplitBytes(1) != snap.DefaultSplitBytes(1) || len(src.Table().Families) != len(snap.Table().Families) {
		t.Error("Bytes, DefaultSplitBytes or Table differ from the snapshot's")
	}
}

// TestOpenSnapshotNotFound: opening a missing snapshot keeps the
// snapshot package's error class.
func TestOpenSnapshotNotFound(t *testing.T) {
	_, err := source.OpenSnapshot(t.Context(), fixtures(t)[0].root, "no_such_snapshot", snapshot.OpenOptions{})
	if !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("err = %v, want snapshot.ErrNotFound", err)
	}
}
