package verify_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/verify"
)

// The salt preset (configs/salt.yaml): old row = device|reversed ts, new
// row = salt(device) | device|reversed ts, 16 buckets.
func saltProgram(t testing.TB) *transform.Program {
	t.Helper()
	p, err := transform.Compile(transform.Spec{
		Source: transform.LayoutSpec{Row: []transform.ComponentSpec{
			{Type: "string", Field: "device", Sep: '|', HasSep: true},
			{Type: "reversed_ts", Field: "ts"},
		}},
		Target: transform.LayoutSpec{Row: []transform.ComponentSpec{
			{Type: "salt", Field: "bucket", Of: []string{"device"}, Buckets: 16},
			{Type: "string", Field: "device", Sep: '|', HasSep: true},
			{Type: "reversed_ts", Field: "ts"},
		}},
		Entity: []string{"device"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bucket is the preset's rule written out: FNV-1a 32 of the device, mod 16.
func bucket(device []byte) byte {
	h := fnv.New32a()
	h.Write(device)
	return byte(h.Sum32() % 16)
}

// newRow maps an old row by the rule: salt byte, then the old row as is.
func newRow(old []byte) []byte {
	dev, _, _ := bytes.Cut(old, []byte("|"))
	return append([]byte{bucket(dev)}, old...)
}

func deviceOf(row []byte) string {
	dev, _, _ := bytes.Cut(row, []byte("|"))
	return string(dev)
}

func parseDump(t testing.TB, out []byte) []cell.Cell {
	t.Helper()
	var cells []cell.Cell
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			t.Fatalf("dump line %q: %d fields", line, len(f))
		}
		var c cell.Cell
		var err error
		c.Row, _ = hex.DecodeString(f[0])
		c.Family = []byte(f[1])
		c.Qualifier, _ = hex.DecodeString(f[2])
		if c.Timestamp, err = strconv.ParseInt(f[3], 10, 64); err != nil {
			t.Fatal(err)
		}
		if c.Type, err = cell.ParseType(f[4]); err != nil {
			t.Fatal(err)
		}
		c.Value, _ = hex.DecodeString(f[5])
		cells = append(cells, c)
	}
	return cells
}

func revTS(ts int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(math.MaxInt64-ts))
}

// fixture is a source table, its snapshot, and the target built from the
// oracle's dump of that snapshot by the preset's rule.
type fixture struct {
	c        *hbase.Client
	st       *testenv.State
	p        *transform.Program
	snap     string
	target   string
	expected map[string][]cell.Cell // device -> expected new cells
	source   map[string][]cell.Cell // device -> old cells (oracle)
	devices  []string
	split    string // the device split across old and new regions
}

const tsBase = int64(1767225600000) // 2026-01-01

func newFixture(t *testing.T) *fixture {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := &fixture{c: c, st: st, p: saltProgram(t), split: "dev-05"}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	src := "verify_src_" + suffix
	f.snap = "verify_snap_" + suffix
	f.target = "verify_dst_" + suffix

	// Old table: device i has 20+15i events, two columns each, the v
	// column with two versions. The old table splits inside dev-05's and
	// dev-08's rows, so those entities span two old regions.
	type ev struct {
		dev string
		ts  int64
	}
	var evs []ev
	for i := 0; i < 12; i++ {
		dev := fmt.Sprintf("dev-%02d", i)
		f.devices = append(f.devices, dev)
		for j := 0; j < 20+15*i; j++ {
			evs = append(evs, ev{dev, tsBase + int64(j)*60_000 + int64(i)})
		}
	}
	oldRow := func(e ev) []byte { return append([]byte(e.dev+"|"), revTS(e.ts)...) }
	mid := func(dev string) []byte {
		var rows [][]byte
		for _, e := range evs {
			if e.dev == dev {
				rows = append(rows, oldRow(e))
			}
		}
		sort.Slice(rows, func(i, j int) bool { return bytes.Compare(rows[i], rows[j]) < 0 })
		return rows[len(rows)/2]
	}
	fam := []hbase.Family{{Name: "d", Attributes: map[string]string{"VERSIONS": "3"}}}
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: src, Families: fam, SplitKeys: [][]byte{mid("dev-05"), mid("dev-08")}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropTable(c, src) })
	w := c.NewWriter([]byte(src), hbase.WriterConfig{})
	for _, e := range evs {
		row := oldRow(e)
		w.Write(ctx,
			cell.Cell{Row: row, Family: []byte("d"), Qualifier: []byte("v"), Timestamp: e.ts, Type: cell.Put, Value: []byte(fmt.Sprintf("v1-%d", e.ts))},
			cell.Cell{Row: row, Family: []byte("d"), Qualifier: []byte("v"), Timestamp: e.ts + 1, Type: cell.Put, Value: []byte(fmt.Sprintf("v2-%d", e.ts))},
			cell.Cell{Row: row, Family: []byte("d"), Qualifier: []byte("w"), Timestamp: e.ts, Type: cell.Put, Value: bytes.Repeat([]byte("w"), int(e.ts%50))},
		)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(ctx, f.snap, src); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSnapshot(context.Background(), f.snap) })

	// Expected target: HBase's own reading of the snapshot, re-keyed by
	// the rule above.
	f.source, f.expected = map[string][]cell.Cell{}, map[string][]cell.Cell{}
	for _, sc := range parseDump(t, testenv.Oracle(t, "dump-snapshot", st.RootDir, f.snap)) {
		dev := deviceOf(sc.Row)
		f.source[dev] = append(f.source[dev], sc)
		nc := sc
		nc.Row = newRow(sc.Row)
		f.expected[dev] = append(f.expected[dev], nc)
	}
	if len(f.source) != 12 {
		t.Fatalf("oracle dump has %d devices, want 12", len(f.source))
	}

	// New table: one region per bucket, and dev-05's bucket split inside
	// dev-05, so it spans two new regions.
	var splits [][]byte
	for b := 1; b < 16; b++ {
		splits = append(splits, []byte{byte(b)})
	}
	splits = append(splits, newRow(mid("dev-05")))
	sort.Slice(splits, func(i, j int) bool { return bytes.Compare(splits[i], splits[j]) < 0 })
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: f.target, Families: fam, SplitKeys: splits}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropTable(c, f.target) })
	w = c.NewWriter([]byte(f.target), hbase.WriterConfig{})
	for _, dev := range f.devices {
		if dev == "dev-04" {
			continue // dropped whole
		}
		if err := w.Write(ctx, f.expected[dev]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

func dropTable(c *hbase.Client, name string) {
	ctx := context.Background()
	c.DisableTable(ctx, name)
	c.DeleteTable(ctx, name)
}

// cellOf returns the n-th expected new cell of dev in column q.
func (f *fixture) cellOf(t *testing.T, dev, q string, n int) cell.Cell {
	for _, c := range f.expected[dev] {
		if string(c.Qualifier) == q {
			if n == 0 {
				return c.Clone()
			}
			n--
		}
	}
	t.Fatalf("no cell %d of %s:%s", n, dev, q)
	return cell.Cell{}
}

func (f *fixture) config(t *testing.T, old *verify.SnapshotReader) verify.Config {
	return verify.Config{
		Program: f.p, Old: old, New: verify.NewTableReader(f.c, f.target),
		SnapshotTime: old.Snapshot().Info().CreationTime,
		Retries:      1, Backoff: 20 * time.Millisecond, Workers: 2,
	}
}

func (f *fixture) targets(t *testing.T, devs ...string) []verify.Target {
	var out []verify.Target
	for _, d := range devs {
		k, err := f.p.ParseEntity("device=" + d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, verify.Target{Key: k, ChosenBy: []string{verify.ByName}})
	}
	return out
}

func TestVerifyAgainstCluster(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old, err := verify.OpenSnapshot(ctx, f.st.RootDir, f.snap, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	t.Run("clean target matches by both methods, counted whole across regions", func(t *testing.T) {
		devs := []string{"dev-00", "dev-05", "dev-08", "dev-11"}
		cfg := f.config(t, old)
		cfg.Method = verify.Both
		res, err := verify.Compare(ctx, cfg, f.targets(t, devs...))
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2*len(devs) {
			t.Fatalf("%d results for %d devices, two methods", len(res), len(devs))
		}
		for i, r := range res {
			dev := devs[i%len(devs)]
			if want := []verify.Method{verify.Inverse, verify.Forward}[i/len(devs)]; r.Method != want {
				t.Errorf("%s: result %d by %s, want %s", dev, i, r.Method, want)
			}
			want := int64(len(f.source[dev]))
			// Both sides count in one layout: the old one when new cells
			// are read back (inverse), the new one when old cells are
			// mapped (forward, one salt byte more per row).
			cells := f.source[dev]
			if r.Method == verify.Forward {
				cells = f.expected[dev]
			}
			var wantBytes int64
			for j := range cells {
				wantBytes += cell.Size(&cells[j])
			}
			if !r.Match || r.Old.Cells != want || r.New.Cells != want || r.Old.Bytes != wantBytes || r.New.Bytes != wantBytes {
				t.Errorf("%s: match %v, old %d cells %d bytes, new %d cells %d bytes; oracle: %d cells, %d bytes; %v",
					dev, r.Match, r.Old.Cells, r.Old.Bytes, r.New.Cells, r.New.Bytes, want, wantBytes, r.First)
			}
			if r.Old.Digest != r.New.Digest {
				t.Errorf("%s: digests %s, %s", dev, r.Old.Digest, r.New.Digest)
			}
		}
	})

	t.Run("salted: only the entity's bucket is read", func(t *testing.T) {
		cfg := f.config(t, old)
		tr := verify.NewTableReader(f.c, f.target)
		cfg.New = tr
		res, err := verify.Compare(ctx, cfg, f.targets(t, "dev-05"))
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		if !strings.HasPrefix(r.New.Range.StartHex, hex.EncodeToString([]byte{bucket([]byte("dev-05"))})) {
			t.Errorf("new range %s is not in bucket %d", r.New.Range, bucket([]byte("dev-05")))
		}
		var want int64
		for i := range f.expected["dev-05"] {
			want += cell.Size(&f.expected["dev-05"][i])
		}
		if tr.BytesRead() != want {
			t.Errorf("read %d bytes of the new table, want exactly dev-05's %d", tr.BytesRead(), want)
		}
		t.Logf("dev-05 (%d cells): old side read %d file bytes, new side %d", r.Old.Cells, old.BytesRead(), tr.BytesRead())
	})

	t.Run("staged HFiles: the table's own flushed files as the new side", func(t *testing.T) {
		if err := f.c.Flush(ctx, f.target); err != nil {
			t.Fatal(err)
		}
		staged, err := verify.OpenStaging(f.st.RootDir + "/data/default/" + f.target)
		if err != nil {
			t.Fatal(err)
		}
		defer staged.Close()
		cfg := f.config(t, old)
		cfg.New = staged
		res, err := verify.Compare(ctx, cfg, f.targets(t, f.devices...))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			dev := strings.TrimPrefix(r.Entity, "device=")
			want := int64(len(f.source[dev]))
			if dev == "dev-04" {
				// Never written: every old cell is missing.
				if r.Match || r.Mismatches[verify.MissingInNew] != want {
					t.Errorf("dev-04: match %v, %v; want %d missing", r.Match, r.Mismatches, want)
				}
				continue
			}
			if !r.Match || r.New.Cells != want {
				t.Errorf("%s: match %v, new %d cells, want %d; %v", dev, r.Match, r.New.Cells, want, r.First)
			}
		}
	})

	// Now break the target, one way per entity.
	put := func(c cell.Cell) {
		if err := f.c.Put(ctx, []byte(f.target), c.Row, []cell.Cell{c}); err != nil {
			t.Fatal(err)
		}
	}
	gone := f.cellOf(t, "dev-01", "w", 3)
	del := gone
	del.Type, del.Value = cell.Delete, nil
	if err := f.c.Delete(ctx, []byte(f.target), del.Row, []cell.Cell{del}); err != nil {
		t.Fatal(err)
	}
	changed := f.cellOf(t, "dev-02", "w", 5)
	changed.Value = []byte("changed")
	put(changed)
	version := f.cellOf(t, "dev-03", "w", 2)
	version.Timestamp -= 500
	version.Value = []byte("older version")
	put(version)
	extra := f.cellOf(t, "dev-07", "w", 1)
	extra.Qualifier, extra.Value = []byte("x"), []byte("stray")
	put(extra)
	// Two dual writes to one column of dev-06: with VERSIONS 3 they push
	// the oldest old version out of sight, which is not a mismatch.
	for h := 1; h <= 2; h++ {
		newer := f.cellOf(t, "dev-06", "v", 0)
		newer.Timestamp, newer.Value = time.Now().Add(time.Duration(h)*time.Hour).UnixMilli(), []byte("dual write")
		put(newer)
	}

	for _, m := range []verify.Method{verify.Inverse, verify.Forward} {
		t.Run("every mismatch caught and named, "+string(m), func(t *testing.T) {
			cfg := f.config(t, old)
			cfg.Method = m
			res, err := verify.Compare(ctx, cfg, f.targets(t, f.devices...))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]map[verify.Class]int64{
				"dev-01": {verify.MissingInNew: 1},
				"dev-02": {verify.ValueDiffers: 1},
				"dev-03": {verify.ExtraVersions: 1},
				"dev-04": {verify.MissingInNew: int64(len(f.source["dev-04"]))},
				"dev-07": {verify.ExtraInNew: 1},
			}
			for _, r := range res {
				dev := strings.TrimPrefix(r.Entity, "device=")
				w := want[dev]
				if (w == nil) != r.Match {
					t.Errorf("%s: match %v, want %v (%v)", dev, r.Match, w == nil, r.Mismatches)
					continue
				}
				if w != nil && fmt.Sprint(r.Mismatches) != fmt.Sprint(w) {
					t.Errorf("%s: mismatches %v, want %v", dev, r.Mismatches, w)
				}
				if dev == "dev-06" && (r.Newer != 2 || r.Superseded != 1) {
					t.Errorf("dev-06: %d cells newer than the snapshot, %d superseded; want 2 and 1", r.Newer, r.Superseded)
				}
				if w != nil && r.Reads != 2 {
					t.Errorf("%s: new side read %d times, want 2 (one retry)", dev, r.Reads)
				}
			}
			byDev := map[string]verify.Result{}
			for _, r := range res {
				byDev[strings.TrimPrefix(r.Entity, "device=")] = r
			}
			// The deleted cell as the method holds it: mapped (forward),
			// or as the old side has it, without the salt byte (inverse).
			missing := gone
			if m == verify.Inverse {
				missing.Row = gone.Row[1:]
			}
			if d := byDev["dev-01"].First; len(d) != 1 || d[0].Old != string(cell.AppendDump(nil, &missing)) {
				t.Errorf("dev-01 differences %v, want the deleted cell %s", d, cell.AppendDump(nil, &missing))
			}
			if d := byDev["dev-02"].First; len(d) != 1 || d[0].New != string(cell.AppendDump(nil, &changed)) {
				t.Errorf("dev-02 differences %v, want the changed cell", d)
			}
			if d := byDev["dev-03"].First; len(d) != 1 || d[0].New != string(cell.AppendDump(nil, &version)) {
				t.Errorf("dev-03 differences %v, want the added version", d)
			}
			rep := verify.NewReport(res)
			if rep.Summary.Mismatched != 5 || len(rep.Redo) != 5 || rep.OK() {
				t.Errorf("summary %+v, %d to redo", rep.Summary, len(rep.Redo))
			}
			// Worst first: dev-04 lost every cell.
			if rep.Entities[0].Entity != "device=dev-04" {
				t.Errorf("worst entity %s, want device=dev-04", rep.Entities[0].Entity)
			}
			var text bytes.Buffer
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", text.String())
		})
	}

	t.Run("old cells past the new family's TTL are expired, not missing", func(t *testing.T) {
		cfg := f.config(t, old)
		cfg.TargetTTL = map[string]time.Duration{"d": 24 * time.Hour}
		cfg.Method = verify.Both
		res, err := verify.Compare(ctx, cfg, f.targets(t, "dev-04"))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if n := r.Mismatches[verify.ExpiredByTTL]; n != int64(len(f.source["dev-04"])) || r.Mismatches[verify.MissingInNew] != 0 {
				t.Errorf("dev-04 with a one-day TTL, %s: %v", r.Method, r.Mismatches)
			}
		}
	})
}

