package bigtable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/sink"
	bt "github.com/rekeyhq/rekey/sink/bigtable"
)

type reporter struct{ lines []string }

func (r *reporter) Printf(f string, a ...any) { r.lines = append(r.lines, fmt.Sprintf(f, a...)) }

// TestDeletePass: the sink alone against the emulator. A table holds an
// earlier copy (written with Google's client); split s1 brings markers of
// every kind for 2,000 rows, and split s2, committed after s1, puts
// cells those markers mask. Only Finish deletes, after both: the table
// then holds exactly the cells HBase's rule leaves of the earlier copy
// and of s2's puts, s2's masked puts included in what is gone. A row
// whose family marker needs more range deletes than one request takes
// is deleted in several; Finish again changes nothing; a split's spill
// file gone fails Finish naming it.
func TestDeletePass(t *testing.T) {
	conn := emulator(t, nil)
	ctx := context.Background()
	newTable(t, conn, "t")
	const rows = 2000
	var pre []cell.Cell
	for i := 0; i < rows; i++ {
		r := fmt.Sprintf("r%05d", i)
		for _, c := range [][2]string{{"d", "a"}, {"d", "b"}, {"e", "c"}} {
			for ts := int64(1); ts <= 3; ts++ {
				pre = append(pre, put(r, c[0], c[1], ts, "pre"))
			}
		}
	}
	for q := 0; q < 250; q++ { // one wide row: 250 columns of d
		pre = append(pre, put("wide", "d", fmt.Sprintf("q%03d", q), 5, "pre"))
	}
	var keys []string
	var muts []*bigtable.Mutation
	for _, c := range pre {
		m := bigtable.NewMutation()
		m.Set(string(c.Family), string(c.Qualifier), bigtable.Timestamp(c.Timestamp*1000), c.Value)
		keys, muts = append(keys, string(c.Row)), append(muts, m)
	}
	if errs, err := conn.Data.Open("t").ApplyBulk(ctx, keys, muts); err != nil || errs != nil {
		t.Fatal(err, errs)
	}
	mark := func(typ cell.Type, row, fam, q string, ts int64) cell.Cell {
		return cell.Cell{Row: []byte(row), Family: []byte(fam), Qualifier: []byte(q), Timestamp: ts, Type: typ}
	}
	var markers []cell.Cell
	for i := 0; i < rows; i++ {
		r := fmt.Sprintf("r%05d", i)
		switch i % 4 {
		case 0:
			markers = append(markers, mark(cell.DeleteColumn, r, "d", "a", 2))
		case 1:
			markers = append(markers, mark(cell.Delete, r, "d", "b", 3))
		case 2:
			markers = append(markers, mark(cell.DeleteFamily, r, "e", "", 2))
		case 3:
			markers = append(markers, mark(cell.DeleteFamilyVersion, r, "d", "", 1))
		}
	}
	markers = append(markers, mark(cell.DeleteFamily, "wide", "d", "", 9))
	// s2's puts, some masked by s1's markers (a column s1's family
	// markers must reach although no earlier cell had it).
	var later []cell.Cell
	for i := 0; i < rows; i++ {
		later = append(later, put(fmt.Sprintf("r%05d", i), "d", "new", 1, "s2"), put(fmt.Sprintf("r%05d", i), "e", "new", 4, "s2"))
	}

	s := bt.New(conn.Data.Open("t"), "t", nil, bt.Options{BatchMutations: 100, Workers: 2})
	dir := filepath.Join(t.TempDir(), "ck.bigtable-deletes")
	if err := s.ApplyDeletes(dir, []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	for i, cells := range [][]cell.Cell{markers, later} {
		sp, err := s.Begin(ctx, sink.SplitInfo{ID: fmt.Sprintf("s%d", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		for j := range cells {
			if err := sp.Write(ctx, &cells[j]); err != nil {
				t.Fatal(err)
			}
		}
		if ack, err := sp.Commit(ctx); err != nil || ack.Cells != int64(len(cells)) {
			t.Fatalf("split %d: %+v %v", i+1, ack, err)
		}
	}
	if n := len(readBack(t, conn, "t")); n != len(pre)+len(later) {
		t.Fatalf("before Finish the table holds %d cells, want every put (%d): nothing deleted yet", n, len(pre)+len(later))
	}
	var want []cell.Cell
	for _, c := range append(slices.Clone(pre), later...) {
		if !slices.ContainsFunc(markers, func(m cell.Cell) bool { return testenv.Masks(&m, &c) }) {
			want = append(want, c)
		}
	}
	rep := &reporter{}
	start := time.Now()
	if err := s.Finish(ctx, rep); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	sameAsWritten(t, readBack(t, conn, "t"), want)
	st := s.Account().(bt.Stats)
	if st.DeleteMarkers != int64(len(markers)) || st.DeleteRows != rows+1 {
		t.Errorf("account: %+v", st)
	}
	t.Logf("%d markers as %d range deletes on %d rows in %v (%.0f markers/s, into the in-process emulator), %d requests in all; %q",
		st.DeleteMarkers, st.DeleteMutations, st.DeleteRows, took, float64(st.DeleteMarkers)/took.Seconds(), st.Requests, rep.lines)

	// Again, as a resume does: the same table.
	if err := s.Finish(ctx, rep); err != nil {
		t.Fatal(err)
	}
	sameAsWritten(t, readBack(t, conn, "t"), want)

	// A spill file gone: the pass cannot be done, and says so.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("%d files in the deletes folder, want one per split", len(ents))
	}
	os.Remove(filepath.Join(dir, ents[0].Name()))
	if err := s.Finish(ctx, rep); err == nil || !strings.Contains(err.Error(), "--fresh") {
		t.Errorf("Finish without a split's spill: %v", err)
	}
}

// TestAtomicRowRefusesItsMarkers: with atomic_rows and deletes: apply, a
// row refused whole gives back its delete markers with its cells (the
// refusal lists them) and the delete pass leaves the table's earlier
// copy of that row as it was; the next row's marker is applied.
func TestAtomicRowRefusesItsMarkers(t *testing.T) {
	conn := emulator(t, nil)
	ctx := context.Background()
	newTable(t, conn, "t")
	for _, r := range []string{"big", "c"} {
		m := bigtable.NewMutation()
		m.Set("d", "old", bigtable.Timestamp(1000), []byte("pre"))
		if err := conn.Data.Open("t").Apply(ctx, r, m); err != nil {
			t.Fatal(err)
		}
	}
	s := bt.New(conn.Data.Open("t"), "t", nil, bt.Options{AtomicRows: true})
	if err := s.ApplyDeletes(filepath.Join(t.TempDir(), "d"), []string{"s1"}); err != nil {
		t.Fatal(err)
	}
	cells := []cell.Cell{{Row: []byte("big"), Family: []byte("d"), Timestamp: 5, Type: cell.DeleteFamily}}
	for i := 0; i < 100_001; i++ {
		cells = append(cells, put("big", "d", fmt.Sprintf("q%03d", i/500), int64(1000-i%500), "x"))
	}
	cells = append(cells, cell.Cell{Row: []byte("c"), Family: []byte("d"), Timestamp: 5, Type: cell.DeleteFamily})
	ack, bad, err := writeSplit(t, s, cells)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || len(bad[0].Dropped) != 100_001 || bad[0].Dropped[100_000].Type != cell.DeleteFamily {
		t.Fatalf("%d refusals, the first dropping %d cells (want the row's 100,000 taken and its marker)", len(bad), len(bad[0].Dropped))
	}
	if ack.Cells != 1 || ack.Failed != 0 {
		t.Errorf("ack %+v, want c's marker alone", ack)
	}
	if err := s.Finish(ctx, &reporter{}); err != nil {
		t.Fatal(err)
	}
	sameAsWritten(t, readBack(t, conn, "t"), []cell.Cell{put("big", "d", "old", 1, "pre")})
}
