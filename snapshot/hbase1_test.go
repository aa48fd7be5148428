package snapshot_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/snapshot"
)

// hbase1Comparator is the comparator HBase 1.x records in the trailer of
// every HFile it writes (2.x records KeyValue$KVComparator there): a file
// that names it was written by 1.x.
const hbase1Comparator = "org.apache.hadoop.hbase.KeyValue$KeyComparator"

// TestHBase1Snapshots reads the snapshots HBase 1.7.2 wrote
// (testenv/hbase1/bin/make-snapshots, run by `make compat`, puts them in
// $REKEY_HBASE1_SNAPSHOTS) and checks our cells equal 1.7.2's own
// TableSnapshotScanner's dump, normal and raw, whole and cut into small
// splits. Every store file must carry 1.x's comparator, so the test
// cannot pass on files a newer HBase wrote; the files together must use
// each data block encoding 1.x and rekey share, and the split table must
// hold Reference files. Without the directory it
// skips, and says how to make one; REKEY_REQUIRE_HBASE1=1 makes that a
// failure.
func TestHBase1Snapshots(t *testing.T) {
	dir := os.Getenv("REKEY_HBASE1_SNAPSHOTS")
	if dir == "" {
		msg := "HBase 1.7.2 snapshots absent: set REKEY_HBASE1_SNAPSHOTS to the output of testenv/hbase1/bin/make-snapshots (`make compat` does)"
		if os.Getenv("REKEY_REQUIRE_HBASE1") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	names := hbase1Names(t, dir)
	encodings := map[string]bool{}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(dir, name)
			refs := checkWrittenBy1x(t, root, encodings)
			if strings.Contains(name, "split") && refs == 0 {
				t.Errorf("%s: no Reference files: the split's daughters were compacted or never made", name)
			}
			for _, mode := range dumpModes(name) {
				want, err := os.ReadFile(filepath.Join(dir, mode.file))
				if err != nil {
					t.Fatal(err)
				}
				if len(want) == 0 {
					t.Fatalf("%s: HBase 1.7.2 dumped no cells", mode.file)
				}
				if d := diffDumps(dumpSnapshot(t, root, name, mode.opts), want); d != "" {
					t.Errorf("%s: %s", mode.file, d)
				}
				if d := diffDumps(dumpSplits(t, root, name, mode.opts, snapshot.SplitOptions{TargetBytes: 8 << 10}), want); d != "" {
					t.Errorf("%s, 8 KiB splits: %s", mode.file, d)
				}
			}
		})
	}
	for _, e := range []string{"NONE", "PREFIX", "DIFF", "FAST_DIFF"} {
		if !encodings[e] {
			t.Errorf("no HFile with data block encoding %s among the 1.7.2 snapshots (have %v)", e, encodings)
		}
	}
}

// dumpMode is one dump the oracle writes beside a snapshot, and the scan
// that reads the same cells.
type dumpMode struct {
	file string
	opts snapshot.ScanOptions
}

// dumpModes are the dumps beside snapshot NAME: NAME.cells (a normal scan
// of all versions) and NAME.raw.cells (raw).
func dumpModes(name string) []dumpMode {
	return []dumpMode{
		{name + ".cells", snapshot.ScanOptions{}},
		{name + ".raw.cells", snapshot.ScanOptions{Raw: true}},
	}
}

// hbase1Names lists the snapshots in dir (each NAME has NAME.cells beside
// its root dir); none fails the test, since the directory was given.
func hbase1Names(t *testing.T, dir string) []string {
	t.Helper()
	dumps, err := filepath.Glob(filepath.Join(dir, "*.cells"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dumps {
		if !strings.HasSuffix(d, ".raw.cells") {
			names = append(names, strings.TrimSuffix(filepath.Base(d), ".cells"))
		}
	}
	if len(names) == 0 {
		t.Fatalf("REKEY_HBASE1_SNAPSHOTS=%s holds no NAME.cells dumps", dir)
	}
	sort.Strings(names)
	return names
}

// checkWrittenBy1x opens every HFile under root's data/ and archive/ and
// fails unless each names 1.x's comparator; it adds their data block
// encodings to encodings and returns how many Reference files (named
// HFILE.PARENTREGION) it passed over.
func checkWrittenBy1x(t *testing.T, root string, encodings map[string]bool) (refs int) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		parts := strings.Split(rel, string(filepath.Separator))
		// data/NS/TABLE/REGION/FAMILY/FILE, or the same under archive/.
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") || parts[len(parts)-2] == "recovered.edits" ||
			(parts[0] != "data" && parts[0] != "archive") {
			return nil
		}
		if strings.Contains(d.Name(), ".") {
			refs++
			return nil
		}
		r, err := hfile.OpenFile(p)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		defer r.Close()
		files++
		encodings[r.Info().Encoding.String()] = true
		if c := r.Trailer().ComparatorClassName; c != hbase1Comparator {
			t.Errorf("%s: comparator %q, want HBase 1.x's %q", rel, c, hbase1Comparator)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("%s: no HFiles found", root)
	}
	return refs
}
