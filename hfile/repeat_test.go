package hfile

import (
	"bytes"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// checkRepeat reads every cell of r and holds each Repeat hint to the
// truth: RepeatRow promises the previous cell's row and family,
// RepeatColumn its qualifier too. It returns how many cells carried each
// hint.
func checkRepeat(t *testing.T, name string, r *Reader) (rows, cols, cells int) {
	t.Helper()
	it := r.NewIterator()
	defer it.Close()
	var prev cell.Cell
	have := false
	for ok := it.First(); ok; ok = it.Next() {
		c := it.Cell()
		cells++
		switch rep := it.Repeat(); rep {
		case RepeatColumn:
			cols++
			if !have || !bytes.Equal(c.Qualifier, prev.Qualifier) {
				t.Fatalf("%s: cell %d %s: RepeatColumn after %s", name, cells, c, &prev)
			}
			fallthrough
		case RepeatRow:
			if rep == RepeatRow {
				rows++
			}
			if !have || !bytes.Equal(c.Row, prev.Row) || !bytes.Equal(c.Family, prev.Family) {
				t.Fatalf("%s: cell %d %s: %d after %s", name, cells, c, rep, &prev)
			}
		}
		prev, have = c.Clone(), true
	}
	if err := it.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return rows, cols, cells
}

// TestRepeatHintsHBaseFiles checks the hints on the store files HBase
// wrote for the bundled snapshots, every encoding: DIFF and FAST_DIFF
// files must give hints (or the scanner saves nothing), and no hint may
// be wrong.
func TestRepeatHintsHBaseFiles(t *testing.T) {
	root := filepath.Join("..", "testdata", "snapshots")
	seen, hints := map[Encoding]int{}, map[Encoding]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") || !strings.Contains(p, string(filepath.Separator)+"data"+string(filepath.Separator)) || strings.Contains(p, "recovered.edits") || strings.Contains(d.Name(), ".") {
			return nil
		}
		r, err := OpenFile(p)
		if err != nil {
			return err
		}
		defer r.Close()
		rows, cols, n := checkRepeat(t, p, r)
		enc := r.Info().Encoding
		seen[enc]++
		hints[enc] += rows + cols
		t.Logf("%s: %s, %d cells, %d RepeatRow, %d RepeatColumn", p, enc, n, rows, cols)
		if enc != EncodingDiff && enc != EncodingFastDiff && rows+cols != 0 {
			t.Errorf("%s (%s): %d hints from an encoding that records none", p, enc, rows+cols)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []Encoding{EncodingDiff, EncodingFastDiff} {
		if seen[enc] == 0 || hints[enc] == 0 {
			t.Errorf("%s: %d store files under %s, %d hints: want files with hints", enc, seen[enc], root, hints[enc])
		}
	}
}

// TestRepeatHintsWrittenFiles checks the hints over many generated cells
// (several versions per column, several columns per row, blocks small
// enough that rows cross block boundaries) for both encodings that give
// them.
func TestRepeatHintsWrittenFiles(t *testing.T) {
	for _, enc := range []Encoding{EncodingDiff, EncodingFastDiff} {
		data := seedFile(t, writeOpts{enc: enc, blockSize: 4 << 10}, 5000)
		r, err := openBytes(t, enc.String()+".hfile", data)
		if err != nil {
			t.Fatal(err)
		}
		rows, cols, n := checkRepeat(t, enc.String(), r)
		if rows == 0 || cols == 0 {
			t.Errorf("%s: %d cells, %d RepeatRow and %d RepeatColumn hints: want some of each", enc, n, rows, cols)
		}
	}
}