// TestVerifyRekeyPresetReadsOldSideWhole: in the re-key preset
// (configs/rekey.yaml) the old row starts with the time, so an entity's
// old cells lie all over the table: the old side is read once, whole, and
// the new side (user first) still by each entity's range.
func TestVerifyRekeyPresetReadsOldSideWhole(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	j, err := job.Load(filepath.Join("..", "configs", "rekey.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	src, snap, dst := "verify_rk_src_"+suffix, "verify_rk_snap_"+suffix, "verify_rk_dst_"+suffix
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: src, Families: []hbase.Family{{Name: "cf"}}, SplitKeys: [][]byte{[]byte(fmt.Sprintf("%013d", tsBase+20_000))}}); err != nil {
		t.Fatal(err)
	}
	defer dropTable(c, src)
	w := c.NewWriter([]byte(src), hbase.WriterConfig{})
	for e := 0; e < 600; e++ {
		user := 1 + e%30
		ts := tsBase + int64(e)*100
		row := []byte(fmt.Sprintf("%013d#%d", ts, user))
		w.Write(ctx, cell.Cell{Row: row, Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: ts, Type: cell.Put, Value: []byte(fmt.Sprint(e))})
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(ctx, snap, src); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSnapshot(ctx, snap)

	// The preset's rule: new row = user as 8 bytes | "E" | Long.MAX_VALUE -
	// ts; family cf becomes a.
	perUser := map[int]int64{}
	var target []cell.Cell
	var ofUser7, oldOfUser7 cell.Cell
	for _, sc := range parseDump(t, testenv.Oracle(t, "dump-snapshot", st.RootDir, snap)) {
		tsText, userText, _ := strings.Cut(string(sc.Row), "#")
		ts, _ := strconv.ParseInt(tsText, 10, 64)
		user, _ := strconv.Atoi(userText)
		perUser[user]++
		nc := sc
		nc.Row = append(append(binary.BigEndian.AppendUint64(nil, uint64(user)), 'E'), revTS(ts)...)
		nc.Family = []byte("a")
		target = append(target, nc)
		if user == 7 {
			ofUser7, oldOfUser7 = nc, sc
		}
	}
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: dst, Families: []hbase.Family{{Name: "a"}}, SplitKeys: [][]byte{binary.BigEndian.AppendUint64(nil, 15)}}); err != nil {
		t.Fatal(err)
	}
	defer dropTable(c, dst)
	w = c.NewWriter([]byte(dst), hbase.WriterConfig{})
	if err := w.Write(ctx, target...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	old, err := verify.OpenSnapshot(ctx, st.RootDir, snap, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	var targets []verify.Target
	for _, u := range []string{"3", "7", "20"} {
		k, err := j.Program.ParseEntity("user=" + u)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, verify.Target{Key: k, ChosenBy: []string{verify.ByName}})
	}
	cfg := verify.Config{Program: j.Program, Old: old, New: verify.NewTableReader(c, dst), Retries: -1, Method: verify.Both}
	res, err := verify.Compare(ctx, cfg, targets)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		var u int
		fmt.Sscanf(r.Entity, "user=%d", &u)
		if !r.Match || r.Old.Cells != perUser[u] || r.New.Cells != perUser[u] || !r.Old.FullScan || r.New.FullScan {
			t.Errorf("%s: match %v, old %d new %d cells (oracle %d), full scans old %v new %v", r.Entity, r.Match, r.Old.Cells, r.New.Cells, perUser[u], r.Old.FullScan, r.New.FullScan)
		}
	}

	del := ofUser7
	del.Type, del.Value = cell.Delete, nil
	if err := c.Delete(ctx, []byte(dst), del.Row, []cell.Cell{del}); err != nil {
		t.Fatal(err)
	}
	res, err = verify.Compare(ctx, cfg, targets)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if (r.Entity == "user=7") == r.Match {
			t.Errorf("%s %s: match %v %v", r.Method, r.Entity, r.Match, r.Mismatches)
		}
		// The missing cell as each method holds it: the old cell as it
		// is (inverse), or mapped (forward).
		missing := oldOfUser7
		if r.Method == verify.Forward {
			missing = ofUser7
		}
		if r.Entity == "user=7" && (r.Mismatches[verify.MissingInNew] != 1 || len(r.First) != 1 || r.First[0].Old != string(cell.AppendDump(nil, &missing))) {
			t.Errorf("user=7, %s: %v %v, want the deleted cell missing", r.Method, r.Mismatches, r.First)
		}
	}
	// Its redo entry (one, for both methods) says the old side must be
	// filtered by entity.
	if rep := verify.NewReport(res); len(rep.Redo) != 1 || rep.Redo[0].Entity != "user=7" || !rep.Redo[0].FilterByEntity || rep.Redo[0].New.StartHex == "" {
		t.Errorf("redo %+v", rep.Redo)
	}
}

