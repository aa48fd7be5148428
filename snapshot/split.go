package snapshot

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/rekeyhq/rekey/cell"
)

// SplitOptions control how a snapshot is cut into units of work.
type SplitOptions struct {
	// TargetBytes > 0 cuts regions larger than this into pieces of about
	// this many bytes, at row boundaries taken from the data index of the
	// region's largest store file. 0 = one split per region.
	TargetBytes int64
	// InRow lets TargetBytes cut inside a row too, at the start of a
	// column (row, family, qualifier) where a row spans blocks of the
	// index, so that a row far larger than a piece is read by several
	// pieces. Never inside a column: every version of a column and its
	// delete markers stay in one piece, and a piece that starts inside a
	// row still applies the row's family delete markers (see Split). Only
	// for work that maps cell by cell: a row-level transform needs whole
	// rows.
	InRow bool
	// GreedyInRow places in-row cuts by the rule of the builds before
	// even cuts (each the first position a unit past the one before; IDs
	// ending in "_c"), for the checkpoints those builds wrote. Without it
	// in-row cuts are placed nearest even shares of the region (IDs ending
	// in "_e"). Only with InRow.
	GreedyInRow bool
}

// MinDefaultSplitBytes is the floor a run gives DefaultSplitBytes unless
// its sink's pieces cost less: a piece costs a split's fixed work (its
// scanners, its sink's writer, its checkpoint record, and for staged
// HFiles files of its own to write, stage and load), so a small table is
// not cut into pieces that cost more to start than to read.
const MinDefaultSplitBytes = 8 << 20

// defaultPieces is how many pieces the whole snapshot is cut into at most
// by DefaultSplitBytes: two pieces a worker for up to 8 workers, so that the
// last pieces, read while other workers are idle, are small.
const defaultPieces = 16

// DefaultSplitBytes is the TargetBytes a run cuts by when its job sets
// none: the mean region's bytes, but at most 1/defaultPieces of the
// snapshot and at least floor (the smallest piece worth its fixed cost,
// MinDefaultSplitBytes or less), so that a region far larger than the
// others becomes pieces the size of the others (or smaller) and no one
// worker reads it alone while the rest sit idle. It depends only on the
// snapshot's store file sizes and the floor (not on the worker count,
// which may change between a run and its resume), and it is 0 when no
// region is larger than it: then nothing would be cut, and the splits and
// their IDs are exactly those of TargetBytes 0.
func (s *Snapshot) DefaultSplitBytes(floor int64) int64 {
	sizes := make([]int64, len(s.regions))
	for i := range s.regions {
		sizes[i] = s.regions[i].Bytes()
	}
	return defaultSplitBytes(sizes, floor)
}

// Bytes returns the store file bytes of every region of the snapshot.
func (s *Snapshot) Bytes() int64 {
	var n int64
	for i := range s.regions {
		n += s.regions[i].Bytes()
	}
	return n
}

// defaultSplitBytes is DefaultSplitBytes' rule over region sizes, with the
// floor given (tests lower it to reach small fixtures).
func defaultSplitBytes(sizes []int64, floor int64) int64 {
	if len(sizes) == 0 {
		return 0
	}
	var total, largest int64
	for _, b := range sizes {
		total += b
		largest = max(largest, b)
	}
	target := max(floor, min(total/int64(len(sizes)), total/defaultPieces))
	if largest <= target {
		return 0
	}
	return target
}

