package transform

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

func warningCodes(rep *PlanReport) string {
	var codes []string
	for _, w := range rep.Warnings {
		codes = append(codes, w.Code)
	}
	sort.Strings(codes)
	return strings.Join(codes, ",")
}

// TestPlanWarnings gives each warning a job that deserves it, and checks
// that the plan raises exactly the expected ones.
func TestPlanWarnings(t *testing.T) {
	userItem := LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "decimal", Field: "item"}}}
	tallCell := func(i int) cell.Cell {
		return cell.Cell{Row: fmt.Appendf(nil, "u%d\x00%d", i%3, 1000+i), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: int64(1767225600000 + i), Type: cell.Put, Value: []byte("v")}
	}
	tests := []struct {
		name string
		spec Spec
		cell func(i int) cell.Cell
		opts PlanOptions
		want string
	}{
		{
			name: "tall to wide without a bucket",
			spec: Spec{Source: userItem, Entity: []string{"user"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}}, Qualifier: []ComponentSpec{{Type: "uint", Field: "item", Width: 8}}}},
			// The old qualifier is not parsed and the new one does not
			// hold it: two columns of one old row collide.
			cell: tallCell, want: "dropped-field,unbounded-row",
		},
		{
			name: "wide row kept wide",
			spec: Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user"}}, Qualifier: []ComponentSpec{{Type: "int", Field: "ts", Width: 8}}}, Entity: []string{"user"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "fixed", Field: "user", Width: 6}}, Qualifier: []ComponentSpec{{Type: "sortable_int", Field: "ts", Width: 8}}}},
			cell: func(i int) cell.Cell {
				return testCell(fmt.Sprintf("u%05d", i%2), be64(1767225600000+int64(i)*1000), 1)
			},
			want: "unbounded-row",
		},
		{
			name: "leading timestamp",
			spec: Spec{Source: userItem, Entity: []string{"user"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "time_bucket", Field: "h", Of: []string{"$ts"}, Unit: "hour"}, {Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "decimal", Field: "item", Width: 10}}}},
			cell: tallCell, want: "hotspot",
		},
		{
			name: "number that looks like a time first",
			spec: Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "decimal", Field: "when", Width: 13}, {Type: "string", Field: "user"}}}, Entity: []string{"user"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "uint", Field: "when", Width: 8}, {Type: "string", Field: "user"}}}},
			cell: func(i int) cell.Cell {
				return cell.Cell{Row: fmt.Appendf(nil, "%013du%d", 1767225600000+i, i%4), Family: []byte("f"), Type: cell.Put}
			},
			want: "hotspot,no-separator",
		},
		{
			name: "reversed timestamp first",
			spec: Spec{Source: userItem, Entity: []string{"user"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "reversed_ts", Field: "$ts"}, {Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "decimal", Field: "item", Width: 10}}}},
			cell: tallCell, want: "hotspot",
		},
		{
			name: "signed and decimal text",
			spec: Spec{Source: userItem, Entity: []string{"user"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "int", Field: "$ts", Width: 8}, {Type: "decimal", Field: "item"}}}},
			cell: tallCell, want: "decimal-text,signed-int",
		},
		{
			name: "dropped field collides",
			spec: Spec{Source: userItem, Entity: []string{"user"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "time_bucket", Field: "d", Of: []string{"$ts"}, Unit: "day"}}}},
			cell: func(i int) cell.Cell { c := tallCell(i); c.Timestamp = 1767225600000; return c },
			want: "collision,dropped-field",
		},
		{
			name: "no separator and separator order",
			spec: Spec{Source: userItem, Entity: []string{"user"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: '|', HasSep: true}, {Type: "decimal", Field: "item", Width: 8}, {Type: "string", Field: "$qualifier"}}}},
			cell: tallCell, want: "no-separator,separator-order",
		},
		{
			name: "row and cell limits",
			spec: Spec{Source: userItem, Entity: []string{"user"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "user", Sep: 0, HasSep: true}, {Type: "time_bucket", Field: "d", Of: []string{"$ts"}, Unit: "day"}}, Qualifier: []ComponentSpec{{Type: "decimal", Field: "item", Width: 8}}}},
			cell: tallCell, opts: PlanOptions{MaxRowSize: 1000, MaxCellSize: 40},
			want: "cell-too-large,dropped-field,row-too-large", // the old qualifier is lost
		},
		{
			name: "bad keys",
			spec: Spec{Source: LayoutSpec{Row: []ComponentSpec{{Type: "decimal", Field: "n", Width: 4}}}, Entity: []string{"n"},
				Target: LayoutSpec{Row: []ComponentSpec{{Type: "uint", Field: "n", Width: 4}}}},
			cell: func(i int) cell.Cell {
				return cell.Cell{Row: fmt.Appendf(nil, "%04d", i*70), Family: []byte("f"), Type: cell.Put}
			},
			want: "bad-keys",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			pl := p.NewPlanner(tc.opts)
			for i := 0; i < 300; i++ {
				c := tc.cell(i)
				pl.Add(&c)
			}
			rep := pl.Report(true)
			if got := warningCodes(rep); got != tc.want {
				t.Fatalf("warnings %s, want %s:\n%+v", got, tc.want, rep.Warnings)
			}
		})
	}
}

