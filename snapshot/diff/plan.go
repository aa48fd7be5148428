// Package diff finds, exactly, the cells HBase shows in one snapshot of a
// table and not in another, and the reverse: the work of a catch-up that
// brings a copy of snapshot A's cells to snapshot B's.
//
// It works in two steps. A Plan compares the two manifests: store files
// (by the file that holds their cells, after HFileLinks, References and
// the archive are resolved) that only one side has, or that the two sides
// give different rows of, name the rows that can differ; a family with a
// TTL adds the rows of the files whose cells can expire between the two
// read times. Only trailers, file info and indexes are read for this, and
// the data of small files only one side has, for their exact rows. Then
// Changes reads those rows on both sides with HBase's read semantics
// (snapshot.Scanner: versions, delete markers, TTL) and merges the two
// streams: a cell only B shows is added, a cell only A shows is removed.
// File names never decide alone: a compaction rewrites old cells under a
// new name, and its rows are compared cell by cell like any other.
package diff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rekeyhq/rekey/snapshot"
)

// Options say how both snapshots are read.
type Options struct {
	// Scan selects families, columns, versions and a time range, the same
	// for both sides. Raw is refused: a marker that vanished cannot be
	// undone by a write. Now and the row bounds are ignored (see NowA and
	// NowB, and Plan.Changes).
	Scan snapshot.ScanOptions
	// NowA and NowB are the times TTLs expire at on each side: what the
	// copy of A was read at, and what B is read at now.
	NowA, NowB time.Time
}

// Range is a range of rows: Start inclusive, Stop exclusive (never empty).
type Range struct{ Start, Stop []byte }

// Stats counts what a Plan decided from the manifests and file info.
type Stats struct {
	// FilesRead and BytesRead are the store file entries (of both sides)
	// whose rows meet a touched range, and their sizes; FilesSkipped and
	// BytesSkipped the rest, whose data blocks are never read.
	FilesRead, FilesSkipped int
	BytesRead, BytesSkipped int64
	// ExactFiles counts the entries whose exact rows were read
	// (exactRows), rather than taken from their first to their last.
	ExactFiles int
}

// ErrIncompatible says two snapshots cannot be compared by their files:
// other tables, or a family whose read rules changed between them.
var ErrIncompatible = errors.New("diff: snapshots cannot be compared")

// Plan is the work of a catch-up from A to B: the rows that can differ.
type Plan struct {
	a, b  *snapshot.Snapshot
	opts  Options
	stats Stats
	// ranges are the touched rows, sorted and disjoint.
	ranges []Range
	// read are the rows and sizes of the entries read (of both sides).
	read []readEntry
}

// readEntry is an entry the plan reads: its rows and its file's size.
type readEntry struct {
	first, stop []byte
	size        int64
}

// entry is one manifest entry of one side with what its file says.
type entry struct {
	span snapshot.Span
	side int // 0 = A, 1 = B
	// Where the entry is, to read its rows (exactRows).
	region *snapshot.Region
	family []byte
	file   *snapshot.StoreFile
}

