package hbase

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// testClient connects to the mini cluster (or skips).
func testClient(t testing.TB) (*Client, *testenv.State) {
	t.Helper()
	st := testenv.Require(t)
	c, err := NewClient(Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, st
}

// tempTable creates a fresh table with family "f" (and any extra split
// keys) and drops it when the test ends.
func tempTable(t testing.TB, c *Client, prefix string, families []Family, splits ...[]byte) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if families == nil {
		families = []Family{{Name: "f", Attributes: map[string]string{"VERSIONS": "10"}}}
	}
	if err := c.CreateTable(ctx, TableSpec{Name: name, Families: families, SplitKeys: splits}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.DisableTable(ctx, name); err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		if err := c.DeleteTable(ctx, name); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	return name
}

func put(row, q string, ts int64, v string) cell.Cell {
	return cell.Cell{Row: []byte(row), Family: []byte("f"), Qualifier: []byte(q), Timestamp: ts, Type: cell.Put, Value: []byte(v)}
}

func scanAll(t testing.TB, c *Client, table string, s *Scan) []cell.Cell {
	t.Helper()
	sc := c.Scan(context.Background(), []byte(table), s)
	defer sc.Close()
	var out []cell.Cell
	for sc.Next() {
		out = append(out, sc.Cell().Clone())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func dump(cells []cell.Cell) string {
	var b []byte
	for i := range cells {
		b = cell.AppendDump(b, &cells[i])
	}
	return string(b)
}

func TestClusterBasics(t *testing.T) {
	c, _ := testClient(t)
	ctx := context.Background()
	table := tempTable(t, c, "basics", nil, []byte("m"))
	tb := []byte(table)

	ok, err := c.TableExists(ctx, table)
	if err != nil || !ok {
		t.Fatalf("TableExists = %v, %v", ok, err)
	}
	if ok, err := c.TableExists(ctx, table+"_missing"); err != nil || ok {
		t.Fatalf("TableExists(missing) = %v, %v", ok, err)
	}
	regions, err := c.Regions(ctx, table)
	if err != nil || len(regions) != 2 || string(regions[0].EndKey) != "m" || string(regions[1].StartKey) != "m" {
		t.Fatalf("regions %v, %v", regions, err)
	}

	if err := c.Put(ctx, tb, []byte("a"), []cell.Cell{put("a", "q1", 100, "v1"), put("a", "q2", 100, "v2")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, tb, []byte("a"), []cell.Cell{put("a", "q1", 200, "v1b")}); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, tb, []byte("z"), []cell.Cell{put("z", "q", 5, "zz")}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, tb, []byte("a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []cell.Cell{put("a", "q1", 200, "v1b"), put("a", "q2", 100, "v2")}
	if dump(got) != dump(want) {
		t.Fatalf("Get:\n%s\nwant\n%s", dump(got), dump(want))
	}
	got, err = c.Get(ctx, tb, []byte("a"), &Get{MaxVersions: 5, Columns: []Column{{Family: []byte("f"), Qualifier: []byte("q1")}}})
	if err != nil || dump(got) != dump([]cell.Cell{put("a", "q1", 200, "v1b"), put("a", "q1", 100, "v1")}) {
		t.Fatalf("Get versions: %v\n%s", err, dump(got))
	}
	if got, err := c.Get(ctx, tb, []byte("nope"), nil); err != nil || len(got) != 0 {
		t.Fatalf("Get missing row: %v %v", got, err)
	}

	all := scanAll(t, c, table, &Scan{MaxVersions: 10})
	wantAll := []cell.Cell{put("a", "q1", 200, "v1b"), put("a", "q1", 100, "v1"), put("a", "q2", 100, "v2"), put("z", "q", 5, "zz")}
	if dump(all) != dump(wantAll) {
		t.Fatalf("Scan:\n%s\nwant\n%s", dump(all), dump(wantAll))
	}
	if got := scanAll(t, c, table, &Scan{Start: []byte("b")}); dump(got) != dump(wantAll[3:]) {
		t.Fatalf("Scan from b:\n%s", dump(got))
	}
	if got := scanAll(t, c, table, &Scan{Stop: []byte("b"), MinTime: 150}); dump(got) != dump(wantAll[:1]) {
		t.Fatalf("Scan to b, ts >= 150:\n%s", dump(got))
	}
	if got := scanAll(t, c, table, &Scan{Limit: 1}); len(got) != 2 {
		t.Fatalf("Scan limit 1 row:\n%s", dump(got))
	}

	// Delete one version, then the whole row: raw scan shows the markers.
	del := cell.Cell{Row: []byte("a"), Family: []byte("f"), Qualifier: []byte("q1"), Timestamp: 200, Type: cell.Delete}
	if err := c.Delete(ctx, tb, []byte("a"), []cell.Cell{del}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(ctx, tb, []byte("a"), &Get{Columns: []Column{{Family: []byte("f"), Qualifier: []byte("q1")}}}); dump(got) != dump([]cell.Cell{put("a", "q1", 100, "v1")}) {
		t.Fatalf("after version delete:\n%s", dump(got))
	}
	if err := c.Delete(ctx, tb, []byte("z"), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(ctx, tb, []byte("z"), nil); len(got) != 0 {
		t.Fatalf("after row delete:\n%s", dump(got))
	}
	raw := scanAll(t, c, table, &Scan{Raw: true, MaxVersions: 10})
	var markers int
	for _, cl := range raw {
		if cl.Type.IsDelete() {
			markers++
		}
	}
	if markers != 2 || len(raw) != 6 {
		t.Fatalf("raw scan: %d cells, %d markers:\n%s", len(raw), markers, dump(raw))
	}
	if err := c.Put(ctx, tb, []byte("a"), []cell.Cell{put("b", "q", 1, "x")}); err == nil {
		t.Fatal("Put accepted a cell of another row")
	}
}

// TestWriterHugeRow writes one row of 30,000 cells through a writer with
// small call limits: the row goes out in slices and arrives whole.
func TestWriterHugeRow(t *testing.T) {
	c, _ := testClient(t)
	ctx := context.Background()
	table := tempTable(t, c, "hugerow", nil)
	w := c.NewWriter([]byte(table), WriterConfig{MaxCellsPerCall: 1000, MaxBytesPerCall: 16 << 10})
	var want []cell.Cell
	for i := 0; i < 30000; i++ {
		cl := put("wide", fmt.Sprintf("q%06d", i), 7, fmt.Sprintf("v%d", i))
		want = append(want, cl)
		if err := w.Write(ctx, cl); err != nil {
			t.Fatal(err)
		}
		if st := w.Stats(); st.Buffered > 64<<20 {
			t.Fatalf("buffered %d bytes", st.Buffered)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Calls < 30 {
		t.Fatalf("the row went out in %d calls; the limits were ignored", st.Calls)
	}
	if got := scanAll(t, c, table, &Scan{Batch: 1000}); dump(got) != dump(want) {
		t.Fatalf("scanned %d cells, want %d", len(got), len(want))
	}
}

// TestWriterDeleteMarkers copies puts and delete markers of every kind, as
// a raw copy does: a raw scan returns exactly what was written.
func TestWriterDeleteMarkers(t *testing.T) {
	c, _ := testClient(t)
	ctx := context.Background()
	table := tempTable(t, c, "markers", nil)
	mk := func(row, q string, ts int64, typ cell.Type, v string) cell.Cell {
		cl := put(row, q, ts, v)
		cl.Type = typ
		if typ.IsDelete() {
			cl.Value = nil
		}
		return cl
	}
	cells := []cell.Cell{
		mk("a", "q", 10, cell.Put, "a10"),
		mk("a", "q", 20, cell.Put, "a20"),
		mk("a", "q", 15, cell.Delete, ""),
		mk("b", "q", 30, cell.DeleteColumn, ""),
		mk("b", "q", 25, cell.Put, "b25"),
		mk("c", "", 40, cell.DeleteFamily, ""),
		mk("c", "x", 35, cell.Put, "c35"),
		mk("d", "", 50, cell.DeleteFamilyVersion, ""),
		mk("d", "y", 50, cell.Put, "d50"),
	}
	w := c.NewWriter([]byte(table), WriterConfig{})
	if err := w.Write(ctx, cells...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sorted := append([]cell.Cell(nil), cells...)
	sort.Slice(sorted, func(i, j int) bool { return cell.Compare(&sorted[i], &sorted[j]) < 0 })
	want := dumpLines(dump(sorted))
	diffLines(t, "raw scan", goDump(t, c, table, &Scan{Raw: true, MaxVersions: 10}), want)
	diffLines(t, "oracle raw dump", dumpLines(oracle(t, "dump-table", table, "--raw")), want)
	// And HBase applies them: only the unmasked puts are visible.
	visible := goDump(t, c, table, &Scan{MaxVersions: 10})
	wantVisible := dumpLines(dump([]cell.Cell{mk("a", "q", 20, cell.Put, "a20"), mk("a", "q", 10, cell.Put, "a10")}))
	diffLines(t, "visible cells", visible, wantVisible)
}