// TestCompareAllReadsAWholeNewSide: the re-key preset turned around (old
// row user first, new row time first), so the new layout gives an entity
// no range and the new side is read whole. CompareAll over every old
// entity finds, in that one read, a row of a user the old snapshot never
// had (an entity of its own, extra_in_new) and a row whose key the new
// layout cannot read (Outside), both written with HBase's client; before
// them, every entity matches and nothing is outside.
func TestCompareAllReadsAWholeNewSide(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	byUser, snap, byTime := "verify_all_user_"+suffix, "verify_all_snap_"+suffix, "verify_all_time_"+suffix
	j, err := job.Parse("reversed.yaml", []byte(fmt.Sprintf(`source: {root: %q, name: %s}
target: {table: %s}
source_layout:
  row:
    - {field: user, type: uint, width: 8}
    - {type: literal, bytes: "E"}
    - {field: ts, type: reversed_ts}
target_layout:
  row:
    - {field: ts, type: decimal, width: 13}
    - {type: literal, bytes: "#"}
    - {field: user, type: decimal}
entity: [user]
families: {a: cf}
`, st.RootDir, snap, byTime)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range []hbase.TableSpec{{Name: byUser, Families: []hbase.Family{{Name: "a"}}}, {Name: byTime, Families: []hbase.Family{{Name: "cf"}}}} {
		if err := c.CreateTable(ctx, tb); err != nil {
			t.Fatal(err)
		}
		defer dropTable(c, tb.Name)
	}
	var olds, news []cell.Cell
	for e := 0; e < 300; e++ {
		user, ts := 1+e%30, tsBase+int64(e)*100
		v := []byte(fmt.Sprint(e))
		olds = append(olds, cell.Cell{Row: append(append(binary.BigEndian.AppendUint64(nil, uint64(user)), 'E'), revTS(ts)...), Family: []byte("a"), Qualifier: []byte("q"), Timestamp: ts, Type: cell.Put, Value: v})
		news = append(news, cell.Cell{Row: []byte(fmt.Sprintf("%013d#%d", ts, user)), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: ts, Type: cell.Put, Value: v})
	}
	for _, w := range []struct {
		table string
		cells []cell.Cell
	}{{byUser, olds}, {byTime, news}} {
		wr := c.NewWriter([]byte(w.table), hbase.WriterConfig{})
		if err := wr.Write(ctx, w.cells...); err != nil {
			t.Fatal(err)
		}
		if err := wr.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Snapshot(ctx, snap, byUser); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSnapshot(ctx, snap)
	old, err := verify.OpenSnapshot(ctx, st.RootDir, snap, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	var targets []verify.Target
	for u := 1; u <= 30; u++ {
		k, err := j.Program.ParseEntity(fmt.Sprintf("user=%d", u))
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, verify.Target{Key: k, ChosenBy: []string{verify.ByAll}})
	}
	cfg := verify.Config{Program: j.Program, Old: old, New: verify.NewTableReader(c, byTime), Retries: -1}
	res, out, err := verify.CompareAll(ctx, cfg, targets)
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify.NewReport(res); len(res) != 30 || rep.Summary.Mismatched != 0 || out != nil || !res[0].New.FullScan {
		t.Fatalf("clean: %d results, summary %+v, outside %+v, new side read whole %v", len(res), rep.Summary, out, res[0].New.FullScan)
	}

	extra := cell.Cell{Row: []byte(fmt.Sprintf("%013d#%d", tsBase+50, 99)), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: tsBase + 50, Type: cell.Put, Value: []byte("extra")}
	bad := cell.Cell{Row: []byte("not-a-time#1"), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: tsBase, Type: cell.Put, Value: []byte("bad")}
	for _, cl := range []cell.Cell{extra, bad} {
		if err := c.Put(ctx, []byte(byTime), cl.Row, []cell.Cell{cl}); err != nil {
			t.Fatal(err)
		}
	}
	res, out, err = verify.CompareAll(ctx, cfg, targets)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 31 || res[30].Entity != "user=99" {
		t.Fatalf("%d results, the last %s: want 31, the last the entity found only on the new side, user=99", len(res), res[len(res)-1].Entity)
	}
	rep := verify.NewReport(res) // sorted worst first
	rep.AddOutside(out)
	if len(res) != 31 || rep.Summary.Mismatched != 1 || rep.OK() {
		t.Errorf("summary %+v, %d results, ok %v: want 31 entities, 1 mismatched", rep.Summary, len(res), rep.OK())
	}
	if e := rep.Entities[0]; e.Entity != "user=99" || e.Match || e.ChosenBy[0] != verify.ByNewOnly || e.Old.Cells != 0 || e.New.Cells != 1 ||
		e.Mismatches[verify.ExtraInNew] != 1 || len(e.First) != 1 || e.First[0].New != string(cell.AppendDump(nil, &extra)) {
		t.Errorf("the new-only entity: %+v", e)
	}
	if len(rep.Redo) != 1 || !rep.Redo[0].NewOnly {
		t.Errorf("redo %+v, want user=99 new_only", rep.Redo)
	}
	if rs, err := rep.RedoRanges(); err != nil || len(rs) != 0 {
		t.Errorf("redo ranges %v, %v: want none (nothing to write again)", rs, err)
	}
	if out == nil || out.Cells != 1 || out.Mismatches[verify.UnreadableInNew] != 1 || len(out.Examples) != 1 || out.Examples[0].New != string(cell.AppendDump(nil, &bad)) {
		t.Errorf("outside %+v, want the row not-a-time#1 unreadable", out)
	}
}
