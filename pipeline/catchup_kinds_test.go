package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/puts"
	rkstate "github.com/rekeyhq/rekey/state"
)

// catchupKind is one kind of change HBase applies between snapshots A
// and B in TestCatchupKinds, with the cells the catch-up must count added
// and removed for it.
type catchupKind struct {
	name   string
	change func(t *testing.T, c *hbase.Client, src string, source []cell.Cell)
	// afterB, when set, runs once snapshot B is taken, before the
	// catch-up reads it.
	afterB         func(t *testing.T, src string)
	added, removed int64
}

// TestCatchupKinds: each kind of change the catch-up issue lists, each on
// a table of its own (TestCatchupThroughPuts applies several together): a whole run of the salt preset from A into a target, HBase's
// change, a flush and snapshot B, then the job with B as its source
// --since A. The target (the oracle's dump) must equal the salt rule over
// the oracle's dump of B as of the TTL time the catch-up recorded. (TTL
// expiry between A and B is proven on the engine, TestTTLExpiryBetweenReadTimes
// in snapshot/diff: a target family with the TTL expires the cells itself,
// so a dump of it races the clock.)
func TestCatchupKinds(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	p := presets["salt"]
	firstRowOf := func(source []cell.Cell, dev string) cell.Cell {
		for _, c := range source {
			if string(c.Row[:len(dev)]) == dev {
				return c
			}
		}
		t.Fatalf("no row of %s", dev)
		return cell.Cell{}
	}
	kinds := []catchupKind{{
		// Cells bulk loaded between A and B, by HBase's own HFile writer
		// and bulk load: a new row, and a column of an existing row with a
		// timestamp older than any of A's.
		name: "bulk load",
		change: func(t *testing.T, _ *hbase.Client, src string, source []cell.Cell) {
			c := firstRowOf(source, "d04|")
			ts := int64(tsBase + 6*24*3600*1000)
			row := append([]byte("d02|"), be64(uint64(math.MaxInt64-ts))...)
			cells := []cell.Cell{
				{Row: row, Family: []byte("t"), Qualifier: []byte("v"), Timestamp: ts, Type: cell.Put, Value: []byte("bulk new row")},
				{Row: c.Row, Family: c.Family, Qualifier: []byte("w"), Timestamp: tsBase - 5000, Type: cell.Put, Value: []byte("bulk past")},
			}
			testenv.SortCells(cells)
			f := filepath.Join(t.TempDir(), "bulk.cells")
			if err := os.WriteFile(f, testenv.DumpCells(cells), 0o644); err != nil {
				t.Fatal(err)
			}
			testenv.Oracle(t, "bulk-cells", src, f)
		},
		added: 2, removed: 0,
	}, {
		// A family-version delete: every column's cell at one timestamp.
		name: "family version delete",
		change: func(t *testing.T, c *hbase.Client, src string, source []cell.Cell) {
			v := firstRowOf(source, "d06|")
			if err := c.Delete(context.Background(), []byte(src), v.Row, []cell.Cell{{Row: v.Row, Family: v.Family, Timestamp: v.Timestamp, Type: cell.DeleteFamilyVersion}}); err != nil {
				t.Fatal(err)
			}
		},
		added: 0, removed: 1,
	}, {
		// A row deleted, then written again above the delete's time.
		name: "row deleted then written again",
		change: func(t *testing.T, c *hbase.Client, src string, source []cell.Cell) {
			ctx := context.Background()
			v := firstRowOf(source, "d08|")
			if err := c.Delete(ctx, []byte(src), v.Row, nil); err != nil {
				t.Fatal(err)
			}
			again := cell.Cell{Row: v.Row, Family: v.Family, Qualifier: []byte("again"), Timestamp: time.Now().UnixMilli() + 60_000, Type: cell.Put, Value: []byte("written again")}
			if err := c.Put(ctx, []byte(src), v.Row, []cell.Cell{again}); err != nil {
				t.Fatal(err)
			}
		},
		added: 1, removed: 1,
	}, {
		// A region split between A and B at a row of d07, then a put
		// into that row, now in a daughter.
		name: "split",
		change: func(t *testing.T, c *hbase.Client, src string, source []cell.Cell) {
			v := firstRowOf(source, "d07|")
			testenv.Oracle(t, "split", src, hexOf(string(v.Row)))
			put := cell.Cell{Row: v.Row, Family: v.Family, Qualifier: []byte("after split"), Timestamp: v.Timestamp, Type: cell.Put, Value: []byte("x")}
			if err := c.Put(context.Background(), []byte(src), v.Row, []cell.Cell{put}); err != nil {
				t.Fatal(err)
			}
		},
		added: 1, removed: 0,
	}, {
		// A region merged between A and B (the region holding d06 with
		// the next), then a put into a row of the merged region: B's store
		// files of it are references to its parents' (or their
		// compaction, when the region server got to it first).
		name: "merge",
		change: func(t *testing.T, c *hbase.Client, src string, source []cell.Cell) {
			v := firstRowOf(source, "d06|")
			testenv.Oracle(t, "merge", src, hexOf(string(v.Row)))
			w := firstRowOf(source, "d11|")
			put := cell.Cell{Row: w.Row, Family: w.Family, Qualifier: []byte("after merge"), Timestamp: w.Timestamp, Type: cell.Put, Value: []byte("x")}
			if err := c.Put(context.Background(), []byte(src), w.Row, []cell.Cell{put}); err != nil {
				t.Fatal(err)
			}
		},
		added: 1, removed: 0,
	}, {
		// Each delete type on its own, on a row of one cell: a version
		// delete at the cell's timestamp, a column delete, a family delete.
		name: "version delete",
		change: func(t *testing.T, c *hbase.Client, src string, source []cell.Cell) {
			v := firstRowOf(source, "d03|")
			del := cell.Cell{Row: v.Row, Family: v.Family, Qualifier: v.Qualifier, Timestamp: v.Timestamp, Type: cell.Delete}
			if err := c.Delete(context.Background(), []byte(src), v.Row, []cell.Cell{del}); err != nil {
				t.Fatal(err)
			}
		},
		added: 0, removed: 1,
	}, {
		name: "column delete",
		change: func(t *testing.T, c *hbase.Client, src string, source []cell.Cell) {
			v := firstRowOf(source, "d09|")
			del := cell.Cell{Row: v.Row, Family: v.Family, Qualifier: v.Qualifier, Timestamp: cell.LatestTimestamp, Type: cell.DeleteColumn}
			if err := c.Delete(context.Background(), []byte(src), v.Row, []cell.Cell{del}); err != nil {
				t.Fatal(err)
			}
		},
		added: 0, removed: 1,
	}, {
		name: "family delete",
		change: func(t *testing.T, c *hbase.Client, src string, source []cell.Cell) {
			v := firstRowOf(source, "d12|")
			del := cell.Cell{Row: v.Row, Family: v.Family, Timestamp: cell.LatestTimestamp, Type: cell.DeleteFamily}
			if err := c.Delete(context.Background(), []byte(src), v.Row, []cell.Cell{del}); err != nil {
				t.Fatal(err)
			}
		},
		added: 0, removed: 1,
	}, {
		// The source table dropped once B is taken: every store file of
		// both snapshots is then read from the archive.
		name: "archived table",
		change: func(t *testing.T, c *hbase.Client, src string, source []cell.Cell) {
			v := firstRowOf(source, "d13|")
			put := cell.Cell{Row: v.Row, Family: v.Family, Qualifier: []byte("before the drop"), Timestamp: v.Timestamp, Type: cell.Put, Value: []byte("x")}
			if err := c.Put(context.Background(), []byte(src), v.Row, []cell.Cell{put}); err != nil {
				t.Fatal(err)
			}
		},
		afterB: func(t *testing.T, src string) { testenv.Oracle(t, "drop-table", src) },
		added:  1, removed: 0,
	}}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src, dst := uniq(t, "cuk_src"), uniq(t, "cuk_dst")
			snapA, snapB := src+"_a", src+"_b"
			t.Cleanup(func() { testenv.Drop([]string{snapA, snapB}, []string{src, dst}) })
			source := seedSource(t, st, src, snapA, p, p.gen(rand.New(rand.NewSource(11))), 3)
			j := loadJob(t, p, st, snapA, dst)
			client := targetClient(t, ctx, j, p.newSplits)
			if sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Sink: puts.New(client, dst, puts.Options{BatchCells: 500, Workers: 2})}); err != nil || !sum.Finished {
				t.Fatalf("whole run from A: %v %+v", err, sum)
			}
			srcClient, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum})
			if err != nil {
				t.Fatal(err)
			}
			defer srcClient.Close()
			k.change(t, srcClient, src, source)
			testenv.Oracle(t, "flush", src)
			testenv.Oracle(t, "snapshot", src, snapB)
			if k.afterB != nil {
				k.afterB(t, src)
			}

			j.Source.Name = snapB
			sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Since: snapA, Sink: puts.New(client, dst, puts.Options{BatchCells: 500, Workers: 2})})
			if err != nil || !sum.Finished || sum.Problems() || sum.Catchup == nil {
				t.Fatalf("catch-up from A to B: %v %+v", err, sum)
			}
			t.Logf("catch-up: %+v", *sum.Catchup)
			b, err := os.ReadFile(rkstate.ReachedBeside(j.Run.Checkpoint))
			if err != nil {
				t.Fatal(err)
			}
			var rec rkstate.Reached
			if err := json.Unmarshal(b, &rec); err != nil || rec.Snapshot != snapB || rec.TTLTime == 0 {
				t.Fatalf("reached record after the catch-up: %v\n%s", err, b)
			}
			dumpB, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snapB, "--now", strconv.FormatInt(rec.TTLTime, 10)))
			if err != nil {
				t.Fatal(err)
			}
			sameCells(t, "target after the catch-up vs the rule over HBase's B", dumpTable(t, dst, false), expect(p, dumpB))
			if cu := sum.Catchup; cu.CellsAdded != k.added || cu.CellsRemoved != k.removed {
				t.Errorf("%s: %+v, want %d cells added and %d removed", k.name, *cu, k.added, k.removed)
			}
		})
	}
}

