package testenv

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/rekeyhq/rekey/cell"
)

// ParseDumpLine parses one line of the canonical dump format (see
// cell.AppendDump): rowhex, family, qualifierhex, timestamp, type,
// valuehex, and optionally a seventh column, the cell's raw tags section in
// hex (the oracle's --tags, AppendDumpTags). A line of six columns is a
// cell whose tags the dump does not show: its Tags stay nil.
func ParseDumpLine(s string) (cell.Cell, error) {
	var c cell.Cell
	f := strings.Split(s, "\t")
	if len(f) != 6 && len(f) != 7 {
		return c, fmt.Errorf("%d fields, want 6 (or 7 with tags)", len(f))
	}
	var err error
	if c.Row, err = hex.DecodeString(f[0]); err != nil {
		return c, fmt.Errorf("row: %w", err)
	}
	c.Family = []byte(f[1])
	if c.Qualifier, err = hex.DecodeString(f[2]); err != nil {
		return c, fmt.Errorf("qualifier: %w", err)
	}
	if c.Timestamp, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return c, fmt.Errorf("timestamp: %w", err)
	}
	if c.Type, err = cell.ParseType(f[4]); err != nil {
		return c, err
	}
	if c.Value, err = hex.DecodeString(f[5]); err != nil {
		return c, fmt.Errorf("value: %w", err)
	}
	if len(f) == 7 {
		if c.Tags, err = hex.DecodeString(f[6]); err != nil {
			return c, fmt.Errorf("tags: %w", err)
		}
		if len(c.Tags) == 0 {
			c.Tags = nil
		}
	}
	return c, nil
}

// ParseDump parses a whole dump (the oracle's output), one cell a line.
func ParseDump(b []byte) ([]cell.Cell, error) {
	var out []cell.Cell
	for i, line := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		c, err := ParseDumpLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("dump line %d: %w", i+1, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// DumpCells renders cells in the canonical dump format.
func DumpCells(cells []cell.Cell) []byte {
	var b []byte
	for i := range cells {
		b = cell.AppendDump(b, &cells[i])
	}
	return b
}

// DumpCellsTags renders cells with the tags column (AppendDumpTags).
func DumpCellsTags(cells []cell.Cell) []byte {
	var b []byte
	for i := range cells {
		b = AppendDumpTags(b, &cells[i])
	}
	return b
}

// AppendDumpTags appends c's dump line with the optional seventh column,
// the raw tags section in hex (empty when c has none), as the oracle's
// --tags prints it.
func AppendDumpTags(dst []byte, c *cell.Cell) []byte {
	dst = cell.AppendDump(dst, c)
	dst[len(dst)-1] = '\t'
	dst = hex.AppendEncode(dst, c.Tags)
	return append(dst, '\n')
}

// DiffDumps names the first line where two dumps differ, with both line
// counts, or returns "" when they are equal.
func DiffDumps(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("%d lines vs %d expected; first difference at line %d:\n got  %q\n want %q", len(g)-1, len(w)-1, i+1, gl, wl)
		}
	}
	return "dumps differ"
}

// Masks is HBase's rule, written here apart from the code under test,
// for whether delete marker m hides cell x of the same row and family
// (timestamps in ms): a version delete hides its column's cell at its
// timestamp, a column delete those at or below it, a family delete every
// column's at or below it, a family-version delete every column's at it.
func Masks(m, x *cell.Cell) bool {
	if string(m.Row) != string(x.Row) || string(m.Family) != string(x.Family) {
		return false
	}
	sameCol := string(m.Qualifier) == string(x.Qualifier)
	switch m.Type {
	case cell.Delete:
		return sameCol && x.Timestamp == m.Timestamp
	case cell.DeleteColumn:
		return sameCol && x.Timestamp <= m.Timestamp
	case cell.DeleteFamily:
		return x.Timestamp <= m.Timestamp
	case cell.DeleteFamilyVersion:
		return x.Timestamp == m.Timestamp
	}
	return false
}
