package job

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/transform"
)

func be(v uint64, width int) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return string(b[8-width:])
}

// presetCase runs one shipped config over synthetic cells of its old
// layout.
type presetCase struct {
	file string
	// cells builds old cell number i.
	cell func(i int) cell.Cell
	// want is the new row, family and qualifier of old cell 0.
	wantRow, wantFamily, wantQual string
	// warnings are the plan warning codes expected, in any order.
	warnings []string
}

const t0 = int64(1767268800123) // 2026-01-01T12:00:00.123Z

var presets = []presetCase{
	{
		file: "demo.yaml",
		cell: func(i int) cell.Cell {
			return cell.Cell{Row: fmt.Appendf(nil, "u%05d", i%7), Family: []byte("e"), Qualifier: []byte(be(uint64(t0+int64(i)*3_600_000), 8)),
				Timestamp: t0, Type: cell.Put, Value: []byte("click:/home")}
		},
		wantRow: "u00000" + be(1767225600000, 8), wantFamily: "e", wantQual: be(43200123, 4),
	},
	{
		file: "wide_to_bucketed.yaml",
		cell: func(i int) cell.Cell {
			return cell.Cell{Row: fmt.Appendf(nil, "sensor-%d", i%5), Family: []byte("r"), Qualifier: []byte(be(uint64(t0+int64(i)*60_000), 8)),
				Timestamp: t0, Type: cell.Put, Value: []byte("21.5")}
		},
		wantRow: "sensor-0\x002026-01-01T12", wantFamily: "r", wantQual: be(123, 4),
	},
	{
		file: "tall_to_wide.yaml",
		cell: func(i int) cell.Cell {
			return cell.Cell{Row: fmt.Appendf(nil, "c%d|%d", i%3, 98765+i), Family: []byte("o"), Qualifier: []byte("amount"),
				Timestamp: t0 + int64(i)*1000, Type: cell.Put, Value: []byte("12.00")}
		},
		wantRow: "c0\x00" + be(1767225600000, 8), wantFamily: "d", wantQual: be(98765, 8) + "amount",
	},
	{
		file: "salt.yaml",
		cell: func(i int) cell.Cell {
			return cell.Cell{Row: []byte(fmt.Sprintf("dev%d|", i%11) + be(uint64(math.MaxInt64-(t0+int64(i))), 8)), Family: []byte("t"),
				Qualifier: []byte("temp"), Timestamp: t0, Type: cell.Put, Value: []byte("7")}
		},
		// FNV-1a 32 of "dev0" is 0x68099164 (computed independently, in
		// Python); mod 16 = 4.
		wantRow: "\x04dev0|" + be(uint64(math.MaxInt64-t0), 8), wantFamily: "t", wantQual: "temp",
		warnings: []string{"separator-order"},
	},
	{
		file: "rekey.yaml",
		cell: func(i int) cell.Cell {
			return cell.Cell{Row: fmt.Appendf(nil, "%d#%d", t0+int64(i), 4711+i%9), Family: []byte("cf"), Qualifier: []byte("q"),
				Timestamp: t0, Type: cell.Put, Value: []byte("x")}
		},
		wantRow: be(4711, 8) + "E" + be(uint64(math.MaxInt64-t0), 8), wantFamily: "a", wantQual: "q",
	},
}

// TestPresets loads each config in configs/ and runs it end to end over
// synthetic cells: the first new key is what the preset documents, every
// cell's entity reads the same from the old and the new key, the new key
// parses back to the same fields, and the plan warns as expected.
func TestPresets(t *testing.T) {
	for _, pc := range presets {
		t.Run(pc.file, func(t *testing.T) {
			j, err := Load(filepath.Join("../configs", pc.file))
			if err != nil {
				t.Fatal(err)
			}
			r := j.Program.New()
			pl := j.Program.NewPlanner(transform.PlanOptions{})
			var oldEnt, newEnt []byte
			for i := 0; i < 500; i++ {
				src := pc.cell(i)
				var out []cell.Cell
				if err := r.Map(src, func(c cell.Cell) { out = append(out, c.Clone()) }); err != nil {
					t.Fatalf("cell %d: %v", i, err)
				}
				if len(out) != 1 {
					t.Fatalf("cell %d: %d cells out", i, len(out))
				}
				o := out[0]
				if i == 0 && (string(o.Row) != pc.wantRow || string(o.Family) != pc.wantFamily || string(o.Qualifier) != pc.wantQual) {
					t.Fatalf("new cell %q/%q:%q, want %q/%q:%q", o.Row, o.Family, o.Qualifier, pc.wantRow, pc.wantFamily, pc.wantQual)
				}
				if o.Timestamp != src.Timestamp || !bytes.Equal(o.Value, src.Value) || o.Type != src.Type {
					t.Fatalf("cell %d: timestamp, value or type changed: %s", i, o.String())
				}
				if oldEnt, err = r.SourceEntity(oldEnt[:0], &src); err != nil {
					t.Fatal(err)
				}
				if newEnt, err = r.TargetEntity(newEnt[:0], &o); err != nil {
					t.Fatalf("cell %d: new key does not parse back: %v", i, err)
				}
				if !bytes.Equal(oldEnt, newEnt) {
					t.Fatalf("cell %d: entity %s from the old key, %s from the new", i, j.Program.FormatEntity(oldEnt), j.Program.FormatEntity(newEnt))
				}
				pl.Add(&src)
			}
			rep := pl.Report(true)
			if rep.Rejected != 0 || len(rep.Collisions) != 0 {
				t.Fatalf("plan: %d rejected, collisions %v", rep.Rejected, rep.Collisions)
			}
			var codes []string
			for _, w := range rep.Warnings {
				codes = append(codes, w.Code)
			}
			sort.Strings(codes)
			want := append([]string(nil), pc.warnings...)
			sort.Strings(want)
			if strings.Join(codes, ",") != strings.Join(want, ",") {
				t.Errorf("warnings %v, want %v: %+v", codes, want, rep.Warnings)
			}
			if len(rep.SplitKeys) == 0 {
				t.Errorf("no split keys suggested")
			}
		})
	}
}

// FuzzPresets feeds arbitrary keys through every shipped config: nothing
// panics, and whenever a cell maps, its new key reads back to the entity of
// its old key.
func FuzzPresets(f *testing.F) {
	var progs []*Job
	for _, pc := range presets {
		j, err := Load(filepath.Join("../configs", pc.file))
		if err != nil {
			f.Fatal(err)
		}
		progs = append(progs, j)
		c := pc.cell(1)
		f.Add(uint8(len(progs)-1), c.Row, c.Family, c.Qualifier, c.Timestamp)
	}
	f.Fuzz(func(t *testing.T, which uint8, row, family, qual []byte, ts int64) {
		j := progs[int(which)%len(progs)]
		r, back := j.Program.New(), j.Program.New()
		src := cell.Cell{Row: row, Family: family, Qualifier: qual, Timestamp: ts, Type: cell.Put}
		out, err := r.Apply(&src)
		if err != nil {
			return
		}
		old, err := r.SourceEntity(nil, &src)
		if err != nil {
			t.Fatalf("mapped but the old entity does not parse: %v", err)
		}
		nw, err := back.TargetEntity(nil, &out)
		if err != nil {
			t.Fatalf("%s: new key %q:%q does not read back: %v", j.Path, out.Row, out.Qualifier, err)
		}
		if !bytes.Equal(old, nw) {
			t.Fatalf("%s: entity %x became %x", j.Path, old, nw)
		}
	})
}