// TestCatchupKillNineThenResume: a catch-up through the CLI, killed with
// SIGKILL once some of its splits are done, then run again with --resume:
// the target equals the wide_to_bucketed rule over the oracle's dump of B
// (puts and version deletes are idempotent, so the splits the resume
// redoes write nothing twice), and the reached record names B.
func TestCatchupKillNineThenResume(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	bin := rekeyBinary(t)
	p := presets["wide_to_bucketed"]
	src, dst := uniq(t, "cuk9_src"), uniq(t, "cuk9_dst")
	snapA, snapB := src+"_a", src+"_b"
	t.Cleanup(func() { testenv.Drop([]string{snapA, snapB}, []string{src, dst}) })
	source := seedSource(t, st, src, snapA, p, bigWide(40, 1000), 3)
	dir := t.TempDir()
	jobPath := writeJobFile(t, st, snapA, dst, dir)
	if out, err := exec.Command(bin, "run", jobPath, "--sink", "puts", "--workers", "2", "--progress", "none").CombinedOutput(); err != nil {
		t.Fatalf("whole run from A: exit %d\n%s", exitCode(err), out)
	}

	// In every sensor's row: a new reading, and one reading deleted.
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[string]bool{}
	for _, old := range source {
		if seen[string(old.Row)] {
			continue
		}
		seen[string(old.Row)] = true
		ts := old.Timestamp + 7
		put := cell.Cell{Row: old.Row, Family: old.Family, Qualifier: be64(uint64(ts)), Timestamp: ts, Type: cell.Put, Value: []byte("new reading")}
		if err := c.Put(ctx, []byte(src), old.Row, []cell.Cell{put}); err != nil {
			t.Fatal(err)
		}
		del := cell.Cell{Row: old.Row, Family: old.Family, Qualifier: old.Qualifier, Timestamp: old.Timestamp, Type: cell.Delete}
		if err := c.Delete(ctx, []byte(src), old.Row, []cell.Cell{del}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Oracle(t, "flush", src)
	testenv.Oracle(t, "snapshot", src, snapB)
	b, err := os.ReadFile(jobPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobPath, []byte(strings.Replace(string(b), "name: "+snapA, "name: "+snapB, 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	// The catch-up writes few cells and reads whole rows: slowed by its
	// reads, one split at a time, so that the kill finds some splits
	// done and some not.
	args := []string{"run", jobPath, "--sink", "puts", "--since", snapA, "--resume", "--force-takeover", "--workers", "1", "--max-read-mb-per-sec", "0.2"}
	k, out := killThenResume(t, bin, args)
	var sum pipeline.Summary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !sum.Finished || sum.Catchup == nil || sum.Skipped < 1 {
		t.Errorf("the resumed catch-up: finished %v, %d of %d splits skipped (killed after %d), catch-up %+v", sum.Finished, sum.Skipped, sum.Splits, k, sum.Catchup)
	}
	rec, err := os.ReadFile(rkstate.ReachedBeside(filepath.Join(dir, "job.rekey", "checkpoint.json")))
	if err != nil || !strings.Contains(string(rec), `"`+snapB+`"`) {
		t.Errorf("the reached record after the resumed catch-up: %v\n%s", err, rec)
	}
	dumpB, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snapB))
	if err != nil {
		t.Fatal(err)
	}
	sameCells(t, fmt.Sprintf("target after a catch-up killed at %d splits done and resumed", k), dumpTable(t, dst, false), expect(p, dumpB))
}
