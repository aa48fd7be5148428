package verify_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/verify"
)

// TestVerifySpeed measures, on demo-shaped data (the events preset, wide ->
// bucketed by day), the time and bytes of verifying the 100 heaviest
// entities and a sample of 1000 against a full read of both sides. It only
// reports: set REKEY_VERIFY_SPEED=1 to run it (it writes about half a
// million cells to the shared cluster). VERIFY_SPEED_USERS sets the user
// count (default 20000).
func TestVerifySpeed(t *testing.T) {
	if os.Getenv("REKEY_VERIFY_SPEED") != "1" {
		t.Skip("set REKEY_VERIFY_SPEED=1 to measure verify against full scans")
	}
	st := testenv.Require(t)
	ctx := context.Background()
	users := 20000
	if s := os.Getenv("VERIFY_SPEED_USERS"); s != "" {
		users, _ = strconv.Atoi(s)
	}
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	j, err := job.Load(filepath.Join("..", "configs", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := j.Program

	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	src, snap, dst := "verify_speed_src_"+suffix, "verify_speed_snap_"+suffix, "verify_speed_dst_"+suffix
	spec := fmt.Sprintf(`{"table": %q, "seed": 11,
 "families": [{"name": "e", "encoding": "FAST_DIFF", "compression": "SNAPPY"}],
 "split_keys": ["u%05d", "u%05d", "u%05d"],
 "steps": [{"op": "events", "users": %d, "max_events": 20000, "zipf_s": 0.9, "days": 60},
  {"op": "flush"}, {"op": "snapshot", "name": %q}]}`, src, users/4, users/2, 3*users/4, users, snap)
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", specFile)
	defer func() {
		c.DeleteSnapshot(ctx, snap)
		dropTable(c, src)
	}()

	// The target, by the preset's rule: row = user | day start (8 bytes),
	// qualifier = millis into the day (4 bytes), from HBase's own dump.
	const day = int64(24 * time.Hour / time.Millisecond)
	var splits [][]byte
	for _, u := range []int{users / 4, users / 2, 3 * users / 4} {
		splits = append(splits, []byte(fmt.Sprintf("u%05d", u)))
	}
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: dst, Families: []hbase.Family{{Name: "e", Attributes: map[string]string{"DATA_BLOCK_ENCODING": "FAST_DIFF", "COMPRESSION": "SNAPPY"}}}, SplitKeys: splits}); err != nil {
		t.Fatal(err)
	}
	defer dropTable(c, dst)
	w := c.NewWriter([]byte(dst), hbase.WriterConfig{})
	cells := parseDump(t, testenv.Oracle(t, "dump-snapshot", st.RootDir, snap))
	for _, sc := range cells {
		ts := int64(binary.BigEndian.Uint64(sc.Qualifier))
		start := ts - ts%day
		nc := sc
		nc.Row = binary.BigEndian.AppendUint64(append([]byte(nil), sc.Row...), uint64(start))
		nc.Qualifier = binary.BigEndian.AppendUint32(nil, uint32(ts-start))
		if err := w.Write(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx, dst); err != nil {
		t.Fatal(err)
	}

	open := func() *verify.SnapshotReader {
		old, err := verify.OpenSnapshot(ctx, st.RootDir, snap, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return old
	}
	// The sketch a run would save: one pass, not timed as verify's.
	old := open()
	var total int64
	for _, r := range old.Snapshot().Regions() {
		total += r.Bytes()
	}
	t0 := time.Now()
	cs, err := verify.Count(ctx, old, p, verify.CountOptions{K: 100, N: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	findWorst := time.Since(t0)
	old.Close()
	t.Logf("data: %d users, %d cells, snapshot store files %d bytes; --find-worst pass: %v, %d bytes read",
		users, len(cells), total, findWorst.Round(time.Millisecond), cs.BytesRead)

	run := func(name string, k, n int) {
		var ch verify.Choice
		ch.AddSketch(cs.Sketch, k, n)
		old := open()
		defer old.Close()
		nw := verify.NewTableReader(c, dst)
		t0 := time.Now()
		res, err := verify.Compare(ctx, verify.Config{Program: p, Old: old, New: nw, SnapshotTime: old.Snapshot().Info().CreationTime}, ch.Targets())
		if err != nil {
			t.Fatal(err)
		}
		el := time.Since(t0)
		var oc int64
		for _, r := range res {
			if !r.Match {
				t.Errorf("%s: %v", r.Entity, r.Mismatches)
			}
			oc += r.Old.Cells
		}
		t.Logf("%-22s %5d entities %8d cells (%5.1f%%)  %7v  old read %10d bytes (%5.1f%% of the snapshot)  new read %10d bytes",
			name, len(res), oc, 100*float64(oc)/float64(len(cells)), el.Round(time.Millisecond),
			old.BytesRead(), 100*float64(old.BytesRead())/float64(total), nw.BytesRead())
	}
	run("worst-100", 100, 0)
	run("sample-1000", 0, 1000)
	run("worst-100+sample-1000", 100, 1000)

	// A full read of both sides, for comparison.
	old = open()
	defer old.Close()
	nw := verify.NewTableReader(c, dst)
	t0 = time.Now()
	var n int64
	if err := old.Read(ctx, transform.KeyRange{}, func(*cell.Cell) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	oldFull := time.Since(t0)
	t0 = time.Now()
	var m int64
	if err := nw.Read(ctx, transform.KeyRange{}, func(*cell.Cell) error { m++; return nil }); err != nil {
		t.Fatal(err)
	}
	t.Logf("full read: old %d cells %v %d bytes; new %d cells %v %d bytes", n, oldFull.Round(time.Millisecond), old.BytesRead(), m, time.Since(t0).Round(time.Millisecond), nw.BytesRead())
}
