package diff

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot"
)

// Counts are what a Changes iterator has seen so far.
type Counts struct {
	// Rows is the number of rows read on either side (each once).
	Rows int64
	// CellsA and CellsB are the cells read on each side.
	CellsA, CellsB int64
	// Added and Removed are the cells returned as each; Replaced counts
	// cells of A that B shows at the same key with another value, which
	// come back as an added cell only.
	Added, Removed, Replaced int64
}

// Changes iterates over the differences in rows [start, stop) (stop empty
// = to the end of the table), in HBase's cell order, with the
// cell.Iterator contract: a cell that B shows and A does not is returned
// with Removed false; a cell that A shows and B does not, and whose key
// (row, column, timestamp) B does not show with another value either, with
// Removed true. A cell whose value changed at the same key is returned
// once, with B's value, as added: writing it replaces the old value, while
// a version delete at its timestamp would mask the new one too.
func (p *Plan) Changes(ctx context.Context, start, stop []byte) *Changes {
	ranges := p.within(start, stop)
	ch := &Changes{}
	ch.sides[0] = newSide(ctx, p.a, ranges, p.opts.Scan, p.opts.NowA)
	ch.sides[1] = newSide(ctx, p.b, ranges, p.opts.Scan, p.opts.NowB)
	return ch
}

// Changes is the iterator Plan.Changes returns.
type Changes struct {
	sides   [2]*side
	started bool
	out     *cell.Cell
	removed bool
	counts  Counts
	lastRow []byte
	haveRow bool
	err     error
}

// Next moves to the next difference.
func (ch *Changes) Next() bool {
	if ch.err != nil {
		return false
	}
	a, b := ch.sides[0], ch.sides[1]
	if !ch.started {
		ch.started = true
		ch.advance(0)
		ch.advance(1)
	} else if ch.out != nil {
		// The cell returned last is consumed: advance the side(s) it came
		// from (both when it was a replaced value).
		switch {
		case ch.removed:
			ch.advance(0)
		default:
			if a.cur != nil && sameKey(a.cur, b.cur) {
				ch.advance(0)
			}
			ch.advance(1)
		}
	}
	ch.out = nil
	for ch.err == nil {
		ca, cb := a.cur, b.cur
		switch {
		case ca == nil && cb == nil:
			return false
		}
		ch.countRow(ca, cb)
		switch {
		case cb == nil || (ca != nil && cell.Compare(ca, cb) < 0):
			ch.out, ch.removed = ca, true
			ch.counts.Removed++
			return true
		case ca == nil || cell.Compare(ca, cb) > 0:
			ch.out, ch.removed = cb, false
			ch.counts.Added++
			return true
		case bytes.Equal(ca.Value, cb.Value):
			ch.advance(0)
			ch.advance(1)
		default:
			// Same key, another value: B's replaces A's.
			ch.out, ch.removed = cb, false
			ch.counts.Added++
			ch.counts.Replaced++
			return true
		}
	}
	return false
}

// countRow counts the row of the smaller of ca and cb (one may be nil):
// the merge consumes cells in order, so a row is new when it differs from
// the last one counted.
func (ch *Changes) countRow(ca, cb *cell.Cell) {
	m := ca
	if m == nil || (cb != nil && cell.Compare(cb, m) < 0) {
		m = cb
	}
	if !ch.haveRow || !bytes.Equal(m.Row, ch.lastRow) {
		ch.haveRow = true
		ch.counts.Rows++
		ch.lastRow = append(ch.lastRow[:0], m.Row...)
	}
}

// sameKey reports whether a and b have the same row, column, timestamp and
// type (b may be nil).
func sameKey(a, b *cell.Cell) bool { return b != nil && cell.Compare(a, b) == 0 }

// advance moves one side on, counting rows and cells.
func (ch *Changes) advance(i int) {
	s := ch.sides[i]
	if !s.next() {
		if s.err != nil && ch.err == nil {
			ch.err = s.err
		}
		return
	}
	if i == 0 {
		ch.counts.CellsA++
	} else {
		ch.counts.CellsB++
	}
}

// Cell returns the current difference, valid until the next call.
func (ch *Changes) Cell() *cell.Cell { return ch.out }

// Removed reports whether the current cell is one A shows and B does not.
func (ch *Changes) Removed() bool { return ch.removed }

// Counts returns what the iterator has seen so far.
func (ch *Changes) Counts() Counts { return ch.counts }

// Err returns the error that ended the iteration, if any.
func (ch *Changes) Err() error { return ch.err }

// Close releases both sides' scanners and returns the iteration's error.
func (ch *Changes) Close() error {
	err := ch.err
	for _, s := range ch.sides {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}
	ch.out = nil
	return err
}

// side reads one snapshot's cells in the touched ranges, region by region,
// range by range, in cell order.
type side struct {
	ctx     context.Context
	s       *snapshot.Snapshot
	splits  []snapshot.Split
	ranges  []Range
	scan    snapshot.ScanOptions
	sc      *snapshot.Scanner
	ri, si  int // the next range, and the next split within it
	cur     *cell.Cell
	err     error
	started bool
}

func newSide(ctx context.Context, s *snapshot.Snapshot, ranges []Range, scan snapshot.ScanOptions, now time.Time) *side {
	scan.Now = now
	scan.StartRow, scan.StopRow = nil, nil
	return &side{ctx: ctx, s: s, ranges: ranges, scan: scan}
}

// next moves to the side's next cell.
func (sd *side) next() bool {
	if sd.err != nil {
		return false
	}
	if !sd.started {
		sd.started = true
		sps, err := sd.s.Splits(snapshot.SplitOptions{})
		if err != nil {
			sd.err = err
			return false
		}
		sd.splits = sps
	}
	for {
		if sd.sc != nil {
			if sd.sc.Next() {
				sd.cur = sd.sc.Cell()
				return true
			}
			err := sd.sc.Close()
			sd.sc = nil
			if err != nil {
				sd.err = err
				sd.cur = nil
				return false
			}
		}
		if !sd.open() {
			sd.cur = nil
			return false
		}
	}
}

// open starts the scanner of the next (range, region) pair that meet.
func (sd *side) open() bool {
	for sd.ri < len(sd.ranges) {
		r := sd.ranges[sd.ri]
		for sd.si < len(sd.splits) {
			sp := sd.splits[sd.si]
			if len(sp.EndRow) > 0 && bytes.Compare(sp.EndRow, r.Start) <= 0 {
				sd.si++
				continue
			}
			if bytes.Compare(sp.StartRow, r.Stop) >= 0 {
				break // the next range may start in this region
			}
			scan := sd.scan
			scan.StartRow, scan.StopRow = r.Start, r.Stop
			sc, err := sd.s.NewScanner(sd.ctx, sp, scan)
			if err != nil {
				sd.err = err
				return false
			}
			sd.sc = sc
			if len(sp.EndRow) > 0 && bytes.Compare(sp.EndRow, r.Stop) < 0 {
				sd.si++ // the range goes on in the next region
			} else {
				sd.ri++ // the range ends in this region
			}
			return true
		}
		sd.ri++
	}
	return false
}

func (sd *side) close() error {
	if sd.sc != nil {
		err := sd.sc.Close()
		sd.sc = nil
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return nil
}
