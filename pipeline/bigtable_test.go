package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	bt "github.com/rekeyhq/rekey/sink/bigtable"
	"github.com/rekeyhq/rekey/verify"
)

// The Bigtable tests share one in-process emulator (Google's bttest),
// each in tables of its own: BIGTABLE_EMULATOR_HOST is one variable for
// the whole test process, and a rekey process the tests start inherits
// it, as a user's environment would give it.
var emu struct {
	once sync.Once
	srv  *bttest.Server
	err  error
}

const (
	btProject  = "rekey-test"
	btInstance = "emulated"
)

func bigtableEmulator(t *testing.T) {
	t.Helper()
	emu.once.Do(func() {
		emu.srv, emu.err = bttest.NewServer("127.0.0.1:0")
		if emu.err == nil {
			emu.err = os.Setenv("BIGTABLE_EMULATOR_HOST", emu.srv.Addr)
		}
	})
	if emu.err != nil {
		t.Fatal(emu.err)
	}
}

// bigtableJob is the preset's job writing into the emulator's table
// through the bigtable sink, created at the preset's target split keys.
func bigtableJob(t *testing.T, p preset, st *testenv.State, snap, table string) *job.Job {
	t.Helper()
	bigtableEmulator(t)
	j := loadJob(t, p, st, snap, table)
	j.Target.ZKQuorum, j.Target.ZNodeParent = "", ""
	j.Target.Bigtable = &job.Bigtable{Project: btProject, Instance: btInstance}
	j.Target.Create.SplitKeys = splitKeys(t, p.newSplits)
	j.Sink.Kind = job.SinkBigtable
	return j
}

// readBigtable reads a table of the emulator whole with Google's client
// (not through rekey), each cell at its Bigtable timestamp
// (microseconds).
func readBigtable(t *testing.T, table string) []cell.Cell {
	t.Helper()
	ctx := context.Background()
	// The emulator sends a row in one message, and the connection Google's
	// client dials for an emulator takes 4 MiB at most: dial it here with
	// Bigtable's own 256 MiB.
	conn, err := grpc.NewClient(os.Getenv("BIGTABLE_EMULATOR_HOST"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<28)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := bigtable.NewClient(ctx, btProject, btInstance, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []cell.Cell
	err = c.Open(table).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for fam, items := range r {
			for _, it := range items {
				out = append(out, cell.Cell{Row: []byte(it.Row), Family: []byte(fam), Qualifier: []byte(strings.TrimPrefix(it.Column, fam+":")),
					Timestamp: int64(it.Timestamp), Type: cell.Put, Value: it.Value})
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("reading bigtable table %s: %v", table, err)
	}
	return out
}

// inBigtable is what Bigtable holds of HBase cells, by the rule written
// here: the same row, family, qualifier and value, at the HBase
// timestamp (milliseconds) ×1000 (Bigtable's microseconds).
func inBigtable(cells []cell.Cell) []cell.Cell {
	out := make([]cell.Cell, len(cells))
	for i, c := range cells {
		c.Timestamp *= 1000
		out[i] = c
	}
	return out
}

// TestPresetsThroughBigtable: each preset, seeded and snapshotted by the
// oracle on the mini cluster, re-keyed into a table the run creates in
// the emulator; the table, read back with Google's client, equals the
// preset's rule applied to the oracle's dump of the source, timestamps
// ×1000, every cell once.
func TestPresetsThroughBigtable(t *testing.T) {
	st := testenv.Require(t)
	for name, p := range presets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src := uniq(t, "bt_src_"+name)
			snap := src + "_snap"
			testenv.DropAfter(t, src, snap)
			source := seedSource(t, st, src, snap, p, p.gen(rand.New(rand.NewSource(7))), 3)
			want := inBigtable(expect(p, source))
			table := uniq(t, "bt_"+name)
			j := bigtableJob(t, p, st, snap, table)
			sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if !sum.Finished || sum.Sink != "bigtable" || sum.Read != int64(len(source)) || sum.Written != int64(len(want)) || sum.Problems() {
				t.Errorf("summary: finished %v, sink %s, read %d (snapshot has %d), written %d (want %d), rejected %d, failed %d",
					sum.Finished, sum.Sink, sum.Read, len(source), sum.Written, len(want), sum.Rejected, sum.Failed)
			}
			sameCells(t, "bigtable target", readBigtable(t, table), want)
			stats, _ := sum.SinkStats.(bt.Stats)
			t.Logf("%d cells in %.2f s (%.0f cells/s, into the in-process emulator: no measure of a real instance), %d MutateRows requests, %d retries",
				sum.Written, sum.Seconds, sum.CellsPerSec, stats.Requests, stats.Retries)
		})
	}
}

