package source

import (
	"context"
	"fmt"

	"github.com/rekeyhq/rekey/snapshot"
)

// Snapshot is the Source of one HBase snapshot: its splits are the
// snapshot's (regions, or pieces cut at data-index keys), its scanners
// the snapshot's merged store scanners, with HBase's read semantics.
type Snapshot struct {
	s *snapshot.Snapshot
}

// OpenSnapshot opens snapshot name under root (snapshot.Open) as a
// Source; the source owns it and closes it.
func OpenSnapshot(ctx context.Context, root, name string, opts snapshot.OpenOptions) (*Snapshot, error) {
	s, err := snapshot.Open(ctx, root, name, opts)
	if err != nil {
		return nil, err
	}
	return FromSnapshot(s), nil
}

// FromSnapshot is the Source of an open snapshot; its Close closes s.
func FromSnapshot(s *snapshot.Snapshot) *Snapshot { return &Snapshot{s: s} }

// Describe names the snapshot: its name, table and creation time.
func (src *Snapshot) Describe() Identity {
	info := src.s.Info()
	return Identity{Kind: KindSnapshot, Table: info.Table, Name: info.Name, Created: info.CreationTime}
}

// Table is the schema the snapshot's manifest holds.
func (src *Snapshot) Table() Table { return src.s.Table() }

// Bytes is the store file bytes of every region.
func (src *Snapshot) Bytes() int64 { return src.s.Bytes() }

// DefaultSplitBytes is snapshot.Snapshot.DefaultSplitBytes.
func (src *Snapshot) DefaultSplitBytes(floor int64) int64 { return src.s.DefaultSplitBytes(floor) }

// Splits cuts the snapshot (snapshot.Snapshot.Splits): the splits, their
// IDs and bytes are the snapshot package's own.
func (src *Snapshot) Splits(opts CutOptions) ([]Split, error) {
	sps, err := src.s.Splits(snapshot.SplitOptions{TargetBytes: opts.TargetBytes, InRow: opts.InRow, GreedyInRow: opts.GreedyInRow})
	if err != nil {
		return nil, err
	}
	out := make([]Split, len(sps))
	for i := range sps {
		sp := &sps[i]
		out[i] = Split{
			ID: sp.ID, Region: sp.Region.EncodedName, StartRow: sp.StartRow, EndRow: sp.EndRow,
			StartColumn: column(sp.StartColumn), EndColumn: column(sp.EndColumn), Bytes: sp.Bytes,
			part: sp,
		}
	}
	return out, nil
}

func column(c *snapshot.Column) *Column {
	if c == nil {
		return nil
	}
	return &Column{Family: c.Family, Qualifier: c.Qualifier}
}

// split is the snapshot's own split behind sp.
func (src *Snapshot) split(sp Split) (*snapshot.Split, error) {
	p, ok := sp.part.(*snapshot.Split)
	if !ok {
		return nil, fmt.Errorf("source: split %s is not one of snapshot %s's", sp.ID, src.s.Info().Name)
	}
	return p, nil
}

// Open returns the snapshot's scanner over sp: the *snapshot.Scanner
// itself, so the run's calls per cell reach it with no layer between.
func (src *Snapshot) Open(ctx context.Context, sp Split, scan ScanOptions) (Scanner, error) {
	p, err := src.split(sp)
	if err != nil {
		return nil, err
	}
	sc, err := src.s.NewScanner(ctx, *p, scan)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// Prepare opens sp's store files in the background
// (snapshot.Snapshot.Prepare).
func (src *Snapshot) Prepare(sp Split, scan ScanOptions) {
	if p, err := src.split(sp); err == nil {
		src.s.Prepare(*p, scan)
	}
}

// Close closes the snapshot.
func (src *Snapshot) Close() error { return src.s.Close() }

var _ Source = (*Snapshot)(nil)
