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
	"sync"
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
	// MaxDiffCells bounds the old cells of one entity held in memory to
	// classify its differences [2,000,000]; a larger entity that differs is
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
	// Rows, Cells and Bytes count the entity's rows and its cells (old
	// cells after mapping, so both sides' bytes compare directly; new cells
	// newer than the snapshot excluded).
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

// Compare verifies each target entity, reading only its ranges on both
// sides, and returns one result per target in the targets' order. An error
// (a read that fails, a layout with no entity range) stops the comparison.
func Compare(ctx context.Context, cfg Config, targets []Target) ([]Result, error) {
	cfg.fill()
	if cfg.Program == nil || cfg.Old == nil || cfg.New == nil {
		return nil, errors.New("verify: Config needs Program, Old and New")
	}
	out := make([]Result, len(targets))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Workers)
	for i := range targets {
		g.Go(func() error {
			r, err := compareOne(ctx, &cfg, targets[i])
			if err != nil {
				return fmt.Errorf("verify: entity %s: %w", cfg.Program.FormatEntity(targets[i].Key), err)
			}
			out[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
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

func (t *tally) add(c *cell.Cell) {
	if !bytes.Equal(c.Row, t.lastRow) || t.side.Cells == 0 {
		t.side.Rows++
		t.lastRow = append(t.lastRow[:0], c.Row...)
	}
	t.side.Cells++
	t.side.Bytes += cellSize(c)
	t.scratch = t.d.add(c, t.scratch)
}

// readOld reads the entity's old cells, mapped, calling fn for each.
func readOld(ctx context.Context, cfg *Config, key []byte, r transform.KeyRange, fn func(*cell.Cell)) (rejected int64, err error) {
	rk := cfg.Program.New()
	var ent []byte
	err = cfg.Old.Read(ctx, r, func(c *cell.Cell) error {
		ent, err = rk.SourceEntity(ent[:0], c)
		if err != nil {
			rejected++
			return nil
		}
		if !bytes.Equal(ent, key) {
			// The range holds exactly this entity's keys; another entity
			// here means the layout and the range disagree.
			return fmt.Errorf("old range %s holds a cell of entity %s (%s)", r, cfg.Program.FormatEntity(ent), c)
		}
		out, err := rk.Apply(c)
		if err != nil {
			rejected++
			return nil
		}
		fn(&out)
		return nil
	})
	return rejected, err
}

// readNew reads the entity's new cells, calling fn for each cell of the
// entity older than the snapshot and newer for the rest.
func readNew(ctx context.Context, cfg *Config, key []byte, r transform.KeyRange, fn, newer func(*cell.Cell)) (unreadable int64, err error) {
	rk := cfg.Program.New()
	snapMs := int64(0)
	if !cfg.SnapshotTime.IsZero() {
		snapMs = cfg.SnapshotTime.UnixMilli()
	}
	var ent []byte
	err = cfg.New.Read(ctx, r, func(c *cell.Cell) error {
		ent, err = rk.TargetEntity(ent[:0], c)
		if err != nil || !bytes.Equal(ent, key) {
			unreadable++
			return nil
		}
		if snapMs != 0 && c.Timestamp > snapMs {
			newer(c)
			return nil
		}
		fn(c)
		return nil
	})
	return unreadable, err
}

func compareOne(ctx context.Context, cfg *Config, t Target) (Result, error) {
	p := cfg.Program
	res := Result{Entity: p.FormatEntity(t.Key), Key: hex.EncodeToString(t.Key), ChosenBy: t.ChosenBy}
	oldR, err := p.SourceRange(t.Key)
	if err != nil {
		return res, err
	}
	newR, err := p.TargetRange(t.Key)
	if err != nil {
		return res, err
	}
	var old tally
	rej, err := readOld(ctx, cfg, t.Key, oldR, old.add)
	if err != nil {
		return res, err
	}
	old.side.Rejected = rej
	old.side.Range, old.side.Digest = rangeOf(oldR), old.d.String()
	res.Old = old.side

	wait := cfg.Backoff
	for {
		var nw tally
		var newer int64
		res.Reads++
		unr, err := readNew(ctx, cfg, t.Key, newR, nw.add, func(*cell.Cell) { newer++ })
		if err != nil {
			return res, err
		}
		nw.side.Unreadable = unr
		nw.side.Range, nw.side.Digest = rangeOf(newR), nw.d.String()
		res.New, res.Newer = nw.side, newer
		if nw.side.Cells == old.side.Cells && nw.d == old.d && unr == 0 {
			res.Match = true
			return res, nil
		}
		if !cfg.New.Live() || res.Reads > cfg.Retries {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	if err := classify(ctx, cfg, t.Key, oldR, newR, &res); err != nil {
		return res, err
	}
	return res, nil
}

// oldCell is one old cell held while classifying.
type oldCell struct {
	c    cell.Cell
	seen bool
}

// classify reads both sides again, holding the old cells by key, and
// sorts every difference into its class.
func classify(ctx context.Context, cfg *Config, key []byte, oldR, newR transform.KeyRange, res *Result) error {
	res.Mismatches = map[Class]int64{}
	held := map[string]*oldCell{}
	cols := map[string]bool{}
	var id []byte
	tooBig := false
	if _, err := readOld(ctx, cfg, key, oldR, func(c *cell.Cell) {
		if tooBig || len(held) >= cfg.MaxDiffCells {
			tooBig = true
			return
		}
		id = appendCellID(id[:0], c)
		held[string(id)] = &oldCell{c: c.Clone()}
		id = columnID(id[:0], c)
		cols[string(id)] = true
	}); err != nil {
		return err
	}
	if tooBig {
		res.Mismatches[Unclassified] = abs(res.Old.Cells-res.New.Cells) + 1
		return nil
	}
	var diffs []Difference
	var mu sync.Mutex
	note := func(cl Class, o, n *cell.Cell) {
		res.Mismatches[cl]++
		d := Difference{Class: cl}
		if o != nil {
			d.Old = string(cell.AppendDump(nil, o))
		}
		if n != nil {
			d.New = string(cell.AppendDump(nil, n))
		}
		mu.Lock()
		diffs = append(diffs, d)
		mu.Unlock()
	}
	newerCols := map[string]bool{}
	unr, err := readNew(ctx, cfg, key, newR, func(c *cell.Cell) {
		id = appendCellID(id[:0], c)
		if o := held[string(id)]; o != nil && !o.seen {
			o.seen = true
			if !bytes.Equal(o.c.Value, c.Value) {
				note(ValueDiffers, &o.c, c)
			}
			return
		}
		id = columnID(id[:0], c)
		if cols[string(id)] {
			note(ExtraVersions, nil, c)
		} else {
			note(ExtraInNew, nil, c)
		}
	}, func(c *cell.Cell) {
		id = columnID(id[:0], c)
		newerCols[string(id)] = true
	})
	if err != nil {
		return err
	}
	if unr > 0 {
		res.Mismatches[UnreadableInNew] += unr
	}
	now := cfg.Now
	if now.IsZero() {
		now = time.Now()
	}
	for _, o := range held {
		if o.seen {
			continue
		}
		id = columnID(id[:0], &o.c)
		if newerCols[string(id)] {
			res.Superseded++
			continue
		}
		if ttl, ok := cfg.TargetTTL[string(o.c.Family)]; ok && ttl > 0 && o.c.Timestamp < now.Add(-ttl).UnixMilli() {
			note(ExpiredByTTL, &o.c, nil)
			continue
		}
		note(MissingInNew, &o.c, nil)
	}
	for cl, n := range res.Mismatches {
		if n == 0 {
			delete(res.Mismatches, cl)
		}
	}
	sort.Slice(diffs, func(i, j int) bool {
		a, b := diffs[i].Old+diffs[i].New, diffs[j].Old+diffs[j].New
		if a != b {
			return a < b
		}
		return diffs[i].Class < diffs[j].Class
	})
	if len(diffs) > cfg.Examples {
		diffs = diffs[:cfg.Examples]
	}
	res.First = diffs
	// Only superseded cells (and newer ones) differ: the tables agree.
	res.Match = len(res.Mismatches) == 0
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