// Split is a unit of work: a key range of one region, from a row (or a
// column inside it) to a row (or a column inside it). Splits are made by
// Snapshot.Splits and scanned with the same Snapshot's NewScanner.
type Split struct {
	// ID names the split for checkpoints and claims. It depends only on
	// the snapshot (its manifest and store files) and on the SplitOptions:
	// the same snapshot cut with the same options gives the same IDs, in
	// any process, and distinct splits of one snapshot have distinct IDs.
	//
	// A split that is a whole region has the region's encoded name as ID
	// (the same under any SplitOptions, since the region is the split). A
	// piece of a region cut by TargetBytes is
	// "<encoded name>_p<k>of<n>_t<TargetBytes>": piece k (from 1) of n, so
	// a checkpoint written under other options never matches it; with
	// InRow the ID ends in "_e" besides (its pieces follow another rule),
	// or "_c" with GreedyInRow. IDs use only [0-9a-z_], so they serve as
	// file and znode names as they are.
	ID     string
	Region Region
	// StartRow (inclusive) and EndRow (exclusive; empty = to the end) are
	// the region's bounds or the piece's, when StartColumn and EndColumn
	// are nil.
	StartRow, EndRow []byte
	// StartColumn, when set, says the piece starts inside StartRow, at
	// this column: StartRow's cells of families before
	// StartColumn.Family, and of that family's qualifiers before
	// StartColumn.Qualifier, belong to the piece before. EndColumn, when
	// set, says the piece ends inside EndRow, before this column: EndRow's
	// cells before it belong to this piece, the rest to the next. Only
	// SplitOptions.InRow makes them; a column is never cut, so each
	// column's versions and markers stay in one piece.
	StartColumn, EndColumn *Column
	// Bytes estimates the store file bytes the split reads.
	Bytes int64

	// snap is the Snapshot that cut it.
	snap *Snapshot
}

// StopRow returns the exclusive upper bound of the rows the split holds
// cells of (empty = to the end): EndRow, or the row just after it when
// the split ends inside EndRow.
func (sp *Split) StopRow() []byte {
	if sp.EndColumn == nil || len(sp.EndRow) == 0 {
		return sp.EndRow
	}
	return append(append([]byte(nil), sp.EndRow...), 0)
}

// startKey is the smallest cell key the split holds.
func (sp *Split) startKey() cell.Cell {
	if sp.StartColumn != nil {
		return firstOnColumn(sp.StartRow, sp.StartColumn.Family, sp.StartColumn.Qualifier)
	}
	return cell.FirstOnRow(sp.StartRow)
}

// endKey is the smallest cell key past the split; ok is false when the
// split runs to the end of the table.
func (sp *Split) endKey() (k cell.Cell, ok bool) {
	if len(sp.EndRow) == 0 {
		return cell.Cell{}, false
	}
	if sp.EndColumn != nil {
		return firstOnColumn(sp.EndRow, sp.EndColumn.Family, sp.EndColumn.Qualifier), true
	}
	return cell.FirstOnRow(sp.EndRow), true
}

// firstOnColumn is the smallest possible cell of a column: the newest
// timestamp and the highest type code sort first within it.
func firstOnColumn(row, family, qualifier []byte) cell.Cell {
	return cell.Cell{Row: row, Family: family, Qualifier: qualifier, Timestamp: cell.LatestTimestamp, Type: cell.Maximum}
}

// Splits cuts the snapshot into splits, in key order.
func (s *Snapshot) Splits(opts SplitOptions) ([]Split, error) {
	var out []Split
	for i := range s.regions {
		r := &s.regions[i]
		whole := Split{ID: r.EncodedName, Region: *r, StartRow: r.StartKey, EndRow: r.EndKey, Bytes: r.Bytes(), snap: s}
		if opts.TargetBytes <= 0 || whole.Bytes <= opts.TargetBytes {
			out = append(out, whole)
			continue
		}
		cuts, err := s.cutRegion(r, opts.TargetBytes, opts)
		if err != nil {
			return nil, err
		}
		if len(cuts) == 0 {
			out = append(out, whole)
			continue
		}
		out = append(out, pieces(s, r, cuts, whole.Bytes, opts)...)
	}
	return out, nil
}

// cut is a position a region is cut at, with the share of the region's
// bytes before it (from 0 to 1), as the chosen store file's offsets say.
// A nil col cuts at the start of row; else at that column inside it.
type cut struct {
	row    []byte
	col    *Column
	before float64
}

// key is the first cell key at or after the cut.
func (c *cut) key() cell.Cell {
	if c.col != nil {
		return firstOnColumn(c.row, c.col.Family, c.col.Qualifier)
	}
	return cell.FirstOnRow(c.row)
}

