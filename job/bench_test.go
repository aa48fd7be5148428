package job

import (
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// BenchmarkPresets maps one cell per iteration through each shipped config
// (the cost a worker pays per cell, with its buffers reused). The goal is
// under 100 ns and no allocation per cell.
func BenchmarkPresets(b *testing.B) {
	for _, pc := range presets {
		b.Run(pc.file, func(b *testing.B) {
			j, err := Load(filepath.Join("../configs", pc.file))
			if err != nil {
				b.Fatal(err)
			}
			r := j.Program.New()
			const n = 64
			cells := make([]cell.Cell, n)
			for i := range cells {
				cells[i] = pc.cell(i)
			}
			var sink int
			emit := func(c cell.Cell) { sink += len(c.Row) }
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := r.Map(cells[i%n], emit); err != nil {
					b.Fatal(err)
				}
			}
			if sink == 0 {
				b.Fatal("nothing emitted")
			}
		})
	}
}

// TestPresetsAllocateNothing holds the zero-allocation promise in the test
// suite, not only in benchmarks.
func TestPresetsAllocateNothing(t *testing.T) {
	for _, pc := range presets {
		j, err := Load(filepath.Join("../configs", pc.file))
		if err != nil {
			t.Fatal(err)
		}
		r := j.Program.New()
		c := pc.cell(3)
		emit := func(cell.Cell) {}
		_ = r.Map(c, emit) // size the buffers
		if n := testing.AllocsPerRun(200, func() { _ = r.Map(c, emit) }); n != 0 {
			t.Errorf("%s: %.1f allocations per cell", pc.file, n)
		}
	}
}
