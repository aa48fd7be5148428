package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/transform"
)

// Class names a kind of difference between the old and the new side.
type Class string

// Mismatch classes: each makes an entity's verdict a mismatch.
const (
	// MissingInNew: an old cell, mapped, has no new cell with its key.
	MissingInNew Class = "missing_in_new"
	// ExtraInNew: a new cell in a column the old side does not have.
	ExtraInNew Class = "extra_in_new"
	// ValueDiffers: the same key on both sides with different values.
	ValueDiffers Class = "value_differs"
	// ExtraVersions: a new cell in a column the old side has, at a
	// timestamp the old side does not have.
	ExtraVersions Class = "extra_versions"
	// ExpiredByTTL: an old cell missing in the new table, older than the
	// new family's TTL allows: HBase dropped or hides it there.
	ExpiredByTTL Class = "expired_by_ttl"
	// UnreadableInNew: a cell in the entity's new range whose key does not
	// parse under the new layout, or belongs to another entity.
	UnreadableInNew Class = "unreadable_in_new"
	// Unclassified: counts or digests differ but the entity is too large
	// to compare cell by cell within Config.MaxDiffCells.
	Unclassified Class = "unclassified"
)

// Classes is every mismatch class, in report order.
var Classes = []Class{MissingInNew, ExtraInNew, ValueDiffers, ExtraVersions, ExpiredByTTL, UnreadableInNew, Unclassified}

// Config sets up a comparison.
type Config struct {
	// Program maps old cells to new ones and reads entities from keys.
	Program *transform.Program
	// Old reads the old layout (a snapshot); New the new layout.
	Old, New Reader
	// SnapshotTime is when the old snapshot was taken: new cells with a
	// later timestamp were written by the application (dual writes) and
	// are counted apart, not compared. Zero: none are.
	SnapshotTime time.Time
	// TargetTTL gives the TTL of new families that have one, to tell an
	// old cell HBase expired in the new table from a missing one.
	TargetTTL map[string]time.Duration
	// Workers verify this many entities at once [4].
	Workers int
	// Retries re-reads a live new side this many times, waiting Backoff,
	// 2*Backoff, ... before declaring a mismatch [3, 1s].
	Retries int
	Backoff time.Duration
	// MaxDiffCells bounds the old cells held in memory, all entities
	// together, to classify differences [2,000,000]: entities that differ
	// are classified in batches that fit, and one larger than the bound is
	// reported Unclassified with its counts.
	MaxDiffCells int
	// Examples is how many differing cells to show per entity [5].
	Examples int
	// Now is the time TTL expiry is judged at (zero: the current time).
	Now time.Time
}