// NewPlan compares the manifests of a and b (snapshots of the same table)
// and reads the file info of their store files.
func NewPlan(ctx context.Context, a, b *snapshot.Snapshot, opts Options) (*Plan, error) {
	if opts.Scan.Raw {
		return nil, fmt.Errorf("%w: a raw read cannot be caught up (a delete marker that vanished cannot be undone by a write)", ErrIncompatible)
	}
	ta, tb := a.Table(), b.Table()
	if ta.Namespace != tb.Namespace || ta.Qualifier != tb.Qualifier {
		return nil, fmt.Errorf("%w: snapshot %s is of table %s:%s, snapshot %s of %s:%s", ErrIncompatible, a.Info().Name, ta.Namespace, ta.Qualifier, b.Info().Name, tb.Namespace, tb.Qualifier)
	}
	fams, err := families(a, b, &opts.Scan)
	if err != nil {
		return nil, err
	}
	p := &Plan{a: a, b: b, opts: opts}
	// Every entry of the families read, grouped by the file behind it.
	byFile := map[string][]entry{}
	var all []entry
	for side, s := range []*snapshot.Snapshot{a, b} {
		regions := s.Regions()
		for ri := range regions {
			r := &regions[ri]
			for _, ff := range r.Families {
				if _, ok := fams[string(ff.Family)]; !ok {
					continue
				}
				for fi := range ff.Files {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					sp, err := s.Span(r, ff.Family, &ff.Files[fi])
					if err != nil {
						return nil, err
					}
					e := entry{span: sp, side: side, region: r, family: ff.Family, file: &ff.Files[fi]}
					all = append(all, e)
					byFile[string(ff.Family)+"\x00"+sp.File] = append(byFile[string(ff.Family)+"\x00"+sp.File], e)
				}
			}
		}
	}
	var touched []Range
	for _, es := range byFile {
		// The same file gives the same cells to the same rows on both
		// sides only when the rows it covers are the same (a split hands
		// a file's halves to two daughters: still the same rows).
		var rows [2][]Range
		for _, e := range es {
			if !e.span.Empty {
				rows[e.side] = append(rows[e.side], Range{e.span.FirstRow, e.span.StopRow})
			}
		}
		ua, ub := union(rows[0]), union(rows[1])
		if sameRanges(ua, ub) {
			continue
		}
		if len(es) == 1 && !es[0].span.Empty {
			rs, err := p.exactRows(ctx, es[0], all)
			if err != nil {
				return nil, err
			}
			if rs != nil {
				touched = append(touched, rs...)
				continue
			}
		}
		touched = append(touched, ua...)
		touched = append(touched, ub...)
	}
	// TTLs: a cell read at NowA may have expired by NowB (or the reverse,
	// when B is read earlier) in a file both sides share.
	if !opts.NowA.Equal(opts.NowB) {
		lo, hi := opts.NowA.UnixMilli(), opts.NowB.UnixMilli()
		if lo > hi {
			lo, hi = hi, lo
		}
		for _, e := range all {
			if e.span.Empty {
				continue
			}
			if e.span.Tags || expiresBetween(fams[familyOf(e.span.File)], e.span, lo, hi) {
				touched = append(touched, Range{e.span.FirstRow, e.span.StopRow})
			}
		}
	}
	p.ranges = union(touched)
	for _, e := range all {
		if !e.span.Empty && p.meets(e.span.FirstRow, e.span.StopRow) {
			p.stats.FilesRead++
			p.stats.BytesRead += e.span.Size
			p.read = append(p.read, readEntry{e.span.FirstRow, e.span.StopRow, e.span.Size})
		} else {
			p.stats.FilesSkipped++
			p.stats.BytesSkipped += e.span.Size
		}
	}
	return p, nil
}

// Exact rows (exactRows): an entry only one side has, whose file is at
// most exactRowsMaxBytes and at most 1/exactRowsShare of the bytes of the
// other entries of its family its rows meet, has its data read for its
// exact rows (at most exactRowsMax of them), rather than every row from
// its first to its last. A flush of a few changed rows spread over a
// region spans nearly all of it: the catch-up bench's 1% of rows changed
// read 78% of a whole run's bytes by spans. Reading such a file costs
// its own bytes, which the compare reads again; a bigger one (a
// compaction's output, most of what it would save) keeps its span.
const (
	exactRowsMaxBytes = 64 << 20
	exactRowsShare    = 4
	exactRowsMax      = 4096
)

// exactRows returns the rows of e's cells as ranges of one row each, or
// nil when its span is to be used (see exactRowsMaxBytes).
func (p *Plan) exactRows(ctx context.Context, e entry, all []entry) ([]Range, error) {
	if e.span.Size > exactRowsMaxBytes {
		return nil, nil
	}
	fam := familyOf(e.span.File)
	var others int64
	for _, o := range all {
		if o.span.Empty || o.span.File == e.span.File || familyOf(o.span.File) != fam {
			continue
		}
		if bytes.Compare(o.span.FirstRow, e.span.StopRow) < 0 && bytes.Compare(e.span.FirstRow, o.span.StopRow) < 0 {
			others += o.span.Size
		}
	}
	if e.span.Size*exactRowsShare > others {
		return nil, nil
	}
	s := p.a
	if e.side == 1 {
		s = p.b
	}
	rows, err := s.SpanRows(ctx, e.region, e.family, e.file, e.span)
	if err != nil {
		return nil, err
	}
	if len(rows) > exactRowsMax {
		return nil, nil
	}
	p.stats.ExactFiles++
	out := make([]Range, len(rows))
	for i, r := range rows {
		out[i] = Range{r, append(bytes.Clone(r), 0)}
	}
	return out, nil
}

// familyOf is the family part of a Span's File.
func familyOf(file string) string {
	// ns/table/region/family/hfile; no part holds a slash.
	parts := bytes.Split([]byte(file), []byte("/"))
	if len(parts) != 5 {
		return ""
	}
	return string(parts[3])
}

// expiresBetween reports whether a file of a family with a TTL can hold a
// cell alive at one of the times lo and hi and expired at the other.
func expiresBetween(ttl int64, sp snapshot.Span, lo, hi int64) bool {
	if ttl == math.MaxInt64 {
		return false
	}
	// Alive at lo: ts > lo - ttl; expired at hi: ts <= hi - ttl. HBase's
	// test is ts < now - ttl; one millisecond either way is harmless here.
	return sp.TimeMax >= lo-ttl && sp.TimeMin <= hi-ttl
}

