package hfiles

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/vfs"
)

// orderedCells makes perRow cells for each of rows, in HBase order when
// rows are sorted: qualifiers ascending, two versions each, newest first.
func orderedCells(rows []string, perRow int, value string) []cell.Cell {
	var out []cell.Cell
	for _, r := range rows {
		for q := 0; q < perRow/2; q++ {
			for _, ts := range []int64{2, 1} {
				out = append(out, cell.Cell{Row: []byte(r), Family: []byte("f1"), Qualifier: []byte(fmt.Sprintf("q%06d", q)),
					Timestamp: 1_700_000_000_000 + ts, Type: cell.Put, Value: []byte(fmt.Sprintf("%s-%s-%d-%d", value, r, q, ts))})
			}
		}
	}
	return out
}

// rowNames returns n sorted row keys from prefix.
func rowNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// firstOfEachKey keeps, of cells with equal keys, the first in cells.
func firstOfEachKey(cells []cell.Cell) []cell.Cell {
	out := slices.Clone(cells)
	slices.SortStableFunc(out, func(a, b cell.Cell) int { return cell.Compare(&a, &b) })
	return slices.CompactFunc(out, func(a, b cell.Cell) bool { return cell.Compare(&a, &b) == 0 })
}

// segmentFiles lists the files left under the staging folder's segments/.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(dir, segmentsDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestStageDirectAdopts: splits whose cells come in order write their
// HFiles themselves (one of them past directAfter, the other only at its
// commit), a repeated key inside a split is dropped and counted as the
// merge counts it, and the merge keeps every file as it is: no runs, the
// HFiles in hfiles/REGION/FAMILY holding exactly the cells, no segment
// left behind.
func TestStageDirectAdopts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("c"), []byte("m"), []byte("t")},
		Memory: 64 << 20, Workers: 2, MaxFiles: 8}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// a (3,200 cells, under 512 KiB with its entries) stays below
	// directAfter; b (120,000) passes it.
	a := orderedCells(append(rowNames("b", 8), rowNames("d", 8)...), 200, "a")
	b := orderedCells(append(rowNames("n", 300), rowNames("u", 300)...), 200, "b")
	// A repeat of a's cell 10 (a duplicate) and of cell 20 with another
	// value (a collision), each right after the cell it repeats.
	dup, coll := a[10], a[20].Clone()
	coll.Value = []byte("other")
	a = slices.Insert(a, 21, coll)
	a = slices.Insert(a, 11, dup)
	writeSplit(t, s, "a", a)
	writeSplit(t, s, "b", b)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Runs != 0 || st.Direct < 4 || st.Adopted != st.Direct {
		t.Errorf("runs %d, direct files %d, adopted %d; want no runs and every direct file adopted (at least 4)", st.Runs, st.Direct, st.Adopted)
	}
	if st.Duplicates != 1 || st.Collisions != 1 {
		t.Errorf("duplicates %d collisions %d, want 1 and 1", st.Duplicates, st.Collisions)
	}
	got := checkStaged(t, s.RegionMap(), readStaged(t, dir), o.MaxFiles)
	want := firstOfEachKey(append(a, b...))
	equalDumps(t, got, want)
	if st.Cells != int64(len(want)) {
		t.Errorf("stats count %d cells written, want %d", st.Cells, len(want))
	}
	if left := segmentFiles(t, dir); len(left) != 0 {
		t.Errorf("segments left after the merge: %v", left)
	}
}

