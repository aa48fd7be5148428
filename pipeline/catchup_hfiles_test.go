package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	rkstate "github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/verify"
)

// TestCatchupThroughHFiles: the salt preset run whole from snapshot A into
// two targets through staged HFiles, one loaded by the run itself and one
// staged with no_load and loaded by the load task (`rekey load`), which
// then records the target at A. HBase changes the source between A and B
// (catchupChanges' kinds, and a version delete, a row deleted then
// written again, cells bulk loaded by HBase's own tools), then the job
// with B as its source catches up --since A into each target through
// staged HFiles: once loaded by the run, once staged (the reached record
// still at A, `verify --staging` of the folder refused, its load refused
// while the record names another snapshot) and loaded by the load task.
// Each target, dumped by the oracle, must then read as the salt
// rule over the oracle's dump of B, and hold raw exactly one version
// delete marker per cell of A that B no longer shows (mapped by the rule,
// at its timestamp: none for a value replaced at the same key), beside
// the puts of A and of B's new cells. The counts are computed here from
// the oracle's dumps of A and B.
func TestCatchupThroughHFiles(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	p := presets["salt"]
	src := uniq(t, "cuh_src")
	dstRun, dstLoad := src+"_run", src+"_load"
	snapA, snapB := src+"_a", src+"_b"
	t.Cleanup(func() { testenv.Drop([]string{snapA, snapB}, []string{src, dstRun, dstLoad}) })
	source := seedSource(t, st, src, snapA, p, p.gen(rand.New(rand.NewSource(11))), 3)

	hfilesJob := func(dst string, noLoad bool) *job.Job {
		j := loadJob(t, p, st, snapA, dst)
		j.Target.Create.SplitKeys = splitKeys(t, p.newSplits)
		j.Sink.Kind, j.Sink.NoLoad = job.SinkHFiles, noLoad
		j.Sink.Staging = "hdfs://" + st.NameNode + "/tmp/" + dst + "/staging"
		return j
	}
	reachedOf := func(j *job.Job) *rkstate.Reached {
		t.Helper()
		b, err := os.ReadFile(rkstate.ReachedBeside(j.Run.Checkpoint))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		var rec rkstate.Reached
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("reached record: %v\n%s", err, b)
		}
		return &rec
	}

	// Whole runs from A: one loads what it staged, one leaves it to the
	// load task, after which (and not before) the record says A.
	jRun, jLoad := hfilesJob(dstRun, false), hfilesJob(dstLoad, true)
	for _, j := range []*job.Job{jRun, jLoad} {
		sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2})
		if err != nil || !sum.Finished {
			t.Fatalf("whole run from A into %s: %v %+v", j.Target.Table, err, sum)
		}
	}
	if rec := reachedOf(jRun); rec == nil || rec.Snapshot != snapA {
		t.Fatalf("the whole run that loaded its HFiles: reached record %+v, want %s", rec, snapA)
	}
	if rec := reachedOf(jLoad); rec != nil {
		t.Fatalf("a whole run that staged without loading recorded the target at %s", rec.Snapshot)
	}
	if _, err := pipeline.RunTask(ctx, jLoad, pipeline.TaskOptions{Phase: pipeline.PhaseLoad}); err != nil {
		t.Fatalf("load of the whole run's staged HFiles: %v", err)
	}
	if rec := reachedOf(jLoad); rec == nil || rec.Snapshot != snapA {
		t.Fatalf("after the load of the whole run: reached record %+v, want %s", rec, snapA)
	}

	// B: every kind of change.
	srcClient, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum})
	if err != nil {
		t.Fatal(err)
	}
	defer srcClient.Close()
	catchupChanges(t, srcClient, src, source)
	var rows []cell.Cell // the first cell of each row
	for _, c := range source {
		if len(rows) == 0 || !bytes.Equal(rows[len(rows)-1].Row, c.Row) {
			rows = append(rows, c)
		}
	}
	last := func(i int) cell.Cell { return rows[len(rows)-1-i] } // rows catchupChanges leaves alone
	// A version delete: exactly one cell, at its timestamp.
	v := last(5)
	if err := srcClient.Delete(ctx, []byte(src), v.Row, []cell.Cell{{Row: v.Row, Family: v.Family, Qualifier: v.Qualifier, Timestamp: v.Timestamp, Type: cell.Delete}}); err != nil {
		t.Fatal(err)
	}
	// A row deleted, then written again above the delete's time.
	v = last(10)
	if err := srcClient.Delete(ctx, []byte(src), v.Row, nil); err != nil {
		t.Fatal(err)
	}
	again := cell.Cell{Row: v.Row, Family: v.Family, Qualifier: []byte("again"), Timestamp: time.Now().UnixMilli() + 60_000, Type: cell.Put, Value: []byte("written again")}
	if err := srcClient.Put(ctx, []byte(src), v.Row, []cell.Cell{again}); err != nil {
		t.Fatal(err)
	}
	// Cells bulk loaded by HBase: a new row, and a column of an existing
	// row older than any of A's cells.
	v = last(15)
	ts := int64(tsBase + 6*24*3600*1000)
	bulk := []cell.Cell{
		{Row: append([]byte("d02|"), be64(uint64(math.MaxInt64-ts))...), Family: []byte("t"), Qualifier: []byte("v"), Timestamp: ts, Type: cell.Put, Value: []byte("bulk new row")},
		{Row: v.Row, Family: v.Family, Qualifier: []byte("w"), Timestamp: tsBase - 5000, Type: cell.Put, Value: []byte("bulk past")},
	}
	testenv.SortCells(bulk)
	f := filepath.Join(t.TempDir(), "bulk.cells")
	if err := os.WriteFile(f, testenv.DumpCells(bulk), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "bulk-cells", src, f)
	testenv.Oracle(t, "flush", src)
	testenv.Oracle(t, "snapshot", src, snapB)

	// The catch-up through staged HFiles the run loads itself.
	jRun.Source.Name = snapB
	sumRun, err := pipeline.Execute(ctx, jRun, pipeline.Options{Workers: 2, Since: snapA})
	if err != nil || !sumRun.Finished || sumRun.Problems() || sumRun.Catchup == nil {
		t.Fatalf("catch-up from A to B, loaded by the run: %v %+v", err, sumRun)
	}
	recRun := reachedOf(jRun)
	if recRun == nil || recRun.Snapshot != snapB {
		t.Fatalf("after the catch-up loaded by the run: reached record %+v, want %s", recRun, snapB)
	}

	// The catch-up staged, then loaded by the load task.
	jLoad.Source.Name = snapB
	sumLoad, err := pipeline.Execute(ctx, jLoad, pipeline.Options{Workers: 2, Since: snapA, LoadCommand: "rekey load job.yaml"})
	if err != nil || !sumLoad.Finished || sumLoad.Problems() || sumLoad.Catchup == nil {
		t.Fatalf("catch-up from A to B, staged: %v %+v", err, sumLoad)
	}
	if hs, _ := sumLoad.Staged(); hs.LoadCommand != "rekey load job.yaml --since "+snapA {
		t.Errorf("the staged catch-up says to load it with %q", hs.LoadCommand)
	}
	recA := reachedOf(jLoad)
	if recA == nil || recA.Snapshot != snapA {
		t.Fatalf("a catch-up staged and not loaded moved the reached record: %+v, want %s still", recA, snapA)
	}
	staged := pipeline.CatchupStaging(jLoad.Sink.Staging, snapA)
	if _, err := verify.Prepare(ctx, jLoad, verify.Options{Staging: staged}); !errors.Is(err, verify.ErrCatchupStaging) {
		t.Fatalf("verify --staging of the catch-up's folder: %v, want ErrCatchupStaging", err)
	}
	jl := *jLoad
	jl.Sink.Staging = staged
	// A target the record does not put at A: the load is refused before
	// it sends anything (the difference is only right for A).
	reachedFile := rkstate.ReachedBeside(jLoad.Run.Checkpoint)
	good, err := os.ReadFile(reachedFile)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := *recA
	elsewhere.Snapshot = src + "_other"
	if b, err := json.Marshal(elsewhere); err != nil || os.WriteFile(reachedFile, b, 0o644) != nil {
		t.Fatal(err)
	}
	if sum, err := pipeline.RunTask(ctx, &jl, pipeline.TaskOptions{Phase: pipeline.PhaseLoad}); !errors.Is(err, pipeline.ErrNotAt) || sum != nil {
		t.Fatalf("load of the staged catch-up into a target at another snapshot: %v, %+v; want ErrNotAt before any load", err, sum)
	}
	if err := os.WriteFile(reachedFile, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if rows := dumpTable(t, dstLoad, false); len(rows) != len(expect(p, source)) {
		t.Fatalf("the refused load changed the target: %d cells, the whole run from A wrote %d", len(rows), len(expect(p, source)))
	}
	if _, err := pipeline.RunTask(ctx, &jl, pipeline.TaskOptions{Phase: pipeline.PhaseLoad}); err != nil {
		t.Fatalf("load of the staged catch-up: %v", err)
	}
	recLoad := reachedOf(jLoad)
	if recLoad == nil || recLoad.Snapshot != snapB || recLoad.TTLTime == 0 {
		t.Fatalf("after the load of the staged catch-up: reached record %+v, want %s", recLoad, snapB)
	}
	// Loaded again: nothing is sent twice, and the record stands.
	if _, err := pipeline.RunTask(ctx, &jl, pipeline.TaskOptions{Phase: pipeline.PhaseLoad}); err != nil {
		t.Fatalf("the staged catch-up's load run again: %v", err)
	}

	// The rule, over the oracle's dumps of A and B.
	dumpA, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snapA))
	if err != nil {
		t.Fatal(err)
	}
	dumpB, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snapB, "--now", strconv.FormatInt(recRun.TTLTime, 10)))
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(c cell.Cell) string {
		k := cell.Cell{Row: c.Row, Family: c.Family, Qualifier: c.Qualifier, Timestamp: c.Timestamp, Type: cell.Put}
		return string(cell.AppendDump(nil, &k))
	}
	wholeOf := func(c cell.Cell) string { return string(cell.AppendDump(nil, &c)) }
	inA, keysB, inB := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, c := range dumpA {
		inA[wholeOf(c)] = true
	}
	for _, c := range dumpB {
		keysB[keyOf(c)], inB[wholeOf(c)] = true, true
	}
	keysA := map[string]bool{}
	for _, c := range dumpA {
		keysA[keyOf(c)] = true
	}
	var added, markers []cell.Cell
	var replaced int64
	for _, c := range dumpB {
		if !inA[wholeOf(c)] {
			added = append(added, c)
			if keysA[keyOf(c)] {
				replaced++
			}
		}
	}
	for _, c := range dumpA {
		if !keysB[keyOf(c)] {
			m := p.rule(c)
			markers = append(markers, cell.Cell{Row: m.Row, Family: m.Family, Qualifier: m.Qualifier, Timestamp: m.Timestamp, Type: cell.Delete})
		}
	}
	testenv.SortCells(markers)
	if len(added) == 0 || len(markers) == 0 || replaced == 0 {
		t.Fatalf("the changes added %d cells (%d replacing a value) and removed %d; want some of each", len(added), replaced, len(markers))
	}
	written := expect(p, append(append([]cell.Cell(nil), dumpA...), added...))
	wantRead := expect(p, dumpB)

	for _, tc := range []struct {
		name, table string
		sum         *pipeline.Summary
	}{{"loaded by the run", dstRun, sumRun}, {"staged, then loaded by the load task", dstLoad, sumLoad}} {
		cu := tc.sum.Catchup
		t.Logf("%s: catch-up %+v", tc.name, *cu)
		if cu.CellsAdded != int64(len(added)) || cu.CellsRemoved != int64(len(markers)) || cu.CellsReplace != replaced {
			t.Errorf("%s: %+v; want %d cells added (%d replacing a value) and %d removed, by the oracle's dumps of A and B", tc.name, *cu, len(added), replaced, len(markers))
		}
		if hs, ok := tc.sum.Staged(); !ok || hs.Cells != cu.CellsAdded+cu.CellsRemoved {
			t.Errorf("%s: the HFiles staged %+v; want the %d puts and %d version deletes in them", tc.name, hs, cu.CellsAdded, cu.CellsRemoved)
		}
		sameCells(t, tc.name+": target after the catch-up vs the rule over HBase's B", dumpTable(t, tc.table, false), wantRead)
		raw := dumpTable(t, tc.table, true)
		var gotMarkers, gotPuts []cell.Cell
		for _, c := range raw {
			if c.Type == cell.Put {
				gotPuts = append(gotPuts, c)
			} else {
				gotMarkers = append(gotMarkers, c)
			}
		}
		sameCells(t, tc.name+": the target's delete markers (raw) vs a version delete of each cell of A that B no longer shows", gotMarkers, markers)
		// Raw, the puts are A's and B's new cells (a value replaced at
		// the same key shows once, the newer), every cell B shows among
		// them.
		all := map[string]bool{}
		for _, c := range written {
			all[wholeOf(c)] = true
		}
		have := map[string]bool{}
		for _, c := range gotPuts {
			have[wholeOf(c)] = true
			if !all[wholeOf(c)] {
				t.Errorf("%s: the target holds raw %s, neither a cell of A nor one B added", tc.name, &c)
			}
		}
		for _, c := range wantRead {
			if !have[wholeOf(c)] {
				t.Errorf("%s: the target does not hold raw %s, a cell of B", tc.name, &c)
			}
		}
	}
}

