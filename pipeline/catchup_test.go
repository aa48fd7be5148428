package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/puts"
)

// catchupChanges has HBase apply, between snapshots A and B, one change of
// each kind to rows of the seeded source: a new row, newer versions past
// VERSIONS, a column written with a timestamp older than any of A's, the
// same key and timestamp with another value, a deleted column, a deleted
// family and a deleted row.
func catchupChanges(t *testing.T, client *hbase.Client, table string, source []cell.Cell) {
	t.Helper()
	ctx := context.Background()
	var rows [][]byte
	var firstOf []cell.Cell
	for _, c := range source {
		if len(rows) == 0 || !bytes.Equal(rows[len(rows)-1], c.Row) {
			rows = append(rows, c.Row)
			firstOf = append(firstOf, c)
		}
	}
	if len(rows) < 400 {
		t.Fatalf("the source has %d rows; the changes need 400", len(rows))
	}
	pick := func(i int) cell.Cell { return firstOf[i] }
	putAll := func(cs ...cell.Cell) {
		t.Helper()
		if err := client.Put(ctx, []byte(table), cs[0].Row, cs); err != nil {
			t.Fatalf("put %q: %v", cs[0].Row, err)
		}
	}
	del := func(row []byte, markers ...cell.Cell) {
		t.Helper()
		if err := client.Delete(ctx, []byte(table), row, markers); err != nil {
			t.Fatalf("delete %q: %v", row, err)
		}
	}
	// A new row of device d03.
	ts := int64(tsBase + 5*24*3600*1000)
	row := append([]byte("d03|"), be64(uint64(math.MaxInt64-ts))...)
	putAll(cell.Cell{Row: row, Family: []byte("t"), Qualifier: []byte("v"), Timestamp: ts, Type: cell.Put, Value: []byte("new row")})
	// Newer versions, past VERSIONS (3).
	c := pick(10)
	var vs []cell.Cell
	for i := int64(1); i <= 3; i++ {
		vs = append(vs, cell.Cell{Row: c.Row, Family: c.Family, Qualifier: c.Qualifier, Timestamp: c.Timestamp + i, Type: cell.Put, Value: []byte("newer " + strconv.FormatInt(i, 10))})
	}
	putAll(vs...)
	// A column with a timestamp older than A's cells.
	c = pick(100)
	putAll(cell.Cell{Row: c.Row, Family: c.Family, Qualifier: []byte("w"), Timestamp: tsBase - 1000, Type: cell.Put, Value: []byte("past")})
	// The same key and timestamp, another value.
	c = pick(200)
	putAll(cell.Cell{Row: c.Row, Family: c.Family, Qualifier: c.Qualifier, Timestamp: c.Timestamp, Type: cell.Put, Value: []byte("replaced")})
	// A deleted column, a deleted family, a deleted row.
	c = pick(250)
	del(c.Row, cell.Cell{Row: c.Row, Family: c.Family, Qualifier: c.Qualifier, Timestamp: cell.LatestTimestamp, Type: cell.DeleteColumn})
	c = pick(300)
	del(c.Row, cell.Cell{Row: c.Row, Family: c.Family, Timestamp: cell.LatestTimestamp, Type: cell.DeleteFamily})
	del(pick(350).Row)
}