// TestStageDirectNeedEstimate: the staging folder's estimated peak (what a
// full disk's error says the job needs) counts the HFiles the splits wrote
// themselves; splits that staged only those once read as none staged.
func TestStageDirectNeedEstimate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := New(ctx, Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 64 << 20, Workers: 2, SourceBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeSplit(t, s, "a", orderedCells(rowNames("b", 300), 200, "a"))
	writeSplit(t, s, "b", orderedCells(rowNames("n", 300), 200, "b"))
	recs, err := readSplits(s.fs, path.Join(s.root, s.spill))
	if err != nil {
		t.Fatal(err)
	}
	var segBytes int64
	for _, r := range recs {
		if len(r.Runs) > 0 {
			t.Fatalf("split %s staged %d runs; the test wants splits written directly", r.ID, len(r.Runs))
		}
		for _, sg := range r.Segments {
			segBytes += sg.Size
		}
	}
	if segBytes == 0 {
		t.Fatal("the splits wrote no HFiles of their own")
	}
	need, basis := s.needEstimate()
	t.Logf("need %d (%s); the splits' HFiles hold %d bytes", need, basis, segBytes)
	if need < segBytes || !strings.Contains(basis, "HFiles written by the splits") {
		t.Errorf("estimated need %d (%s), below the %d bytes of HFiles the splits wrote", need, basis, segBytes)
	}
}

// TestStageDirectFallsBack: a split in order long enough to write
// directly, then out of order, keeps the files it wrote and sorts the rest
// through a run; the merge reads both, and a second split in order whose
// keys overlap the first's is merged with them, not adopted: the HFiles
// hold exactly the cells, a key repeated across splits keeping the first
// split's cell.
func TestStageDirectFallsBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 64 << 20, Workers: 2, MaxFiles: 8}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := orderedCells(rowNames("a", 400), 200, "a") // about 6 MB: past directAfter
	tail := orderedCells(rowNames("b", 100), 20, "a")
	rand.New(rand.NewSource(3)).Shuffle(len(tail), func(i, j int) { tail[i], tail[j] = tail[j], tail[i] })
	a := append(slices.Clone(in), tail...)
	// Split b is in order and interleaves with a in region 0: its own
	// rows, one cell of a unchanged and one with another value.
	b := orderedCells(rowNames("a0001x", 3), 10, "b")
	same, other := in[5000], in[6000].Clone()
	other.Value = []byte("b's value")
	b = append(b, cell.Cell{}, cell.Cell{})
	b[len(b)-2], b[len(b)-1] = same, other
	slices.SortStableFunc(b, func(x, y cell.Cell) int { return cell.Compare(&x, &y) })
	writeSplit(t, s, "a", a)
	writeSplit(t, s, "b", b)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("stats: runs %d, direct %d, adopted %d, duplicates %d, collisions %d", st.Runs, st.Direct, st.Adopted, st.Duplicates, st.Collisions)
	if st.Direct < 2 || st.Runs < 1 || st.Adopted != 0 {
		t.Errorf("direct files %d, runs %d, adopted %d; want files of both splits, a run of a's tail, nothing adopted", st.Direct, st.Runs, st.Adopted)
	}
	if st.Duplicates != 1 || st.Collisions != 1 {
		t.Errorf("duplicates %d collisions %d, want 1 and 1", st.Duplicates, st.Collisions)
	}
	got := checkStaged(t, s.RegionMap(), readStaged(t, dir), o.MaxFiles)
	equalDumps(t, got, firstOfEachKey(append(a, b...)))
}

// TestStageDirectAbortAndStrays: an aborted split that wrote directly
// leaves no file; one that died without Commit or Abort (kill -9) leaves
// files the next opening of the folder removes; neither reaches the
// HFiles.
func TestStageDirectAbortAndStrays(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{Staging: dir, Table: "t", Memory: 64 << 20, Workers: 1}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	cells := orderedCells(rowNames("r", 400), 200, "x")
	write := func(id string) sink.SplitSink {
		w := beginSplit(t, s, id, cells)
		if !w.(*splitSink).direct {
			t.Fatalf("split %s: %d cells in order did not go direct", id, len(cells))
		}
		return w
	}
	write("aborted").Abort()
	if left := segmentFiles(t, dir); len(left) != 0 {
		t.Errorf("an aborted split left %v", left)
	}
	write("killed") // neither committed nor aborted
	if len(segmentFiles(t, dir)) == 0 {
		t.Fatal("the killed split wrote no file: the test tests nothing")
	}
	s.Close()
	s2, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if left := segmentFiles(t, dir); len(left) != 0 {
		t.Errorf("reopening left the killed split's files: %v", left)
	}
	ok := orderedCells(rowNames("k", 5), 10, "y")
	writeSplit(t, s2, "ok", ok)
	if err := s2.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	equalDumps(t, checkStaged(t, s2.RegionMap(), readStaged(t, dir), 32), ok)
}

