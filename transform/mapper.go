package transform

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/rekeyhq/rekey/cell"
)

// Mapper maps one source cell to zero or more target cells. The source cell
// and its slices are valid only during the call; so are the cells passed to
// emit, which the caller copies if it keeps them. All presets are Mappers.
//
// A cell the Mapper cannot map is reported, never dropped quietly: Map
// returns an error wrapping ErrBadKey for a cell whose key does not fit
// (the job's bad_keys policy then rejects it to a file or stops the job),
// and any other error stops the job.
type Mapper interface {
	Map(src cell.Cell, emit func(cell.Cell)) error
}

// Flusher is a Mapper that holds cells back (a row-level transform). The
// pipeline calls Flush at the end of each split, and MaxRowBytes tells it how
// much memory the Mapper may hold, so memory stays bounded by configuration.
type Flusher interface {
	Mapper
	Flush(emit func(cell.Cell)) error
	MaxRowBytes() int64
}

// EntityMapper is a Mapper that knows the entity of the cell it mapped
// last, so the pipeline counts cells per entity without parsing the old key
// a second time. *Rekey is one; a custom Mapper that is not has its
// entities parsed from the old cells by the job's source layout.
type EntityMapper interface {
	Mapper
	// LastEntity appends to dst the entity key (as SourceEntity gives it)
	// of the cell the last successful Map call mapped.
	LastEntity(dst []byte) []byte
}

// RowEntityMapper is an EntityMapper that can say its entities are read
// from the old row alone: then every cell of one old row has one entity,
// and a caller counting entities need not ask again until the row changes.
type RowEntityMapper interface {
	EntityMapper
	// EntityOfOldRow says the entity of an old cell depends on its row
	// only (not its family, qualifier or timestamp).
	EntityOfOldRow() bool
}

// InPlaceMapper is a Mapper that maps every cell it maps to exactly one
// new cell, which it can write over the old one: the pipeline calls
// MapInPlace on its own copy of the old cell instead of Map, sparing a
// second copy and a call through emit per cell. MapInPlace must do what
// Map does; on error c is unchanged. *Rekey is one.
type InPlaceMapper interface {
	Mapper
	// MapInPlace replaces c's key with its new key; c's slices may then
	// point into the mapper's buffers, valid until the next call.
	MapInPlace(c *cell.Cell) error
}

// MapFunc adapts a function to Mapper.
type MapFunc func(src cell.Cell, emit func(cell.Cell)) error

// Map calls f.
func (f MapFunc) Map(src cell.Cell, emit func(cell.Cell)) error { return f(src, emit) }

// ErrRowTooLarge is returned when a row-level transform meets a row bigger
// than the limit it declared.
var ErrRowTooLarge = errors.New("transform: row exceeds the declared maximum")

// RowBuffer turns a function over whole rows into a Mapper. It gathers the
// cells of one row (cells arrive in row order from a split) and calls Fn when
// the row ends: when a cell of another row arrives, or on Flush. It refuses
// rows above MaxBytes of keys and values instead of growing without bound.
type RowBuffer struct {
	// MaxBytes bounds the row it holds (keys, values and tags).
	MaxBytes int64
	// Fn receives one whole row; the cells are valid until Fn returns.
	Fn func(row []cell.Cell, emit func(cell.Cell)) error

	cells []cell.Cell
	arena []byte
	size  int64
}

// MaxRowBytes implements Flusher.
func (b *RowBuffer) MaxRowBytes() int64 { return b.MaxBytes }

// Map implements Mapper: it keeps src, and hands the previous row to Fn
// when src starts a new one.
func (b *RowBuffer) Map(src cell.Cell, emit func(cell.Cell)) error {
	if len(b.cells) > 0 && !bytes.Equal(b.cells[0].Row, src.Row) {
		if err := b.flush(emit); err != nil {
			return err
		}
	}
	n := int64(len(src.Row) + len(src.Family) + len(src.Qualifier) + len(src.Value) + len(src.Tags))
	if b.size+n > b.MaxBytes {
		row := printable(src.Row)
		b.cells, b.arena, b.size = b.cells[:0], b.arena[:0], 0
		return fmt.Errorf("%w: row %s is larger than %d bytes", ErrRowTooLarge, row, b.MaxBytes)
	}
	b.size += n
	// Copy into the arena: the source cell is only valid during this call.
	// When the arena grows, cells copied earlier keep the old array alive,
	// so their slices stay valid.
	keep := func(s []byte) []byte {
		if s == nil {
			return nil
		}
		start := len(b.arena)
		b.arena = append(b.arena, s...)
		return b.arena[start:len(b.arena):len(b.arena)]
	}
	c := src
	c.Row, c.Family, c.Qualifier, c.Value, c.Tags = keep(src.Row), keep(src.Family), keep(src.Qualifier), keep(src.Value), keep(src.Tags)
	b.cells = append(b.cells, c)
	return nil
}

// Flush implements Flusher: it hands the last row to Fn.
func (b *RowBuffer) Flush(emit func(cell.Cell)) error {
	return b.flush(emit)
}

func (b *RowBuffer) flush(emit func(cell.Cell)) error {
	if len(b.cells) == 0 {
		return nil
	}
	err := b.Fn(b.cells, emit)
	b.cells, b.arena, b.size = b.cells[:0], b.arena[:0], 0
	return err
}

// AppendReject appends one line of a reject file for a cell that did not
// fit: the cell in the canonical dump format (row hex, family, qualifier hex,
// timestamp, type, value hex), a tab, and the reason with tabs and newlines
// replaced by spaces. One line per cell, so a reject file can be fixed up
// and replayed with ordinary tools.
func AppendReject(dst []byte, c *cell.Cell, reason error) []byte {
	dst = cell.AppendDump(dst, c)
	dst = dst[:len(dst)-1] // AppendDump ends the line; the reason follows
	dst = append(dst, '\t')
	for _, r := range []byte(reason.Error()) {
		if r == '\t' || r == '\n' || r == '\r' {
			r = ' '
		}
		dst = append(dst, r)
	}
	return append(dst, '\n')
}
