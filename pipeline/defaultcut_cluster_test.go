package pipeline_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
)

// TestDefaultCutThroughPuts runs the wide_to_bucketed preset with no split
// size over a source whose first region holds about 11 MB of store files
// (225,000 unencoded, uncompressed cells) and the other two a few KB: the
// default cut is the 8 MiB floor (1/16 of the snapshot and the mean region
// are both below it), the heavy region is cut into pieces, and the target
// holds exactly the source's cells through the preset's rule, as HBase's
// dumps of both tables say.
func TestDefaultCutThroughPuts(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	p := presets["wide_to_bucketed"]
	src := uniq(t, "cut_src")
	snap := src + "_snap"
	dst := uniq(t, "cut_dst")
	defer dropTable(t, src)
	defer dropTable(t, dst)
	defer testenv.RunOracle("delete-snapshot", snap)
	r := rand.New(rand.NewSource(11))
	var cells []cell.Cell
	for s := 1; s <= 30; s++ {
		n := 50
		if s < 10 { // the region [, s010)
			n = 25000
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
	if sum.SplitBytes != 8<<20 || sum.Splits <= 3 {
		t.Errorf("split size %d, %d splits; want the 8 MiB floor and the heavy region of 3 cut", sum.SplitBytes, sum.Splits)
	}
	if !sum.Finished || sum.Read != int64(len(source)) || sum.Written != int64(len(want)) || sum.Problems() {
		t.Errorf("summary: finished %v, read %d (snapshot has %d), written %d (want %d)", sum.Finished, sum.Read, len(source), sum.Written, len(want))
	}
	sameCells(t, "target", dumpTable(t, dst, false), want)
	t.Logf("%d splits at %d bytes, split times %+v", sum.Splits, sum.SplitBytes, sum.SplitTimes)
}