// pieces makes the splits of region r cut at cuts: each piece's Bytes is
// its share of the region's bytes, so the run's largest-first order puts a
// piece that holds a huge row first.
func pieces(s *Snapshot, r *Region, cuts []cut, bytes int64, opts SplitOptions) []Split {
	n := len(cuts) + 1
	out := make([]Split, 0, n)
	suffix := ""
	switch {
	case opts.InRow && opts.GreedyInRow:
		suffix = "_c"
	case opts.InRow:
		suffix = "_e"
	}
	start, from := r.StartKey, 0.0
	var startCol *Column
	for k := 0; k < n; k++ {
		end, to := r.EndKey, 1.0
		var endCol *Column
		if k < len(cuts) {
			end, endCol, to = cuts[k].row, cuts[k].col, cuts[k].before
		}
		out = append(out, Split{
			ID:          fmt.Sprintf("%s_p%dof%d_t%d%s", r.EncodedName, k+1, n, opts.TargetBytes, suffix),
			Region:      *r,
			StartRow:    start,
			EndRow:      end,
			StartColumn: startCol,
			EndColumn:   endCol,
			Bytes:       max(1, int64(float64(bytes)*(to-from))),
			snap:        s,
		})
		start, startCol, from = end, endCol, to
	}
	return out
}

// cutRegion picks positions that cut region r into pieces of about target
// bytes: rows (cutRows), or with inRow rows and columns (cutInRow).
func (s *Snapshot) cutRegion(r *Region, target int64, opts SplitOptions) ([]cut, error) {
	if opts.InRow {
		return s.cutInRow(r, target, opts.GreedyInRow)
	}
	return s.cutRows(r, target)
}

// regionIndex reads the data index of store file f of region r: its
// entries, where its data blocks end, and the row bounds [lo, hi) its
// entries count within (the region's, narrowed to the half a reference
// names), which the cut rules share.
func (s *Snapshot) regionIndex(r *Region, family []byte, f *StoreFile) (idx []indexKey, end int64, lo, hi []byte, err error) {
	rf, err := s.resolve(r, family, f)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	rd, _, err := s.acquire(rf)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	idx, err = rd.dataIndex()
	end = rd.dataEnd()
	s.release(rf)
	if err != nil {
		return nil, 0, nil, nil, fmt.Errorf("snapshot %s: %s: data index: %w", s.info.Name, rf.where(), err)
	}
	lo, hi = r.StartKey, r.EndKey
	if rf.ref != nil {
		sk := rf.ref.SplitRow()
		if rf.ref.Top {
			if bytes.Compare(sk, lo) > 0 {
				lo = sk
			}
		} else if len(hi) == 0 || bytes.Compare(sk, hi) < 0 {
			hi = sk
		}
	}
	return idx, end, lo, hi, nil
}

// cutRows picks rows that cut region r into pieces of about target bytes,
// from the data index of its largest store file (block first keys, whose
// offsets say how far into the file each lies).
func (s *Snapshot) cutRows(r *Region, target int64) ([]cut, error) {
	var best *StoreFile
	var bestFam []byte
	for _, ff := range r.Families {
		for i := range ff.Files {
			if best == nil || ff.Files[i].Size > best.Size {
				best, bestFam = &ff.Files[i], ff.Family
			}
		}
	}
	if best == nil {
		return nil, nil
	}
	// end is moved below to where the region's rows end in the file.
	idx, end, lo, hi, err := s.regionIndex(r, bestFam, best)
	if err != nil {
		return nil, err
	}
	type cand struct {
		row []byte
		off int64
	}
	var cands []cand
	for _, e := range idx {
		var c cell.Cell
		if cell.ParseKey(e.Key, &c) != nil {
			continue
		}
		if len(hi) > 0 && bytes.Compare(c.Row, hi) >= 0 {
			end = min(end, e.Offset) // the blocks from here on are past the region
			continue
		}
		if bytes.Compare(c.Row, lo) <= 0 {
			continue
		}
		cands = append(cands, cand{append([]byte(nil), c.Row...), e.Offset})
	}
	if len(cands) == 0 {
		return nil, nil
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].off < cands[j].off })
	pieces := (r.Bytes() + target - 1) / target
	if pieces < 2 {
		return nil, nil
	}
	// Offsets in the chosen file scale to the region's bytes: a piece is
	// about unit bytes of the file. Greedy, from the region's first block:
	// cut at the first block a unit past the last cut that starts a row
	// after the last cut's. A row longer than a unit (no block boundary
	// after it in reach) stays whole in one piece, and the pieces after it
	// are cut afresh from where it ends, not crammed into the little left.
	first := cands[0].off
	if end <= first {
		end = cands[len(cands)-1].off + 1
	}
	unit := (end - first) / pieces
	var cuts []cut
	last, rowAt := first, first
	for i, c := range cands {
		if i == 0 || !bytes.Equal(c.row, cands[i-1].row) {
			rowAt = c.off // the row starts about here (its first block)
		}
		if c.off-last < unit || (len(cuts) > 0 && bytes.Compare(c.row, cuts[len(cuts)-1].row) <= 0) {
			continue
		}
		if end-rowAt < unit/2 {
			break // a last piece of less than half a unit joins the one before
		}
		// The cut is where the row starts, so a row of many blocks counts
		// whole in the piece it begins.
		cuts = append(cuts, cut{row: c.row, before: float64(rowAt-first) / float64(end-first)})
		last = rowAt
	}
	return cuts, nil
}