// families checks the families the scan reads have the same read rules on
// both sides, and returns their TTLs in ms.
func families(a, b *snapshot.Snapshot, scan *snapshot.ScanOptions) (map[string]int64, error) {
	wanted := map[string]bool{}
	for _, f := range scan.Families {
		wanted[string(f)] = true
	}
	for _, c := range scan.Columns {
		wanted[string(c.Family)] = true
	}
	out := map[string]int64{}
	tb := b.Table()
	ta := a.Table()
	for i := range tb.Families {
		fb := &tb.Families[i]
		if len(wanted) > 0 && !wanted[string(fb.Name)] {
			continue
		}
		fa := ta.Family(fb.Name)
		if fa == nil {
			// A family added after A: A shows nothing of it.
			out[string(fb.Name)] = fb.TTLMillis()
			continue
		}
		if fa.MaxVersions != fb.MaxVersions || fa.MinVersions != fb.MinVersions || fa.TTL != fb.TTL || fa.KeepDeletedCells != fb.KeepDeletedCells {
			return nil, fmt.Errorf("%w: family %s reads by other rules in %s (VERSIONS %d, MIN_VERSIONS %d, TTL %d, KEEP_DELETED_CELLS %s) than in %s (VERSIONS %d, MIN_VERSIONS %d, TTL %d, KEEP_DELETED_CELLS %s): every row may differ; run a full copy",
				ErrIncompatible, fb.Name, a.Info().Name, fa.MaxVersions, fa.MinVersions, fa.TTL, fa.KeepDeletedCells, b.Info().Name, fb.MaxVersions, fb.MinVersions, fb.TTL, fb.KeepDeletedCells)
		}
		out[string(fb.Name)] = fb.TTLMillis()
	}
	for i := range ta.Families {
		fa := &ta.Families[i]
		if len(wanted) > 0 && !wanted[string(fa.Name)] {
			continue
		}
		if tb.Family(fa.Name) == nil {
			return nil, fmt.Errorf("%w: family %s of %s is gone from %s: every row of it may differ; run a full copy", ErrIncompatible, fa.Name, a.Info().Name, b.Info().Name)
		}
	}
	return out, nil
}

// union sorts ranges and merges those that overlap or touch.
func union(rs []Range) []Range {
	if len(rs) == 0 {
		return nil
	}
	s := append([]Range(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return bytes.Compare(s[i].Start, s[j].Start) < 0 })
	out := []Range{s[0]}
	for _, r := range s[1:] {
		last := &out[len(out)-1]
		if bytes.Compare(r.Start, last.Stop) <= 0 {
			if bytes.Compare(r.Stop, last.Stop) > 0 {
				last.Stop = r.Stop
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func sameRanges(a, b []Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Start, b[i].Start) || !bytes.Equal(a[i].Stop, b[i].Stop) {
			return false
		}
	}
	return true
}

// meets reports whether rows [start, stop) meet a touched range.
func (p *Plan) meets(start, stop []byte) bool {
	i := sort.Search(len(p.ranges), func(i int) bool { return bytes.Compare(p.ranges[i].Stop, start) > 0 })
	return i < len(p.ranges) && bytes.Compare(p.ranges[i].Start, stop) < 0
}

// BytesIn is the size of the store files of both sides that the plan
// reads and whose rows meet [start, stop) (stop empty: to the end): the
// work of reading those rows, counted whole for a file that also holds
// rows outside them.
func (p *Plan) BytesIn(start, stop []byte) int64 {
	var n int64
	for _, e := range p.read {
		if (len(stop) == 0 || bytes.Compare(e.first, stop) < 0) && bytes.Compare(e.stop, start) > 0 {
			n += e.size
		}
	}
	return n
}

// Ranges returns the touched rows, sorted and disjoint.
func (p *Plan) Ranges() []Range { return p.ranges }

// Stats returns what the plan reads and skips.
func (p *Plan) Stats() Stats { return p.stats }

// within returns the touched ranges clipped to rows [start, stop) (stop
// empty = to the end).
func (p *Plan) within(start, stop []byte) []Range {
	var out []Range
	for _, r := range p.ranges {
		if len(stop) > 0 && bytes.Compare(r.Start, stop) >= 0 {
			break
		}
		if bytes.Compare(r.Stop, start) <= 0 {
			continue
		}
		c := r
		if bytes.Compare(c.Start, start) < 0 {
			c.Start = start
		}
		if len(stop) > 0 && bytes.Compare(c.Stop, stop) > 0 {
			c.Stop = stop
		}
		out = append(out, c)
	}
	return out
}
