package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	bt "github.com/rekeyhq/rekey/sink/bigtable"
)

// copyBigtableJob is the preset's job with its layouts replaced by a
// copy of the row key (one old row is one new row, so family markers
// carry), writing into the existing emulator table.
func copyBigtableJob(t *testing.T, st *testenv.State, snap, table string) *job.Job {
	t.Helper()
	j := bigtableCopy(t, st, snap, table)
	j.BadKeys = job.BadKeys{Action: job.Reject, File: t.TempDir() + "/rejects.tsv"}
	j.Target.Create.Enabled = false
	return j
}

// bigtableCopy is the rekey preset's Bigtable job with its layouts
// replaced by a copy of the row key and its families kept, its table
// created without split keys.
func bigtableCopy(t *testing.T, st *testenv.State, snap, table string) *job.Job {
	t.Helper()
	j := bigtableJob(t, presets["rekey"], st, snap, table)
	cp, err := job.Parse(j.Path, []byte(`
source: {root: /x, name: x}
target: {table: x, bigtable: {project: p, instance: i}}
source_layout: {row: [{field: k, type: string}]}
target_layout: {row: [{field: k, type: string}]}
entity: [k]
sink: {type: bigtable}
`))
	if err != nil {
		t.Fatal(err)
	}
	j.Spec, j.Program = cp.Spec, cp.Program
	j.Spec.Families, j.Target.Create.SplitKeys = nil, nil
	return j
}

// seedDeleted seeds a source with HBase's own client (the oracle's seed
// steps): puts, a flush, then the delete markers and a flush, so that
// the markers and the puts they mask sit in different store files, as
// deletes of data written earlier do (a flush drops the puts a marker
// in the same memstore masks). It returns HBase's (non-raw) view of the
// snapshot and the oracle's raw dump of it.
func seedDeleted(t *testing.T, table, snap string, fams []string, puts, markers []cell.Cell) (view, raw []cell.Cell) {
	t.Helper()
	st := testenv.Require(t)
	dir := t.TempDir()
	files := [2]string{filepath.Join(dir, "puts.cells"), filepath.Join(dir, "markers.cells")}
	for i, cs := range [][]cell.Cell{puts, markers} {
		if err := os.WriteFile(files[i], testenv.DumpCells(cs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var fs []map[string]any
	for _, f := range fams {
		fs = append(fs, map[string]any{"name": f, "versions": 10, "encoding": "FAST_DIFF", "compression": "SNAPPY"})
	}
	b, _ := json.Marshal(map[string]any{"table": table, "families": fs, "steps": []map[string]any{
		{"op": "cells", "file": files[0]}, {"op": "flush"},
		{"op": "cells", "file": files[1]}, {"op": "flush"},
		{"op": "snapshot", "name": snap}}})
	spec := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", spec)
	var err error
	if view, err = testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap)); err != nil {
		t.Fatal(err)
	}
	if raw, err = testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap, "--raw")); err != nil {
		t.Fatal(err)
	}
	return view, raw
}