// TestBigtableOddCells: binary row keys (every byte value, 0x00 and
// 0xff runs), empty qualifiers, an empty value, a 1 MB value, a column
// with many versions, a row key of exactly 4 KiB and one a byte longer
// (a bad key: rejected into the reject file, by the job's bad_keys), all
// through a job that copies keys unchanged; the table holds every cell
// but the rejected one, read back with Google's client.
func TestBigtableOddCells(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	p := presets["rekey"] // a layout; the job below replaces it with a copy
	src := uniq(t, "bt_odd_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	r := rand.New(rand.NewSource(9))
	var cells []cell.Cell
	add := func(row, q []byte, ts int64, v []byte) {
		cells = append(cells, cell.Cell{Row: row, Family: []byte("cf"), Qualifier: q, Timestamp: ts, Type: cell.Put, Value: v})
	}
	for b := 0; b < 256; b++ {
		add([]byte{byte(b), 0x00, 0xff, byte(255 - b)}, nil, tsBase+int64(b), []byte{byte(b)})
		add([]byte{0xff, 0xff, byte(b)}, []byte{0x00, byte(b)}, tsBase, nil)
	}
	big := make([]byte, 1<<20)
	r.Read(big)
	add([]byte("one-megabyte"), []byte("v"), tsBase, big)
	for v := 0; v < 200; v++ {
		add([]byte("versions"), []byte("c"), tsBase+int64(v), []byte(fmt.Sprint(v)))
	}
	add([]byte(strings.Repeat("k", bt.MaxRowKey)), []byte("q"), tsBase, []byte("fits"))
	long := []byte(strings.Repeat("k", bt.MaxRowKey+1))
	add(long, []byte("q"), tsBase, []byte("too long"))
	source := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: []string{"cf"}, Versions: 1000}, cells)
	var want []cell.Cell
	for _, c := range source {
		if len(c.Row) <= bt.MaxRowKey {
			want = append(want, c)
		}
	}
	if len(want) != len(source)-1 {
		t.Fatalf("the source holds %d cells, %d of them with keys that fit", len(source), len(want))
	}
	table := uniq(t, "bt_odd")
	j := bigtableJob(t, p, st, snap, table)
	copyJob, err := job.Parse(j.Path, []byte(`
source: {root: /x, name: x}
target: {table: x, bigtable: {project: p, instance: i}}
source_layout: {row: [{field: k, type: string}]}
target_layout: {row: [{field: k, type: string}]}
entity: [k]
sink: {type: bigtable}
bad_keys: {action: reject, file: rejects.tsv}
`))
	if err != nil {
		t.Fatal(err)
	}
	j.Spec, j.Program, j.BadKeys = copyJob.Spec, copyJob.Program, job.BadKeys{Action: job.Reject, File: t.TempDir() + "/rejects.tsv"}
	j.Spec.Families, j.Target.Create.SplitKeys = nil, nil
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sum.Written != int64(len(want)) || sum.Rejected != 1 || sum.Failed != 0 {
		t.Errorf("written %d (want %d), rejected %d (want 1), failed %d", sum.Written, len(want), sum.Rejected, sum.Failed)
	}
	rej, err := os.ReadFile(j.BadKeys.File)
	if err != nil || !strings.Contains(string(rej), "4097 bytes") {
		t.Errorf("reject file: %v\n%.300s", err, rej)
	}
	sameCells(t, "bigtable target", readBigtable(t, table), inBigtable(want))
}

