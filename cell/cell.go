// Package cell holds the unit of data every other package passes around: one
// HBase cell (row, family, qualifier, timestamp, type, value, tags, sequence
// id), the KeyValue type codes, and HBase's cell order.
//
// A Cell's slices may point into a buffer owned by whoever produced it (an
// HFile block, an RPC response). They are valid until the producer's next
// call; a consumer that keeps a cell calls Clone.
package cell

import (
	"bytes"
	"fmt"
)

// Type is the KeyValue type code stored in the last byte of a cell key.
type Type uint8

// KeyValue type codes, as HBase writes them on disk and on the wire.
const (
	Minimum             Type = 0
	Put                 Type = 4
	Delete              Type = 8
	DeleteFamilyVersion Type = 10
	DeleteColumn        Type = 12
	DeleteFamily        Type = 14
	Maximum             Type = 255
)

// String returns the name HBase gives the type (the names of the canonical
// dump format).
func (t Type) String() string {
	switch t {
	case Minimum:
		return "Minimum"
	case Put:
		return "Put"
	case Delete:
		return "Delete"
	case DeleteFamilyVersion:
		return "DeleteFamilyVersion"
	case DeleteColumn:
		return "DeleteColumn"
	case DeleteFamily:
		return "DeleteFamily"
	case Maximum:
		return "Maximum"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// ParseType is the inverse of String for the named types.
func ParseType(s string) (Type, error) {
	for _, t := range []Type{Minimum, Put, Delete, DeleteFamilyVersion, DeleteColumn, DeleteFamily, Maximum} {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("cell: unknown type %q", s)
}

// Valid reports whether t is one of the codes HBase defines.
func (t Type) Valid() bool {
	switch t {
	case Minimum, Put, Delete, DeleteFamilyVersion, DeleteColumn, DeleteFamily, Maximum:
		return true
	}
	return false
}

// IsDelete reports whether t is a delete marker of any kind.
func (t Type) IsDelete() bool {
	return t == Delete || t == DeleteColumn || t == DeleteFamily || t == DeleteFamilyVersion
}

// LatestTimestamp is HBase's HConstants.LATEST_TIMESTAMP (Long.MAX_VALUE):
// "now" on a write, and the timestamp of synthetic seek keys.
const LatestTimestamp int64 = 1<<63 - 1

// Cell is one HBase cell. The zero value is an empty Put-less cell (type
// Minimum); producers always set Type.
type Cell struct {
	Row       []byte
	Family    []byte
	Qualifier []byte
	Timestamp int64
	Type      Type
	Value     []byte
	// Tags is the raw tags section (repeated u16 length, u8 type, value), or
	// nil when the cell has none.
	Tags []byte
	// SeqID is the memstore timestamp / sequence id when the source carries
	// one, else 0.
	SeqID uint64
}

// Clone returns a deep copy whose slices share nothing with c, in one
// allocation.
func (c *Cell) Clone() Cell {
	n := len(c.Row) + len(c.Family) + len(c.Qualifier) + len(c.Value) + len(c.Tags)
	buf := make([]byte, 0, n)
	out := *c
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		start := len(buf)
		buf = append(buf, b...)
		return buf[start:len(buf):len(buf)]
	}
	out.Row = take(c.Row)
	out.Family = take(c.Family)
	out.Qualifier = take(c.Qualifier)
	out.Value = take(c.Value)
	out.Tags = take(c.Tags)
	return out
}

// String renders the cell's key for error messages and debugging.
func (c *Cell) String() string {
	return fmt.Sprintf("%q/%s:%q/%d/%s/vlen=%d", c.Row, c.Family, c.Qualifier, c.Timestamp, c.Type, len(c.Value))
}

// Compare orders cells as HBase's CellComparatorImpl does: row, family and
// qualifier ascending by unsigned bytes; timestamp descending; type
// descending (so Maximum first, Minimum last). A cell with an empty family
// and qualifier and type Minimum (the "last on row" seek key) sorts after
// every other cell of its row. Sequence ids are not compared; use
// CompareWithSeqID where equal keys must be ordered newest first.
func Compare(a, b *Cell) int {
	if c := bytes.Compare(a.Row, b.Row); c != 0 {
		return c
	}
	return CompareColumnsAndVersion(a, b)
}

// SameName is bytes.Equal for short names (a family is a byte or a few): a
// loop the compiler inlines costs less per cell than the call into the
// runtime's memequal.
func SameName(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// CompareColumnsAndVersion compares everything after the row, for callers
// that already know two cells share a row.
func CompareColumnsAndVersion(a, b *Cell) int {
	aLast := a.Type == Minimum && len(a.Family) == 0 && len(a.Qualifier) == 0
	bLast := b.Type == Minimum && len(b.Family) == 0 && len(b.Qualifier) == 0
	if aLast || bLast {
		switch {
		case aLast && bLast:
			return 0
		case aLast:
			return 1
		default:
			return -1
		}
	}
	if c := bytes.Compare(a.Family, b.Family); c != 0 {
		return c
	}
	if c := bytes.Compare(a.Qualifier, b.Qualifier); c != 0 {
		return c
	}
	return CompareVersion(a, b)
}

// CompareVersion orders two cells of one column: timestamp descending,
// then type descending.
func CompareVersion(a, b *Cell) int {
	switch {
	case a.Timestamp > b.Timestamp:
		return -1
	case a.Timestamp < b.Timestamp:
		return 1
	}
	switch {
	case a.Type > b.Type:
		return -1
	case a.Type < b.Type:
		return 1
	}
	return 0
}

// compareSeqID orders equal keys newest first: sequence id descending.
func compareSeqID(a, b *Cell) int {
	switch {
	case a.SeqID > b.SeqID:
		return -1
	case a.SeqID < b.SeqID:
		return 1
	}
	return 0
}

// CompareVersionAndSeqID is CompareWithSeqID for callers that already know
// two cells share row, family and qualifier.
func CompareVersionAndSeqID(a, b *Cell) int {
	if c := CompareVersion(a, b); c != 0 {
		return c
	}
	return compareSeqID(a, b)
}

// CompareWithSeqID is Compare with a final tie-break on sequence id,
// descending, as HBase's store scanners order equal keys from different
// files.
func CompareWithSeqID(a, b *Cell) int {
	if c := Compare(a, b); c != 0 {
		return c
	}
	return compareSeqID(a, b)
}
