package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestVerifySnapshotAuto: `rekey verify --snapshot auto` snapshots the
// live target itself, reads that snapshot's HFiles, says so in the report
// (new_side "snapshot", against "table" for the live path), finds a
// broken cell as the live path does, and deletes its snapshot unless
// --keep-snapshot. The target is built from the oracle's dump of the
// source snapshot by the demo preset's rule.
func TestVerifySnapshotAuto(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	src, snap, dst := "verify_auto_src_"+suffix, "verify_auto_snap_"+suffix, "verify_auto_dst_"+suffix
	dir := t.TempDir()
	spec := fmt.Sprintf(`{"table": %q, "seed": 5, "families": [{"name": "e"}], "split_keys": ["u00020"],
 "steps": [{"op": "events", "users": 40, "max_events": 300, "days": 5}, {"op": "flush"}, {"op": "snapshot", "name": %q}]}`, src, snap)
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", filepath.Join(dir, "spec.json"))
	defer func() {
		c.DeleteSnapshot(ctx, snap)
		c.DisableTable(ctx, src)
		c.DeleteTable(ctx, src)
	}()

	// The demo preset's rule: new row = user | day start (8 bytes), new
	// qualifier = millis into the day (4 bytes).
	const day = int64(24 * time.Hour / time.Millisecond)
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: dst, Families: []hbase.Family{{Name: "e"}}, SplitKeys: [][]byte{[]byte("u00010"), []byte("u00030")}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.DisableTable(ctx, dst)
		c.DeleteTable(ctx, dst)
	}()
	var target []cell.Cell
	for _, line := range strings.Split(strings.TrimSpace(string(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap))), "\n") {
		f := strings.Split(line, "\t")
		row, _ := hex.DecodeString(f[0])
		q, _ := hex.DecodeString(f[2])
		val, _ := hex.DecodeString(f[5])
		ts, _ := strconv.ParseInt(f[3], 10, 64)
		evt := int64(binary.BigEndian.Uint64(q))
		start := evt - evt%day
		target = append(target, cell.Cell{
			Row: binary.BigEndian.AppendUint64(row, uint64(start)), Family: []byte(f[1]),
			Qualifier: binary.BigEndian.AppendUint32(nil, uint32(evt-start)), Timestamp: ts, Type: cell.Put, Value: val,
		})
	}
	w := c.NewWriter([]byte(dst), hbase.WriterConfig{})
	if err := w.Write(ctx, target...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(dir, "autosnap.yaml")
	if err := os.WriteFile(job, []byte(fmt.Sprintf(`source: {root: %q, name: %s}
target: {table: %s}
source_layout:
  row: [{field: user, type: string}]
  qualifier: [{field: ts, type: int, width: 8}]
target_layout:
  row:
    - {field: user, type: fixed, width: 6}
    - {field: day, type: time_bucket, of: ts, unit: day}
  qualifier:
    - {type: offset, of: ts, bucket: day}
entity: [user]
verify: {retries: 0}
`, st.RootDir, snap, dst)), 0o644); err != nil {
		t.Fatal(err)
	}
	type report struct {
		New     string `json:"new"`
		NewSide string `json:"new_side"`
		Summary struct {
			Entities, Mismatched int
			CellsCompared        int64 `json:"cells_compared"`
		}
		Entities []struct {
			Entity     string
			Match      bool
			Mismatches map[string]int64
		}
	}
	verify := func(want int, args ...string) report {
		t.Helper()
		code, out, errOut := runRekey(t, append([]string{"verify", job, "--zk", st.ZKQuorum, "--all", "--json"}, args...)...)
		if code != want {
			t.Fatalf("verify %v: exit %d, want %d: %s\n%.2000s", args, code, want, errOut, out)
		}
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("report: %v\n%.2000s", err, out)
		}
		return r
	}
	ours := func() []string {
		t.Helper()
		snaps, err := c.Snapshots(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range snaps {
			if strings.HasPrefix(s.Name, "rekey_verify_autosnap_") && s.Table == dst {
				names = append(names, s.Name)
			}
		}
		return names
	}

	live := verify(exitOK)
	auto := verify(exitOK, "--snapshot", "auto", "--snapshot-root", st.RootDir)
	if live.NewSide != "table" || auto.NewSide != "snapshot" || !strings.Contains(auto.New, dst) {
		t.Errorf("new sides %q and %q (%s), want table and snapshot (of %s)", live.NewSide, auto.NewSide, auto.New, dst)
	}
	if auto.Summary.Entities != 40 || auto.Summary.CellsCompared != 2*int64(len(target)) || auto.Summary.CellsCompared != live.Summary.CellsCompared {
		t.Errorf("--snapshot auto compared %d entities, %d cells; want 40 and %d, as the live table", auto.Summary.Entities, auto.Summary.CellsCompared, 2*len(target))
	}
	if left := ours(); len(left) != 0 {
		t.Errorf("snapshots left after the check: %v", left)
	}

	// A broken cell, found through the snapshot; the snapshot kept.
	broken := target[len(target)/3]
	changed := broken
	changed.Value = []byte("broken")
	if err := c.Put(ctx, []byte(dst), changed.Row, []cell.Cell{changed}); err != nil {
		t.Fatal(err)
	}
	bad := verify(exitProblems, "--snapshot", "auto", "--snapshot-root", st.RootDir, "--keep-snapshot")
	user := "user=" + string(broken.Row[:6])
	found := false
	for _, e := range bad.Entities {
		if e.Entity == user {
			found = !e.Match && e.Mismatches["value_differs"] == 1 && len(e.Mismatches) == 1
		} else if !e.Match {
			t.Errorf("%s: mismatch %v, only %s was broken", e.Entity, e.Mismatches, user)
		}
	}
	if !found || bad.Summary.Mismatched != 1 {
		t.Errorf("the broken cell of %s not found through the snapshot: %+v", user, bad.Summary)
	}
	kept := ours()
	for _, n := range kept {
		c.DeleteSnapshot(ctx, n)
	}
	if len(kept) != 1 {
		t.Errorf("--keep-snapshot kept %v, want one snapshot", kept)
	}

	// No root and no hbase-site.xml: refused before any snapshot is taken.
	t.Setenv("HBASE_CONF_DIR", "")
	code, _, errOut := runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--all", "--snapshot", "auto")
	if code != exitUsage || !strings.Contains(errOut, "--snapshot-root") {
		t.Errorf("--snapshot auto with no root: exit %d, %q; want %d naming --snapshot-root", code, errOut, exitUsage)
	}
	if left := ours(); len(left) != 0 {
		t.Errorf("snapshots taken by a refused check: %v", left)
	}
}