// TestBigtableRowInPieces: a new row of 200,250 cells is written
// whole, in pieces Bigtable applies one by one, and the summary names
// it; with atomic_rows it is a bad key instead: rejected whole (every
// cell counted and in the reject file), nothing of it written.
func TestBigtableRowInPieces(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	p := presets["wide_to_bucketed"]
	src := uniq(t, "bt_wide_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	// One sensor, 450 readings within one hour, each with 445 versions:
	// one new row of 200,250 cells. (Versions rather than columns: the
	// emulator sorts a row's column names at each new column, which would
	// take minutes at 200,000 columns.)
	var cells []cell.Cell
	for q := 0; q < 450; q++ {
		at := uint64(tsBase + q*1000)
		for v := 0; v < 445; v++ {
			cells = append(cells, cell.Cell{Row: []byte("s007"), Family: []byte("r"), Qualifier: be64(at), Timestamp: int64(tsBase + v), Type: cell.Put, Value: []byte{byte(v)}})
		}
	}
	for i := 0; i < 50; i++ {
		ts := int64(tsBase + i*1000)
		cells = append(cells, cell.Cell{Row: []byte("s012"), Family: []byte("r"), Qualifier: be64(uint64(ts)), Timestamp: ts, Type: cell.Put, Value: []byte{1}})
	}
	source := seedSource(t, st, src, snap, p, cells, 1000)
	want := expect(p, source)
	if len(want) != 450*445+50 {
		t.Fatalf("the source reads %d cells, want %d", len(want), 450*445+50)
	}

	t.Run("in pieces", func(t *testing.T) {
		table := uniq(t, "bt_pieces")
		j := bigtableJob(t, p, st, snap, table)
		sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, SplitBytes: job.SplitBytesOff})
		if err != nil {
			t.Fatal(err)
		}
		if !sum.Finished || sum.Written != int64(len(want)) || sum.Problems() {
			t.Errorf("finished %v, written %d of %d", sum.Finished, sum.Written, len(want))
		}
		stats, _ := sum.SinkStats.(bt.Stats)
		if len(stats.RowsInPieces) != 1 || stats.RowsInPieces[0].Cells != 450*445 || stats.RowsInPieces[0].Pieces != 3 {
			t.Errorf("rows in pieces: %+v", stats.RowsInPieces)
		}
		named := false
		for _, w := range sum.Warnings {
			named = named || strings.Contains(w, `row "s007\x002026-01-01T00" (200250 cells) written in 3 pieces, not atomic`)
		}
		if !named {
			t.Errorf("no warning names the row: %q", sum.Warnings)
		}
		sameCells(t, "bigtable target", readBigtable(t, table), inBigtable(want))
	})
	t.Run("atomic_rows", func(t *testing.T) {
		table := uniq(t, "bt_atomic")
		j := bigtableJob(t, p, st, snap, table)
		j.Target.Bigtable.AtomicRows = true
		sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, SplitBytes: job.SplitBytesOff})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Rejected != 450*445 || sum.Written != 50 {
			t.Errorf("rejected %d (want %d), written %d (want 50)", sum.Rejected, 450*445, sum.Written)
		}
		var small []cell.Cell
		for _, c := range want {
			if !strings.HasPrefix(string(c.Row), "s007") {
				small = append(small, c)
			}
		}
		sameCells(t, "bigtable target", readBigtable(t, table), inBigtable(small))
		rej, err := os.ReadFile(j.BadKeys.File)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(rej), "\n"); n != 450*445 {
			t.Errorf("reject file has %d lines, want %d", n, 450*445)
		}
	})
}

