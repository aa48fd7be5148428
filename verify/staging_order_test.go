package verify_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/verify"
)

// writeStaged writes cells (in order) as one HFile of a staging folder,
// hfiles/REGION/FAMILY/NAME, and returns its size.
func writeStaged(t *testing.T, root, region, family, name string, cells []cell.Cell) int64 {
	t.Helper()
	dir := filepath.Join(root, region, family)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := hfile.NewWriter(&buf, hfile.WriterOptions{Name: name, BlockSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cells {
		if err := w.Append(&cells[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return int64(buf.Len())
}

// TestStagingReadsInKeyOrder: a region's families, and several files of
// one family, hold cells of the same rows. The staged side hands them out
// merged into key order, so that a side's row count (a change of row is a
// new row) counts each row once: read file after file, 10 rows in two
// families counted 20 (verify reported 300 new rows for 150). The bytes
// fetched, counted from the side's opening, are the files' sizes when
// every cell is read (it reported 0 B).
func TestStagingReadsInKeyOrder(t *testing.T) {
	root := t.TempDir()
	mk := func(family string, from, to int) []cell.Cell {
		var out []cell.Cell
		for r := from; r < to; r++ {
			for q := 0; q < 30; q++ {
				out = append(out, cell.Cell{Row: []byte(fmt.Sprintf("row%02d", r)), Family: []byte(family),
					Qualifier: []byte(fmt.Sprintf("q%02d", q)), Timestamp: 1000, Type: cell.Put, Value: []byte("v")})
			}
		}
		return out
	}
	var size int64
	size += writeStaged(t, root, "r1", "a", "f1", mk("a", 0, 6))
	size += writeStaged(t, root, "r1", "a", "f2", mk("a", 6, 10))
	size += writeStaged(t, root, "r1", "b", "f3", mk("b", 0, 10))
	side, err := verify.OpenStaging(root)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	var prev cell.Cell
	var rows, cells int
	err = side.Read(context.Background(), transform.KeyRange{}, func(c *cell.Cell) error {
		if cells > 0 && cell.Compare(&prev, c) > 0 {
			return fmt.Errorf("%s after %s: out of key order", c, &prev)
		}
		if cells == 0 || !bytes.Equal(prev.Row, c.Row) {
			rows++
		}
		prev = c.Clone()
		cells++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows != 10 || cells != 600 {
		t.Errorf("read %d rows and %d cells by change of row, want 10 and 600", rows, cells)
	}
	if got := side.BytesRead(); got != size {
		t.Errorf("fetched %d bytes, want the files' %d", got, size)
	}
	// A range clipped inside the rows stops at its end in every file.
	n := 0
	if err := side.Read(context.Background(), transform.KeyRange{Start: []byte("row03"), Stop: []byte("row07")}, func(c *cell.Cell) error {
		if string(c.Row) < "row03" || string(c.Row) >= "row07" {
			return fmt.Errorf("%s outside [row03, row07)", c)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 4*30*2 {
		t.Errorf("read %d cells of [row03, row07), want %d", n, 4*30*2)
	}
}
