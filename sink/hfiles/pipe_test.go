package hfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/vfs"
)

// pipeRuns writes three runs of one partition, a cell larger than a
// batch's buffer among them, and returns them.
func pipeRuns(t *testing.T) (*vfs.Mem, []partRun) {
	fsys := vfs.NewMem()
	var runs []partRun
	for i := range 3 {
		cells := runCells(int64(40+i), 20000)
		if i == 1 {
			big := cell.Cell{Row: []byte("sensor-020\x00big"), Family: []byte("d"), Qualifier: []byte("q"), Timestamp: 7, Type: cell.Put,
				Value: bytes.Repeat([]byte{0xab}, 3*pipeBatchBytes)}
			cells = sorted(append(cells, big))
		}
		name := fmt.Sprintf("/r%d", i)
		parts, size := writeRun(t, fsys, name, "s2", [][]cell.Cell{cells})
		runs = append(runs, partRun{name: name, size: size, part: parts[0], order: fmt.Sprint(i)})
	}
	return fsys, runs
}

// pipeDump describes a cell with everything the HFile keeps, nil tags
// apart from empty ones.
func pipeDump(c *cell.Cell) string {
	return fmt.Sprintf("%q/%q/%q/%d/%d/%x/%x/%v/%d", c.Row, c.Family, c.Qualifier, c.Timestamp, c.Type, c.Value, c.Tags, c.Tags == nil, c.SeqID)
}

// TestPipeCellsIsEach: the merge read on its own goroutine hands the
// writer the very cells, in the very order, that the merge read inline
// gives, a cell larger than a batch included.
func TestPipeCellsIsEach(t *testing.T) {
	fsys, runs := pipeRuns(t)
	m, err := newMerger(fsys, "", runs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := m.each(func(c *cell.Cell) error { want = append(want, pipeDump(c)); return nil }); err != nil {
		t.Fatal(err)
	}
	m.close()
	m, err = newMerger(fsys, "", runs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	var got []string
	if err := pipeCells(context.Background(), m, 64<<10, func(c *cell.Cell) error { got = append(got, pipeDump(c)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("piped %d cells, inline %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("cell %d piped %s, inline %s", i, got[i][:min(len(got[i]), 200)], want[i][:min(len(want[i]), 200)])
		}
	}
}

// TestPipeCellsErrors: a writer that fails stops the reading side (no
// goroutine left blocked, the writer's error returned), and a damaged run
// fails the pipe with the run's error, never with fewer cells.
func TestPipeCellsErrors(t *testing.T) {
	fsys, runs := pipeRuns(t)
	m, err := newMerger(fsys, "", runs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	full := errors.New("disk full")
	n := 0
	err = pipeCells(context.Background(), m, 64<<10, func(*cell.Cell) error {
		if n++; n == 10000 {
			return full
		}
		return nil
	})
	m.close()
	if !errors.Is(err, full) || n != 10000 {
		t.Errorf("writer failing at cell 10000: %v after %d cells", err, n)
	}

	b, _ := vfs.ReadFile(fsys, runs[2].name)
	b[len(b)/2] ^= 0x40
	fsys.WriteFile(runs[2].name, b)
	m, err = newMerger(fsys, "", runs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	err = pipeCells(context.Background(), m, 64<<10, func(*cell.Cell) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "/r2") {
		t.Errorf("damaged run: %v, want its error", err)
	}
}

// TestMarkHeavy: with two or more workers, a partition holding more than
// half a worker's share of the bytes merges on two goroutines; with one
// worker none does.
func TestMarkHeavy(t *testing.T) {
	ps := []*partition{{bytes: 45}, {bytes: 20}, {bytes: 20}, {bytes: 15}}
	if n := markHeavy(ps, 2); n != 1 {
		t.Errorf("two workers: %d partitions marked, want 1", n)
	}
	var got []bool
	for _, p := range ps {
		got = append(got, p.pipe)
	}
	if fmt.Sprint(got) != "[true false false false]" {
		t.Errorf("two workers: piped %v, want only the 45%% partition", got)
	}
	for _, p := range ps {
		p.pipe = false
	}
	markHeavy(ps, 1)
	for i, p := range ps {
		if p.pipe {
			t.Errorf("one worker: partition %d piped", i)
		}
	}
}
