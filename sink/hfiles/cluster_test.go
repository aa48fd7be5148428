package hfiles

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
)

// clusterTable creates a pre-split table with families f1 and f2 and
// returns a client and a staging URL on the cluster's HDFS; both are
// removed when the test ends.
func clusterTable(t *testing.T, name string, splits ...string) (*hbase.Client, string, string) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("stage_%s_%d", name, time.Now().UnixNano())
	var keys [][]byte
	for _, k := range splits {
		keys = append(keys, []byte(k))
	}
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: table, Families: []hbase.Family{
		{Name: "f1", Attributes: map[string]string{"DATA_BLOCK_ENCODING": "FAST_DIFF", "COMPRESSION": "GZ", "BLOOMFILTER": "ROWCOL"}},
		{Name: "f2"}}, SplitKeys: keys}); err != nil {
		t.Fatal(err)
	}
	staging := fmt.Sprintf("hdfs://%s/tmp/rekey-stage-test/%s", st.NameNode, table)
	t.Cleanup(func() {
		c.DisableTable(ctx, table)
		c.DeleteTable(ctx, table)
		c.Close()
		removeAll(staging, "")
	})
	return c, table, staging
}

// removeAll removes p on the file system of the folder at where (the
// folder itself when p is ""), as a test's cleanup: errors are ignored.
func removeAll(where, p string) {
	loc, err := vfs.Open(where)
	if err != nil {
		return
	}
	defer loc.Close()
	if p == "" {
		p = loc.Path
	}
	loc.FS.RemoveAll(p)
}

// oracleDump is HBase's own scan of table, in the canonical dump format.
func oracleDump(t *testing.T, table string) []string {
	return dumpLines(testenv.Oracle(t, "dump-table", table))
}

// dumpLines splits an oracle dump into its lines, each with its newline.
func dumpLines(b []byte) []string {
	out := strings.TrimSuffix(string(b), "\n")
	if out == "" {
		return nil
	}
	lines := strings.Split(out, "\n")
	for i := range lines {
		lines[i] += "\n"
	}
	return lines
}

func equalLines(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("table holds %d cells, want %d", len(got), len(want))
	}
	for i := 0; i < min(len(got), len(want)); i++ {
		if got[i] != want[i] {
			t.Fatalf("cell %d:\n got %s want %s", i, got[i], want[i])
		}
	}
}

// TestStageLoadCluster stages cells for a pre-split table on the cluster's
// HDFS with a small memory budget, and bulk loads them: HBase's scan of the
// table (the oracle) returns exactly the cells written, once each, though
// one split was staged twice.
func TestStageLoadCluster(t *testing.T) {
	c, table, staging := clusterTable(t, "load", "g", "n", "t")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Memory: 512 << 10, Workers: 2, HFileSize: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(s.RegionMap().Regions); n != 4 {
		t.Fatalf("plan has %d regions, the table 4", n)
	}
	cells := genCells(7, 20000)
	writeSplit(t, s, "one", cells[:12000])
	writeSplit(t, s, "two", cells[12000:])
	writeSplit(t, s, "two", cells[12000:]) // redone split
	// The load is interrupted once its first region is loaded; the regions
	// whose loads were under way then finish (a load, once sent, is waited
	// for: cancelling it and removing its staging directory lost cells),
	// and the next Finish (a --resume) loads the rest, nothing twice.
	cctx, cancel := context.WithCancel(ctx)
	stopper := reporterFunc(func(format string, args ...any) {
		logRep{t}.Printf(format, args...)
		if strings.HasPrefix(format, "hfiles: loaded region") {
			cancel()
		}
	})
	if err := s.Finish(cctx, stopper); err == nil {
		t.Fatal("Finish ran through a cancelled context")
	}
	if n := s.Stats().RegionsLoaded; n < 1 || n > 4 {
		t.Fatalf("%d regions loaded before the interrupt, want 1 to 4", n)
	}
	s.Close()
	s, err = New(ctx, Options{Staging: staging, Table: table, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("stats: runs %d (%d bytes), %d HFiles (%d bytes), %d cells, %d regions loaded, peak memory %d, peak staging %d",
		st.Runs, st.RunBytes, st.HFiles, st.HFileBytes, st.Cells, st.RegionsLoaded, st.PeakMemory, st.PeakStaging)
	if st.RegionsLoaded != 4 {
		t.Errorf("%d regions loaded, want 4", st.RegionsLoaded)
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))

	// Finish again (a later --resume): nothing is loaded twice.
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))
}