// TestBigtableTargetRefused: before any write, a run is refused (the
// job's mistake: pipeline.ErrInvalid, exit 2) when the existing table's
// GC rule would remove cells the job writes, when it lacks a family, in
// raw mode, and with deletes: apply but no raw read or in shards (the
// delete pass must follow every put of the job); the table is left
// empty.
func TestBigtableTargetRefused(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	p := presets["tall_to_wide"] // writes family d
	src := uniq(t, "bt_ref_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	seedSource(t, st, src, snap, p, p.gen(rand.New(rand.NewSource(1)))[:200], 3)
	bigtableEmulator(t)
	admin, err := bigtable.NewAdminClient(ctx, btProject, btInstance)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	noGC := map[string]bigtable.Family{"d": {GCPolicy: bigtable.NoGcPolicy()}}
	for name, tc := range map[string]struct {
		fams         map[string]bigtable.Family
		raw, deletes bool
		shards       int
		want         string
	}{
		"one version kept":         {map[string]bigtable.Family{"d": {GCPolicy: bigtable.MaxVersionsPolicy(1)}}, false, false, 0, "the GC rule of family d (versions() > 1) would remove cells the job writes: it keeps 1 versions of a column, and the job writes up to 3"},
		"no family d":              {map[string]bigtable.Family{"o": {GCPolicy: bigtable.NoGcPolicy()}}, false, false, 0, "no family d"},
		"raw mode":                 {noGC, true, false, 0, "Bigtable keeps no tombstones"},
		"deletes without raw mode": {noGC, false, true, 0, "deletes: apply needs a raw read"},
		"deletes with shards":      {noGC, true, true, 2, "apply with --shard"},
	} {
		t.Run(name, func(t *testing.T) {
			table := uniq(t, "bt_refused")
			if err := admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: table, ColumnFamilies: tc.fams}); err != nil {
				t.Fatal(err)
			}
			j := bigtableJob(t, p, st, snap, table)
			j.Source.Scan.Raw, j.Target.Bigtable.ApplyDeletes = tc.raw, tc.deletes
			_, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Shard: pipeline.Shard{Count: tc.shards}})
			if !errors.Is(err, pipeline.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run: %v, want pipeline.ErrInvalid saying %q", err, tc.want)
			}
			if n := len(readBigtable(t, table)); n != 0 {
				t.Errorf("%d cells written into the refused table", n)
			}
		})
	}
}

