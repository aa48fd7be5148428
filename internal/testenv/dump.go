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
// cell.AppendDump): rowhex, family, qualifierhex, timestamp, type, valuehex.
func ParseDumpLine(s string) (cell.Cell, error) {
	var c cell.Cell
	f := strings.Split(s, "\t")
	if len(f) != 6 {
		return c, fmt.Errorf("%d fields, want 6", len(f))
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
