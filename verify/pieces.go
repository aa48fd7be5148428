package verify

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"golang.org/x/sync/errgroup"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
)

// An entity can be most of a table: one sensor of 5M cells in 11M. Read as
// one unit of work, it holds one worker while the others idle. So the first
// pass (counts and digests) reads an entity larger than a piece in pieces,
// on both sides, by several workers at once:
//
//   - the old side in the snapshot's own pieces (snapshot.Split, cut at
//     about Config.SplitBytes from the store files' data index, inside a
//     row too, at a column start, as a run cuts a huge row), each read
//     over the entity's range;
//   - the new side over its range cut at the rows the old pieces' starts
//     map to through the job's layouts, so the new pieces follow the old
//     ones in size.
//
// Counts, bytes and digests add up (the digest is a sum), whatever the
// pieces: a side's pieces need not match the other side's, only cover its
// range exactly once, which cuts of one range in key order do. Rows add up
// too, but for a row one piece ends in and the next starts in (an old row
// cut at a column): sideCount.join counts it once. Classification reads
// the entities that differ whole, as before, so results, classes, digests
// and redo ranges are the same whatever the worker count.

// plan is how one entity's sides are read in the first pass.
type plan struct {
	// old holds the snapshot pieces the entity's old range is read in
	// (nil: through Config.Old over the whole range, one unit).
	old []snapshot.Split
	// new holds the pieces of the entity's new range, in key order (nil:
	// the whole range, one unit).
	new []transform.KeyRange
}

// sideCount is what the first pass counted of one side of one entity, or
// of one piece of it.
type sideCount struct {
	t                                  tally
	rejected, unreadable, newer, wrong int64
}

// join adds q, the count of the piece that follows p's in key order. The
// row p's cells end in and q's begin in is one row: counted once.
func (p *sideCount) join(q *sideCount) {
	p.rejected += q.rejected
	p.unreadable += q.unreadable
	p.newer += q.newer
	p.wrong += q.wrong
	if q.t.side.Cells == 0 {
		return
	}
	rows := q.t.side.Rows
	if p.t.side.Cells == 0 {
		p.t.firstRow = append(p.t.firstRow[:0], q.t.firstRow...)
	} else if bytes.Equal(p.t.lastRow, q.t.firstRow) {
		rows--
	}
	p.t.side.Rows += rows
	p.t.side.Cells += q.t.side.Cells
	p.t.side.Bytes += q.t.side.Bytes
	p.t.d.a += q.t.d.a
	p.t.d.b += q.t.d.b
	p.t.lastRow = append(p.t.lastRow[:0], q.t.lastRow...)
}

// minSplitBytes is the smallest piece the default SplitBytes cuts: a
// piece costs a scanner of its own (every store file of its region opened
// and sought), worth it only over enough cells.
const minSplitBytes = 1 << 20

// splitBytes is the piece size entities are cut at, or <= 0 for none: the
// Config's, else a quarter of a worker's share of the old snapshot's bytes,
// so the last piece left while other workers finish is small.
func (c *comparison) splitBytes() int64 {
	if c.cfg.SplitBytes != 0 {
		return c.cfg.SplitBytes
	}
	sr, ok := c.cfg.Old.(*SnapshotReader)
	if !ok || c.cfg.Workers < 2 {
		return 0
	}
	return max(sr.snap.Bytes()/int64(4*c.cfg.Workers), minSplitBytes)
}

// makePlans plans, once, how each entity's sides are read: an entity
// whose old range covers more than one snapshot piece is read piece by
// piece, and its new range cut where the pieces' starts map to.
func (c *comparison) makePlans() error {
	if c.plans != nil {
		return nil
	}
	c.plans = make([]plan, len(c.targets))
	target := c.splitBytes()
	sr, ok := c.cfg.Old.(*SnapshotReader)
	if target <= 0 || !ok || c.oldR == nil {
		return nil
	}
	// A row-level forward mapping needs whole rows: cut between rows only.
	inRow := true
	if c.method == Forward {
		_, rowLevel := c.mapper().(transform.Flusher)
		inRow = !rowLevel
	}
	rk := c.cfg.Program.New()
	for i := range c.targets {
		ps, err := sr.pieces(*c.oldR[i], target, inRow)
		if err != nil {
			return fmt.Errorf("verify: cutting entity %s into pieces: %w", c.cfg.Program.FormatEntity(c.targets[i].Key), err)
		}
		if len(ps) < 2 {
			continue
		}
		c.plans[i].old = ps
		if c.newR != nil {
			c.plans[i].new = newPieces(rk, ps[1:], *c.newR[i])
		}
	}
	return nil
}