// failingFS fails the creation of files whose path holds part, while on.
type failingFS struct {
	vfs.WriteFS
	part string
	on   bool
}

func (f *failingFS) Create(name string) (vfs.WriteFile, error) {
	if f.on && strings.Contains(name, f.part) {
		return nil, fmt.Errorf("injected failure creating %s", name)
	}
	return f.WriteFS.Create(name)
}

// adoptOptions are the options of the adoption tests' sink on dir: two
// regions, split at "m".
func adoptOptions(dir string) Options {
	return Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")}, Memory: 64 << 20, Workers: 1}
}

// adoptThenFailMerge stages in dir a split in order in region 0 and one
// shuffled by seed in region 1, then finishes with the creation of region
// 1's HFiles failing: region 0's files adopted, region 1's merge failed.
// It returns the sink, its file system (failing while on) and the two
// splits' cells.
func adoptThenFailMerge(t *testing.T, dir string, seed int64) (s *Sink, ffs *failingFS, direct, mixed []cell.Cell) {
	t.Helper()
	ctx := context.Background()
	s, err := New(ctx, adoptOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	ffs = &failingFS{WriteFS: s.fs, part: "/" + hfilesDir + "/r00001/"}
	s.fs = ffs
	direct = orderedCells(rowNames("d", 50), 20, "direct") // region 0, in order
	mixed = orderedCells(rowNames("p", 50), 20, "mixed")   // region 1
	rand.New(rand.NewSource(seed)).Shuffle(len(mixed), func(i, j int) { mixed[i], mixed[j] = mixed[j], mixed[i] })
	writeSplit(t, s, "direct", direct)
	writeSplit(t, s, "mixed", mixed)
	ffs.on = true
	if err := s.Finish(ctx, logRep{t}); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Finish: %v; want the injected failure", err)
	}
	if st := s.Stats(); st.Adopted != 1 {
		t.Fatalf("adopted %d files before the failure, want 1 (the test needs one adopted)", st.Adopted)
	}
	return s, ffs, direct, mixed
}

// TestStageDirectAdoptedThenRestaged: a Finish that adopted one
// partition's files and failed merging another, followed by a split staged
// again (the merge must start over, its HFiles removed), moves the adopted
// files back to the split's segments and adopts them anew: the HFiles
// hold exactly the cells.
func TestStageDirectAdoptedThenRestaged(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, ffs, direct, mixed := adoptThenFailMerge(t, dir, 4)
	ffs.on = false
	// The mixed split is staged again (another attempt): the merge starts
	// over.
	writeSplit(t, s, "mixed", mixed)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	equalDumps(t, checkStaged(t, s.RegionMap(), readStaged(t, dir), 32), sorted(append(direct, mixed...)))
}

// TestStageDirectAdoptionResumed: a partition's adoption is saved with the
// next write of finish.json, not by itself. A Finish that adopted one
// partition's files and failed merging another before anything was saved
// leaves the files moved and finish.json without them; the resumed run (a
// new sink on the folder, nothing staged again) must find them moved,
// adopt them again and merge the other: the HFiles hold exactly the cells.
func TestStageDirectAdoptionResumed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _, direct, mixed := adoptThenFailMerge(t, dir, 5)
	st, found, err := s.readFinish()
	if err != nil {
		t.Fatal(err)
	}
	if found {
		for k, ps := range st.Parts {
			if ps.Done {
				t.Fatalf("finish.json records partition %s done before any save of the merge; the test needs the adoption unsaved", k)
			}
		}
	}
	s.Close()

	s, err = New(ctx, adoptOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Adopted != 1 {
		t.Errorf("the resumed run adopted %d files, want the 1 moved before", st.Adopted)
	}
	s.Close()
	equalDumps(t, checkStaged(t, s.RegionMap(), readStaged(t, dir), 32), sorted(append(direct, mixed...)))
}