// btWrite writes cells into a table of the emulator with Google's
// client (not through rekey), each at its HBase timestamp ×1000.
func btWrite(t *testing.T, table string, cells []cell.Cell) {
	t.Helper()
	ctx := context.Background()
	c, err := bigtable.NewClient(ctx, btProject, btInstance)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys []string
	var muts []*bigtable.Mutation
	for _, x := range cells {
		m := bigtable.NewMutation()
		m.Set(string(x.Family), string(x.Qualifier), bigtable.Timestamp(x.Timestamp*1000), x.Value)
		keys, muts = append(keys, string(x.Row)), append(muts, m)
	}
	errs, err := c.Open(table).ApplyBulk(ctx, keys, muts)
	if err == nil && errs != nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestBigtableRawDeletes: a source seeded with HBase and deleted in it
// with every kind of delete (version, column, family with a bounded
// timestamp, family version, a whole row), then snapshotted; an existing
// Bigtable table pre-filled, with Google's client, with an earlier copy
// of the rows (older, equal and newer timestamps, and a column the
// source lacks). A raw run with deletes: apply leaves the table, read
// back with Google's client, equal to HBase's own (non-raw) view of the
// source plus the pre-filled cells that no marker of the oracle's raw
// dump masks by HBase's rule: the masked puts the raw read carries are
// gone, and so are the older cells of the target. A resumed run redoes
// the delete pass; without deletes: apply the raw run is refused, naming
// the option.
func TestBigtableRawDeletes(t *testing.T) {
	st := testenv.Require(t)
	bigtableEmulator(t)
	ctx := context.Background()
	src := uniq(t, "bt_del_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	put := func(row, fam, q string, ts int64, v string) cell.Cell {
		return cell.Cell{Row: []byte(row), Family: []byte(fam), Qualifier: []byte(q), Timestamp: ts, Type: cell.Put, Value: []byte(v)}
	}
	mark := func(typ cell.Type, row, fam, q string, ts int64) cell.Cell {
		return cell.Cell{Row: []byte(row), Family: []byte(fam), Qualifier: []byte(q), Timestamp: ts, Type: typ}
	}
	cols := [][2]string{{"cf", "q0"}, {"cf", "q1"}, {"cf", "q2"}, {"cg", "q0"}}
	var cells []cell.Cell
	for r := 0; r < 8; r++ {
		for _, c := range cols {
			for v := int64(0); v < 3; v++ {
				cells = append(cells, put(fmt.Sprintf("r%02d", r), c[0], c[1], tsBase+v, fmt.Sprintf("v%d", v)))
			}
		}
	}
	// Row r03 is large, so that the run cuts it into pieces read by
	// different splits (at column starts): its family marker comes with
	// the first piece, the puts it masks with the later ones.
	rnd := rand.New(rand.NewSource(52))
	for c := 0; c < 200; c++ {
		for v := int64(0); v < 3; v++ {
			b := make([]byte, 1024) // incompressible: many HFile blocks to cut at
			rnd.Read(b)
			cells = append(cells, put("r03", "cf", fmt.Sprintf("c%03d", c), tsBase+v, string(b)))
		}
	}
	dels := []cell.Cell{
		mark(cell.Delete, "r01", "cf", "q1", tsBase+1),
		mark(cell.DeleteColumn, "r02", "cf", "q2", tsBase+1),
		mark(cell.DeleteFamily, "r03", "cf", "", tsBase+1),
		mark(cell.DeleteFamilyVersion, "r04", "cf", "", tsBase),
		// A whole-row delete, as HBase stores it: a family marker per family.
		mark(cell.DeleteFamily, "r05", "cf", "", tsBase+5),
		mark(cell.DeleteFamily, "r05", "cg", "", tsBase+5),
		// A version delete masking nothing in the source, only in the target.
		mark(cell.Delete, "r06", "cf", "q0", tsBase+9),
	}
	source, raw := seedDeleted(t, src, snap, []string{"cf", "cg"}, cells, dels)
	var markers []cell.Cell
	for _, c := range raw {
		if c.Type != cell.Put {
			markers = append(markers, c)
		}
	}
	if len(markers) != 7 || len(source) >= len(raw)-len(markers) {
		t.Fatalf("the raw source holds %d markers (want 7) and %d puts, HBase shows %d cells", len(markers), len(raw)-len(markers), len(source))
	}
	// The earlier copy in the target: older, equal and newer timestamps,
	// a column the source lacks, a row the source lacks.
	var pre []cell.Cell
	for r := 0; r < 8; r++ {
		for _, c := range append(cols, [2]string{"cf", "zz"}) {
			for _, ts := range []int64{tsBase - 10, tsBase + 1, tsBase + 9} {
				pre = append(pre, put(fmt.Sprintf("r%02d", r), c[0], c[1], ts, "pre"))
			}
		}
	}
	pre = append(pre, put("r99", "cf", "q0", tsBase, "pre"))
	// The rule: HBase's view of the source, and the pre-filled cells no
	// marker masks, the source's value where both have a cell.
	key := func(c *cell.Cell) string {
		return fmt.Sprintf("%q/%s:%q@%d", c.Row, c.Family, c.Qualifier, c.Timestamp)
	}
	want := map[string]cell.Cell{}
	var masked []cell.Cell // pre-filled cells the markers remove
	for _, p := range pre {
		hit := false
		for i := range markers {
			hit = hit || testenv.Masks(&markers[i], &p)
		}
		if hit {
			masked = append(masked, p)
		} else {
			want[key(&p)] = p
		}
	}
	for _, c := range source {
		want[key(&c)] = c
	}
	var wantCells []cell.Cell
	for _, c := range want {
		wantCells = append(wantCells, c)
	}
	wantCells = expectSorted(wantCells)

	// The faults of the interrupted pass below: while denyDeletes is set,
	// a MutateRows call carrying a delete fails whole for good.
	var denyDeletes atomic.Bool
	deleteFaults(t, &denyDeletes)
	admin, err := bigtable.NewAdminClient(ctx, btProject, btInstance)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	prefilled := func(t *testing.T, name string) string {
		table := uniq(t, name)
		if err := admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: table, ColumnFamilies: map[string]bigtable.Family{
			"cf": {GCPolicy: bigtable.NoGcPolicy()}, "cg": {GCPolicy: bigtable.NoGcPolicy()}}}); err != nil {
			t.Fatal(err)
		}
		btWrite(t, table, pre)
		return table
	}
	rawJob := func(t *testing.T, table string, apply bool) *job.Job {
		j := copyBigtableJob(t, st, snap, table)
		j.Source.Scan.Raw, j.Target.Bigtable.ApplyDeletes = true, apply
		return j
	}

	t.Run("refused without deletes apply", func(t *testing.T) {
		table := prefilled(t, "bt_del_refused")
		_, err := pipeline.Execute(ctx, rawJob(t, table, false), pipeline.Options{Workers: 2})
		if !errors.Is(err, pipeline.ErrInvalid) || !strings.Contains(err.Error(), "target.bigtable.deletes: apply") || !strings.Contains(err.Error(), "keeps no tombstones") {
			t.Errorf("raw run without deletes: apply: %v, want pipeline.ErrInvalid naming the option", err)
		}
		sameCells(t, "the untouched target", readBigtable(t, table), expectSorted(inBigtable(pre)))
	})
	t.Run("applied", func(t *testing.T) {
		table := prefilled(t, "bt_del")
		sum, err := pipeline.Execute(ctx, rawJob(t, table, true), pipeline.Options{Workers: 2, SplitBytes: 64 << 10})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		stats, _ := sum.SinkStats.(bt.Stats)
		if !sum.Finished || sum.Read != int64(len(raw)) || sum.Written != int64(len(raw)) || sum.Problems() || stats.DeleteMarkers != int64(len(markers)) || stats.DeleteMutations == 0 {
			t.Errorf("finished %v, read %d and written %d (raw dump %d), problems %v, %d markers applied (want %d), %d range deletes",
				sum.Finished, sum.Read, sum.Written, len(raw), sum.Problems(), stats.DeleteMarkers, len(markers), stats.DeleteMutations)
		}
		t.Logf("%d splits; %d markers as %d range deletes on %d rows", sum.Splits, stats.DeleteMarkers, stats.DeleteMutations, stats.DeleteRows)
		sameCells(t, "bigtable target after the delete pass", readBigtable(t, table), inBigtable(wantCells))
	})
	t.Run("interrupted pass redone by resume", func(t *testing.T) {
		table := prefilled(t, "bt_del_resume")
		j := rawJob(t, table, true)
		denyDeletes.Store(true)
		sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, SplitBytes: 64 << 10})
		denyDeletes.Store(false)
		if err == nil || !strings.Contains(err.Error(), "deleting in row") || (sum != nil && sum.Finished) {
			t.Fatalf("a run whose delete pass fails: %v, want the pass's error and the run unfinished", err)
		}
		if got := readBigtable(t, table); len(got) <= len(wantCells) {
			t.Fatalf("the failed pass left %d cells, want the masked ones still there (more than %d)", len(got), len(wantCells))
		}
		sum, err = pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, SplitBytes: 64 << 10, Resume: true})
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		stats, _ := sum.SinkStats.(bt.Stats)
		if !sum.Finished || sum.Skipped != sum.Splits || stats.DeleteMarkers != int64(len(markers)) {
			t.Errorf("resumed: finished %v, %d of %d splits skipped, %d markers applied (want %d)", sum.Finished, sum.Skipped, sum.Splits, stats.DeleteMarkers, len(markers))
		}
		sameCells(t, "bigtable target after the resumed pass", readBigtable(t, table), inBigtable(wantCells))
	})
}