// TestStageLoadRetriesRefusedLoad: a region server that answers a
// region's load with loaded=false though no file lies outside the region
// (seen when its file system was closed under the load by another load's
// cleanup) is asked again, as HBase's own bulk load tool does, instead of
// failing the run. HBase's own test hook makes two loads of the table fail
// that way; HBase's scan then holds every cell once.
func TestStageLoadRetriesRefusedLoad(t *testing.T) {
	c, table, staging := clusterTable(t, "refused", "g", "n", "t")
	st := testenv.Require(t)
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Memory: 512 << 10, Workers: 2, HFileSize: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cells := genCells(23, 12000)
	writeSplit(t, s, "all", cells)
	out, err := st.Control("bulkload-refuse 2 " + table)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out)
	rep, refusals := countingRep(t, "refused the load")
	if err := s.Finish(ctx, rep); err != nil {
		t.Fatal(err)
	}
	if n := refusals.Load(); n != 2 {
		t.Errorf("%d refused loads reported, want the 2 made", n)
	}
	if n := s.Stats().RegionsLoaded; n != 4 {
		t.Errorf("%d regions loaded, want 4", n)
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))
	// The refused loads' staging directories in HBase were left in place
	// (they might have held files not moved back) and are removed once
	// their regions loaded: none of the 6 loads' directories is left.
	fin, _, err := s.readFinish()
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, ts := range fin.Tokens {
		tokens = append(tokens, ts...)
	}
	if len(tokens) != 6 {
		t.Fatalf("%d bulk tokens recorded, want 6 (4 regions, 2 refused loads): %v", len(tokens), tokens)
	}
	for _, token := range tokens {
		dir, ok := s.onStagingFS(token)
		if !ok {
			t.Fatalf("bulk token %s is not on the staging folder's file system", token)
		}
		if _, err := s.fs.Stat(dir); !notExist(err) {
			t.Errorf("HBase's staging directory %s is left (stat: %v)", token, err)
		}
	}
}

// TestStageLoadResumesUnsavedMarks: a region's "loaded" mark is saved with
// the next write of finish.json, not by itself. A run killed after its
// regions were loaded but before their marks were saved leaves each
// region sent (saved before its load) and its files gone into HBase. The
// resumed load must count them loaded, moving nothing back and sending
// nothing again: HBase's scan holds every cell once.
func TestStageLoadResumesUnsavedMarks(t *testing.T) {
	c, table, staging := clusterTable(t, "marks", "g", "n", "t")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Memory: 512 << 10, Workers: 2, HFileSize: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cells := genCells(17, 16000)
	writeSplit(t, s, "all", cells)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st, found, err := s.readFinish()
	if err != nil || !found {
		t.Fatalf("finish.json after the load: found %v, error %v", found, err)
	}
	if len(st.Loaded) != 4 || len(st.Sent) != 4 {
		t.Fatalf("finish.json after the load marks %d regions loaded and %d sent, want 4 and 4", len(st.Loaded), len(st.Sent))
	}
	st.Loaded = map[string]bool{} // the marks a killed run never saved
	// And one region's load whose staging directory was never cleaned
	// (the run killed before it could): a real one from HBase, empty.
	stale, err := c.PrepareBulkLoad(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	staleDir, ok := s.onStagingFS(stale)
	if !ok {
		t.Fatalf("bulk token %s is not on the staging folder's file system", stale)
	}
	if _, err := s.fs.Stat(staleDir); err != nil {
		t.Fatalf("HBase's staging directory %s: %v", stale, err)
	}
	reg := s.regions.Regions[0].Dir
	st.Tokens[reg] = append(st.Tokens[reg], stale)
	if err := s.saveFinish(st); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, moved := resumeLoad(t, ctx, staging, table, c)
	if _, err := s.fs.Stat(staleDir); !notExist(err) {
		t.Errorf("HBase's staging directory %s of the earlier load is left after the resumed load (stat: %v)", stale, err)
	}
	if moved != 0 {
		t.Errorf("%d files moved back from HBase's staging directory, want none", moved)
	}
	if n := s.Stats().RegionsLoaded; n != 4 {
		t.Errorf("%d regions loaded, want 4", n)
	}
	if st, _, err := s.readFinish(); err != nil {
		t.Error(err)
	} else if len(st.Loaded) != 4 {
		t.Errorf("finish.json after the resumed load marks %d regions loaded, want 4", len(st.Loaded))
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))
}