// newPieces cuts the new range r at the new rows the starts of the old
// pieces map to through rk (those inside r, each once, in order). A start
// the mapping refuses (a row cut whose key needs the qualifier) makes no
// cut: the pieces are only fewer.
func newPieces(rk *transform.Rekey, starts []snapshot.Split, r transform.KeyRange) []transform.KeyRange {
	var cuts [][]byte
	for _, sp := range starts {
		b := cell.Cell{Row: sp.StartRow, Type: cell.Put}
		switch {
		case sp.StartColumn != nil:
			b.Family, b.Qualifier = sp.StartColumn.Family, sp.StartColumn.Qualifier
		case len(sp.Region.Families) > 0:
			b.Family = sp.Region.Families[0].Family
		}
		out, ok := mapCut(rk, b)
		if !ok {
			continue
		}
		if bytes.Compare(out.Row, r.Start) <= 0 || (len(r.Stop) > 0 && bytes.Compare(out.Row, r.Stop) >= 0) {
			continue
		}
		cuts = append(cuts, bytes.Clone(out.Row))
	}
	if len(cuts) == 0 {
		return nil
	}
	sort.Slice(cuts, func(a, b int) bool { return bytes.Compare(cuts[a], cuts[b]) < 0 })
	out := make([]transform.KeyRange, 0, len(cuts)+1)
	start := r.Start
	for _, k := range cuts {
		if bytes.Equal(k, start) {
			continue
		}
		out = append(out, transform.KeyRange{Start: start, Stop: k})
		start = k
	}
	return append(out, transform.KeyRange{Start: start, Stop: r.Stop})
}

// maxCutPad is how many zero bytes mapCut appends to a cut's qualifier.
const maxCutPad = 16

// mapCut maps the key a piece starts at to a new cell. The key is from a
// data index, where HBase writes the shortest key between two blocks, not
// a cell's: its qualifier may be cut short of what the old layout reads (6
// bytes of an 8-byte time), or empty at a row cut. Zero bytes appended
// make the smallest key of that length, still between the two blocks'
// cells, until the layout reads it; ok is false when none does.
func mapCut(rk *transform.Rekey, b cell.Cell) (cell.Cell, bool) {
	q := b.Qualifier
	for pad := 0; pad <= maxCutPad; pad++ {
		if pad > 0 {
			b.Qualifier = append(bytes.Clone(q), make([]byte, pad)...)
		}
		if out, err := rk.Apply(&b); err == nil {
			return out, true
		}
	}
	return cell.Cell{}, false
}

// unit is one piece of the first pass's work: one side of one entity, or
// a piece of it, or a whole side read once for every entity.
type unit struct {
	i     int  // the entity (unused for a whole side)
	old   bool // the old side, else the new
	whole bool // the side has no entity ranges: read it whole, once
	sp    *snapshot.Split
	r     transform.KeyRange
	n     int // the units of its entity and side: more run first
	out   sideCount
	// lead, when not nil, is where the gap in no entity's new range
	// before r starts: the unit reads from there, and the cells before
	// r.Start are outside every entity (CompareAll). tail says the whole
	// unit is such a gap, the one after the last range.
	lead []byte
	tail bool
}