// deleteFaults points the test at an emulator of its own whose
// MutateRows calls that carry a delete fail whole, for good
// (PERMISSION_DENIED), while deny is set.
func deleteFaults(t *testing.T, deny *atomic.Bool) {
	t.Helper()
	mutateRowsEmulator(t, func(ss grpc.ServerStream) (grpc.ServerStream, error) {
		return &denyDeletes{ServerStream: ss, deny: deny}, nil
	})
}

// denyDeletes fails a MutateRows request holding a DeleteFromColumn
// while deny is set.
type denyDeletes struct {
	grpc.ServerStream
	deny *atomic.Bool
}

func (s *denyDeletes) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if req, ok := m.(*btpb.MutateRowsRequest); ok && err == nil && s.deny.Load() {
		for _, e := range req.Entries {
			for _, mu := range e.Mutations {
				if mu.GetDeleteFromColumn() != nil {
					return status.Error(codes.PermissionDenied, "injected: deletes denied")
				}
			}
		}
	}
	return err
}

// expectSorted sorts cells in HBase's order, as sameCells compares.
func expectSorted(cells []cell.Cell) []cell.Cell {
	return expect(preset{rule: func(c cell.Cell) cell.Cell { return c }}, cells)
}

// TestBigtableMarkerWithoutBigtableForm: a column delete at a timestamp
// past Bigtable's largest (cells from there on all share its largest
// timestamp, so "at or below" cannot be told) is refused as a bad key:
// counted, in the reject file named with its type, and not applied; the
// other marker is applied.
func TestBigtableMarkerWithoutBigtableForm(t *testing.T) {
	st := testenv.Require(t)
	bigtableEmulator(t)
	ctx := context.Background()
	src := uniq(t, "bt_delmax_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	const far = 9_223_372_036_854_775 + 5 // ms: ×1000 passes Bigtable's largest
	puts := []cell.Cell{
		{Row: []byte("a"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: tsBase, Type: cell.Put, Value: []byte("x")},
		{Row: []byte("b"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: tsBase, Type: cell.Put, Value: []byte("y")},
		{Row: []byte("c"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: tsBase, Type: cell.Put, Value: []byte("z")},
	}
	seedDeleted(t, src, snap, []string{"cf"}, puts, []cell.Cell{
		{Row: []byte("a"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: far, Type: cell.DeleteColumn},
		{Row: []byte("b"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: tsBase, Type: cell.DeleteColumn},
	})
	table := uniq(t, "bt_delmax")
	admin, err := bigtable.NewAdminClient(ctx, btProject, btInstance)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: table, ColumnFamilies: map[string]bigtable.Family{"cf": {GCPolicy: bigtable.NoGcPolicy()}}}); err != nil {
		t.Fatal(err)
	}
	j := copyBigtableJob(t, st, snap, table)
	j.Source.Scan.Raw, j.Target.Bigtable.ApplyDeletes = true, true
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 1})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sum.Rejected != 1 || !sum.Finished {
		t.Errorf("rejected %d (want 1), finished %v", sum.Rejected, sum.Finished)
	}
	rej, err := os.ReadFile(j.BadKeys.File)
	if err != nil || !strings.Contains(string(rej), "DeleteColumn marker at 9223372036854780 ms") || !strings.Contains(string(rej), "past Bigtable's largest") {
		t.Errorf("reject file: %v\n%s", err, rej)
	}
	// a's put stays (its marker refused), b's is deleted, c's written.
	want := []cell.Cell{
		{Row: []byte("a"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: tsBase * 1000, Type: cell.Put, Value: []byte("x")},
		{Row: []byte("c"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: tsBase * 1000, Type: cell.Put, Value: []byte("z")},
	}
	sameCells(t, "bigtable target", readBigtable(t, table), want)
}

// TestBigtableRawDeletesKillNineThenResume: rekey run --raw into
// Bigtable with deletes: apply, re-keying wide sensor rows into hourly
// rows (version and column deletes made by HBase over puts in earlier
// store files), killed with SIGKILL once a split is done, then resumed:
// the splits recorded done kept their spilled markers, and the table,
// read back with Google's client, equals the preset's rule over HBase's
// own (non-raw) view of the source: no masked put left, none missing.
func TestBigtableRawDeletesKillNineThenResume(t *testing.T) {
	st := testenv.Require(t)
	bigtableEmulator(t)
	bin := rekeyBinary(t)
	p := presets["wide_to_bucketed"]
	src := uniq(t, "bt_delkill_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	puts := bigWide(40, 1000)
	var dels []cell.Cell
	for i := 0; i < len(puts); i += 7 {
		c := puts[i]
		typ := cell.Delete
		if i%2 == 1 {
			typ = cell.DeleteColumn
		}
		dels = append(dels, cell.Cell{Row: c.Row, Family: c.Family, Qualifier: c.Qualifier, Timestamp: c.Timestamp, Type: typ})
	}
	view, raw := seedDeleted(t, src, snap, p.families, puts, dels)
	if len(view) >= len(raw)-len(dels) {
		t.Fatalf("HBase shows %d cells of %d raw: the markers mask nothing", len(view), len(raw))
	}
	want := inBigtable(expect(p, view))
	table := uniq(t, "bt_delkill")
	dir := t.TempDir()
	jobPath := writeBigtableJobFile(t, st, snap, table, dir)
	b, err := os.ReadFile(jobPath)
	if err != nil {
		t.Fatal(err)
	}
	withDeletes := strings.Replace(string(b), "instance: "+btInstance+"}", "instance: "+btInstance+", deletes: apply}", 1)
	if withDeletes == string(b) {
		t.Fatal("the job file names no target.bigtable instance")
	}
	if err := os.WriteFile(jobPath, []byte(withDeletes), 0o644); err != nil {
		t.Fatal(err)
	}
	k, out := killThenResume(t, bin, []string{"run", jobPath, "--raw", "--resume", "--workers", "2", "--split-bytes", "256KiB"})
	var sum pipeline.Summary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !sum.Finished || sum.Done != sum.Splits || sum.Skipped < k || sum.Problems() {
		t.Errorf("resumed: finished %v, %d/%d splits, %d skipped (killed after %d done), problems %v", sum.Finished, sum.Done, sum.Splits, sum.Skipped, k, sum.Problems())
	}
	sameCells(t, "bigtable target after kill -9, resume and the delete pass", readBigtable(t, table), want)
}
