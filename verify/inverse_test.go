package verify_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/verify"
)

const (
	hourMs = int64(3_600_000)
	dayMs  = 24 * hourMs
)

// demoCells is HBase's dump of the bundled demo snapshot (the oracle wrote
// testdata/snapshots/demo_events.cells): old row = user, qualifier = the
// event time as 8 big-endian bytes.
func demoCells(t *testing.T) []cell.Cell {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "snapshots", "demo_events.cells"))
	if err != nil {
		t.Fatal(err)
	}
	return parseDump(t, b)
}

// eventTime is an old cell's event time, its qualifier.
func eventTime(c *cell.Cell) int64 { return int64(binary.BigEndian.Uint64(c.Qualifier)) }

// stageRun writes a job reading the demo snapshot into the given target
// layout, and runs it through the pipeline into staged HFiles with no
// cluster, mapping every cell with newMapper (a test's broken transform).
// It returns the job and the staged HFiles as the new side.
func stageRun(t *testing.T, targetLayout string, newMapper func(*transform.Program) transform.Mapper) (*job.Job, *verify.StagingReader) {
	t.Helper()
	dir := t.TempDir()
	snaps, _ := filepath.Abs(filepath.Join("..", "testdata", "snapshots", "demo_events"))
	path := filepath.Join(dir, "job.yaml")
	src := fmt.Sprintf(`source: {root: %s, name: demo_events}
target: {table: events_new}
source_layout:
  row: [{field: user, type: string}]
  qualifier: [{field: ts, type: int, width: 8}]
target_layout:
%s
entity: [user]
sink: {type: hfiles, offline: true, staging: %s}
`, snaps, targetLayout, filepath.Join(dir, "stage"))
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := job.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run, err := pipeline.Prepare(ctx, j, pipeline.Options{NewMapper: func() transform.Mapper { return newMapper(j.Program) }, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sum, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Written != 31413 {
		t.Fatalf("the run wrote %d cells, want the snapshot's 31413", sum.Written)
	}
	staged, err := verify.OpenStaging(filepath.Join(dir, "stage", "hfiles"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { staged.Close() })
	return j, staged
}

// breaking wraps the job's own mapping and edits every cell it emits: a bug
// injected into the forward transform.
func breaking(edit func(c *cell.Cell)) func(*transform.Program) transform.Mapper {
	return func(p *transform.Program) transform.Mapper {
		rk := p.New()
		return transform.MapFunc(func(src cell.Cell, emit func(cell.Cell)) error {
			return rk.Map(src, func(c cell.Cell) {
				c = c.Clone()
				edit(&c)
				emit(c)
			})
		})
	}
}

// The demo layout (configs/demo.yaml): row = user (6 bytes) | day start (8
// bytes), qualifier = millis into the day (4 bytes).
const demoLayout = `  row:
    - {field: user, type: fixed, width: 6}
    - {field: day, type: time_bucket, of: ts, unit: day}
  qualifier:
    - {type: offset, of: ts, bucket: day}`

// TestInverseCatchesBrokenMappings: a run whose forward transform carries a
// bug writes its new cells; verified with that same transform, the forward
// comparison passes (the blind spot), while the inverse comparison finds
// exactly the cells the bug moved, as mapped_wrong with both keys. The
// cells each bug moves are counted from HBase's dump by the rule the test
// writes out, not by the code under test.
func TestInverseCatchesBrokenMappings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layout string
		edit   func(c *cell.Cell)
		// moved says whether the bug gives an old cell another key.
		moved func(old *cell.Cell) bool
		// forwardSees says the forward comparison catches it too.
		forwardSees bool
	}{
		{
			name: "day bucket boundary an hour late", layout: demoLayout,
			// Cells of the first hour of a UTC day go to the previous
			// day's row, their offset unchanged.
			edit: func(c *cell.Cell) {
				if binary.BigEndian.Uint32(c.Qualifier) < uint32(hourMs) {
					day := int64(binary.BigEndian.Uint64(c.Row[6:]))
					c.Row = binary.BigEndian.AppendUint64(c.Row[:6:6], uint64(day-dayMs))
				}
			},
			moved: func(o *cell.Cell) bool { return eventTime(o)%dayMs < hourMs },
		},
		{
			name: "offset truncated to whole seconds", layout: demoLayout,
			edit: func(c *cell.Cell) {
				off := binary.BigEndian.Uint32(c.Qualifier)
				c.Qualifier = binary.BigEndian.AppendUint32(nil, off-off%1000)
			},
			moved: func(o *cell.Cell) bool { return eventTime(o)%1000 != 0 },
		},
		{
			name: "ISO day written in UTC-5",
			layout: `  row:
    - {field: user, type: fixed, width: 6}
    - {field: day, type: time_bucket, of: ts, unit: day, format: iso}
  qualifier:
    - {type: offset, of: ts, bucket: day}`,
			// The date text is the event's date in New York winter time;
			// the offset stays measured from the UTC day.
			edit: func(c *cell.Cell) {
				start, err := time.Parse("2006-01-02", string(c.Row[6:]))
				if err != nil {
					panic(err)
				}
				ts := start.Add(time.Duration(binary.BigEndian.Uint32(c.Qualifier)) * time.Millisecond)
				c.Row = append(c.Row[:6:6], ts.In(time.FixedZone("EST", -5*3600)).Format("2006-01-02")...)
			},
			moved: func(o *cell.Cell) bool { return eventTime(o)%dayMs < 5*hourMs },
		},
		{
			name: "salt over the wrong bytes",
			// The day leads, so the new side has no entity range and is
			// read whole; cells are attributed by their fields.
			layout: `  row:
    - {field: day, type: time_bucket, of: ts, unit: day}
    - {field: b, type: salt, of: [user], buckets: 16}
    - {field: user, type: fixed, width: 6}
  qualifier:
    - {type: offset, of: ts, bucket: day}`,
			// The salt hashes the day and the user, not the user alone.
			edit: func(c *cell.Cell) { c.Row[8] = saltOf(c.Row[:8], c.Row[9:]) },
			moved: func(o *cell.Cell) bool {
				day := binary.BigEndian.AppendUint64(nil, uint64(eventTime(o)-eventTime(o)%dayMs))
				return saltOf(o.Row) != saltOf(day, o.Row)
			},
			// The forward comparison reads new keys with the layout,
			// which checks salts: it cannot attribute these cells and
			// finds their old cells missing.
			forwardSees: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, staged := stageRun(t, tc.layout, breaking(tc.edit))
			old, err := verify.OpenSnapshot(context.Background(), filepath.Join("..", "testdata", "snapshots", "demo_events"), "demo_events", time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			moved, cells := map[string]int64{}, map[string]int64{}
			var ch verify.Choice
			for _, c := range demoCells(t) {
				u := string(c.Row)
				if cells[u] == 0 {
					k, err := j.Program.ParseEntity("user=" + u)
					if err != nil {
						t.Fatal(err)
					}
					ch.Add(k, verify.ByAll)
				}
				cells[u]++
				if tc.moved(&c) {
					moved[u]++
				}
			}
			if len(moved) == 0 {
				t.Fatal("the bug moves no cell of the snapshot: the test shows nothing")
			}
			var n int64
			for _, k := range moved {
				n += k
			}
			t.Logf("the bug moves %d of 31413 cells, of %d of %d users", n, len(moved), len(cells))
			cfg := verify.Config{Program: j.Program, Old: old, New: staged, Workers: 2,
				NewMapper: func() transform.Mapper { return breaking(tc.edit)(j.Program) }}

			if m, _, _ := verify.ChooseMethod(j.Program, ""); m != verify.Inverse {
				t.Fatalf("the layout keeps every field, but the default method is %s", m)
			}
			cfg.Method = verify.Both
			res, err := verify.Compare(context.Background(), cfg, ch.Targets())
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 2*len(cells) {
				t.Fatalf("%d results for %d entities and two methods", len(res), len(cells))
			}
			for _, r := range res[len(cells):] {
				u := strings.TrimPrefix(r.Entity, "user=")
				switch {
				case r.Method != verify.Forward:
					t.Fatalf("%s: method %s, want forward", r.Entity, r.Method)
				case tc.forwardSees:
					if want := map[verify.Class]int64{verify.MissingInNew: moved[u]}; moved[u] > 0 && fmt.Sprint(r.Mismatches) != fmt.Sprint(want) {
						t.Errorf("forward %s: %v, want %v", r.Entity, r.Mismatches, want)
					}
				case !r.Match:
					t.Errorf("forward with the broken transform: %s mismatches (%v); the blind spot is not shown", r.Entity, r.Mismatches)
				}
			}
			var caught int
			for _, r := range res[:len(cells)] {
				u := strings.TrimPrefix(r.Entity, "user=")
				if r.Method != verify.Inverse || r.Old.Cells != cells[u] {
					t.Fatalf("%s: method %s, %d old cells; want inverse and the dump's %d", r.Entity, r.Method, r.Old.Cells, cells[u])
				}
				if moved[u] == 0 {
					if !r.Match {
						t.Errorf("inverse %s: nothing moved, but %v %v", r.Entity, r.Mismatches, r.First)
					}
					continue
				}
				want := map[verify.Class]int64{verify.MappedWrong: moved[u]}
				if r.Match || fmt.Sprint(r.Mismatches) != fmt.Sprint(want) {
					t.Errorf("inverse %s: %v, want %v", r.Entity, r.Mismatches, want)
					continue
				}
				caught++
				checkBothKeys(t, r)
			}
			// The report names the entities the methods disagree on: the
			// transform's fault, not the data's.
			if rep := verify.NewReport(res); !tc.forwardSees && len(rep.Summary.Disagree) != len(moved) {
				t.Errorf("the report names %d entities the methods disagree on, the bug moved cells of %d", len(rep.Summary.Disagree), len(moved))
			}
			if caught != len(moved) {
				t.Errorf("the inverse caught %d entities, the bug moved cells of %d", caught, len(moved))
			}
		})
	}
}

// checkBothKeys: a mapped_wrong difference shows the old cell whose
// content the new cell holds, and the new cell, with another key.
func checkBothKeys(t *testing.T, r verify.Result) {
	t.Helper()
	for _, d := range r.First {
		if d.Class != verify.MappedWrong || d.Old == "" || d.New == "" {
			t.Errorf("%s: difference %+v does not name both cells", r.Entity, d)
			continue
		}
		oldF, newF := strings.Split(d.Old, "\t"), strings.Split(d.New, "\t")
		// Same timestamp and value, different key.
		if oldF[3] != newF[3] || oldF[5] != newF[5] || oldF[0]+oldF[2] == newF[0]+newF[2] {
			t.Errorf("%s: old %q and new %q are not one cell under two keys", r.Entity, d.Old, d.New)
		}
	}
}

// saltOf is the salt rule doc.go gives, written out: FNV-1a 32 over the
// bytes, mod 16.
func saltOf(parts ...[]byte) byte {
	h := fnv.New32a()
	for _, p := range parts {
		h.Write(p)
	}
	return byte(h.Sum32() % 16)
}

// TestInverseCleanRunMatches: the same runs with the job's own transform
// verify clean by the inverse method, and with both methods agree.
func TestInverseCleanRunMatches(t *testing.T) {
	j, staged := stageRun(t, demoLayout, func(p *transform.Program) transform.Mapper { return p.New() })
	old, err := verify.OpenSnapshot(context.Background(), filepath.Join("..", "testdata", "snapshots", "demo_events"), "demo_events", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	cells := map[string]int64{}
	var bytesAll int64
	var ch verify.Choice
	for _, c := range demoCells(t) {
		if cells[string(c.Row)] == 0 {
			k, _ := j.Program.ParseEntity("user=" + string(c.Row))
			ch.Add(k, verify.ByAll)
		}
		cells[string(c.Row)]++
		bytesAll += cell.Size(&c)
	}
	res, err := verify.Compare(context.Background(), verify.Config{Program: j.Program, Old: old, New: staged, Method: verify.Both}, ch.Targets())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2*len(cells) {
		t.Fatalf("%d results for %d entities and two methods", len(res), len(cells))
	}
	var inverseBytes int64
	for i, r := range res {
		u := strings.TrimPrefix(r.Entity, "user=")
		want := verify.Inverse
		if i >= len(cells) {
			want = verify.Forward
		}
		if !r.Match || r.Method != want || r.Old.Cells != cells[u] || r.New.Cells != cells[u] || r.Old.Digest != r.New.Digest {
			t.Errorf("%s %s: match %v, %d old and %d new cells (dump %d)", r.Method, r.Entity, r.Match, r.Old.Cells, r.New.Cells, cells[u])
		}
		if r.Method == verify.Inverse {
			inverseBytes += r.New.Bytes
		}
	}
	// The inverse counts new cells read back, in the old layout: their
	// bytes are the old cells' own.
	if inverseBytes != bytesAll {
		t.Errorf("inverse: %d bytes of new cells read back, the dump's old cells hold %d", inverseBytes, bytesAll)
	}
	if rep := verify.NewReport(res); rep.Method != verify.Both || rep.Summary.Entities != len(cells) || len(rep.Summary.Disagree) != 0 || !rep.OK() {
		t.Errorf("report: method %s, summary %+v", rep.Method, rep.Summary)
	}
}
