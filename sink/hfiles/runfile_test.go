package hfiles

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/vfs"
)

// runCells is a sorted, varied partition stream: rows sharing long
// prefixes and none, empty qualifiers and values, nil and empty tags,
// timestamps up and down, every cell type, a row of 64 KiB - 1.
func runCells(seed int64, n int) []cell.Cell {
	rng := rand.New(rand.NewSource(seed))
	types := []cell.Type{cell.Put, cell.Delete, cell.DeleteColumn, cell.DeleteFamily, cell.DeleteFamilyVersion}
	out := make([]cell.Cell, 0, n+1)
	for i := 0; i < n; i++ {
		c := cell.Cell{
			Row:       fmt.Appendf(nil, "sensor-%03d\x00%05d", rng.Intn(40), rng.Intn(3)),
			Family:    []byte("d"),
			Qualifier: fmt.Appendf(nil, "%d", rng.Intn(50)),
			Timestamp: rng.Int63n(1<<62) - 1<<61,
			Type:      types[rng.Intn(len(types))],
			Value:     bytes.Repeat([]byte{byte(i)}, rng.Intn(300)),
		}
		switch i % 7 {
		case 0:
			c.Qualifier = nil
		case 1:
			c.Tags = []byte{0, 2, 1, byte(i)}
		case 2:
			c.Tags = []byte{}
		case 3:
			c.Value = nil
		}
		if i%50 == 0 {
			c.Row = c.Row[:rng.Intn(len(c.Row))+1]
		}
		out = append(out, c)
	}
	out = append(out, cell.Cell{Row: bytes.Repeat([]byte{0xff}, 1<<16-1), Family: []byte("d"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put, Value: []byte("v")})
	slices.SortFunc(out, func(a, b cell.Cell) int { return cell.Compare(&a, &b) })
	return out
}

// writeRun writes parts (region -> cells, one family each) as a run file
// named name with codec and small blocks.
func writeRun(t testing.TB, fsys *vfs.Mem, name, codec string, parts [][]cell.Cell) ([]RunPart, int64) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := newRunWriter(f, codec, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	for region, cells := range parts {
		for i := range cells {
			if err := rw.add(region, &cells[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	rp, size, err := rw.close()
	if err != nil {
		t.Fatal(err)
	}
	return rp, size
}

// readRun reads partition part of a run back, with clones of its cells.
func readRun(fsys vfs.FS, name string, size int64, part RunPart) ([]cell.Cell, error) {
	rc, err := openCursor(fsys, name, size, part, 0)
	if err != nil {
		return nil, err
	}
	defer rc.close()
	var out []cell.Cell
	for rc.next() {
		out = append(out, rc.at().Clone())
	}
	return out, rc.fail()
}

// TestRunFileRoundTrip: with every codec, each partition of a run reads
// back exactly the cells written (nil and empty tags kept apart), and its
// record's counts are the cells' own.
func TestRunFileRoundTrip(t *testing.T) {
	parts := [][]cell.Cell{runCells(1, 3000), runCells(2, 1), runCells(3, 800)}
	for _, codec := range []string{"s2", "lz4", "zstd", "none"} {
		t.Run(codec, func(t *testing.T) {
			fsys := vfs.NewMem()
			rp, size := writeRun(t, fsys, "r.run", codec, parts)
			if len(rp) != len(parts) {
				t.Fatalf("%d partitions, want %d", len(rp), len(parts))
			}
			for i, p := range rp {
				var sum int64
				for j := range parts[i] {
					sum += cell.Size(&parts[i][j])
				}
				if p.Region != i || p.Family != "d" || p.Cells != int64(len(parts[i])) || p.Bytes != sum {
					t.Errorf("partition %d: %+v, want region %d, %d cells, %d bytes", i, p, i, len(parts[i]), sum)
				}
				got, err := readRun(fsys, "r.run", size, p)
				if err != nil {
					t.Fatalf("partition %d: %v", i, err)
				}
				if len(got) != len(parts[i]) {
					t.Fatalf("partition %d: %d cells, want %d", i, len(got), len(parts[i]))
				}
				for j := range got {
					w := &parts[i][j]
					if cell.Compare(&got[j], w) != 0 || !bytes.Equal(got[j].Value, w.Value) || !bytes.Equal(got[j].Tags, w.Tags) || (got[j].Tags == nil) != (w.Tags == nil) {
						t.Fatalf("partition %d cell %d: %v, want %v", i, j, &got[j], w)
					}
				}
			}
		})
	}
}

// TestRunFileDamage: a run file with any one byte changed, or cut short,
// or read under another record, fails with an error naming the run, or
// (a change a codec's output can absorb, such as a copy from another
// place holding the same bytes) reads the very cells written: no damage
// ever reads as other or fewer cells.
func TestRunFileDamage(t *testing.T) {
	cells := runCells(4, 60)
	cells = cells[:len(cells)-1] // not the 64 KiB row: every byte is tried
	for _, codec := range []string{"s2", "lz4", "zstd", "none"} {
		t.Run(codec, func(t *testing.T) {
			fsys := vfs.NewMem()
			rp, size := writeRun(t, fsys, "r.run", codec, [][]cell.Cell{cells})
			orig, err := vfs.ReadFile(fsys, "r.run")
			if err != nil {
				t.Fatal(err)
			}
			want, err := readRun(fsys, "r.run", size, rp[0])
			if err != nil || len(want) != len(cells) {
				t.Fatalf("undamaged: %d cells, %v", len(want), err)
			}
			absorbed := 0
			check := func(what string, data []byte, size int64, part RunPart) {
				t.Helper()
				fsys.WriteFile("d.run", data)
				got, err := readRun(fsys, "d.run", size, part)
				if err == nil {
					if len(got) != len(want) {
						t.Fatalf("%s: read %d cells without an error, want %d", what, len(got), len(want))
					}
					for j := range got {
						if !slices.Equal(cell.AppendDump(nil, &got[j]), cell.AppendDump(nil, &want[j])) || (got[j].Tags == nil) != (want[j].Tags == nil) {
							t.Fatalf("%s: cell %d read as %v without an error, want %v", what, j, &got[j], &want[j])
						}
					}
					absorbed++
					return
				}
				if !strings.Contains(err.Error(), "d.run") {
					t.Fatalf("%s: error does not name the run: %v", what, err)
				}
			}
			for i := range orig {
				d := bytes.Clone(orig)
				d[i] ^= 0x5a
				check(fmt.Sprintf("byte %d changed", i), d, size, rp[0])
			}
			for _, n := range []int{0, 10, runHeaderSize, runHeaderSize + 5, len(orig) / 2, len(orig) - 1} {
				check(fmt.Sprintf("cut to %d bytes", n), orig[:n], int64(n), rp[0])
				check(fmt.Sprintf("cut to %d bytes, record's size", n), orig[:n], size, rp[0])
			}
			for _, p := range []RunPart{
				func() RunPart { p := rp[0]; p.Cells--; return p }(),
				func() RunPart { p := rp[0]; p.Bytes++; return p }(),
				func() RunPart { p := rp[0]; p.Batches++; return p }(),
				func() RunPart { p := rp[0]; p.Length -= blockHeadSize; return p }(),
				func() RunPart { p := rp[0]; p.Offset++; return p }(),
			} {
				check(fmt.Sprintf("record %+v", p), orig, size, p)
			}
			t.Logf("%d bytes, %d changes read as the same cells", len(orig), absorbed)
		})
	}
}

// TestRunFileArrowRefused: a run an earlier rekey wrote (Arrow IPC) is
// refused, saying so and what to do.
func TestRunFileArrowRefused(t *testing.T) {
	fsys := vfs.NewMem()
	fsys.WriteFile("old.arrow", append([]byte("ARROW1\x00\x00"), make([]byte, 200)...))
	_, err := readRun(fsys, "old.arrow", 208, RunPart{Offset: 16, Length: 100, Cells: 1})
	if err == nil || !strings.Contains(err.Error(), "old.arrow") || !strings.Contains(err.Error(), "fresh folder") {
		t.Fatalf("Arrow run: %v", err)
	}
}

// TestRunFileAllocations: writing and reading a run allocates per block,
// not per cell.
func TestRunFileAllocations(t *testing.T) {
	cells := runCells(5, 20000)
	fsys := vfs.NewMem()
	allocs := testing.AllocsPerRun(3, func() {
		f, _ := fsys.Create("a.run")
		rw, err := newRunWriter(f, "s2", 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cells {
			if err := rw.add(0, &cells[i]); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := rw.close(); err != nil {
			t.Fatal(err)
		}
	})
	if per := allocs / float64(len(cells)); per > 0.02 {
		t.Errorf("writing: %.0f allocations for %d cells (%.3f a cell)", allocs, len(cells), per)
	}
	f, _ := fsys.Create("b.run")
	rw, _ := newRunWriter(f, "s2", 64<<10)
	for i := range cells {
		rw.add(0, &cells[i])
	}
	rp, size, err := rw.close()
	if err != nil {
		t.Fatal(err)
	}
	allocs = testing.AllocsPerRun(3, func() {
		rc, err := openCursor(fsys, "b.run", size, rp[0], 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rc.next() {
			n++
		}
		if rc.fail() != nil || n != len(cells) {
			t.Fatalf("read %d cells: %v", n, rc.fail())
		}
		rc.close()
	})
	if per := allocs / float64(len(cells)); per > 0.02 {
		t.Errorf("reading: %.0f allocations for %d cells (%.3f a cell)", allocs, len(cells), per)
	}
}

// TestSortCompareIsCellOrder: the sort buffer's in-place comparison
// orders entries as (region, family, cell.Compare) does on their cells,
// rows shared between entries (as Write lays out a row's cells) or not.
func TestSortCompareIsCellOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	w := &splitSink{chunks: [][]byte{nil}}
	pick := func(opts ...string) []byte { return []byte(opts[rng.Intn(len(opts))]) }
	for i := 0; i < 3000; i++ {
		c := cell.Cell{
			Row:       pick("", "a", "ab", "abc", "b", "b\x00", "\xff"),
			Family:    pick("f", "f1", "g", ""),
			Qualifier: pick("", "q", "q\x00", "qq", "r"),
			Timestamp: int64(rng.Intn(3)),
			Type:      []cell.Type{cell.Put, cell.Delete, cell.DeleteFamily, cell.Minimum}[rng.Intn(4)],
			Value:     pick("", "v"),
		}
		// As Write lays a cell out in the arena: half of them share the
		// row of the entry before.
		e := entry{ts: c.Timestamp, qual: uint32(len(c.Qualifier)), val: uint32(len(c.Value)),
			region: int32(rng.Intn(2)), fam: uint8(len(c.Family)), typ: c.Type}
		if n := len(w.ents); n > 0 && rng.Intn(2) == 0 {
			p := w.ents[n-1]
			e.rowOff, e.row = p.rowOff, p.row
		} else {
			e.rowOff, e.row = uint32(len(w.chunks[0])), uint16(len(c.Row))
			w.chunks[0] = append(w.chunks[0], c.Row...)
		}
		e.off = uint32(len(w.chunks[0]))
		for _, b := range [][]byte{c.Family, c.Qualifier, c.Value, c.Tags} {
			w.chunks[0] = append(w.chunks[0], b...)
		}
		w.ents = append(w.ents, e)
	}
	for k := 0; k < 20000; k++ {
		i, j := rng.Intn(len(w.ents)), rng.Intn(len(w.ents))
		a, b := &w.ents[i], &w.ents[j]
		var ca, cb cell.Cell
		w.view(a, &ca)
		w.view(b, &cb)
		want := int(a.region) - int(b.region)
		if want == 0 {
			want = bytes.Compare(ca.Family, cb.Family)
		}
		if want == 0 {
			want = cell.Compare(&ca, &cb)
		}
		if got := w.compare(a, b); sign(got) != sign(want) {
			t.Fatalf("compare(%v region %d, %v region %d) = %d, want the sign of %d", &ca, a.region, &cb, b.region, got, want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// FuzzRunCursor: whatever bytes a run file holds and whatever its record
// says, reading it never panics, and never gives more cells than the
// record names without an error.
func FuzzRunCursor(f *testing.F) {
	for _, codec := range []string{"s2", "lz4", "zstd", "none"} {
		fsys := vfs.NewMem()
		rp, _ := writeRun(f, fsys, "r.run", codec, [][]cell.Cell{runCells(7, 30)[:30]})
		data, _ := vfs.ReadFile(fsys, "r.run")
		f.Add(data, rp[0].Offset, rp[0].Length, rp[0].Cells, rp[0].Bytes, rp[0].Batches)
	}
	f.Fuzz(func(t *testing.T, data []byte, offset, length, cells, size int64, blocks int) {
		fsys := vfs.NewMem()
		fsys.WriteFile("f.run", data)
		got, err := readRun(fsys, "f.run", int64(len(data)), RunPart{Region: 0, Family: "d", Offset: offset, Length: length, Cells: cells, Bytes: size, Batches: blocks})
		if err == nil && int64(len(got)) != cells {
			t.Fatalf("%d cells read without an error, the record says %d", len(got), cells)
		}
	})
}
