package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/rekeyhq/rekey/cell"
)

// Span is what a store file's trailer, file info and index say about the
// cells one manifest entry gives its region, without reading a data block:
// which underlying file holds them, which rows they lie in, and their
// timestamps. A catch-up between two snapshots compares Spans to find the
// rows that can differ.
type Span struct {
	// File names the underlying HFile by where it was written
	// (namespace/table/region/family/hfile), whatever the entry's form
	// (plain name, HFileLink, Reference) and wherever it lies now (data/,
	// archive/): two entries with the same File hold the same cells.
	File string
	// Entry is the manifest's name for it.
	Entry string
	// Size is the file's size in bytes.
	Size int64
	// Empty is true when the file holds no cell in the rows the entry
	// gives its region (a reference's other half, a file with no cells).
	Empty bool
	// FirstRow (inclusive) and StopRow (exclusive, never empty unless
	// Empty) bound the rows of its cells in the region, clipped to the
	// region and to a reference's half.
	FirstRow, StopRow []byte
	// TimeMin and TimeMax bound its cells' timestamps (TIMERANGE); with
	// no TIMERANGE in the file they are 0 and math.MaxInt64.
	TimeMin, TimeMax int64
	// Tags is true when cells of the file may carry tags (a per-cell TTL
	// among them): hfile.MAX_TAGS_LEN above 0.
	Tags bool
}

// Span opens one manifest entry's file (trailer, file info and index only)
// and describes the cells it gives region r's family.
func (s *Snapshot) Span(r *Region, family []byte, sf *StoreFile) (Span, error) {
	t, err := s.targetOf(r, family, sf)
	if err != nil {
		return Span{}, err
	}
	rf, err := s.resolve(r, family, sf)
	if err != nil {
		return Span{}, err
	}
	rd, _, err := s.acquire(rf)
	if err != nil {
		return Span{}, fmt.Errorf("snapshot %s: %s: %w", s.info.Name, rf.where(), err)
	}
	m := rd.meta()
	s.release(rf)
	sp := Span{
		File:    t.ns + "/" + t.table + "/" + t.region + "/" + t.family + "/" + t.hfile,
		Entry:   sf.Name,
		Size:    rf.size,
		TimeMin: 0, TimeMax: math.MaxInt64,
		Tags: m.MaxTagsLen > 0,
	}
	if m.HasTimeRange {
		sp.TimeMin, sp.TimeMax = m.TimeRangeMin, m.TimeRangeMax
	}
	if m.Entries == 0 || m.FirstKey == nil || m.LastKey == nil {
		if m.Entries != 0 {
			return Span{}, fmt.Errorf("%w: snapshot %s: %s holds %d cells but names no first or last key", ErrCorrupt, s.info.Name, rf.where(), m.Entries)
		}
		sp.Empty = true
		return sp, nil
	}
	var first, last cell.Cell
	if err := cell.ParseKey(m.FirstKey, &first); err != nil {
		return Span{}, fmt.Errorf("%w: snapshot %s: %s: first key: %v", ErrCorrupt, s.info.Name, rf.where(), err)
	}
	if err := cell.ParseKey(m.LastKey, &last); err != nil {
		return Span{}, fmt.Errorf("%w: snapshot %s: %s: last key: %v", ErrCorrupt, s.info.Name, rf.where(), err)
	}
	lo, hi := first.Row, last.Row
	// The rows the entry gives the region: the region's own, cut to a
	// reference's half. A half's bound is a row, so rows are enough.
	rlo, rhi := r.StartKey, r.EndKey // rhi exclusive, empty = none
	if rf.ref != nil {
		sk := rf.ref.SplitRow()
		if rf.ref.Top {
			if bytes.Compare(sk, rlo) > 0 {
				rlo = sk
			}
		} else if len(rhi) == 0 || bytes.Compare(sk, rhi) < 0 {
			rhi = sk
		}
	}
	stop := append(bytes.Clone(hi), 0) // the row just after the last
	if bytes.Compare(lo, rlo) < 0 {
		lo = rlo
	}
	if len(rhi) > 0 && bytes.Compare(stop, rhi) > 0 {
		stop = rhi
	}
	if bytes.Compare(lo, stop) >= 0 {
		sp.Empty = true
		return sp, nil
	}
	sp.FirstRow, sp.StopRow = bytes.Clone(lo), stop
	return sp, nil
}

// SpanRows returns the distinct rows of the cells the entry gives its
// region, sp being its Span: it reads every data block of the file in
// those rows. A Span bounds an entry by its first and last rows, which
// for a small flush holding a few scattered rows is every row between
// them; the catch-up (package diff) asks for the exact rows of the
// entries only one side has and that are small, whose blocks it reads
// again anyway when it compares those rows.
func (s *Snapshot) SpanRows(ctx context.Context, r *Region, family []byte, sf *StoreFile, sp Span) ([][]byte, error) {
	if sp.Empty {
		return nil, nil
	}
	rf, err := s.resolve(r, family, sf)
	if err != nil {
		return nil, err
	}
	rd, _, err := s.acquire(rf)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %s: %w", s.info.Name, rf.where(), err)
	}
	defer s.release(rf)
	it := rd.newIter(nil)
	var rows [][]byte
	start := cell.FirstOnRow(sp.FirstRow)
	for ok := it.SeekGE(&start); ok; ok = it.Next() {
		if len(rows)%1024 == 0 {
			if err := ctx.Err(); err != nil {
				it.Close()
				return nil, err
			}
		}
		c := it.Cell()
		if bytes.Compare(c.Row, sp.StopRow) >= 0 {
			break
		}
		if n := len(rows); n == 0 || !bytes.Equal(rows[n-1], c.Row) {
			if n > 0 && bytes.Compare(rows[n-1], c.Row) > 0 {
				it.Close()
				return nil, fmt.Errorf("%w: snapshot %s: %s: row %q after row %q", ErrCorrupt, s.info.Name, rf.where(), c.Row, rows[n-1])
			}
			rows = append(rows, bytes.Clone(c.Row))
		}
	}
	if err := it.Err(); err != nil {
		it.Close()
		return nil, fmt.Errorf("snapshot %s: %s: %w", s.info.Name, rf.where(), err)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("snapshot %s: %s: %w", s.info.Name, rf.where(), err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: snapshot %s: %s: its file info bounds cells in rows [%q, %q) but it holds none there", ErrCorrupt, s.info.Name, rf.where(), sp.FirstRow, sp.StopRow)
	}
	return rows, nil
}