func (c *Config) fill() {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Retries < 0 {
		c.Retries = 0
	} else if c.Retries == 0 {
		c.Retries = 3
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.MaxDiffCells <= 0 {
		c.MaxDiffCells = 2_000_000
	}
	if c.Examples <= 0 {
		c.Examples = 5
	}
}

// Side is what one side holds of one entity.
type Side struct {
	// Range is the row range read.
	Range Range `json:"range"`
	// Rows counts the entity's rows in this side's own layout (old rows on
	// the old side, so they differ from the new side's when the layout
	// splits or merges rows). Cells and Bytes count its cells, old cells
	// after mapping, so both sides' bytes compare directly; new cells newer
	// than the snapshot are excluded.
	Rows  int64 `json:"rows"`
	Cells int64 `json:"cells"`
	Bytes int64 `json:"bytes"`
	// Digest is an order-independent digest of the mapped cells (row,
	// family, qualifier, timestamp, type, value): equal digests mean equal
	// cell sets, whatever the order they were read in.
	Digest string `json:"digest"`
	// Rejected counts old cells in the range whose key does not fit the old
	// layout (a run rejects them too); Unreadable counts new cells in the
	// range that are not this entity's.
	Rejected   int64 `json:"rejected,omitempty"`
	Unreadable int64 `json:"unreadable,omitempty"`
	// FullScan says this side's layout gives an entity no single key range
	// (its entity fields do not lead the row), so the side was read whole
	// and Range is the whole table: redoing the entity there means
	// filtering a full read by its key.
	FullScan bool `json:"full_scan,omitempty"`
}

// Range is a row range in printable and hex forms; an empty stop is the
// end of the table.
type Range struct {
	Start    string `json:"start"`
	Stop     string `json:"stop"`
	StartHex string `json:"start_hex"`
	StopHex  string `json:"stop_hex"`
}

func rangeOf(k transform.KeyRange) Range {
	return Range{
		Start: string(transform.AppendPrintable(nil, k.Start)), Stop: string(transform.AppendPrintable(nil, k.Stop)),
		StartHex: hex.EncodeToString(k.Start), StopHex: hex.EncodeToString(k.Stop),
	}
}

// KeyRange returns r's bytes.
func (r Range) KeyRange() (transform.KeyRange, error) {
	s, err := hex.DecodeString(r.StartHex)
	if err != nil {
		return transform.KeyRange{}, fmt.Errorf("range start %q: %w", r.StartHex, err)
	}
	e, err := hex.DecodeString(r.StopHex)
	if err != nil {
		return transform.KeyRange{}, fmt.Errorf("range stop %q: %w", r.StopHex, err)
	}
	return transform.KeyRange{Start: s, Stop: e}, nil
}

// Difference is one differing cell, in the canonical dump form
// (cell.AppendDump) on each side that has it.
type Difference struct {
	Class Class  `json:"class"`
	Old   string `json:"old,omitempty"`
	New   string `json:"new,omitempty"`
}

// Result is the comparison of one entity.
type Result struct {
	Entity string `json:"entity"`
	// Key is the entity key in hex (transform.Rekey.SourceEntity).
	Key string `json:"key"`
	// ChosenBy says why the entity was checked: heaviest-cells,
	// heaviest-bytes, sample, named, all, only.
	ChosenBy []string `json:"chosen_by"`
	Old      Side     `json:"old"`
	New      Side     `json:"new"`
	// Newer counts new cells with timestamps after the snapshot (dual
	// writes): not compared. Superseded counts old cells missing in the
	// new table where a newer dual-written cell of the same column hides
	// them: not mismatches either.
	Newer      int64 `json:"newer_than_snapshot"`
	Superseded int64 `json:"superseded"`
	// Match is the verdict.
	Match bool `json:"match"`
	// Mismatches counts differing cells per class.
	Mismatches map[Class]int64 `json:"mismatches,omitempty"`
	// First lists the first differing cells, in key order.
	First []Difference `json:"first_differences,omitempty"`
	// Reads is how many times the new side was read (more than one when a
	// live table was re-read after a mismatch).
	Reads int `json:"new_reads"`
}

// Verdict is "match" or "MISMATCH".
func (r *Result) Verdict() string {
	if r.Match {
		return "match"
	}
	return "MISMATCH"
}

// Target is one entity to verify and why it was chosen.
type Target struct {
	Key      []byte
	ChosenBy []string
}

// Compare verifies each target entity (each key once) and returns one
// result per target, in the targets' order. Each side is read over the entities' own key
// ranges; a side whose layout gives an entity no single range (its entity
// fields do not lead the row, as in a re-key that moves a timestamp first)
// is read whole, once, collecting the chosen entities' cells in that pass.
// An error (a read that fails) stops the comparison.
func Compare(ctx context.Context, cfg Config, targets []Target) ([]Result, error) {
	cfg.fill()
	if cfg.Program == nil || cfg.Old == nil || cfg.New == nil {
		return nil, errors.New("verify: Config needs Program, Old and New")
	}
	p := cfg.Program
	c := &comparison{cfg: &cfg, targets: targets, res: make([]Result, len(targets)), keys: map[string]int{}}
	var err error
	if c.oldR, err = ranges(targets, p.SourceRange); err != nil {
		return nil, err
	}
	if c.newR, err = ranges(targets, p.TargetRange); err != nil {
		return nil, err
	}
	all := make([]int, len(targets))
	for i, t := range targets {
		all[i] = i
		if _, dup := c.keys[string(t.Key)]; dup {
			return nil, fmt.Errorf("verify: entity %s is listed twice (Choice lists each once)", p.FormatEntity(t.Key))
		}
		c.keys[string(t.Key)] = i
		c.res[i] = Result{Entity: p.FormatEntity(t.Key), Key: hex.EncodeToString(t.Key), ChosenBy: t.ChosenBy}
	}

	olds := make([]tally, len(targets))
	if err := c.visitOld(ctx, all, func(i int, cl *cell.Cell, oldRow []byte) { olds[i].add(cl, oldRow) }); err != nil {
		return nil, err
	}
	for i := range olds {
		rej := c.res[i].Old.Rejected
		c.res[i].Old = olds[i].side
		c.res[i].Old.Rejected = rej
		c.res[i].Old.Digest = olds[i].d.String()
		c.res[i].Old.Range, c.res[i].Old.FullScan = sideRange(c.oldR, i)
	}

	pending, wait := all, cfg.Backoff
	for attempt := 0; ; attempt++ {
		news := make([]tally, len(targets))
		newer := make([]int64, len(targets))
		for _, i := range pending {
			c.res[i].New.Unreadable = 0
		}
		snapMs := c.snapMs()
		if err := c.visitNew(ctx, pending, func(i int, cl *cell.Cell) {
			if snapMs != 0 && cl.Timestamp > snapMs {
				newer[i]++
				return
			}
			news[i].add(cl, cl.Row)
		}); err != nil {
			return nil, err
		}
		var still []int
		for _, i := range pending {
			r := &c.res[i]
			unr := r.New.Unreadable
			r.New = news[i].side
			r.New.Unreadable = unr
			r.New.Digest = news[i].d.String()
			r.New.Range, r.New.FullScan = sideRange(c.newR, i)
			r.Newer = newer[i]
			r.Reads++
			if r.New.Cells == r.Old.Cells && news[i].d == olds[i].d && unr == 0 {
				r.Match = true
				continue
			}
			still = append(still, i)
		}
		pending = still
		if len(pending) == 0 || !cfg.New.Live() || attempt >= cfg.Retries {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	// Classify in batches whose old cells fit MaxDiffCells together, so
	// memory stays bounded however many entities differ (say, every one
	// after a wrong family mapping). A side read whole is read once per
	// batch.
	var batch []int
	var inBatch int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.classify(ctx, batch)
		batch, inBatch = nil, 0
		return err
	}
	for _, i := range pending {
		n := c.res[i].Old.Cells
		if n > int64(cfg.MaxDiffCells) {
			// Too big to hold: say so with its counts.
			c.res[i].Mismatches = map[Class]int64{Unclassified: abs(c.res[i].Old.Cells-c.res[i].New.Cells) + 1}
			continue
		}
		if inBatch+n > int64(cfg.MaxDiffCells) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		batch = append(batch, i)
		inBatch += n
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return c.res, nil
}

// comparison is the state of one Compare.
type comparison struct {
	cfg        *Config
	targets    []Target
	res        []Result
	keys       map[string]int        // entity key -> target index, to refuse duplicates
	oldR, newR []*transform.KeyRange // nil: that side has no entity range
}

// ranges returns each target's range, or nil for all of them when the
// layout has none (ErrNoEntityRange).
func ranges(targets []Target, fn func([]byte) (transform.KeyRange, error)) ([]*transform.KeyRange, error) {
	out := make([]*transform.KeyRange, len(targets))
	for i, t := range targets {
		r, err := fn(t.Key)
		if errors.Is(err, transform.ErrNoEntityRange) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		out[i] = &r
	}
	return out, nil
}

func sideRange(rs []*transform.KeyRange, i int) (Range, bool) {
	if rs == nil {
		return rangeOf(transform.KeyRange{}), true
	}
	return rangeOf(*rs[i]), false
}

func (c *comparison) snapMs() int64 {
	if c.cfg.SnapshotTime.IsZero() {
		return 0
	}
	return c.cfg.SnapshotTime.UnixMilli()
}

// visitOld calls fn(i, mapped cell) for every old cell of the entities in
// idx. In range mode fn runs for different entities at once, never for one
// entity at once; it must touch only entity i's state.
func (c *comparison) visitOld(ctx context.Context, idx []int, fn func(i int, mapped *cell.Cell, oldRow []byte)) error {
	p := c.cfg.Program
	if c.oldR == nil {
		want := c.wanted(idx)
		rk := p.New()
		var ent []byte
		return c.cfg.Old.Read(ctx, transform.KeyRange{}, func(cl *cell.Cell) error {
			var err error
			if ent, err = rk.SourceEntity(ent[:0], cl); err != nil {
				return nil // not any entity's: the run rejects it
			}
			i, ok := want[string(ent)]
			if !ok {
				return nil
			}
			out, err := rk.Apply(cl)
			if err != nil {
				c.res[i].Old.Rejected++
				return nil
			}
			fn(i, &out, cl.Row)
			return nil
		})
	}
	return c.each(ctx, idx, func(ctx context.Context, i int) error {
		key, r := c.targets[i].Key, *c.oldR[i]
		rk := p.New()
		var ent []byte
		err := c.cfg.Old.Read(ctx, r, func(cl *cell.Cell) error {
			var err error
			if ent, err = rk.SourceEntity(ent[:0], cl); err != nil {
				c.res[i].Old.Rejected++
				return nil
			}
			if !bytes.Equal(ent, key) {
				// The range holds exactly this entity's keys; another
				// entity here means the layout and the range disagree.
				return fmt.Errorf("old range %s holds a cell of entity %s (%s)", r, p.FormatEntity(ent), cl)
			}
			out, err := rk.Apply(cl)
			if err != nil {
				c.res[i].Old.Rejected++
				return nil
			}
			fn(i, &out, cl.Row)
			return nil
		})
		if err != nil {
			return fmt.Errorf("verify: entity %s: %w", p.FormatEntity(key), err)
		}
		return nil
	})
}

// visitNew calls fn(i, cell) for every new cell of the entities in idx
// (newer ones included: fn tells them apart). A cell in an entity's range
// that is not that entity's counts as unreadable for it.
func (c *comparison) visitNew(ctx context.Context, idx []int, fn func(int, *cell.Cell)) error {
	p := c.cfg.Program
	if c.newR == nil {
		want := c.wanted(idx)
		rk := p.New()
		var ent []byte
		return c.cfg.New.Read(ctx, transform.KeyRange{}, func(cl *cell.Cell) error {
			var err error
			if ent, err = rk.TargetEntity(ent[:0], cl); err != nil {
				return nil // a whole-table read cannot say whose it is
			}
			if i, ok := want[string(ent)]; ok {
				fn(i, cl)
			}
			return nil
		})
	}
	return c.each(ctx, idx, func(ctx context.Context, i int) error {
		key := c.targets[i].Key
		rk := p.New()
		var ent []byte
		err := c.cfg.New.Read(ctx, *c.newR[i], func(cl *cell.Cell) error {
			var err error
			ent, err = rk.TargetEntity(ent[:0], cl)
			if err != nil || !bytes.Equal(ent, key) {
				c.res[i].New.Unreadable++
				return nil
			}
			fn(i, cl)
			return nil
		})
		if err != nil {
			return fmt.Errorf("verify: entity %s: %w", p.FormatEntity(key), err)
		}
		return nil
	})
}

// wanted maps the entity keys of idx to their indexes.
func (c *comparison) wanted(idx []int) map[string]int {
	m := make(map[string]int, len(idx))
	for _, i := range idx {
		m[string(c.targets[i].Key)] = i
	}
	return m
}

// each runs fn for every index, Workers at a time.
func (c *comparison) each(ctx context.Context, idx []int, fn func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Workers)
	for _, i := range idx {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}

// digest sums per-cell hashes: addition commutes, so the order cells are
// read in does not matter, and a changed, missing or extra cell changes it.
type digest struct{ a, b uint64 }

func (d *digest) add(c *cell.Cell, scratch []byte) []byte {
	scratch = appendCellID(scratch[:0], c)
	scratch = binary.BigEndian.AppendUint32(scratch, uint32(len(c.Value)))
	scratch = append(scratch, c.Value...)
	h := sha256.Sum256(scratch)
	d.a += binary.BigEndian.Uint64(h[0:8])
	d.b += binary.BigEndian.Uint64(h[8:16])
	return scratch
}

func (d digest) String() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], d.a)
	binary.BigEndian.PutUint64(b[8:], d.b)
	return hex.EncodeToString(b[:])
}

