package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	bt "github.com/rekeyhq/rekey/sink/bigtable"
	rkstate "github.com/rekeyhq/rekey/state"
)

// TestCatchupThroughBigtable: the salt preset run whole from snapshot A
// into a table of the Bigtable emulator; HBase then changes the source
// (catchupChanges: a new row, newer versions past VERSIONS, a column
// older than A's cells, a value replaced at the same key and timestamp,
// column, family and row deletes; here also a version delete and a row
// deleted then written again), flushes it, and snapshot B is taken; the
// job with B as its source --since A writes into the same table. Its
// first attempt's delete pass fails (the emulator refuses deletes): the
// record stays at A and the removed cells stay. --resume applies them and
// records B. The table, read back with Google's client, must then equal
// the salt rule over the oracle's dump of B as of the TTL time the
// catch-up recorded, timestamps ×1000; the counts must equal the
// difference of the oracle's dumps of A and B, and the pass must have
// applied one delete per removed cell. A catch-up into a missing table,
// and one whose checkpoint is not local (the removals spill beside it),
// are refused before anything is written.
func TestCatchupThroughBigtable(t *testing.T) {
	st := testenv.Require(t)
	// An emulator of its own, whose MutateRows calls carrying a delete
	// fail while deny is set (not parallel: it sets the emulator's
	// variable for the test process).
	var deny atomic.Bool
	deleteFaults(t, &deny)
	ctx := context.Background()
	p := presets["salt"]
	src := uniq(t, "cubt_src")
	snapA, snapB := src+"_a", src+"_b"
	t.Cleanup(func() { testenv.Drop([]string{snapA, snapB}, []string{src}) })
	source := seedSource(t, st, src, snapA, p, p.gen(rand.New(rand.NewSource(11))), 3)
	table := uniq(t, "cubt")
	j := bigtableJob(t, p, st, snapA, table)
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2})
	if err != nil || !sum.Finished || sum.Problems() {
		t.Fatalf("whole run from A: %v %+v", err, sum)
	}
	reached := func() rkstate.Reached {
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
	dump := func(snap string, at int64) []cell.Cell {
		t.Helper()
		cs, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap, "--now", strconv.FormatInt(at, 10)))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	// The oracle's dump of A, taken as it was seeded: the salt table's
	// family has no TTL, so the time A is read at changes nothing.
	dumpA := source

	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	catchupChanges(t, c, src, source)
	var firstOf []cell.Cell
	for _, x := range source {
		if len(firstOf) == 0 || !bytes.Equal(firstOf[len(firstOf)-1].Row, x.Row) {
			firstOf = append(firstOf, x)
		}
	}
	// A version delete of one cell, at its timestamp.
	v := firstOf[150]
	if err := c.Delete(ctx, []byte(src), v.Row, []cell.Cell{{Row: v.Row, Family: v.Family, Qualifier: v.Qualifier, Timestamp: v.Timestamp, Type: cell.Delete}}); err != nil {
		t.Fatal(err)
	}
	// A row deleted, then written again above the delete's time.
	v = firstOf[380]
	if err := c.Delete(ctx, []byte(src), v.Row, nil); err != nil {
		t.Fatal(err)
	}
	again := cell.Cell{Row: v.Row, Family: v.Family, Qualifier: []byte("again"), Timestamp: time.Now().UnixMilli() + 60_000, Type: cell.Put, Value: []byte("written again")}
	if err := c.Put(ctx, []byte(src), v.Row, []cell.Cell{again}); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "flush", src)
	testenv.Oracle(t, "snapshot", src, snapB)

	j.Source.Name = snapB
	// The first attempt's removals are refused by the emulator: its puts
	// are in, its delete pass fails, and the record stays at A.
	deny.Store(true)
	sum, err = pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Since: snapA})
	deny.Store(false)
	if err == nil || !strings.Contains(err.Error(), "deleting in row") || sum == nil || sum.Finished || sum.Catchup == nil {
		t.Fatalf("a catch-up whose delete pass fails: %v %+v; want the pass's error, unfinished", err, sum)
	}
	cu := *sum.Catchup
	if rec := reached(); rec.Snapshot != snapA {
		t.Fatalf("the reached record after a failed delete pass names %s, want %s still", rec.Snapshot, snapA)
	}
	failedPass := readBigtable(t, table)
	// --resume skips every split and applies the spilled removals again.
	sum, err = pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Since: snapA, Resume: true})
	if err != nil || !sum.Finished || sum.Problems() || sum.Skipped != sum.Splits {
		t.Fatalf("the resumed catch-up: %v %+v", err, sum)
	}
	stats, _ := sum.SinkStats.(bt.Stats)
	t.Logf("catch-up: %+v; %d removals as %d range deletes on %d rows", cu, stats.DeleteMarkers, stats.DeleteMutations, stats.DeleteRows)
	recB := reached()
	if recB.Snapshot != snapB {
		t.Fatalf("the reached record after the catch-up names %s, want %s", recB.Snapshot, snapB)
	}
	dumpB := dump(snapB, recB.TTLTime)
	want := inBigtable(expect(p, dumpB))
	sameCells(t, "bigtable table after the catch-up vs the rule over HBase's B", readBigtable(t, table), want)

	// The counts, from the oracle's dumps: a cell of B that A lacks, or
	// holds with another value, is added (replaced, when A holds the key);
	// a key of A that B lacks is removed.
	key := func(x *cell.Cell) string {
		return fmt.Sprintf("%q/%s:%q@%d", x.Row, x.Family, x.Qualifier, x.Timestamp)
	}
	inA := map[string][]byte{}
	for i := range dumpA {
		inA[key(&dumpA[i])] = dumpA[i].Value
	}
	inB := map[string]bool{}
	var added, replaced, removed int64
	for i := range dumpB {
		k := key(&dumpB[i])
		inB[k] = true
		old, ok := inA[k]
		switch {
		case !ok:
			added++
		case !bytes.Equal(old, dumpB[i].Value):
			added++
			replaced++
		}
	}
	for k := range inA {
		if !inB[k] {
			removed++
		}
	}
	if removed < 6 || replaced != 1 || added < 7 {
		t.Fatalf("the oracle's dumps differ by %d added (%d replaced) and %d removed: the changes did not take", added, replaced, removed)
	}
	if int64(len(failedPass)) != int64(len(want))+removed {
		t.Errorf("the failed delete pass left %d cells; want B's %d and the %d removed ones", len(failedPass), len(want), removed)
	}
	if cu.CellsAdded != added || cu.CellsReplace != replaced || cu.CellsRemoved != removed || stats.DeleteMarkers != removed || stats.DeleteMutations != removed {
		t.Errorf("catch-up counts %+v, %d removals applied as %d range deletes; the oracle's dumps differ by %d added (%d replaced) and %d removed",
			cu, stats.DeleteMarkers, stats.DeleteMutations, added, replaced, removed)
	}

	// Refused before any write: a missing table (a catch-up does not
	// create it), and a checkpoint off the local disk.
	missing := bigtableJob(t, p, st, snapB, uniq(t, "cubt_none"))
	if _, err := pipeline.Prepare(ctx, missing, pipeline.Options{Workers: 2, Since: snapA, AssumeAt: true}); !errors.Is(err, pipeline.ErrInvalid) || !strings.Contains(err.Error(), "does not create it") {
		t.Errorf("a catch-up into a missing bigtable table: %v, want it refused, not created", err)
	}
	remote := bigtableJob(t, p, st, snapB, table)
	r, err := pipeline.Prepare(ctx, remote, pipeline.Options{Workers: 2, Since: snapA, AssumeAt: true, Checkpoint: "hdfs://" + st.NameNode + "/tmp/" + uniq(t, "cubt_ckpt") + "/checkpoint.json"})
	if err == nil {
		r.Close()
	}
	if !errors.Is(err, pipeline.ErrInvalid) || !strings.Contains(err.Error(), "must be a local path") {
		t.Errorf("a catch-up into bigtable with its checkpoint on HDFS: %v, want it refused", err)
	}
	sameCells(t, "bigtable table after the refused catch-ups", readBigtable(t, table), inBigtable(expect(p, dumpB)))
}