func TestPlanFigures(t *testing.T) {
	p, err := Compile(wideSpec())
	if err != nil {
		t.Fatal(err)
	}
	pl := p.NewPlanner(PlanOptions{Regions: 3})
	// u00000 gets 30 cells on one day, u00001 20, u00002 10.
	for u, n := range []int{30, 20, 10} {
		for i := 0; i < n; i++ {
			c := testCell(fmt.Sprintf("u%05d", u), be64(1767225600000+int64(i)*1000), 1)
			pl.Add(&c)
		}
	}
	rep := pl.Report(true)
	if rep.SampledCells != 60 || rep.Entities != 3 || rep.NewRows != 3 {
		t.Fatalf("figures: %+v", rep)
	}
	if h := rep.HeaviestEntities; len(h) != 3 || h[0].Entity != "user=u00000" || h[0].Cells != 30 || h[2].Cells != 10 {
		t.Fatalf("heaviest: %+v", h)
	}
	if rep.WorstRow.Cells != 30 || !strings.HasPrefix(rep.WorstRow.Row, "u00000") {
		t.Fatalf("worst row: %+v", rep.WorstRow)
	}
	if len(rep.SplitKeys) != 2 || !strings.HasPrefix(rep.SplitKeys[0], "u00001") || !strings.HasPrefix(rep.SplitKeys[1], "u00002") {
		t.Fatalf("split keys: %v", rep.SplitKeys)
	}
	if len(rep.Examples) != 3 || !strings.Contains(rep.Examples[0].Fields, "user=u00000") {
		t.Fatalf("examples: %+v", rep.Examples)
	}

	// A salted new table splits at its buckets.
	sp, err := Compile(Spec{
		Source: LayoutSpec{Row: []ComponentSpec{{Type: "string", Field: "k"}}},
		Target: LayoutSpec{Row: []ComponentSpec{{Type: "salt", Of: []string{"k"}, Buckets: 300}, {Type: "string", Field: "k"}}},
		Entity: []string{"k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := sp.NewPlanner(PlanOptions{}).Report(true).SplitKeysHex
	if len(keys) != 299 || keys[0] != "0001" || keys[298] != "012b" {
		t.Fatalf("salt split keys: %d, first %v", len(keys), keys[:2])
	}
}

func TestPlanMemoryBound(t *testing.T) {
	p, err := Compile(wideSpec())
	if err != nil {
		t.Fatal(err)
	}
	pl := p.NewPlanner(PlanOptions{MaxTracked: 5})
	for i := 0; i < 300; i++ {
		c := testCell(fmt.Sprintf("u%05d", i), be64(1767225600000+int64(i)*86_400_000), 1)
		pl.Add(&c)
	}
	rep := pl.Report(true)
	if !rep.Truncated || rep.Entities != 5 || rep.NewRows != 5 || len(pl.newKeys) != 5 || warningCodes(rep) != "partial" {
		t.Fatalf("truncated %v, %d entities, %d rows, %d keys, warnings %s", rep.Truncated, rep.Entities, rep.NewRows, len(pl.newKeys), warningCodes(rep))
	}
}