// appendCellID appends a cell's key (row, family, qualifier, timestamp,
// type) with lengths, so no two keys encode alike.
func appendCellID(dst []byte, c *cell.Cell) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Row)))
	dst = append(dst, c.Row...)
	dst = append(dst, byte(len(c.Family)))
	dst = append(dst, c.Family...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Qualifier)))
	dst = append(dst, c.Qualifier...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.Timestamp))
	return append(dst, byte(c.Type))
}

// columnID is a cell's row, family and qualifier.
func columnID(dst []byte, c *cell.Cell) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Row)))
	dst = append(dst, c.Row...)
	dst = append(dst, byte(len(c.Family)))
	dst = append(dst, c.Family...)
	return append(dst, c.Qualifier...)
}

// tally counts one side of one entity.
type tally struct {
	side    Side
	d       digest
	lastRow []byte
	scratch []byte
}

// add counts cell c, which lies in row (the old row for an old cell, whose
// mapped row c.Row may differ): rows arrive in order, so a change of row is
// a new row.
func (t *tally) add(c *cell.Cell, row []byte) {
	if !bytes.Equal(row, t.lastRow) || t.side.Cells == 0 {
		t.side.Rows++
		t.lastRow = append(t.lastRow[:0], row...)
	}
	t.side.Cells++
	t.side.Bytes += cell.Size(c)
	t.scratch = t.d.add(c, t.scratch)
}