// TestCatchupHFilesKillNineThenResume: a catch-up through staged HFiles,
// run by the CLI, killed with SIGKILL once some of its splits are done,
// then run again with --resume: the reached record still names A after
// the kill (nothing was loaded), and after the resume it names B, the
// resume skipped the splits the killed run staged, the target reads as
// the wide_to_bucketed rule over the oracle's dump of B, and it holds raw
// exactly one version delete per reading deleted between A and B.
func TestCatchupHFilesKillNineThenResume(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	bin := rekeyBinary(t)
	p := presets["wide_to_bucketed"]
	src, dst := uniq(t, "cuhk9_src"), uniq(t, "cuhk9_dst")
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
	var markers []cell.Cell
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
		m := p.rule(old)
		markers = append(markers, cell.Cell{Row: m.Row, Family: m.Family, Qualifier: m.Qualifier, Timestamp: m.Timestamp, Type: cell.Delete})
	}
	testenv.SortCells(markers)
	testenv.Oracle(t, "flush", src)
	testenv.Oracle(t, "snapshot", src, snapB)
	b, err := os.ReadFile(jobPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobPath, []byte(strings.Replace(string(b), "name: "+snapA, "name: "+snapB, 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	// Slowed by its reads, one split at a time, so that the kill finds
	// some splits done and some not.
	reached := rkstate.ReachedBeside(filepath.Join(dir, "job.rekey", "checkpoint.json"))
	staging := "hdfs://" + st.NameNode + "/tmp/" + dst + "/staging"
	args := []string{"run", jobPath, "--sink", "hfiles", "--staging", staging, "--since", snapA, "--resume", "--force-takeover", "--workers", "1", "--max-read-mb-per-sec", "0.2"}
	k := killAfterSplitsDone(t, bin, append(slices.Clone(args), "--progress", "log", "--max-cells-per-sec", "6000"))
	if k == 0 {
		t.Fatal("the first run showed no split done before it ended; slow it further")
	}
	if rec, err := os.ReadFile(reached); err != nil || !strings.Contains(string(rec), `"`+snapA+`"`) {
		t.Fatalf("the reached record after the kill: %v\n%s; want it at A still", err, rec)
	}
	out, err := exec.Command(bin, append(slices.Clone(args), "--progress", "none", "--json")...).Output()
	if err != nil {
		t.Fatalf("resume: exit %d: %v", exitCode(err), err)
	}
	var sum pipeline.Summary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The resume stages only the splits the killed run left undone: the
	// others' HFiles, staged before the kill, go into the same load.
	if !sum.Finished || sum.Catchup == nil || sum.Skipped < 1 {
		t.Fatalf("the resumed catch-up: finished %v, %d of %d splits skipped (killed after %d), catch-up %+v", sum.Finished, sum.Skipped, sum.Splits, k, sum.Catchup)
	}
	t.Logf("killed after %d splits done; the resume skipped %d of %d and removed %d of the %d cells", k, sum.Skipped, sum.Splits, sum.Catchup.CellsRemoved, len(markers))
	if rec, err := os.ReadFile(reached); err != nil || !strings.Contains(string(rec), `"`+snapB+`"`) {
		t.Errorf("the reached record after the resumed catch-up: %v\n%s", err, rec)
	}
	dumpB, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snapB))
	if err != nil {
		t.Fatal(err)
	}
	sameCells(t, fmt.Sprintf("target after a catch-up through HFiles killed at %d splits done and resumed", k), dumpTable(t, dst, false), expect(p, dumpB))
	var got []cell.Cell
	for _, c := range dumpTable(t, dst, true) {
		if c.Type != cell.Put {
			got = append(got, c)
		}
	}
	sameCells(t, "the target's delete markers (raw) vs a version delete of each reading deleted", got, markers)
}