// fileIndex is one store file's data index inside a region: the blocks'
// first keys in order, their offsets, and where the region's blocks begin
// and end in the file.
type fileIndex struct {
	keys       []cell.Cell
	offs       []int64
	first, end int64
}

// before estimates the file's bytes before key k: those of the blocks
// whose first key sorts before it.
func (f *fileIndex) before(k *cell.Cell) int64 {
	j := sort.Search(len(f.keys), func(i int) bool { return cell.Compare(&f.keys[i], k) >= 0 })
	if j == len(f.keys) {
		return f.end - f.first
	}
	return f.offs[j] - f.first
}

// cutInRow is cutRegion's rule with in-row cuts, over every store file of
// the region (all families, all flushes): a huge row written over several
// flushes, or wide in several families, has its cells in several files, and
// one file's offsets would leave the others' share of the row to one piece.
// The candidates are the positions the blocks' first keys give in every
// file (a row start where a file's block starts a new row, else a column
// start, unless the qualifier is empty); the bytes before a candidate are
// the sum, over the files, of the bytes of their blocks that start before
// it. The cuts are then chosen among the candidates by evenCuts, or with
// greedy by greedyCuts.
func (s *Snapshot) cutInRow(r *Region, target int64, greedy bool) ([]cut, error) {
	var files []fileIndex
	var cands []cut
	for _, ff := range r.Families {
		for i := range ff.Files {
			idx, end, lo, hi, err := s.regionIndex(r, ff.Family, &ff.Files[i])
			if err != nil {
				return nil, err
			}
			fx := fileIndex{end: end}
			var prevRow []byte
			havePrev := false
			for _, e := range idx {
				var c cell.Cell
				if cell.ParseKey(e.Key, &c) != nil {
					continue
				}
				if len(hi) > 0 && bytes.Compare(c.Row, hi) >= 0 {
					fx.end = min(fx.end, e.Offset) // the blocks from here on are past the region
					continue
				}
				newRow := !havePrev || !bytes.Equal(c.Row, prevRow)
				prevRow, havePrev = append(prevRow[:0], c.Row...), true
				rowCmp := bytes.Compare(c.Row, lo)
				if rowCmp < 0 {
					continue // the other half of a reference's parent
				}
				c = c.Clone()
				fx.keys, fx.offs = append(fx.keys, c), append(fx.offs, e.Offset)
				switch {
				case len(c.Qualifier) > 0 && (!newRow || rowCmp == 0):
					cands = append(cands, cut{row: c.Row, col: &Column{Family: c.Family, Qualifier: c.Qualifier}})
				case newRow && rowCmp > 0:
					cands = append(cands, cut{row: c.Row})
				}
			}
			if len(fx.keys) == 0 {
				continue
			}
			fx.first = fx.offs[0]
			if fx.end <= fx.first {
				fx.end = fx.offs[len(fx.offs)-1] + 1
			}
			files = append(files, fx)
		}
	}
	pieces := (r.Bytes() + target - 1) / target
	if len(cands) == 0 || pieces < 2 {
		return nil, nil
	}
	keys := make([]cell.Cell, len(cands))
	for i := range cands {
		keys[i] = cands[i].key()
	}
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return cell.Compare(&keys[order[a]], &keys[order[b]]) < 0 })
	// Distinct positions in key order, each with the bytes before it.
	var pos []cut
	var at []int64
	var total int64
	for i := range files {
		total += files[i].end - files[i].first
	}
	for n, i := range order {
		if n > 0 && cell.Compare(&keys[i], &keys[order[n-1]]) == 0 {
			continue
		}
		var b int64
		for f := range files {
			b += files[f].before(&keys[i])
		}
		pos, at = append(pos, cands[i]), append(at, b)
	}
	if greedy {
		return greedyCuts(pos, at, total, pieces), nil
	}
	return evenCuts(pos, at, total, pieces), nil
}

