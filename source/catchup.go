package source

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/snapshot/diff"
)

// KindCatchup is the Kind of a catch-up: the difference between an
// earlier snapshot and the job's.
const KindCatchup = "catchup"

// Catchup is the source of a catch-up from snapshot A to snapshot B of the
// same table: its cells are what a copy of A must take to become a copy
// of B. A cell B shows and A does not comes as it is (a Put); a cell A
// shows and B does not comes as a version delete marker (type
// cell.Delete) of exactly that cell, with no value. A cell whose value
// changed at the same key comes once, as B's Put: a marker at its
// timestamp would mask the new value too.
//
// Its splits are B's regions (a catch-up reads only the rows that can
// differ, so cutting regions finer buys little).
type Catchup struct {
	a, b       *snapshot.Snapshot
	plan       *diff.Plan
	nowA, nowB time.Time
	counts     struct {
		rows, added, removed, replaced atomic.Int64
	}
}

// NewCatchup compares a and b under scan (families, versions, time range;
// Raw is refused) and returns the source of their difference. nowA is the
// TTL time the copy of A was read at; B is read at scan.Now, or at the
// current time when it is zero, taken once here so every split reads B
// alike. The source owns a and b from then on (Close closes them), also
// when it fails.
func NewCatchup(ctx context.Context, a, b *snapshot.Snapshot, scan ScanOptions, nowA time.Time) (*Catchup, error) {
	nowB := scan.Now
	if nowB.IsZero() {
		nowB = time.Now()
	}
	p, err := diff.NewPlan(ctx, a, b, diff.Options{Scan: scan, NowA: nowA, NowB: nowB})
	if err != nil {
		a.Close()
		b.Close()
		return nil, fmt.Errorf("catch-up from %s to %s: %w", a.Info().Name, b.Info().Name, err)
	}
	return &Catchup{a: a, b: b, plan: p, nowA: nowA, nowB: nowB}, nil
}

// Describe implements Source: B, with A and the time A was read at.
func (c *Catchup) Describe() Identity {
	in := c.b.Info()
	return Identity{
		Kind: KindCatchup, Table: in.Table, Name: in.Name, Created: in.CreationTime,
		More: []Field{
			{Name: "since snapshot", Value: c.a.Info().Name},
			{Name: "since snapshot creation time", Value: fmt.Sprint(c.a.Info().CreationTime.UnixMilli())},
			{Name: "since TTL time", Value: fmt.Sprint(c.nowA.UnixMilli())},
		},
	}
}

// Table implements Source: B's schema.
func (c *Catchup) Table() Table { return c.b.Table() }

// Bytes implements Source: the store file bytes the catch-up reads.
func (c *Catchup) Bytes() int64 { return c.plan.Stats().BytesRead }

// DefaultSplitBytes implements Source: a catch-up is never cut finer than
// B's regions.
func (c *Catchup) DefaultSplitBytes(int64) int64 { return 0 }

// Splits implements Source: one split per region of B, whatever opts say.
func (c *Catchup) Splits(CutOptions) ([]Split, error) {
	sps, err := c.b.Splits(snapshot.SplitOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]Split, len(sps))
	for i := range sps {
		sp := &sps[i]
		out[i] = Split{ID: sp.ID, Region: sp.Region.EncodedName, StartRow: sp.StartRow, EndRow: sp.EndRow, Bytes: c.touchedBytes(sp), part: sp}
	}
	return out, nil
}

// touchedBytes estimates a split's work: the store files of both
// snapshots the plan reads in its rows (B's region alone was counted
// before, and the progress line showed 114% read).
func (c *Catchup) touchedBytes(sp *snapshot.Split) int64 {
	return c.plan.BytesIn(sp.StartRow, sp.EndRow)
}

// Open implements Source: the differences in sp's rows, clipped further
// by scan's StartRow and StopRow. Scan's other fields must be those the
// source was made with (the run's scan).
func (c *Catchup) Open(ctx context.Context, sp Split, scan ScanOptions) (Scanner, error) {
	if _, ok := sp.part.(*snapshot.Split); !ok {
		return nil, fmt.Errorf("source: split %s is not one of this catch-up's", sp.ID)
	}
	start, stop := sp.StartRow, sp.EndRow
	if len(scan.StartRow) > 0 && bytes.Compare(scan.StartRow, start) > 0 {
		start = scan.StartRow
	}
	if len(scan.StopRow) > 0 && (len(stop) == 0 || bytes.Compare(scan.StopRow, stop) < 0) {
		stop = scan.StopRow
	}
	if len(stop) > 0 && bytes.Compare(start, stop) >= 0 {
		start = stop // nothing to read
	}
	return &catchupScanner{src: c, ch: c.plan.Changes(ctx, start, stop)}, nil
}

// Prepare implements Source: nothing is opened ahead.
func (c *Catchup) Prepare(Split, ScanOptions) {}

// Close implements Source.
func (c *Catchup) Close() error {
	errA := c.a.Close()
	errB := c.b.Close()
	if errA != nil {
		return errA
	}
	return errB
}

// NowB is the TTL time B is read at: what a record of the target reaching
// B says.
func (c *Catchup) NowB() time.Time { return c.nowB }

// CatchupStats is what a catch-up planned and did.
type CatchupStats struct {
	// Plan is what the manifests decided: store files and bytes read and
	// skipped (both snapshots').
	Plan diff.Stats
	// Rows is the rows read on either side; Added and Removed the cells
	// returned as puts and as version deletes; Replaced the cells whose
	// value changed at the same key (among Added).
	Rows, Added, Removed, Replaced int64
}

// Stats returns the plan and the counts of the scanners closed so far.
func (c *Catchup) Stats() CatchupStats {
	return CatchupStats{
		Plan: c.plan.Stats(), Rows: c.counts.rows.Load(), Added: c.counts.added.Load(),
		Removed: c.counts.removed.Load(), Replaced: c.counts.replaced.Load(),
	}
}

// catchupScanner turns a diff.Changes into cells: removed cells become
// version delete markers.
type catchupScanner struct {
	src     *Catchup
	ch      *diff.Changes
	out     cell.Cell
	gen     uint64
	row     []byte
	fam     []byte
	started bool
	closed  bool
}

func (s *catchupScanner) Next() bool {
	if !s.ch.Next() {
		return false
	}
	c := s.ch.Cell()
	s.out = *c
	if s.ch.Removed() {
		s.out.Type = cell.Delete
		s.out.Value = nil
		s.out.Tags = nil
	}
	if !s.started || !bytes.Equal(c.Row, s.row) || !bytes.Equal(c.Family, s.fam) {
		s.started = true
		s.gen++
		s.row = append(s.row[:0], c.Row...)
		s.fam = append(s.fam[:0], c.Family...)
	}
	return true
}

func (s *catchupScanner) Cell() *cell.Cell  { return &s.out }
func (s *catchupScanner) RowGen() uint64    { return s.gen }
func (s *catchupScanner) FilesChecked() int { return 0 }
func (s *catchupScanner) Err() error        { return s.ch.Err() }

func (s *catchupScanner) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.ch.Close()
	n := s.ch.Counts()
	s.src.counts.rows.Add(n.Rows)
	s.src.counts.added.Add(n.Added)
	s.src.counts.removed.Add(n.Removed)
	s.src.counts.replaced.Add(n.Replaced)
	return err
}