// writeBigtableJobFile writes the wide_to_bucketed preset as a job file
// writing into the emulator's table through the bigtable sink.
func writeBigtableJobFile(t *testing.T, st *testenv.State, snap, table, dir string) string {
	t.Helper()
	b, err := os.ReadFile("../configs/wide_to_bucketed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{"root: /hbase ", "root: " + st.RootDir + " "},
		{"name: readings_snap", "name: " + snap},
		{"table: readings_by_hour", fmt.Sprintf("table: %s\n  bigtable: {project: %s, instance: %s}\n  create: {split_keys: [s005, s015, s025]}", table, btProject, btInstance)},
		{"file: readings-rejects.tsv", "file: " + dir + "/rejects.tsv"},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("configs/wide_to_bucketed.yaml has no %q", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	s += "sink: {type: bigtable, batch_cells: 500}\n"
	p := dir + "/job.yaml"
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBigtableKillNineThenResume: rekey run into Bigtable killed with
// SIGKILL once a split is done, then resumed: the resumed run skips the
// splits recorded done, and the table holds every expected cell exactly
// once (a redone split writes the same cells at the same timestamps,
// which adds no version).
func TestBigtableKillNineThenResume(t *testing.T) {
	st := testenv.Require(t)
	bigtableEmulator(t)
	bin := rekeyBinary(t)
	p := presets["wide_to_bucketed"]
	src := uniq(t, "bt_kill_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	source := seedSource(t, st, src, snap, p, bigWide(40, 1000), 3)
	want := inBigtable(expect(p, source))
	table := uniq(t, "bt_kill")
	dir := t.TempDir()
	jobPath := writeBigtableJobFile(t, st, snap, table, dir)
	k, out := killThenResume(t, bin, []string{"run", jobPath, "--resume", "--workers", "2", "--split-bytes", "256KiB"})
	var sum pipeline.Summary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !sum.Finished || sum.Done != sum.Splits || sum.Skipped < k || sum.Sink != "bigtable" {
		t.Errorf("resumed: finished %v, %d/%d splits, %d skipped (killed after %d done), sink %s", sum.Finished, sum.Done, sum.Splits, sum.Skipped, k, sum.Sink)
	}
	sameCells(t, "bigtable target after kill -9 and resume", readBigtable(t, table), want)
	// rekey verify reads the new side from Bigtable (the job names no
	// HBase cluster): every entity matches, from the run's sketch and
	// over all of them.
	for _, extra := range [][]string{nil, {"--all"}} {
		args := append([]string{"verify", jobPath}, extra...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		if code := exitCode(err); code != 0 || !strings.Contains(string(out), "40 entities checked, 0 mismatched") {
			t.Errorf("rekey %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
}

// TestBigtableShards: two shards of one job, each its own run beside
// one checkpoint (as rekey run --shard gives them), write the table the
// one-process run would: every expected cell once. They share the job's
// record: the first reports the job waiting, the second proves its
// coverage, and a shard run again with another split size is refused
// before it writes.
func TestBigtableShards(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	p := presets["salt"]
	src := uniq(t, "bt_shard_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	source := seedSource(t, st, src, snap, p, p.gen(rand.New(rand.NewSource(4))), 3)
	want := inBigtable(expect(p, source))
	table := uniq(t, "bt_shards")
	j := bigtableJob(t, p, st, snap, table)
	written := int64(0)
	for i := 0; i < 2; i++ {
		sj := *j
		sum, err := pipeline.Execute(ctx, &sj, pipeline.Options{Workers: 2, SplitBytes: 64 << 10, Shard: pipeline.Shard{Index: i, Count: 2}})
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		if sum.Done == 0 || !sum.Finished {
			t.Errorf("shard %d: %d splits done, finished %v", i, sum.Done, sum.Finished)
		}
		if cov := sum.Coverage; cov == nil || cov.Shards != 2 || cov.Committed != i+1 || cov.Proven != (i == 1) {
			t.Errorf("shard %d: coverage %+v, want %d of 2 committed, proven by the last", i, cov, i+1)
		}
		written += sum.Written
	}
	if written != int64(len(want)) {
		t.Errorf("the shards wrote %d cells, want %d", written, len(want))
	}
	sj := *j
	sum, err := pipeline.Execute(ctx, &sj, pipeline.Options{Workers: 2, SplitBytes: 40 << 10, Shard: pipeline.Shard{Index: 1, Count: 2}})
	if !errors.Is(err, pipeline.ErrJobMismatch) || (sum != nil && sum.Written != 0) {
		t.Errorf("shard 1 again with another split size: %v, want ErrJobMismatch before any write", err)
	}
	sameCells(t, "bigtable target of two shards", readBigtable(t, table), want)
}

// TestVerifyBigtable: rekey verify reads the new side from the Bigtable
// table (verify.BigtableReader): after a run, every entity matches by
// both methods; after one cell's value is changed in Bigtable (written
// with Google's client at the same timestamp), that entity alone
// mismatches and the difference names the cell.
func TestVerifyBigtable(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	p := presets["tall_to_wide"]
	src := uniq(t, "bt_verify_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	source := seedSource(t, st, src, snap, p, p.gen(rand.New(rand.NewSource(5))), 3)
	table := uniq(t, "bt_verify")
	j := bigtableJob(t, p, st, snap, table)
	if _, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	old, ch := censusOf(t, ctx, j)
	compare := func() []verify.Result {
		t.Helper()
		nr, err := verify.OpenBigtable(ctx, j.Target.Bigtable, table)
		if err != nil {
			t.Fatal(err)
		}
		defer nr.Close()
		res, err := verify.Compare(ctx, verify.Config{Program: j.Program, Old: old, New: nr, Method: verify.Both, Retries: -1}, ch.Targets())
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2*ch.Len() || ch.Len() < 30 {
			t.Fatalf("%d results for %d entities, two methods", len(res), ch.Len())
		}
		return res
	}
	for _, r := range compare() {
		if !r.Match || r.Old.Cells == 0 {
			t.Errorf("clean: %s %s: match %v, %d old cells, %v %v", r.Method, r.Entity, r.Match, r.Old.Cells, r.Mismatches, r.First)
		}
	}

	// Damage one cell: customer c0007's first cell, its value changed.
	want := expect(p, source)
	var victim cell.Cell
	for _, c := range want {
		if strings.HasPrefix(string(c.Row), "c0007\x00") {
			victim = c
			break
		}
	}
	if victim.Row == nil {
		t.Fatal("no cell of c0007 in the expectation")
	}
	c, err := bigtable.NewClient(ctx, btProject, btInstance)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := bigtable.NewMutation()
	m.Set(string(victim.Family), string(victim.Qualifier), bigtable.Timestamp(victim.Timestamp*1000), []byte("damaged"))
	if err := c.Open(table).Apply(ctx, string(victim.Row), m); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, r := range compare() {
		if r.Match {
			continue
		}
		bad++
		named := false
		for _, d := range r.First {
			named = named || strings.Contains(d.New, "damaged") || strings.Contains(d.New, fmt.Sprintf("%x", "damaged"))
		}
		if !strings.Contains(r.Entity, "c0007") || !named {
			t.Errorf("%s %s: mismatch %v, first differences %+v", r.Method, r.Entity, r.Mismatches, r.First)
		}
	}
	if bad != 2 {
		t.Errorf("%d mismatching results, want c0007's by both methods", bad)
	}
}

// faultyEmulator starts a second emulator whose MutateRows calls pass
// through fail first: a non-nil error fails call n (1-based) whole, and
// entry can fail one entry of it (the emulator has applied it) with a
// code; it points BIGTABLE_EMULATOR_HOST at it for the test.
func faultyEmulator(t *testing.T, call func(n int64) error, entry func(row string) codes.Code) {
	t.Helper()
	var calls atomic.Int64
	mutateRowsEmulator(t, func(ss grpc.ServerStream) (grpc.ServerStream, error) {
		if err := call(calls.Add(1)); err != nil {
			return nil, err
		}
		return &entryFaults{ServerStream: ss, code: entry}, nil
	})
}

// mutateRowsEmulator starts a second emulator whose MutateRows streams
// go through wrap (an error fails the call whole) and points
// BIGTABLE_EMULATOR_HOST at it for the test.
func mutateRowsEmulator(t *testing.T, wrap func(grpc.ServerStream) (grpc.ServerStream, error)) {
	t.Helper()
	bigtableEmulator(t) // the shared one, set up first: its setup sets the variable too
	srv, err := bttest.NewServer("127.0.0.1:0", grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !strings.HasSuffix(info.FullMethod, "/MutateRows") {
			return handler(srv, ss)
		}
		w, err := wrap(ss)
		if err != nil {
			return err
		}
		return handler(srv, w)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("BIGTABLE_EMULATOR_HOST", srv.Addr)
}

// entryFaults sets the status of the entries code names in a MutateRows
// response.
type entryFaults struct {
	grpc.ServerStream
	code func(row string) codes.Code
	rows []string
}

func (s *entryFaults) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if req, ok := m.(*btpb.MutateRowsRequest); ok && err == nil {
		for _, e := range req.Entries {
			s.rows = append(s.rows, string(e.RowKey))
		}
	}
	return err
}

func (s *entryFaults) SendMsg(m any) error {
	if res, ok := m.(*btpb.MutateRowsResponse); ok {
		for _, e := range res.Entries {
			if c := s.code(s.rows[e.Index]); c != codes.OK {
				e.Status.Code, e.Status.Message = int32(c), "injected: "+c.String()
			}
		}
	}
	return s.ServerStream.SendMsg(m)
}

// TestBigtableFailuresThenResume: a run whose first MutateRows calls
// fail with UNAVAILABLE retries them (counted); entries that keep failing
// with PERMISSION_DENIED are counted failed with their rows named, their
// splits are not recorded done and the run ends with problems; once the
// fault is gone, --resume redoes exactly those splits and the table
// holds every expected cell once.
func TestBigtableFailuresThenResume(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	p := presets["salt"]
	src := uniq(t, "bt_fault_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	source := seedSource(t, st, src, snap, p, p.gen(rand.New(rand.NewSource(8))), 3)
	want := inBigtable(expect(p, source))
	var denied atomic.Bool
	denied.Store(true)
	faultyEmulator(t, func(n int64) error {
		if n <= 2 {
			return status.Error(codes.Unavailable, "injected: unavailable")
		}
		return nil
	}, func(row string) codes.Code {
		// Device d07's rows (the heavy one), while the fault lasts.
		if denied.Load() && strings.Contains(row, "d07|") {
			return codes.PermissionDenied
		}
		return codes.OK
	})
	table := uniq(t, "bt_fault")
	j := bigtableJob(t, p, st, snap, table)
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, SplitBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	stats, _ := sum.SinkStats.(bt.Stats)
	named := false
	for _, e := range sum.Examples {
		named = named || strings.Contains(e, "d07|") && strings.Contains(e, "PermissionDenied")
	}
	if sum.Failed == 0 || sum.Finished || !sum.Problems() || sum.Done == sum.Splits || !named || stats.Retries < 2 {
		t.Errorf("first run: failed %d, finished %v, %d/%d splits done, retries %d, examples %q", sum.Failed, sum.Finished, sum.Done, sum.Splits, stats.Retries, sum.Examples)
	}
	t.Logf("first run: %d cells failed in %d of %d splits, %d retries", sum.Failed, sum.Splits-sum.Done, sum.Splits, stats.Retries)
	denied.Store(false)
	sum, err = pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, SplitBytes: 64 << 10, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Finished || sum.Failed != 0 || sum.Skipped == 0 || sum.Skipped == sum.Splits {
		t.Errorf("resume: finished %v, failed %d, %d of %d splits done before", sum.Finished, sum.Failed, sum.Skipped, sum.Splits)
	}
	sameCells(t, "bigtable target after failures and resume", readBigtable(t, table), want)
}

// TestVerifyBigtableTimestampsAtMax: HBase timestamps whose ×1000 passes
// Bigtable's largest timestamp are written at that largest, as Google's
// HBase client writes them, and verify compares the old cells there: by
// both methods, with and without the snapshot's time (rekey verify sets
// it), the table equals the source. Before, each such cell was reported
// missing beside one extra (or newer than the snapshot) in the table.
func TestVerifyBigtableTimestampsAtMax(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	src := uniq(t, "bt_tsmax_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	// Bigtable counts microseconds at millisecond granularity up to the
	// largest int64: 9,223,372,036,854,775,000 µs, that is HBase's
	// 9,223,372,036,854,775 ms. The rule: a cell at that many ms or more
	// is held there, any other at its ms ×1000.
	const lastMs int64 = 9223372036854775
	stamps := []int64{tsBase, lastMs - 1, lastMs, lastMs + 1, math.MaxInt64 - 1}
	var cells []cell.Cell
	for i := range 40 {
		for q, ts := range stamps {
			cells = append(cells, cell.Cell{Row: []byte(fmt.Sprintf("k%02d", i)), Family: []byte("cf"), Qualifier: []byte{byte('a' + q)},
				Timestamp: ts, Type: cell.Put, Value: []byte(fmt.Sprint(i, "/", q))})
		}
	}
	source := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: []string{"cf"}, Versions: 1}, cells)
	if len(source) != len(cells) {
		t.Fatalf("the snapshot holds %d cells of the %d seeded", len(source), len(cells))
	}
	table := uniq(t, "bt_tsmax")
	j := bigtableCopy(t, st, snap, table)
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sum.Written != int64(len(source)) {
		t.Errorf("written %d, want %d", sum.Written, len(source))
	}
	var want []cell.Cell
	for _, c := range source {
		if c.Timestamp >= lastMs {
			c.Timestamp = lastMs * 1000
		} else {
			c.Timestamp *= 1000
		}
		want = append(want, c)
	}
	sameCells(t, "bigtable target", readBigtable(t, table), want)

	old, ch := censusOf(t, ctx, j)
	nr, err := verify.OpenBigtable(ctx, j.Target.Bigtable, table)
	if err != nil {
		t.Fatal(err)
	}
	defer nr.Close()
	if got, sink := nr.MaxTimestampMillis(), int64(bt.MaxTimestamp)/1000; got != lastMs || sink != lastMs {
		t.Errorf("verify's ceiling %d ms, the sink's %d ms, want %d", got, sink, lastMs)
	}
	// Without a snapshot time every cell is compared; with the snapshot's
	// (as rekey verify sets it) a new cell later than the snapshot counts
	// as an application's write: the one at lastMs-1 does, those at the
	// ceiling do not.
	for _, pass := range []struct {
		at              time.Time
		compared, newer int64
	}{{time.Time{}, 5, 0}, {old.Snapshot().Info().CreationTime, 4, 1}} {
		res, err := verify.Compare(ctx, verify.Config{Program: j.Program, Old: old, New: nr, Method: verify.Both, Retries: -1, SnapshotTime: pass.at}, ch.Targets())
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 80 {
			t.Fatalf("%d results, want 40 entities by two methods", len(res))
		}
		for _, r := range res {
			if !r.Match || r.Old.Cells != int64(len(stamps)) || r.New.Cells != pass.compared || r.Newer != pass.newer {
				t.Errorf("snapshot time %v: %s %s: match %v, old %d new %d newer %d cells (want %d, %d), %v %+v", pass.at, r.Method, r.Entity,
					r.Match, r.Old.Cells, r.New.Cells, r.Newer, pass.compared, pass.newer, r.Mismatches, r.First)
			}
		}
	}
}