// evenCuts places the cuts of a region of total bytes into pieces at the
// candidate positions pos (in key order, at[i] bytes before pos[i]) nearest
// the even shares k*total/pieces, k = 1 .. pieces-1. Cutting greedily a
// unit past the last cut leaves whatever follows the last cut it could make
// to the final piece: where a huge row ended a little past a share, the
// piece after it came out twice the others (SIZE=small's heavy region:
// 40,440 and 79,357 cells). A row start within a quarter unit of a share is
// taken over a nearer column, so that a piece starts at a whole row where
// that costs little. A position that would leave a piece of under half a
// unit (after the cut before it, or to the region's end) is passed over,
// and a share with no other position near is not cut.
func evenCuts(pos []cut, at []int64, total, pieces int64) []cut {
	unit := total / pieces
	// rowBefore[i] and rowFrom[i]: the nearest row start at or before i,
	// and at or after i (-1: none).
	rowBefore, rowFrom := make([]int, len(pos)), make([]int, len(pos))
	for i, r := 0, -1; i < len(pos); i++ {
		if pos[i].col == nil {
			r = i
		}
		rowBefore[i] = r
	}
	for i, r := len(pos)-1, -1; i >= 0; i-- {
		if pos[i].col == nil {
			r = i
		}
		rowFrom[i] = r
	}
	var cuts []cut
	var last int64
	usable := func(i int) bool {
		return i >= 0 && i < len(pos) && at[i] > last && at[i]-last >= unit/2 && total-at[i] >= unit/2
	}
	for k := int64(1); k < pieces; k++ {
		share := total / pieces * k
		off := func(i int) int64 { return max(at[i]-share, share-at[i]) }
		j := sort.Search(len(at), func(i int) bool { return at[i] >= share })
		best := -1
		var rows [2]int
		rows[0], rows[1] = -1, -1
		if j > 0 {
			rows[0] = rowBefore[j-1]
		}
		if j < len(pos) {
			rows[1] = rowFrom[j]
		}
		for _, i := range rows {
			if usable(i) && off(i) <= unit/4 && (best < 0 || off(i) < off(best)) {
				best = i
			}
		}
		if best < 0 {
			for _, i := range [2]int{j - 1, j} {
				if usable(i) && (best < 0 || off(i) < off(best)) {
					best = i
				}
			}
		}
		if best < 0 {
			continue
		}
		c := pos[best]
		c.before = float64(at[best]) / float64(total)
		cuts = append(cuts, c)
		last = at[best]
	}
	return cuts
}

// greedyCuts is the in-row rule of the builds before evenCuts, kept
// unchanged so that their checkpoints' pieces are cut again exactly: the
// first candidate a unit past the last cut, a column only where its row
// goes on for half a unit more, and a last piece of under half a unit
// joined to the one before.
func greedyCuts(pos []cut, at []int64, total, pieces int64) []cut {
	unit := total / pieces
	nextRow := make([]int64, len(pos))
	for i, next := len(pos)-1, total; i >= 0; i-- {
		nextRow[i] = next
		if pos[i].col == nil {
			next = at[i]
		}
	}
	var cuts []cut
	var last int64
	for i := range pos {
		b := at[i]
		if b-last < unit || (pos[i].col != nil && nextRow[i]-b < unit/2) {
			continue
		}
		if total-b < unit/2 {
			break // a last piece of less than half a unit joins the one before
		}
		c := pos[i]
		c.before = float64(b) / float64(total)
		cuts = append(cuts, c)
		last = b
	}
	return cuts
}