// count is the first pass: it counts the old side of the entities in
// oldIdx and the new side of those in newIdx, Workers units at a time,
// both sides at once, heavy entities in pieces (makePlans). olds is nil
// when oldIdx is.
func (c *comparison) count(ctx context.Context, oldIdx, newIdx []int) (olds, news []sideCount, err error) {
	if err := c.makePlans(); err != nil {
		return nil, nil, err
	}
	n := len(c.targets)
	if oldIdx != nil {
		olds = make([]sideCount, n)
	}
	news = make([]sideCount, n)
	var units []*unit
	if len(oldIdx) > 0 && c.oldR == nil {
		units = append(units, &unit{old: true, whole: true})
	}
	// The first pass of a check of every entity reads the new side whole
	// (outside.go): the gaps between the entities' new ranges too.
	gaps := c.outside != nil && oldIdx != nil
	if (len(newIdx) > 0 || gaps) && c.newR == nil {
		units = append(units, &unit{whole: true})
	}
	var lead map[int][]byte
	if gaps && c.newR != nil {
		var tail []byte
		var hasTail bool
		lead, tail, hasTail = c.gaps(newIdx)
		if hasTail {
			units = append(units, &unit{tail: true, r: transform.KeyRange{Start: tail}, n: 1})
		}
	}
	for _, i := range oldIdx {
		if c.oldR == nil {
			break
		}
		ps := c.plans[i].old
		if ps == nil {
			units = append(units, &unit{i: i, old: true, r: *c.oldR[i], n: 1})
			continue
		}
		for k := range ps {
			units = append(units, &unit{i: i, old: true, sp: &ps[k], r: *c.oldR[i], n: len(ps)})
		}
	}
	for _, i := range newIdx {
		if c.newR == nil {
			break
		}
		rs := c.plans[i].new
		if rs == nil {
			units = append(units, &unit{i: i, r: *c.newR[i], n: 1, lead: lead[i]})
			continue
		}
		for k, r := range rs {
			u := &unit{i: i, r: r, n: len(rs)}
			if k == 0 {
				u.lead = lead[i] // the first piece starts where the range does
			}
			units = append(units, u)
		}
	}
	// The largest first: whole sides, then the pieces of heavy entities.
	order := append([]*unit(nil), units...)
	sort.SliceStable(order, func(a, b int) bool {
		if order[a].whole != order[b].whole {
			return order[a].whole
		}
		return order[a].n > order[b].n
	})
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Workers)
	for _, u := range order {
		g.Go(func() error {
			switch {
			case u.whole && u.old:
				return c.visitOld(gctx, oldIdx, func(i int, cl *cell.Cell, oldRow []byte) { olds[i].t.add(cl, oldRow) })
			case u.whole:
				snapMs := c.snapMs()
				var other func(*newReader, *cell.Cell)
				if gaps {
					other = func(nr *newReader, cl *cell.Cell) { c.outsideCell(nr, cl, snapMs) }
				}
				return c.visitNew(gctx, newIdx, func(i int, nc newCell) { news[i].addNew(c, nc, snapMs) }, other)
			case u.old:
				return c.countOld(gctx, u)
			}
			return c.countNew(gctx, u)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	if olds != nil && c.oldR == nil {
		// visitOld counted the rejected cells of a whole read in place.
		for _, i := range oldIdx {
			olds[i].rejected, c.res[i].Old.Rejected = c.res[i].Old.Rejected, 0
		}
	}
	for _, u := range units {
		if u.whole || u.tail {
			continue
		}
		if u.old {
			olds[u.i].join(&u.out)
		} else {
			news[u.i].join(&u.out)
		}
	}
	return olds, news, nil
}

// addNew counts a new cell as the first pass does: newer than the
// snapshot apart (comparison.newerThanSnapshot), a key that disagrees
// with its fields apart, the rest in the tally.
func (s *sideCount) addNew(c *comparison, n newCell, snapMs int64) {
	switch {
	case c.newerThanSnapshot(n.c.Timestamp, snapMs):
		s.newer++
	case n.wrong != nil:
		s.wrong++
	default:
		s.t.add(n.key, n.c.Row)
	}
}

// countOld counts the old cells of one unit: its entity's range, or the
// part of it in one snapshot piece.
func (c *comparison) countOld(ctx context.Context, u *unit) error {
	p := c.cfg.Program
	key := c.targets[u.i].Key
	rk, m := p.New(), c.mapper()
	s := &u.out
	var ent []byte
	add := func(_ int, cl *cell.Cell, oldRow []byte) { s.t.add(cl, oldRow) }
	fn := func(cl *cell.Cell) error {
		var err error
		if ent, err = rk.SourceEntity(ent[:0], cl); err != nil {
			s.rejected++
			return nil
		}
		if !bytes.Equal(ent, key) {
			// The range holds exactly this entity's keys; another
			// entity here means the layout and the range disagree.
			return fmt.Errorf("old range %s holds a cell of entity %s (%s)", u.r, p.FormatEntity(ent), cl)
		}
		return c.oldVisit(m, &s.rejected, u.i, cl, add)
	}
	var err error
	if u.sp != nil {
		err = c.cfg.Old.(*SnapshotReader).readPiece(ctx, *u.sp, u.r, fn)
	} else {
		err = c.cfg.Old.Read(ctx, u.r, fn)
	}
	if err == nil {
		err = c.flushOld(m, u.i, nil, add)
	}
	if err != nil {
		return fmt.Errorf("verify: entity %s: %w", p.FormatEntity(key), err)
	}
	return nil
}

// countNew counts the new cells of one unit: its entity's range, or a
// piece of it. A cell that does not parse, or is another entity's, is
// unreadable, unless its key disagrees with its own fields.
func (c *comparison) countNew(ctx context.Context, u *unit) error {
	nr := &newReader{c: c, rk: c.cfg.Program.New()}
	s, snapMs := &u.out, c.snapMs()
	if u.tail {
		err := c.cfg.New.Read(ctx, u.r, func(cl *cell.Cell) error {
			c.outsideCell(nr, cl, snapMs)
			return nil
		})
		if err != nil {
			return fmt.Errorf("verify: the new side after every entity's range: %w", err)
		}
		return nil
	}
	key := c.targets[u.i].Key
	r, inLead := u.r, u.lead != nil
	if inLead {
		r.Start = u.lead
	}
	err := c.cfg.New.Read(ctx, r, func(cl *cell.Cell) error {
		if inLead {
			// One compare a cell until the entity's range begins.
			if bytes.Compare(cl.Row, u.r.Start) < 0 {
				c.outsideCell(nr, cl, snapMs)
				return nil
			}
			inLead = false
		}
		n, ent, ok := nr.read(cl)
		if ok && (n.wrong != nil || bytes.Equal(ent, key)) {
			s.addNew(c, n, snapMs)
		} else {
			s.unreadable++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify: entity %s: %w", c.cfg.Program.FormatEntity(key), err)
	}
	return nil
}
