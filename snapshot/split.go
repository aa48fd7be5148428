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
}

// MinDefaultSplitBytes is the smallest piece DefaultSplitBytes cuts: a
// piece costs a split's fixed work (its scanners, its sink's writer, its
// checkpoint record), so a small table is not cut into pieces that cost
// more to start than to read.
const MinDefaultSplitBytes = 8 << 20

// defaultPieces is how many pieces the whole snapshot is cut into at most
// by DefaultSplitBytes: two pieces a worker for up to 8 workers, so that the
// last pieces, read while other workers are idle, are small.
const defaultPieces = 16

// DefaultSplitBytes is the TargetBytes a run cuts by when its job sets
// none: the mean region's bytes, but at most 1/defaultPieces of the
// snapshot and at least MinDefaultSplitBytes, so that a region far larger
// than the others becomes pieces the size of the others (or smaller) and
// no one worker reads it alone while the rest sit idle. It depends only on
// the snapshot's store file sizes (not on the worker count, which may
// change between a run and its resume), and it is 0 when no region is
// larger than it: then nothing would be cut, and the splits and their IDs
// are exactly those of TargetBytes 0.
func (s *Snapshot) DefaultSplitBytes() int64 {
	sizes := make([]int64, len(s.regions))
	for i := range s.regions {
		sizes[i] = s.regions[i].Bytes()
	}
	return defaultSplitBytes(sizes, MinDefaultSplitBytes)
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

// Split is a unit of work: a row range of one region. Splits are made by
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
	// a checkpoint written under other options never matches it. IDs use
	// only [0-9a-z_], so they serve as file and znode names as they are.
	ID     string
	Region Region
	// StartRow (inclusive) and EndRow (exclusive; empty = to the end) are
	// the region's bounds or the piece's.
	StartRow, EndRow []byte
	// Bytes estimates the store file bytes the split reads.
	Bytes int64

	// snap is the Snapshot that cut it.
	snap *Snapshot
}

// Splits cuts the snapshot into splits, in row order.
func (s *Snapshot) Splits(opts SplitOptions) ([]Split, error) {
	var out []Split
	for i := range s.regions {
		r := &s.regions[i]
		whole := Split{ID: r.EncodedName, Region: *r, StartRow: r.StartKey, EndRow: r.EndKey, Bytes: r.Bytes(), snap: s}
		if opts.TargetBytes <= 0 || whole.Bytes <= opts.TargetBytes {
			out = append(out, whole)
			continue
		}
		cuts, err := s.cutRows(r, opts.TargetBytes)
		if err != nil {
			return nil, err
		}
		if len(cuts) == 0 {
			out = append(out, whole)
			continue
		}
		out = append(out, pieces(s, r, cuts, whole.Bytes, opts.TargetBytes)...)
	}
	return out, nil
}

// cut is a row a region is cut at, with the share of the region's bytes
// before it (from 0 to 1), as the chosen store file's offsets say.
type cut struct {
	row    []byte
	before float64
}

// pieces makes the splits of region r cut at cuts: each piece's Bytes is
// its share of the region's bytes, so the run's largest-first order puts a
// piece that holds a huge row first.
func pieces(s *Snapshot, r *Region, cuts []cut, bytes, target int64) []Split {
	n := len(cuts) + 1
	out := make([]Split, 0, n)
	start, from := r.StartKey, 0.0
	for k := 0; k < n; k++ {
		end, to := r.EndKey, 1.0
		if k < len(cuts) {
			end, to = cuts[k].row, cuts[k].before
		}
		out = append(out, Split{
			ID:       fmt.Sprintf("%s_p%dof%d_t%d", r.EncodedName, k+1, n, target),
			Region:   *r,
			StartRow: start,
			EndRow:   end,
			Bytes:    max(1, int64(float64(bytes)*(to-from))),
			snap:     s,
		})
		start, from = end, to
	}
	return out
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
	rf, err := s.resolve(r, bestFam, best)
	if err != nil {
		return nil, err
	}
	rd, _, err := s.acquire(rf)
	if err != nil {
		return nil, err
	}
	idx, err := rd.dataIndex()
	end := rd.dataEnd() // moved below to where the region's rows end in the file
	s.release(rf)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %s: data index: %w", s.info.Name, rf.where(), err)
	}
	// Keep the entries inside the region (and inside the half, for a
	// reference).
	lo, hi := r.StartKey, r.EndKey
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