// TestCatchupThroughPuts runs the salt preset whole from snapshot A into a
// target, has HBase change the source (catchupChanges), flushes it (and,
// in the second case, major compacts it) and takes snapshot B, then runs
// the job with B as its source --since A: the target, dumped by the
// oracle with every version, must equal the preset's rule applied to the
// oracle's dump of B. A second catch-up from A is then refused (the
// target is at B), and so is one from a job folder with no record
// (unless --assume-at) and one into a target that does not exist.
func TestCatchupThroughPuts(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	for _, tc := range []struct {
		name    string
		compact bool
	}{{"flushed", false}, {"major compacted", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := presets["salt"]
			src, dst := uniq(t, "cu_src"), uniq(t, "cu_dst")
			snapA, snapB := src+"_a", src+"_b"
			t.Cleanup(func() { testenv.Drop([]string{snapA, snapB}, []string{src, dst}) })
			source := seedSource(t, st, src, snapA, p, p.gen(rand.New(rand.NewSource(11))), 3)

			j := loadJob(t, p, st, snapA, dst)
			client := targetClient(t, ctx, j, p.newSplits)
			sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Sink: puts.New(client, dst, puts.Options{BatchCells: 500, Workers: 2})})
			if err != nil || !sum.Finished {
				t.Fatalf("full run from A: %v %+v", err, sum)
			}
			if sum.Catchup != nil {
				t.Fatal("a whole run reports a catch-up")
			}
			fullRead := sum.BytesRead

			srcClient, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum})
			if err != nil {
				t.Fatal(err)
			}
			defer srcClient.Close()
			catchupChanges(t, srcClient, src, source)
			testenv.Oracle(t, "flush", src)
			if tc.compact {
				testenv.Oracle(t, "major-compact", src)
			}
			testenv.Oracle(t, "snapshot", src, snapB)

			j.Source.Name = snapB
			// rekey plan --since: the estimate reads no cell of a compared row and names the
			// store files the catch-up below reads and skips.
			est, err := pipeline.PlanCatchup(ctx, j, pipeline.Options{Since: snapA})
			if err != nil || est.Refused != "" {
				t.Fatalf("plan of the catch-up from A: %v %+v", err, est)
			}
			sum, err = pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Since: snapA, Sink: puts.New(client, dst, puts.Options{BatchCells: 500, Workers: 2})})
			if err != nil || !sum.Finished || sum.Problems() {
				t.Fatalf("catch-up from A to B: %v %+v", err, sum)
			}
			cu := sum.Catchup
			if cu == nil {
				t.Fatal("the catch-up's summary has no catch-up section")
			}
			t.Logf("catch-up: %+v; bytes read from the file system: %d by the catch-up (both snapshots), %d by the whole run from A", *cu, sum.BytesRead, fullRead)

			now := strconv.FormatInt(time.Now().UnixMilli(), 10)
			dumpB, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snapB, "--now", now))
			if err != nil {
				t.Fatal(err)
			}
			sameCells(t, "target after the catch-up", dumpTable(t, dst, false), expect(p, dumpB))

			// The counts: 1 new row + 3 newer versions + 1 past column +
			// 1 replaced value added; the version pushed out, and the cells
			// of the deleted column, family and row removed.
			if cu.CellsAdded != 6 || cu.CellsReplace != 1 || cu.CellsRemoved != 4 || cu.RowsTouched == 0 || cu.FilesRead == 0 {
				t.Errorf("catch-up counts: %+v", *cu)
			}
			if !tc.compact && (cu.FilesSkipped == 0 || cu.BytesSkipped == 0) {
				t.Errorf("a flush after a few changes skips no store file: %+v", *cu)
			}
			if est.FilesRead != cu.FilesRead || est.BytesRead != cu.BytesRead || est.FilesSkipped != cu.FilesSkipped || est.BytesSkipped != cu.BytesSkipped || est.FullBytes == 0 {
				t.Errorf("plan --since estimated %+v; the catch-up read %+v", *est, *cu)
			}
			// The plan sees the record move: refused now, as the run is.
			if est, err := pipeline.PlanCatchup(ctx, j, pipeline.Options{Since: snapA}); err != nil || !strings.Contains(est.Refused, "reached snapshot "+snapB) {
				t.Errorf("plan of a second catch-up from A: %v, %+v; want it refused, the target at B", err, est)
			}

			// The target is at B now: a catch-up from A again is refused.
			_, err = pipeline.Prepare(ctx, j, pipeline.Options{Workers: 2, Since: snapA, Sink: puts.New(client, dst, puts.Options{})})
			if !errors.Is(err, pipeline.ErrNotAt) {
				t.Fatalf("a second catch-up from A: %v, want ErrNotAt", err)
			}
			// --since last reads the record the catch-up wrote: the
			// target is at B, the job's own snapshot, already.
			_, err = pipeline.Prepare(ctx, j, pipeline.Options{Workers: 2, Since: pipeline.SinceLast, Sink: puts.New(client, dst, puts.Options{})})
			if !errors.Is(err, pipeline.ErrInvalid) || !strings.Contains(err.Error(), "at the job's snapshot "+snapB+" already") {
				t.Fatalf("--since last after the catch-up to B: %v, want the target at B already", err)
			}
			// Back from B to A (B older than A): refused, however the
			// record stands, with the plan refusing alike.
			back := *j
			back.Source.Name = snapA
			if _, err := pipeline.Prepare(ctx, &back, pipeline.Options{Workers: 2, Since: snapB, Sink: puts.New(client, dst, puts.Options{})}); !errors.Is(err, pipeline.ErrInvalid) || !strings.Contains(err.Error(), "only goes forward") {
				t.Fatalf("a catch-up back from B to A: %v, want it refused", err)
			}
			if _, err := pipeline.PlanCatchup(ctx, &back, pipeline.Options{Since: snapB}); !errors.Is(err, pipeline.ErrInvalid) {
				t.Fatalf("plan of a catch-up back from B to A: %v, want it refused", err)
			}
			// A job folder with no record: refused, unless --assume-at.
			j2 := loadJob(t, p, st, snapB, dst)
			_, err = pipeline.Prepare(ctx, j2, pipeline.Options{Workers: 2, Since: snapA, Sink: puts.New(client, dst, puts.Options{})})
			if !errors.Is(err, pipeline.ErrNotAt) {
				t.Fatalf("a catch-up with no reached record: %v, want ErrNotAt", err)
			}
			r, err := pipeline.Prepare(ctx, j2, pipeline.Options{Workers: 2, Since: snapA, AssumeAt: true, Sink: puts.New(client, dst, puts.Options{})})
			if err != nil {
				t.Fatalf("--assume-at: %v", err)
			}
			r.Close()
			// A target that does not exist is not at A: a catch-up does
			// not create it, whatever target.create says.
			j3 := loadJob(t, p, st, snapB, uniq(t, "cu_none"))
			if _, err := pipeline.Prepare(ctx, j3, pipeline.Options{Workers: 2, Since: snapA, AssumeAt: true}); !errors.Is(err, pipeline.ErrNotAt) {
				t.Fatalf("a catch-up into a missing target: %v, want ErrNotAt", err)
			}
		})
	}
}
