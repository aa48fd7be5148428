package job

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/transform"
)

var update = flag.Bool("update", false, "rewrite testdata/presets.golden")

// TestPresetsGolden writes what each shipped config does to a few synthetic
// cells (old key, new key, the fields read back from the new key) and what
// its plan says, and compares it with testdata/presets.golden. Run with
// -update after an intended change and review the diff.
func TestPresetsGolden(t *testing.T) {
	var buf bytes.Buffer
	for _, pc := range presets {
		j, err := Load(filepath.Join("../configs", pc.file))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&buf, "== %s (entity %v)\n", pc.file, j.Program.Entity())
		r, back := j.Program.New(), j.Program.New()
		for _, i := range []int{0, 1, 77} {
			src := pc.cell(i)
			out, err := r.Apply(&src)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := back.TargetEntity(nil, &out); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&buf, "%s\n  -> %s\n     %s\n", keyOf(&src), keyOf(&out), back.AppendFields(nil))
		}
		pl := j.Program.NewPlanner(transform.PlanOptions{})
		for i := 0; i < 500; i++ {
			c := pc.cell(i)
			pl.Add(&c)
		}
		rep := pl.Report(true)
		fmt.Fprintf(&buf, "plan: %d cells, %d entities, %d new rows, largest %d cells; split keys %v\n", rep.SampledCells, rep.Entities, rep.NewRows, rep.WorstRow.Cells, rep.SplitKeys)
		for _, w := range rep.Warnings {
			fmt.Fprintf(&buf, "warning [%s] %s\n", w.Code, w.Message)
		}
		buf.WriteByte('\n')
	}
	golden := filepath.Join("testdata", "presets.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run PresetsGolden -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("preset output differs from %s (rerun with -update and review the diff):\n%s", golden, buf.String())
	}
}

func keyOf(c *cell.Cell) string {
	b := transform.AppendPrintable(nil, c.Row)
	b = append(b, '/')
	b = append(b, c.Family...)
	b = append(b, ':')
	b = transform.AppendPrintable(b, c.Qualifier)
	return fmt.Sprintf("%s @%d", b, c.Timestamp)
}
