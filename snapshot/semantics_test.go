package snapshot

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot/manifest"
)

// now10s is the TTL reference time of the semantics tests: 10,000 ms.
var now10s = time.UnixMilli(10_000)

// semanticsCase is one rule of HBase's read semantics: a family's
// attributes, its store files, the scan options and the cells HBase
// returns. TestReadSemantics reads it from hand-made files;
// TestReadSemanticsOnHBase has the mini cluster write the same cells, one
// flush per file, and holds both rekey and the rule to HBase's own dump.
type semanticsCase struct {
	name  string
	attrs []string // attributes of family "f"
	files []string // cells of each store file of family "f", oldest file first
	opts  ScanOptions
	want  string
	// notOnHBase says why HBase cannot be made to write these files (the
	// oracle comparison skips the case).
	notOnHBase string
	// onHBase is what HBase returns when its writes change the files (a
	// flush keeps only VERSIONS versions of a column), with the reason.
	onHBase, onHBaseWhy string
}

var readSemanticsCases = []semanticsCase{
	{
		name:  "VERSIONS keeps the newest versions",
		attrs: []string{"VERSIONS", "2"},
		files: []string{"r/f:q/1/Put=a r/f:q/2/Put=b r/f:q/3/Put=c r/f:p/1/Put=x"},
		want:  "r/f:p/1/Put=x r/f:q/3/Put=c r/f:q/2/Put=b",
	},
	{
		name:  "default VERSIONS is 1",
		files: []string{"r/f:q/1/Put=a r/f:q/2/Put=b"},
		want:  "r/f:q/2/Put=b",
	},
	{
		name:  "MaxVersions lowers VERSIONS but never raises it",
		attrs: []string{"VERSIONS", "2"},
		files: []string{"r/f:q/1/Put=a r/f:q/2/Put=b r/f:q/3/Put=c"},
		opts:  ScanOptions{MaxVersions: 5},
		want:  "r/f:q/3/Put=c r/f:q/2/Put=b",
	},
	{
		name:  "Delete masks exactly its version",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:q/1/Put=a r/f:q/2/Put=b r/f:q/3/Put=c", "r/f:q/2/Delete"},
		want:  "r/f:q/3/Put=c r/f:q/1/Put=a",
	},
	{
		name:       "a deleted version does not count against VERSIONS",
		attrs:      []string{"VERSIONS", "2"},
		files:      []string{"r/f:q/1/Put=a r/f:q/2/Put=b r/f:q/3/Put=c", "r/f:q/3/Delete"},
		want:       "r/f:q/2/Put=b r/f:q/1/Put=a",
		onHBase:    "r/f:q/2/Put=b",
		onHBaseWhy: "the flush keeps VERSIONS (2) versions of q, so version 1 never reaches a file",
	},
	{
		name:  "DeleteColumn masks its version and older ones",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:q/1/Put=a r/f:q/2/Put=b r/f:q/3/Put=c r/f:p/1/Put=x", "r/f:q/2/DeleteColumn"},
		want:  "r/f:p/1/Put=x r/f:q/3/Put=c",
	},
	{
		name:  "a DeleteFamily behind more empty-qualifier versions than asked for still masks",
		attrs: []string{"VERSIONS", "3"},
		files: []string{"r/f:/5/Put=a r/f:/4/Put=b r/f:q/2/Put=c r/f:p/6/Put=d", "r/f:/3/DeleteFamily"},
		opts:  ScanOptions{MaxVersions: 1},
		want:  "r/f:/5/Put=a r/f:p/6/Put=d",
	},
	{
		name:  "DeleteFamily masks the family's cells at or before it, in its row only",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:a/1/Put=a r/f:b/5/Put=b r/f:c/2/Put=c s/f:a/1/Put=s", "r/f:/2/DeleteFamily"},
		want:  "r/f:b/5/Put=b s/f:a/1/Put=s",
	},
	{
		name:  "DeleteFamilyVersion masks that timestamp in every column",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:a/1/Put=a1 r/f:a/2/Put=a2 r/f:b/2/Put=b2 r/f:b/3/Put=b3", "r/f:/2/DeleteFamilyVersion"},
		want:  "r/f:a/1/Put=a1 r/f:b/3/Put=b3",
	},
	{
		name:  "a Put written after a delete at a newer timestamp survives",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:q/1/Put=old", "r/f:/5/DeleteFamily", "r/f:q/6/Put=new"},
		want:  "r/f:q/6/Put=new",
	},
	{
		name:  "a Put rewritten at the deleted timestamp stays deleted",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:q/5/Put=old", "r/f:q/5/Delete", "r/f:q/5/Put=new"},
		want:  "",
	},
	{
		name:  "TTL drops expired cells",
		attrs: []string{"VERSIONS", "5", "TTL", "5"},
		files: []string{"r/f:q/4000/Put=old r/f:q/6000/Put=new s/f:q/1000/Put=gone"},
		opts:  ScanOptions{Now: now10s},
		want:  "r/f:q/6000/Put=new",
	},
	{
		name:  "MIN_VERSIONS keeps expired versions up to its count",
		attrs: []string{"VERSIONS", "5", "TTL", "5", "MIN_VERSIONS", "1"},
		files: []string{"r/f:q/1000/Put=a r/f:q/2000/Put=b s/f:q/1000/Put=c s/f:q/9000/Put=d"},
		opts:  ScanOptions{Now: now10s},
		want:  "r/f:q/2000/Put=b s/f:q/9000/Put=d",
	},
	{
		name:  "named columns keep the first expired version past MIN_VERSIONS",
		attrs: []string{"VERSIONS", "5", "TTL", "5", "MIN_VERSIONS", "1"},
		files: []string{"r/f:q/9000/Put=new r/f:q/4000/Put=old r/f:q/3000/Put=older r/f:p/9000/Put=p"},
		opts:  ScanOptions{Columns: []Column{{Family: []byte("f"), Qualifier: []byte("q")}}, Now: now10s},
		want:  "r/f:q/9000/Put=new r/f:q/4000/Put=old",
	},
	{
		name:  "named columns, every version expired: MIN_VERSIONS keeps its count and no more",
		attrs: []string{"VERSIONS", "5", "TTL", "5", "MIN_VERSIONS", "1"},
		files: []string{"r/f:q/4000/Put=a r/f:q/3000/Put=b r/f:q/2000/Put=c"},
		opts:  ScanOptions{Columns: []Column{{Family: []byte("f"), Qualifier: []byte("q")}}, Now: now10s},
		want:  "r/f:q/4000/Put=a",
	},
	{
		name:       "raw returns markers and masked cells, every version",
		attrs:      []string{"VERSIONS", "1", "TTL", "5"},
		files:      []string{"r/f:q/1/Put=a r/f:q/2/Put=b", "r/f:q/2/DeleteColumn"},
		opts:       ScanOptions{Raw: true, Now: now10s},
		want:       "r/f:q/2/DeleteColumn r/f:q/2/Put=b r/f:q/1/Put=a",
		onHBase:    "r/f:q/2/DeleteColumn r/f:q/2/Put=b",
		onHBaseWhy: "the flush keeps VERSIONS (1) version of q, so version 1 never reaches a file",
	},
	{
		name:       "raw MaxVersions counts puts, not markers",
		attrs:      []string{"VERSIONS", "1"},
		files:      []string{"r/f:q/1/Put=a r/f:q/2/Put=b r/f:q/3/Put=c", "r/f:q/3/Delete"},
		opts:       ScanOptions{Raw: true, MaxVersions: 2},
		want:       "r/f:q/3/Delete r/f:q/3/Put=c r/f:q/2/Put=b",
		onHBase:    "r/f:q/3/Delete r/f:q/3/Put=c",
		onHBaseWhy: "the flush keeps VERSIONS (1) version of q, so version 2 never reaches a file",
	},
	{
		name:  "the same key in two files: the newer file wins",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:q/1/Put=older", "r/f:q/1/Put=newer"},
		want:  "r/f:q/1/Put=newer",
	},
	{
		name:       "the same key in two files: the higher sequence id wins over file order",
		attrs:      []string{"VERSIONS", "5"},
		files:      []string{"r/f:q/1/Put=higher@9", "r/f:q/1/Put=lower@3"},
		want:       "r/f:q/1/Put=higher",
		notOnHBase: "HBase gives a later flush a higher sequence id; TestSequenceIDsOnHBase has a bulk-loaded file outrank a later flush",
	},
	{
		name:  "time range: newer cells skipped, older ones end the column",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:q/1/Put=a r/f:q/2/Put=b r/f:q/3/Put=c r/f:q/4/Put=d"},
		opts:  ScanOptions{TimeRange: TimeRange{Min: 2, Max: 4}},
		want:  "r/f:q/3/Put=c r/f:q/2/Put=b",
	},
	{
		name:  "time range before a delete: the delete still masks (KEEP_DELETED_CELLS=FALSE)",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:q/1/Put=a r/f:q/2/Put=b", "r/f:q/5/DeleteColumn"},
		opts:  ScanOptions{TimeRange: TimeRange{Min: 0, Max: 3}},
		want:  "",
	},
	{
		name:  "time range before a delete with KEEP_DELETED_CELLS=TRUE sees past it",
		attrs: []string{"VERSIONS", "5", "KEEP_DELETED_CELLS", "TRUE"},
		files: []string{"r/f:q/1/Put=a r/f:q/2/Put=b r/f:q/5/DeleteColumn"},
		opts:  ScanOptions{TimeRange: TimeRange{Min: 0, Max: 3}},
		want:  "r/f:q/2/Put=b r/f:q/1/Put=a",
	},
	{
		name:  "KEEP_DELETED_CELLS=TRUE does not show deleted cells to a plain scan",
		attrs: []string{"VERSIONS", "5", "KEEP_DELETED_CELLS", "TRUE"},
		files: []string{"r/f:q/1/Put=a r/f:q/5/DeleteColumn"},
		want:  "",
	},
	{
		name:  "column selection",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"r/f:a/1/Put=a r/f:b/1/Put=b r/f:c/1/Put=c"},
		opts:  ScanOptions{Columns: []Column{{Family: []byte("f"), Qualifier: []byte("b")}}},
		want:  "r/f:b/1/Put=b",
	},
	{
		name:  "start and stop rows",
		attrs: []string{"VERSIONS", "5"},
		files: []string{"a/f:q/1/Put=a b/f:q/1/Put=b c/f:q/1/Put=c d/f:q/1/Put=d"},
		opts:  ScanOptions{StartRow: []byte("b"), StopRow: []byte("d")},
		want:  "b/f:q/1/Put=b c/f:q/1/Put=c",
	},
	{
		name:  "an expired DeleteFamily cannot mask unexpired cells",
		attrs: []string{"VERSIONS", "5", "TTL", "5"},
		files: []string{"r/f:q/6000/Put=new", "r/f:/1000/DeleteFamily"},
		opts:  ScanOptions{Now: now10s},
		want:  "r/f:q/6000/Put=new",
	},
}

