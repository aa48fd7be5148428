package hfiles

import (
	"context"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// newTestPartWriter opens a staging folder of one region and a partition
// writer for its family f, whose files roll after every row (HFileSize 1).
func newTestPartWriter(t *testing.T) (*Sink, *partWriter) {
	t.Helper()
	s, err := New(context.Background(), Options{Staging: t.TempDir(), Table: "t", Memory: 1 << 20, Workers: 1, HFileSize: 1, MaxFiles: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ps := &partState{Region: 0, Family: "f"}
	st := &finishState{Parts: map[string]*partState{"0/f": ps}}
	w, err := s.newPartWriter(st, ps, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.abort)
	return s, w
}

func partCell(row, qual string, ts int64, value string) *cell.Cell {
	return &cell.Cell{Row: []byte(row), Family: []byte("f"), Qualifier: []byte(qual), Timestamp: ts, Type: cell.Put, Value: []byte(value)}
}

// TestPartWriterCollapsesRepeats: a cell with the key of the one before it
// is dropped and counted (a duplicate when the value agrees, a collision
// when not), also after the row buffer was reused across rows of other
// lengths; every other cell is written.
func TestPartWriterCollapsesRepeats(t *testing.T) {
	ctx := context.Background()
	_, w := newTestPartWriter(t)
	in := []*cell.Cell{
		partCell("a-long-row", "q1", 2, "v"),
		partCell("a-long-row", "q1", 2, "v"), // duplicate
		partCell("a-long-row", "q1", 1, "v"),
		partCell("b", "q1", 5, "x"),
		partCell("b", "q1", 5, "y"), // collision
		partCell("b", "q2", 5, "x"),
		partCell("c-row", "q2", 5, "x"),
		partCell("c-row", "q2", 5, "x"), // duplicate
	}
	for _, c := range in {
		if err := w.add(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	var cells int64
	for _, f := range w.ps.Files {
		cells += f.Cells
	}
	if cells != 5 || w.ps.Duplicates != 2 || w.ps.Collisions != 1 {
		t.Fatalf("cells %d, duplicates %d, collisions %d; want 5, 2, 1", cells, w.ps.Duplicates, w.ps.Collisions)
	}
	// HFileSize 1 rolls at every new row: three rows, three files.
	if len(w.ps.Files) != 3 {
		t.Fatalf("%d files, want one per row (3)", len(w.ps.Files))
	}
}

// TestPartWriterRefusesRowsOutOfOrder: a row before the row written last
// fails the merge, also where the file rolls between the two rows (where
// the new file's writer has nothing to compare it with).
func TestPartWriterRefusesRowsOutOfOrder(t *testing.T) {
	ctx := context.Background()
	_, w := newTestPartWriter(t)
	if err := w.add(ctx, partCell("m", "q", 1, "v")); err != nil {
		t.Fatal(err)
	}
	err := w.add(ctx, partCell("b", "q", 1, "v"))
	if err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("row b after row m: %v; want an out-of-order error", err)
	}
}