// TestStageLoadReclaimsCutShortLoad: a region server takes a bulk load's
// files into its staging directory, under the load's bulk token, then
// moves them into the region. One that fails between the two (or a run
// killed while it works) leaves them in that directory, in no region. The
// resumed load finds them missing from the folder, and a load of their
// region was sent: counted as loaded, their cells would be lost without a
// word. They must be found there, moved back and loaded again.
//
// The test makes that state with HBase's own staging directory (a real
// PrepareBulkLoad) and the move the region server makes, the file under
// its own name in a directory named after its family (HBase's
// SecureBulkLoadManager does so for files on its own file system), then
// judges the table by HBase's own scan against every cell.
func TestStageLoadReclaimsCutShortLoad(t *testing.T) {
	c, table, staging := clusterTable(t, "reclaim", "n")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Memory: 512 << 10, Workers: 2, HFileSize: 128 << 10, NoLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cells := genCells(13, 12000)
	writeSplit(t, s, "all", cells)
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st, found, err := s.readFinish()
	if err != nil || !found || !st.Written {
		t.Fatalf("finish.json after the staging: found %v, written %v, error %v", found, st != nil && st.Written, err)
	}
	token, err := c.PrepareBulkLoad(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(token)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HBase's bulk token: %s", token)
	t.Cleanup(func() { removeAll(staging, u.Path) })
	reg := s.regions.Regions[0]
	var held []string
	for _, ps := range st.Parts {
		if ps.Region != 0 {
			continue
		}
		for _, f := range ps.Files {
			from := path.Join(s.root, f.Name)
			to := path.Join(u.Path, ps.Family, path.Base(f.Name))
			if err := s.fs.MkdirAll(path.Dir(to)); err != nil {
				t.Fatal(err)
			}
			if err := s.fs.Rename(from, to); err != nil {
				t.Fatal(err)
			}
			held = append(held, to)
		}
	}
	if len(held) < 2 {
		t.Fatalf("region %s has %d files; the test wants more than one", reg.Dir, len(held))
	}
	st.Sent = map[string]bool{reg.Dir: true}
	st.Tokens = map[string][]string{reg.Dir: {token}}
	if err := s.saveFinish(st); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, warned := resumeLoad(t, ctx, staging, table, c)
	if warned != len(held) {
		t.Errorf("%d files reported moved back from HBase's staging directory, want %d", warned, len(held))
	}
	if n := s.Stats().RegionsLoaded; n != 2 {
		t.Errorf("%d regions loaded, want 2", n)
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))
	for _, p := range held {
		if _, err := s.fs.Stat(p); !notExist(err) {
			t.Errorf("%s is still in HBase's staging directory (stat error %v)", p, err)
		}
	}
}

// resumeLoad opens the sink on staging again, as a resumed run does, and
// finishes it (the load). It returns the sink (closed with the test) and
// how many files it reported moving back from HBase's staging directory.
func resumeLoad(t *testing.T, ctx context.Context, staging, table string, c *hbase.Client) (*Sink, int) {
	t.Helper()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rep, moved := countingRep(t, "never loaded")
	if err := s.Finish(ctx, rep); err != nil {
		t.Fatal(err)
	}
	return s, int(moved.Load())
}

type reporterFunc func(format string, args ...any)

func (f reporterFunc) Printf(format string, args ...any) { f(format, args...) }

// countingRep logs what a sink reports and counts the messages whose
// format holds substr; safe from the load's goroutines.
func countingRep(t *testing.T, substr string) (reporterFunc, *atomic.Int64) {
	var n atomic.Int64
	return func(format string, args ...any) {
		logRep{t}.Printf(format, args...)
		if strings.Contains(format, substr) {
			n.Add(1)
		}
	}, &n
}