func TestReadSemantics(t *testing.T) {
	for _, tc := range readSemanticsCases {
		t.Run(tc.name, func(t *testing.T) {
			var files []testFile
			for i, c := range tc.files {
				files = append(files, testFile{family: "f", cells: c, meta: fileMeta{MaxSeqID: int64(i + 1), HasMaxSeqID: true}})
			}
			mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f", tc.attrs...)}, []testRegion{{enc: "aaaa", files: files}})
			got, err := readAll(t, mem, root, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if g := joinCells(got); g != tc.want {
				t.Errorf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
}

func TestCellTTLTag(t *testing.T) {
	tag := func(ttl int64) []byte {
		b := []byte{0, 9, ttlTagType}
		for i := 7; i >= 0; i-- {
			b = append(b, byte(ttl>>(8*i)))
		}
		return b
	}
	c := cell.Cell{Timestamp: 5000, Tags: tag(1000)}
	if !cellTTLExpired(&c, 7000) {
		t.Error("ts 5000 + ttl 1000 < now 7000: want expired")
	}
	if cellTTLExpired(&c, 6000) {
		t.Error("ts 5000 + ttl 1000 == now 6000: want live")
	}
	c.Tags = append([]byte{0, 2, 1, 'x'}, tag(1)...) // another tag first
	if !cellTTLExpired(&c, 7000) {
		t.Error("TTL tag after another tag: want expired")
	}
	c.Tags = []byte{0, 200, ttlTagType} // truncated: ignored, no panic
	if cellTTLExpired(&c, 7000) {
		t.Error("malformed tags: want no expiry")
	}
}

func TestFamiliesAreIndependent(t *testing.T) {
	fams := []*manifest.ColumnFamilySchema{family("a", "VERSIONS", "1"), family("b", "VERSIONS", "3")}
	mem, root := buildSnapshot(t, fams, []testRegion{{enc: "aaaa", files: []testFile{
		{family: "a", cells: "r/a:q/1/Put=a1 r/a:q/2/Put=a2"},
		{family: "b", cells: "r/b:q/1/Put=b1 r/b:q/2/Put=b2 r/b:/9/DeleteFamily"},
		{family: "b", cells: "r/b:q/10/Put=b10"},
	}}})
	got, err := readAll(t, mem, root, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := joinCells(got), "r/a:q/2/Put=a2 r/b:q/10/Put=b10"; g != w {
		t.Errorf("got  %s\nwant %s", g, w)
	}
	got, err = readAll(t, mem, root, ScanOptions{Families: [][]byte{[]byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := joinCells(got), "r/a:q/2/Put=a2"; g != w {
		t.Errorf("families=a: got %s, want %s", g, w)
	}
}

func TestReferenceHalves(t *testing.T) {
	split := cell.FirstOnRow([]byte("m"))
	key := cell.AppendKey(nil, &split)
	parentCells := "a/f:q/1/Put=a l/f:q/1/Put=l m/f:q/1/Put=m z/f:q/1/Put=z"
	mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f")}, []testRegion{
		{enc: "bbbb", end: "m", files: []testFile{{family: "f", name: "abc1.pppp", parent: "pppp", at: "archive", cells: parentCells, ref: &manifest.Ref{SplitKey: key}}}},
		{enc: "cccc", start: "m", files: []testFile{{family: "f", name: "abc1.pppp", parent: "pppp", at: "archive", cells: parentCells, ref: &manifest.Ref{SplitKey: key, Top: true}}}},
	})
	got, err := readAll(t, mem, root, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := joinCells(got), "a/f:q/1/Put=a l/f:q/1/Put=l m/f:q/1/Put=m z/f:q/1/Put=z"; g != w {
		t.Errorf("got  %s\nwant %s", g, w)
	}
	s, err := Open(t.Context(), root, "snap", OpenOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	splits, _ := s.Splits(SplitOptions{})
	var halves []string
	for _, sp := range splits {
		sc, err := s.NewScanner(t.Context(), sp, ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var rows []string
		for sc.Next() {
			rows = append(rows, string(sc.Cell().Row))
		}
		sc.Close()
		halves = append(halves, strings.Join(rows, ","))
	}
	if g, w := strings.Join(halves, " | "), "a,l | m,z"; g != w {
		t.Errorf("halves: got %s, want %s", g, w)
	}
}

func TestBulkLoadSequenceIDs(t *testing.T) {
	// A bulk-loaded file's cells take the file's sequence id (from its
	// _SeqId_<n>_ name); a flushed file's cells keep their own.
	mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("f", "VERSIONS", "5")}, []testRegion{{enc: "aaaa", files: []testFile{
		{family: "f", name: "aa01_SeqId_50_", cells: "r/f:q/1/Put=bulk@0", meta: fileMeta{MaxSeqID: 7, HasMaxSeqID: true, HasBulkLoadTS: true, BulkLoadTS: 1}},
		{family: "f", name: "aa02", cells: "r/f:q/1/Put=flushed@20", meta: fileMeta{MaxSeqID: 20, HasMaxSeqID: true, IncludesMVCC: true}},
	}}})
	got, err := readAll(t, mem, root, ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := joinCells(got), "r/f:q/1/Put=bulk"; g != w {
		t.Errorf("got %s, want %s", g, w)
	}
}

func TestSplitsCutLargeRegions(t *testing.T) {
	var cells []string
	for _, r := range "abcdefghijklmnopqrst" {
		cells = append(cells, string(r)+"/f:q/1/Put=v")
	}
	s := oneRegion(t, cells)
	whole := s.Regions()[0].Bytes()
	splits, err := s.Splits(SplitOptions{TargetBytes: whole / 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) < 3 {
		t.Fatalf("got %d splits, want about 4", len(splits))
	}
	ids := map[string]bool{}
	var rows []string
	for i, sp := range splits {
		if ids[sp.ID] {
			t.Errorf("duplicate split id %s", sp.ID)
		}
		ids[sp.ID] = true
		if i > 0 && string(splits[i-1].EndRow) != string(sp.StartRow) {
			t.Errorf("split %d starts at %q, previous ends at %q", i, sp.StartRow, splits[i-1].EndRow)
		}
		sc, err := s.NewScanner(t.Context(), sp, ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			rows = append(rows, string(sc.Cell().Row))
		}
		sc.Close()
	}
	if g, w := strings.Join(rows, ""), "abcdefghijklmnopqrst"; g != w {
		t.Errorf("rows over all splits: %s, want %s", g, w)
	}
	again, _ := s.Splits(SplitOptions{TargetBytes: whole / 4})
	for i := range again {
		if again[i].ID != splits[i].ID {
			t.Errorf("split ids not stable: %s vs %s", again[i].ID, splits[i].ID)
		}
	}
}

func TestMOBFamilyRefused(t *testing.T) {
	mem, root := buildSnapshot(t, []*manifest.ColumnFamilySchema{family("m", "IS_MOB", "true"), family("f")}, []testRegion{{enc: "aaaa", files: []testFile{
		{family: "f", cells: "r/f:q/1/Put=v"},
	}}})
	if _, err := readAll(t, mem, root, ScanOptions{}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "MOB") {
		t.Fatalf("err = %v, want ErrUnsupported naming MOB", err)
	}
	// Leaving the MOB family out of the scan reads the rest.
	got, err := readAll(t, mem, root, ScanOptions{Families: [][]byte{[]byte("f")}})
	if err != nil || joinCells(got) != "r/f:q/1/Put=v" {
		t.Fatalf("got %v, %v", got, err)
	}
}
