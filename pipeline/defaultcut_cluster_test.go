package pipeline_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
)

// TestDefaultCutThroughPuts runs the wide_to_bucketed preset with no split
// size over a source whose first region holds about 11 MB of store files
// (220,000 unencoded, uncompressed cells, 180,000 of them in row s001) and
// the other two a few KB: the default cut for puts is a quarter of the
// snapshot (a table under 32 MiB; 1/16 of it and the mean region are
// below that), the heavy region is cut into pieces at even shares, inside
// row s001 (the preset maps cell by cell), and the target holds exactly
// the source's cells through the preset's rule, as HBase's dumps of both
// tables say, with the cells of every entity counted exactly although
// s001's are read by several pieces. The same job through a
// row-level transform (a transform.Flusher) keeps whole rows.
func TestDefaultCutThroughPuts(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	p := presets["wide_to_bucketed"]
	src := uniq(t, "cut_src")
	snap := src + "_snap"
	dst := uniq(t, "cut_dst")
	defer dropTable(t, src)
	defer dropTable(t, dst)
	defer testenv.Drop([]string{snap}, nil)
	r := rand.New(rand.NewSource(11))
	var cells []cell.Cell
	for s := 1; s <= 30; s++ {
		n := 50
		switch {
		case s == 1: // the huge row
			n = 180000
		case s < 10: // the region [, s010)
			n = 5000
		}
		for i := 0; i < n; i++ {
			ts := tsBase + int64(i)*60000 + r.Int63n(60000)
			cells = append(cells, cell.Cell{Row: []byte(fmt.Sprintf("s%03d", s)), Family: []byte("r"), Qualifier: be64(uint64(ts)), Timestamp: ts, Type: cell.Put, Value: randValue(r)})
		}
	}
	source := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: p.families, SplitKeys: p.split, Versions: 3, Encoding: "NONE", Compression: "NONE"}, cells)
	want := expect(p, source)
	j := loadJob(t, p, st, snap, dst)
	sum, err := runPuts(t, ctx, j, p.newSplits, pipeline.Options{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !sum.Finished || sum.Read != int64(len(source)) || sum.Written != int64(len(want)) || sum.Problems() {
		t.Errorf("summary: finished %v, read %d (snapshot has %d), written %d (want %d)", sum.Finished, sum.Read, len(source), sum.Written, len(want))
	}
	sameCells(t, "target", dumpTable(t, dst, false), want)
	t.Logf("%d splits at %d bytes, split times %+v", sum.Splits, sum.SplitBytes, sum.SplitTimes)

	// The run's splits are the in-row cut's, and one starts inside s001.
	snapOpen, err := snapshot.Open(ctx, st.RootDir, snap, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer snapOpen.Close()
	// The puts sink's floor is a quarter of a snapshot under 32 MiB (1/16
	// of it and the mean region are below that here).
	var total int64
	for _, reg := range snapOpen.Regions() {
		total += reg.Bytes()
	}
	if sum.SplitBytes != total/4 || sum.Splits <= 3 {
		t.Errorf("split size %d, %d splits; want a quarter of the snapshot's %d bytes and the heavy region of 3 cut", sum.SplitBytes, sum.Splits, total)
	}
	splits, err := snapOpen.Splits(snapshot.SplitOptions{TargetBytes: sum.SplitBytes, InRow: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	inRow := 0
	for _, sp := range splits {
		ids[sp.ID] = true
		if sp.StartColumn != nil && string(sp.StartRow) == "s001" {
			inRow++
		}
	}
	// The heavy region's pieces are cut at even shares of its bytes: they
	// read about as many cells each.
	var least, most int64
	for _, ps := range sum.PerSplit {
		if !ids[ps.ID] {
			t.Errorf("the run's split %s is not one of the in-row cut's", ps.ID)
		}
		if strings.Contains(ps.ID, "_p") {
			if least == 0 || ps.Read < least {
				least = ps.Read
			}
			most = max(most, ps.Read)
		}
	}
	if least == 0 || most > least*3/2 {
		t.Errorf("the heavy region's pieces read %d to %d cells; want within half again of each other", least, most)
	}
	if !sum.SplitInRow || inRow == 0 {
		t.Errorf("split_in_row %v, %d pieces start inside s001; want the huge row cut", sum.SplitInRow, inRow)
	}
	// Per-entity counts: an entity is a sensor (the old row), and each old
	// cell becomes one new cell.
	perRow := map[string]int64{}
	for _, c := range source {
		perRow[string(c.Row)]++
	}
	heaviest := sketchOf(t, j).Heaviest(entity.ByCells)
	var counted int64
	for _, e := range heaviest {
		if e.Error != 0 {
			t.Errorf("entity %s: count error %d, want exact", e.Name, e.Error)
		}
		counted += e.Cells
	}
	if len(heaviest) != len(perRow) || counted != int64(len(source)) || heaviest[0].Cells != perRow["s001"] {
		t.Errorf("heaviest entities: %d entities, %d cells, the first %+v; want %d entities, %d cells, the first with s001's %d", len(heaviest), counted, heaviest[0], len(perRow), len(source), perRow["s001"])
	}

	// A row-level transform over the same snapshot keeps whole rows.
	jr := loadJob(t, p, st, snap, dst)
	prog := jr.Program
	rows, err := pipeline.Execute(ctx, jr, pipeline.Options{Sink: sink.DryRun{}, Workers: 2, NewMapper: func() transform.Mapper {
		m := prog.New()
		return &transform.RowBuffer{MaxBytes: 64 << 20, Fn: func(row []cell.Cell, emit func(cell.Cell)) error {
			for _, c := range row {
				if err := m.Map(c, emit); err != nil {
					return err
				}
			}
			return nil
		}}
	}})
	if err != nil {
		t.Fatalf("row-level run: %v", err)
	}
	if rows.SplitInRow || rows.Splits < 2 || rows.Read != int64(len(source)) || rows.Written != int64(len(want)) {
		t.Errorf("row-level run: split_in_row %v, %d splits, read %d, wrote %d; want row cuts, 2 or more splits, %d and %d", rows.SplitInRow, rows.Splits, rows.Read, rows.Written, len(source), len(want))
	}
	for _, ps := range rows.PerSplit {
		if strings.HasSuffix(ps.ID, "_e") || strings.HasSuffix(ps.ID, "_c") {
			t.Errorf("row-level run: split %s is an in-row piece", ps.ID)
		}
	}
}
