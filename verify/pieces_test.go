package verify_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
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

// hourCell re-keys an old cell of configs/wide_to_bucketed.yaml by the
// preset's rule, written out: old row = sensor, qualifier = the reading's
// 8-byte millis; new row = sensor, 0x00, the reading's UTC hour as
// 2006-01-02T15; new qualifier = the millis into the hour, 4 bytes.
func hourCell(old cell.Cell) cell.Cell {
	ts := int64(binary.BigEndian.Uint64(old.Qualifier))
	start := ts - ts%3_600_000
	n := old
	n.Row = append(append(bytes.Clone(old.Row), 0), time.UnixMilli(start).UTC().Format("2006-01-02T15")...)
	n.Qualifier = binary.BigEndian.AppendUint32(nil, uint32(ts-start))
	return n
}

// TestHeavyEntityReadInPieces: one sensor is nearly the whole table, a
// single wide row of 20,000 readings over small blocks. Verified by four
// workers with small pieces, its old row is read in snapshot pieces cut
// inside the row and its new range in the hour ranges those cuts map to,
// and the results (counts, rows, digests, classes, first differences) are
// byte for byte those of one worker reading it whole, by both methods.
// Differences planted in the split entity (a cell missing in a middle
// piece, a value changed in another, an extra cell on the row a piece
// starts at) are each found and classified. Expected counts come from
// HBase's dump of the snapshot by the preset's rule.
func TestHeavyEntityReadInPieces(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	j, err := job.Load(filepath.Join("..", "configs", "wide_to_bucketed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := j.Program

	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	src, snap := "verify_heavy_src_"+suffix, "verify_heavy_snap_"+suffix
	fam := []hbase.Family{{Name: "d", Attributes: map[string]string{"VERSIONS": "3", "BLOCKSIZE": "4096"}}}
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: src, Families: fam, SplitKeys: [][]byte{[]byte("s02"), []byte("s06")}}); err != nil {
		t.Fatal(err)
	}
	defer dropTable(c, src)
	const heavy = "s03"
	w := c.NewWriter([]byte(src), hbase.WriterConfig{})
	for i := 0; i < 10; i++ {
		sensor := fmt.Sprintf("s%02d", i)
		n := 40
		if sensor == heavy {
			n = 20_000
		}
		for k := 0; k < n; k++ {
			ts := tsBase + int64(k)*60_000 + int64(i)
			q := binary.BigEndian.AppendUint64(nil, uint64(ts))
			cells := []cell.Cell{{Row: []byte(sensor), Family: []byte("d"), Qualifier: q, Timestamp: ts, Type: cell.Put, Value: []byte(fmt.Sprintf("r-%d-%d", i, k))}}
			if k%3 == 0 {
				cells = append(cells, cell.Cell{Row: []byte(sensor), Family: []byte("d"), Qualifier: q, Timestamp: ts + 1, Type: cell.Put, Value: []byte(fmt.Sprintf("r2-%d-%d", i, k))})
			}
			if err := w.Write(ctx, cells...); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot(ctx, snap, src); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSnapshot(context.Background(), snap)

	source := map[string][]cell.Cell{}
	for _, sc := range parseDump(t, testenv.Oracle(t, "dump-snapshot", st.RootDir, snap)) {
		source[string(sc.Row)] = append(source[string(sc.Row)], sc)
	}
	if len(source) != 10 || len(source[heavy]) != 20_000+6_667 {
		t.Fatalf("oracle dump: %d sensors, %d cells of %s", len(source), len(source[heavy]), heavy)
	}
	var targets []verify.Target
	for i := 0; i < 10; i++ {
		k, err := p.ParseEntity(fmt.Sprintf("sensor=s%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, verify.Target{Key: k, ChosenBy: []string{verify.ByName}})
	}
	old, err := verify.OpenSnapshot(ctx, st.RootDir, snap, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	config := func(table string, workers int, split int64) verify.Config {
		return verify.Config{
			Program: p, Method: verify.Both, Old: old, New: verify.NewTableReader(c, table),
			SnapshotTime: old.Snapshot().Info().CreationTime, Retries: -1,
			Workers: workers, SplitBytes: split,
		}
	}
	const pieceBytes = 64 << 10

	// The plan: the heavy sensor alone is cut, on both sides.
	oldPieces, newPieces, err := verify.Pieces(config("unused", 4, pieceBytes), targets)
	if err != nil {
		t.Fatal(err)
	}
	hv := 3
	if oldPieces[hv] < 4 || len(newPieces[hv]) < 4 {
		t.Fatalf("%s read in %d old pieces and %d new ones, want several of each", heavy, oldPieces[hv], len(newPieces[hv]))
	}
	for i := range targets {
		if i != hv && (oldPieces[i] > 1 || newPieces[i] != nil) {
			t.Errorf("s%02d cut into %d old and %d new pieces, want none", i, oldPieces[i], len(newPieces[i]))
		}
	}
	t.Logf("%s: %d old pieces, %d new ones", heavy, oldPieces[hv], len(newPieces[hv]))

	// Two targets by the rule: one clean, one with differences planted
	// inside the heavy sensor, at places the pieces decide.
	in := func(r transform.KeyRange, row []byte) bool {
		return bytes.Compare(row, r.Start) >= 0 && (len(r.Stop) == 0 || bytes.Compare(row, r.Stop) < 0)
	}
	var hvNew []cell.Cell
	for _, sc := range source[heavy] {
		hvNew = append(hvNew, hourCell(sc))
	}
	pick := func(r transform.KeyRange) int {
		var at []int
		for k, nc := range hvNew {
			if in(r, nc.Row) {
				at = append(at, k)
			}
		}
		if len(at) == 0 {
			t.Fatalf("no cell of %s in new piece %s", heavy, r)
		}
		return at[len(at)/2]
	}
	rs := newPieces[hv]
	missing := pick(rs[len(rs)/2])
	changed := pick(rs[1])
	boundary := rs[len(rs)-1].Start
	extra := cell.Cell{Row: bytes.Clone(boundary), Family: []byte("d"), Qualifier: []byte{0, 0, 0, 1}, Type: cell.Put, Value: []byte("extra")}
	var hourStart int64
	{
		_, text, _ := bytes.Cut(boundary, []byte{0})
		h, err := time.Parse("2006-01-02T15", string(text))
		if err != nil {
			t.Fatalf("boundary row %q: %v", boundary, err)
		}
		hourStart = h.UnixMilli()
	}
	extra.Timestamp = hourStart + 1
	changedCell := hvNew[changed].Clone()
	changedCell.Value = []byte("changed")

	write := func(name string, planted bool) {
		var splits [][]byte
		for _, s := range []string{"s02", "s06"} {
			splits = append(splits, []byte(s))
		}
		if err := c.CreateTable(ctx, hbase.TableSpec{Name: name, Families: fam, SplitKeys: splits}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dropTable(c, name) })
		w := c.NewWriter([]byte(name), hbase.WriterConfig{})
		for sensor, cells := range source {
			for k, sc := range cells {
				nc := hourCell(sc)
				if planted && sensor == heavy {
					switch k {
					case missing:
						continue
					case changed:
						nc = changedCell
					}
				}
				if err := w.Write(ctx, nc); err != nil {
					t.Fatal(err)
				}
			}
		}
		if planted {
			if err := w.Write(ctx, extra); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clean, planted := "verify_heavy_clean_"+suffix, "verify_heavy_planted_"+suffix
	write(clean, false)
	write(planted, true)

	hours := map[string]bool{}
	for _, nc := range hvNew {
		hours[string(nc.Row)] = true
	}
	for _, table := range []string{clean, planted} {
		one, err := verify.Compare(ctx, config(table, 1, -1), targets)
		if err != nil {
			t.Fatal(err)
		}
		many, err := verify.Compare(ctx, config(table, 4, pieceBytes), targets)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.MarshalIndent(one, "", " ")
		b, _ := json.MarshalIndent(many, "", " ")
		if !bytes.Equal(a, b) {
			t.Errorf("%s: four workers in pieces differ from one worker whole:\none:  %s\nmany: %s", table, a, b)
		}
		if len(many) != 2*len(targets) {
			t.Fatalf("%s: %d results, want %d (both methods)", table, len(many), 2*len(targets))
		}
		for _, r := range many {
			sensor := r.Entity[len("sensor="):]
			if r.Old.Cells != int64(len(source[sensor])) || r.Old.Rows != 1 {
				t.Errorf("%s %s %s: old side %d cells in %d rows, want %d in 1", table, r.Method, r.Entity, r.Old.Cells, r.Old.Rows, len(source[sensor]))
			}
			if sensor != heavy || table == clean {
				if !r.Match {
					t.Errorf("%s %s %s: %s %v %+v", table, r.Method, r.Entity, r.Verdict(), r.Mismatches, r.First)
				}
				if sensor == heavy && r.Method == verify.Inverse && r.New.Rows != int64(len(hours)) {
					t.Errorf("%s %s: new side %d rows, want the %d hours", table, r.Entity, r.New.Rows, len(hours))
				}
				continue
			}
			want := map[verify.Class]int64{verify.MissingInNew: 1, verify.ValueDiffers: 1, verify.ExtraInNew: 1}
			if r.Match || fmt.Sprint(r.Mismatches) != fmt.Sprint(want) {
				t.Errorf("%s %s %s: %s %v, want %v", table, r.Method, r.Entity, r.Verdict(), r.Mismatches, want)
				continue
			}
			// The cells themselves, in each method's own layout.
			oldOf := func(k int) string {
				if r.Method == verify.Inverse {
					return string(cell.AppendDump(nil, &source[heavy][k]))
				}
				return string(cell.AppendDump(nil, &hvNew[k]))
			}
			seen := map[verify.Class]bool{}
			for _, d := range r.First {
				switch d.Class {
				case verify.MissingInNew:
					seen[d.Class] = d.Old == oldOf(missing)
				case verify.ValueDiffers:
					seen[d.Class] = d.Old == oldOf(changed) && d.New == string(cell.AppendDump(nil, &changedCell))
				case verify.ExtraInNew:
					seen[d.Class] = d.New == string(cell.AppendDump(nil, &extra))
				}
			}
			if len(seen) != 3 || !seen[verify.MissingInNew] || !seen[verify.ValueDiffers] || !seen[verify.ExtraInNew] {
				t.Errorf("%s %s %s: first differences %+v do not show the planted cells (%v)", table, r.Method, r.Entity, r.First, seen)
			}
		}
	}
}
