package pipeline_test

import (
	"context"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/puts"
	rkstate "github.com/rekeyhq/rekey/state"
)

// TestCatchupTTLExpiry: cells that expire between A and B, by the
// family's TTL and by per-cell TTLs (TTL tags), leave the target through a
// catch-up. HBase seeds a table whose family has a one-hour TTL: most
// cells written now, some that expire between two fixed TTL times a
// minute apart, and cells with a per-cell TTL expiring between them;
// snapshot A, a whole run into a target with no TTL of its own (so its
// cells and markers stay readable) read as of the first time
// (ttl_at), snapshot B of the unchanged table (the same store files: only
// their TIMERANGE and tags say rows may differ) and the catch-up --since
// A read as of the second. The target must equal the salt rule over the
// oracle's dump of B as of the second time, and, raw, hold one version
// delete per cell HBase showed as of the first and not the second.
func TestCatchupTTLExpiry(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	p := presets["salt"]
	src, dst := uniq(t, "cuttl_src"), uniq(t, "cuttl_dst")
	snapA, snapB := src+"_a", src+"_b"
	t.Cleanup(func() { testenv.Drop([]string{snapA, snapB}, []string{src, dst}) })

	const ttl = 3600 // s, the source family's
	// The job's TTL time is fixed (ttl_at): A is read as of start + 60 s,
	// B as of start + 120 s, whatever the clock says meanwhile, so the
	// test waits for nothing. The expiring cells expire between the two.
	start := time.Now()
	now := start.UnixMilli()
	ttlA, ttlB := start.Add(time.Minute), start.Add(2*time.Minute)
	const tagTTL = 90 * time.Second
	cells := p.gen(rand.New(rand.NewSource(17)))
	var tagged []cell.Cell
	for i := range cells {
		switch {
		case i%9 == 0: // expire by the family's TTL 10 to 19 s after ttlA
			cells[i].Timestamp = ttlA.UnixMilli() - ttl*1000 + 10_000 + int64(i%10)*1000
		case i%9 == 1: // the same cell with a TTL tag expiring at start + 90 s, in its own column
			c := cells[i]
			c.Qualifier, c.Timestamp = []byte("tagged"), now
			tagged = append(tagged, c)
			cells[i].Timestamp = now - int64(i%1000)
		default:
			cells[i].Timestamp = now - int64(i%1000)
		}
	}
	testenv.SortCells(cells)
	testenv.SortCells(tagged)
	dir := t.TempDir()
	write := func(name string, cs []cell.Cell) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, testenv.DumpCells(cs), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	spec, _ := json.Marshal(map[string]any{
		"table": src, "split_keys": p.split,
		"families": []map[string]any{{"name": "t", "versions": 3, "ttl": ttl, "encoding": "FAST_DIFF", "compression": "SNAPPY"}},
		"steps": []map[string]any{
			{"op": "cells", "file": write("family.cells", cells)},
			{"op": "cells", "file": write("tagged.cells", tagged), "ttl_ms": tagTTL.Milliseconds()},
			{"op": "flush"}, {"op": "snapshot", "name": snapA}},
	})
	// The target: the salt layout's regions, no TTL.
	target, _ := json.Marshal(map[string]any{
		"table": dst, "split_keys_hex": p.newSplits,
		"families": []map[string]any{{"name": "t", "versions": 3}}, "steps": []any{}})
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "target.json"), target, 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", filepath.Join(dir, "spec.json"), filepath.Join(dir, "target.json"))

	j := loadJob(t, p, st, snapA, dst)
	j.Target.Create.Enabled = false
	j.Source.Scan.TTLAt = ttlA
	client := targetClient(t, ctx, j, nil)
	if sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Sink: puts.New(client, dst, puts.Options{BatchCells: 500, Workers: 2})}); err != nil || !sum.Finished {
		t.Fatalf("whole run from A: %v %+v", err, sum)
	}
	readRecord := func() rkstate.Reached {
		t.Helper()
		b, err := os.ReadFile(rkstate.ReachedBeside(j.Run.Checkpoint))
		if err != nil {
			t.Fatal(err)
		}
		var rec rkstate.Reached
		if err := json.Unmarshal(b, &rec); err != nil || rec.TTLTime == 0 {
			t.Fatalf("reached record: %v\n%s", err, b)
		}
		return rec
	}
	atA := readRecord().TTLTime
	if atA != ttlA.UnixMilli() {
		t.Fatalf("the reached record's TTL time %d; the job read A as of %d", atA, ttlA.UnixMilli())
	}

	testenv.Oracle(t, "snapshot", src, snapB)
	j.Source.Name, j.Source.Scan.TTLAt = snapB, ttlB
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Since: snapA, Sink: puts.New(client, dst, puts.Options{BatchCells: 500, Workers: 2})})
	if err != nil || !sum.Finished || sum.Problems() || sum.Catchup == nil {
		t.Fatalf("catch-up from A to B: %v %+v", err, sum)
	}
	t.Logf("catch-up: %+v", *sum.Catchup)
	atB := readRecord().TTLTime

	dump := func(snap string, ms int64) []cell.Cell {
		got, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap, "--now", strconv.FormatInt(ms, 10)))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	dumpA, dumpB := dump(snapA, atA), dump(snapB, atB)
	inB := map[string]bool{}
	for _, c := range dumpB {
		inB[cellKey(c)] = true
	}
	var gone []cell.Cell
	family, tag := 0, 0
	for _, c := range dumpA {
		if !inB[cellKey(c)] {
			gone = append(gone, c)
			if string(c.Qualifier) == "tagged" {
				tag++
			} else {
				family++
			}
		}
	}
	// The test proves something only if cells of both kinds were alive at
	// A's TTL time and gone at B's.
	if family == 0 || tag == 0 || len(dumpB) == 0 {
		t.Fatalf("HBase shows %d cells at A's TTL time %d and %d at B's %d: %d expired by the family's TTL and %d by their own between them; the fixed TTL times must lie between",
			len(dumpA), atA, len(dumpB), atB, family, tag)
	}
	sameCells(t, "target after the catch-up vs the salt rule over HBase's B", dumpTable(t, dst, false), expect(p, dumpB))
	var markers []cell.Cell
	for _, c := range dumpTable(t, dst, true) {
		if c.Type != cell.Put {
			c.Value = nil
			markers = append(markers, c)
		}
	}
	var want []cell.Cell
	for _, c := range expect(p, gone) {
		c.Type, c.Value, c.Tags = cell.Delete, nil, nil
		want = append(want, c)
	}
	sameCells(t, "the target's delete markers vs one version delete per cell that expired between A and B", markers, want)
	if cu := sum.Catchup; cu.CellsRemoved != int64(len(gone)) || cu.CellsAdded != 0 {
		t.Errorf("catch-up counts %+v; want %d removed (%d by the family's TTL, %d by their own) and none added", *cu, len(gone), family, tag)
	}
}

// cellKey is a cell's row, family, qualifier, timestamp and type.
func cellKey(c cell.Cell) string {
	return string(c.Row) + "\x00" + string(c.Family) + "\x00" + string(c.Qualifier) + "\x00" + strconv.FormatInt(c.Timestamp, 10) + "\x00" + strconv.Itoa(int(c.Type))
}