// TestStageDirectNotWhenSpreadWide: of a run of many splits, a split in
// order within every region it touches but touching them all (a salted
// layout) sorts, as every such split would leave each region more files
// than MaxFiles to merge again; a split in one region writes directly.
func TestStageDirectNotWhenSpreadWide(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("c"), []byte("m"), []byte("t")},
		Memory: 64 << 20, Workers: 1, MaxFiles: 32, Splits: 100}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Salted: the same entities under four salts, one per region, each
	// salt's rows in order.
	var wide []cell.Cell
	for _, salt := range []string{"a", "d", "n", "u"} {
		wide = append(wide, orderedCells(rowNames(salt+"-e", 200), 100, "w")...)
	}
	// Interleave the salts a row at a time, as a salted layout emits
	// them, each salt's rows staying in order.
	interleaved := make([]cell.Cell, 0, len(wide))
	per := len(wide) / 4
	for r := 0; r < per; r += 100 {
		for k := 0; k < 4; k++ {
			interleaved = append(interleaved, wide[k*per+r:k*per+r+100]...)
		}
	}
	writeSplit(t, s, "wide", interleaved)
	narrow := orderedCells(rowNames("p", 400), 200, "n")
	writeSplit(t, s, "narrow", narrow)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Direct != 1 || st.Adopted != 0 {
		// The narrow split's file shares region 2 with the wide split's
		// cells, so it is merged with them, not adopted.
		t.Errorf("direct files %d, adopted %d; want 1 (the narrow split's) and 0", st.Direct, st.Adopted)
	}
	equalDumps(t, checkStaged(t, s.RegionMap(), readStaged(t, dir), o.MaxFiles), sorted(append(interleaved, narrow...)))
}

// TestStageDirectNoRollBeforeEarlierRow: a split writing directly whose
// file is full (every row rolls one here) meets a row before its last. The
// file must not roll for it, which would start a new segment with the
// earlier row unchecked against the closed one: the writer refuses the
// cell and the split stops writing directly, its rest sorted; the result
// is every cell once, in order.
func TestStageDirectNoRollBeforeEarlierRow(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{Staging: dir, Table: "t", Memory: 64 << 20, Workers: 1, HFileSize: 1}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := orderedCells(rowNames("r", 400), 200, "x") // past directAfter
	late := orderedCells([]string{"r00100a"}, 2, "late")
	w := beginSplit(t, s, "a", in)
	if !w.(*splitSink).direct {
		t.Fatalf("%d cells in order did not go direct", len(in))
	}
	for i := range late {
		if err := w.Write(ctx, &late[i]); err != nil {
			t.Fatal(err)
		}
	}
	if w.(*splitSink).direct {
		t.Fatal("a row before the last one was written directly")
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	got := checkStaged(t, s.RegionMap(), readStaged(t, dir), 1<<20)
	equalDumps(t, got, firstOfEachKey(append(in, late...)))
}

// TestHoldsFile: a bulk load's staging directory (family folders) is
// taken for empty only when no folder holds a file; what it finds first is
// named, so the directory is kept and the warning says why.
func TestHoldsFile(t *testing.T) {
	dir := t.TempDir()
	s, err := New(context.Background(), Options{Staging: dir, Table: "t", Memory: 64 << 20, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	token := filepath.Join(dir, "token")
	if _, err := s.holdsFile(token); !notExist(err) {
		t.Fatalf("a missing directory: %v, want not-exist", err)
	}
	for _, f := range []string{"f1", "f2"} {
		if err := os.MkdirAll(filepath.Join(token, f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if held, err := s.holdsFile(token); err != nil || held != "" {
		t.Fatalf("empty family folders: %q, %v; want nothing held", held, err)
	}
	if err := os.WriteFile(filepath.Join(token, "f2", "abc"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if held, err := s.holdsFile(token); err != nil || held != filepath.Join(token, "f2", "abc") {
		t.Fatalf("a file in f2: %q, %v; want it named", held, err)
	}
}