// oldCell is one old cell held while classifying.
type oldCell struct {
	c    cell.Cell
	seen bool
}

// held is what classification keeps of one entity.
type held struct {
	cells     map[string]*oldCell
	cols      map[string]bool
	newerCols map[string]bool
	tooBig    bool
	diffs     []Difference
	id        []byte
}

// classify reads both sides again for the entities that differ, holding
// their old cells by key, and sorts every difference into its class.
func (c *comparison) classify(ctx context.Context, idx []int) error {
	cfg := c.cfg
	hs := make([]*held, len(c.targets))
	for _, i := range idx {
		hs[i] = &held{cells: map[string]*oldCell{}, cols: map[string]bool{}, newerCols: map[string]bool{}}
	}
	// The first pass counted the rejected old cells; this one must not
	// count them again.
	rejected := make([]int64, len(c.targets))
	for _, i := range idx {
		rejected[i] = c.res[i].Old.Rejected
	}
	defer func() {
		for _, i := range idx {
			c.res[i].Old.Rejected = rejected[i]
		}
	}()
	if err := c.visitOld(ctx, idx, func(i int, cl *cell.Cell, _ []byte) {
		h := hs[i]
		if h.tooBig || len(h.cells) >= cfg.MaxDiffCells {
			h.tooBig = true
			return
		}
		h.id = appendCellID(h.id[:0], cl)
		h.cells[string(h.id)] = &oldCell{c: cl.Clone()}
		h.id = columnID(h.id[:0], cl)
		h.cols[string(h.id)] = true
	}); err != nil {
		return err
	}
	for _, i := range idx {
		c.res[i].Mismatches = map[Class]int64{}
		c.res[i].New.Unreadable = 0
	}
	note := func(i int, cl Class, o, n *cell.Cell) {
		c.res[i].Mismatches[cl]++
		d := Difference{Class: cl}
		if o != nil {
			d.Old = string(cell.AppendDump(nil, o))
		}
		if n != nil {
			d.New = string(cell.AppendDump(nil, n))
		}
		hs[i].diffs = append(hs[i].diffs, d)
	}
	snapMs := c.snapMs()
	if err := c.visitNew(ctx, idx, func(i int, cl *cell.Cell) {
		h := hs[i]
		if h.tooBig {
			return
		}
		if snapMs != 0 && cl.Timestamp > snapMs {
			h.id = columnID(h.id[:0], cl)
			h.newerCols[string(h.id)] = true
			return
		}
		h.id = appendCellID(h.id[:0], cl)
		if o := h.cells[string(h.id)]; o != nil && !o.seen {
			o.seen = true
			if !bytes.Equal(o.c.Value, cl.Value) {
				note(i, ValueDiffers, &o.c, cl)
			}
			return
		}
		h.id = columnID(h.id[:0], cl)
		if h.cols[string(h.id)] {
			note(i, ExtraVersions, nil, cl)
		} else {
			note(i, ExtraInNew, nil, cl)
		}
	}); err != nil {
		return err
	}
	now := cfg.Now
	if now.IsZero() {
		now = time.Now()
	}
	for _, i := range idx {
		h, res := hs[i], &c.res[i]
		if unr := res.New.Unreadable; unr > 0 {
			res.Mismatches[UnreadableInNew] += unr
		}
		if h.tooBig {
			res.Mismatches = map[Class]int64{Unclassified: abs(res.Old.Cells-res.New.Cells) + 1}
			res.Match = false
			continue
		}
		for _, o := range h.cells {
			if o.seen {
				continue
			}
			h.id = columnID(h.id[:0], &o.c)
			if h.newerCols[string(h.id)] {
				res.Superseded++
				continue
			}
			if ttl, ok := cfg.TargetTTL[string(o.c.Family)]; ok && ttl > 0 && o.c.Timestamp < now.Add(-ttl).UnixMilli() {
				note(i, ExpiredByTTL, &o.c, nil)
				continue
			}
			note(i, MissingInNew, &o.c, nil)
		}
		for cl, n := range res.Mismatches {
			if n == 0 {
				delete(res.Mismatches, cl)
			}
		}
		diffs := h.diffs
		sort.Slice(diffs, func(a, b int) bool {
			x, y := diffs[a].Old+diffs[a].New, diffs[b].Old+diffs[b].New
			if x != y {
				return x < y
			}
			return diffs[a].Class < diffs[b].Class
		})
		if len(diffs) > cfg.Examples {
			diffs = diffs[:cfg.Examples]
		}
		res.First = diffs
		// Only superseded cells (and newer ones) differ: the sides agree.
		res.Match = len(res.Mismatches) == 0
	}
	return nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// ClassList renders mismatch counts as "class=n, ..." in Classes order.
func ClassList(m map[Class]int64) string {
	var parts []string
	for _, c := range Classes {
		if n := m[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", c, n))
		}
	}
	return strings.Join(parts, ", ")
}