// TestStageLoadAfterSplit: the target region splits between the staging
// and the load; the files that now span two regions are split again and
// every cell arrives.
func TestStageLoadAfterSplit(t *testing.T) {
	c, table, staging := clusterTable(t, "split", "n")
	ctx := context.Background()
	s, err := New(ctx, Options{Staging: staging, Table: table, Client: c, Memory: 1 << 20, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cells := genCells(11, 8000)
	logRep{t}.Printf("staging")
	writeSplit(t, s, "all", cells)
	logRep{t}.Printf("staged")
	// Split the first region at "g" and the second at "t" after the plan.
	for _, at := range []string{"g", "t"} {
		testenv.Oracle(t, "split", table, hex.EncodeToString([]byte(at)))
	}
	logRep{t}.Printf("split")
	rs, err := c.Regions(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("table has %d regions after two splits, want 4", len(rs))
	}
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("stats: %d HFiles, %d re-split, %d regions loaded", st.HFiles, st.FilesResplit, st.RegionsLoaded)
	if st.FilesResplit == 0 {
		t.Error("no file was re-split, though both planned regions split")
	}
	equalLines(t, oracleDump(t, table), dump(sorted(cells)))
}

// TestStageCheckHFile stages offline (no cluster in the sink, as the demo
// runs) with a different encoding, codec and bloom per family, and has
// HBase's own reader (the oracle's check-hfile) open, check and dump every
// staged HFile: it holds exactly the expected cells, tags included, in the
// order of region, family and row.
func TestStageCheckHFile(t *testing.T) {
	testenv.Require(t)
	dir := t.TempDir()
	ctx := context.Background()
	splits := []string{"h", "p"}
	o := Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte(splits[0]), []byte(splits[1])},
		Memory: 256 << 10, Workers: 1, HFileSize: 96 << 10,
		Families: map[string]hfile.WriterOptions{
			"f1": {Encoding: hfile.EncodingFastDiff, Codec: hfile.CodecGZ, Bloom: hfile.BloomRow, BlockSize: 8 << 10},
			"f2": {Encoding: hfile.EncodingRowIndexV1, Codec: hfile.CodecZstd, Bloom: hfile.BloomRowCol},
		}}
	s, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cells := genCells(5, 8000)
	writeSplit(t, s, "a", cells[:5000])
	writeSplit(t, s, "b", cells[5000:])
	if err := s.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	// Expected, by the rule: region by the split keys, then family, then
	// HBase's cell order.
	regionOf := func(row []byte) int {
		r := 0
		for _, k := range splits {
			if string(row) >= k {
				r++
			}
		}
		return r
	}
	want := sorted(cells)
	slices.SortStableFunc(want, func(a, b cell.Cell) int {
		if ra, rb := regionOf(a.Row), regionOf(b.Row); ra != rb {
			return ra - rb
		}
		return strings.Compare(string(a.Family), string(b.Family))
	})
	var wantLines []string
	for i := range want {
		l := strings.TrimSuffix(string(cell.AppendDump(nil, &want[i])), "\n")
		wantLines = append(wantLines, l+"\t"+hex.EncodeToString(want[i].Tags)+"\n")
	}
	// Files in the same order: region dir (rNNNNN sorts by index), family,
	// first row.
	files := readStaged(t, dir)
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i], files[j]
		if a.region != b.region {
			return a.region < b.region
		}
		if a.family != b.family {
			return a.family < b.family
		}
		return string(a.cells[0].Row) < string(b.cells[0].Row)
	})
	args := []string{"check-hfile", "--tags"}
	for _, f := range files {
		args = append(args, filepath.Join(dir, hfilesDir, f.path))
	}
	out := string(testenv.Oracle(t, args...))
	var got []string
	encodings := map[string]bool{}
	for _, l := range strings.SplitAfter(out, "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "# encoding "), strings.HasPrefix(l, "# codec "), strings.HasPrefix(l, "# bloom "):
			encodings[strings.TrimSpace(l)] = true
		case strings.HasPrefix(l, "#"):
		default:
			got = append(got, l)
		}
	}
	t.Logf("%d HFiles checked by HBase; %v", len(files), encodings)
	for _, want := range []string{"# encoding FAST_DIFF", "# encoding ROW_INDEX_V1", "# codec GZ", "# codec ZSTD", "# bloom ROW", "# bloom ROWCOL"} {
		if !encodings[want] {
			t.Errorf("no staged HFile reports %q", want)
		}
	}
	equalLines(t, got, wantLines)
}
