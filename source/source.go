package source

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot"
)

// Source is a set of splits that yield cells. It is safe for concurrent
// use: the run's workers open scanners on different splits at once.
type Source interface {
	// Describe says what the source is, for the checkpoint's fingerprint
	// and the job record: a run and its resume, and every task of a job,
	// must read the same source.
	Describe() Identity
	// Table is the schema of the table the cells are of: the families a
	// target is created with, and their VERSIONS and TTL that ScanOptions
	// are read under.
	Table() Table
	// Bytes is what reading every split costs, in the units of
	// Split.Bytes.
	Bytes() int64
	// DefaultSplitBytes is the CutOptions.TargetBytes a run cuts by when
	// its job sets none, never below floor (the smallest piece worth its
	// fixed cost); 0 when no split would be cut. It must depend on the
	// source alone (not on the workers), so a resume and every shard cut
	// alike.
	DefaultSplitBytes(floor int64) int64
	// Splits cuts the source into splits in key order. The same source cut
	// with the same options gives the same splits with the same IDs in any
	// process; together they hold every cell exactly once.
	Splits(opts CutOptions) ([]Split, error)
	// Open returns a scanner over sp's cells, read with scan; scan's
	// StartRow and StopRow clip it further (a redo of some key ranges).
	// The split must be one this source's Splits returned.
	Open(ctx context.Context, sp Split, scan ScanOptions) (Scanner, error)
	// Prepare hints that sp is read next with scan: a source may start
	// opening what the scan needs in the background and return at once.
	// It reports nothing; Open meets any error again.
	Prepare(sp Split, scan ScanOptions)
	// Close releases what the source holds; scanners still open fail on
	// their next read.
	Close() error
}

// Scanner iterates over one split's cells in HBase's cell order, with the
// cell.Iterator contract (slices valid until the next call, Close
// required). The run calls it once per cell, so an implementation keeps
// these methods cheap.
type Scanner interface {
	cell.Iterator
	// RowGen numbers the current cell's row: cells given with one number
	// share their row and family, so the run counts an old row's entity
	// once without comparing keys. A new number does not say the row
	// changed.
	RowGen() uint64
	// FilesChecked counts the inputs the scan read whole and checked
	// against their own count (store files against their trailer's
	// entry count), for the split's record.
	FilesChecked() int
}

// ScanOptions select and shape the cells a Scanner returns: raw or
// versions, time range, families, a row range, the time TTLs expire at.
// They are HBase's user scan, which the snapshot package carries out; a
// source over other inputs honours the same fields.
type ScanOptions = snapshot.ScanOptions

// Table is a table's schema as HBase describes it.
type Table = snapshot.TableDescriptor

// CutOptions say how finely Splits cuts.
type CutOptions struct {
	// TargetBytes > 0 cuts larger parts into pieces of about this many
	// bytes; 0 leaves one split per natural part (a region).
	TargetBytes int64
	// InRow lets a cut fall inside a row, at a column (never inside a
	// column: its versions and markers stay in one piece); only for work
	// that maps cell by cell.
	InRow bool
	// GreedyInRow places in-row cuts by the rule of the builds before even
	// cuts, for checkpoints those builds wrote (snapshot.SplitOptions).
	GreedyInRow bool
}

// Column names one column, where a split starts or ends inside a row.
type Column struct{ Family, Qualifier []byte }

// Split is one unit of work: a key range with its estimated size.
type Split struct {
	// ID names the split in checkpoints, claims and the job record: stable
	// for the same source and CutOptions, distinct between splits, of
	// [0-9a-z_] only.
	ID string
	// Region names the part of the source the split is a piece of (the
	// region's encoded name): the run spreads its workers over parts,
	// since the pieces of one hold neighbouring keys.
	Region string
	// StartRow (inclusive) and EndRow (exclusive; empty = to the end)
	// bound the split's rows.
	StartRow, EndRow []byte
	// StartColumn, when set, says the split starts inside StartRow at this
	// column; EndColumn, when set, that it ends inside EndRow before this
	// column. Only in-row cuts make them.
	StartColumn, EndColumn *Column
	// Bytes estimates the split's reading work.
	Bytes int64

	// part is the source's own description of the split, given back to
	// Open and Prepare.
	part any
}

// StopRow returns the exclusive upper bound of the rows the split holds
// cells of (empty = to the end): EndRow, or the row just after it when the
// split ends inside EndRow.
func (sp *Split) StopRow() []byte {
	if sp.EndColumn == nil || len(sp.EndRow) == 0 {
		return sp.EndRow
	}
	return append(bytes.Clone(sp.EndRow), 0)
}

// Identity says what a source is, for the checkpoint's fingerprint and the
// job record.
type Identity struct {
	// Kind is the kind of source: KindSnapshot, or a later one's.
	Kind string
	// Table is the source table, namespace:qualifier.
	Table string
	// Name is the snapshot's name.
	Name string
	// Created is the snapshot's creation time (the TTL time of a job
	// that reads as of the snapshot).
	Created time.Time
	// More names what else decides the cells, in the order the job record
	// lists it (a catch-up's earlier snapshot); a snapshot has none.
	More []Field
}

// KindSnapshot is the Kind of a source that is one snapshot.
const KindSnapshot = "snapshot"

// Field is one named part of an Identity, as the job record lists it so a
// refusal can say which part differs.
type Field struct{ Name, Value string }

// Fields lists the identity for the job record. A snapshot's fields are
// those records have always held (its name, table and creation time), so
// a record written before sources existed still matches; another kind
// adds its kind and More.
func (id Identity) Fields() []Field {
	out := []Field{
		{Name: "source snapshot", Value: id.Name},
		{Name: "source table", Value: id.Table},
		{Name: "snapshot creation time", Value: fmt.Sprint(id.Created.UnixMilli())},
	}
	if id.Kind != KindSnapshot {
		out = append(out, Field{Name: "source kind", Value: id.Kind})
	}
	return append(out, id.More...)
}
