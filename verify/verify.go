package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
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
	// MappedWrong: a new cell whose key was built wrong: it holds the
	// content (family, timestamp, type, value) of an old cell whose key it
	// does not lead back to, or, in the inverse comparison, its key
	// disagrees with its own fields (a salt that is not the hash of its
	// fields, a time bucket that does not hold its timestamp) or leads back
	// to an old cell another new cell already gives. Both keys are shown.
	MappedWrong Class = "mapped_wrong"
	// ExpiredByTTL: an old cell missing in the new table, older than the
	// new family's TTL allows: HBase dropped or hides it there.
	ExpiredByTTL Class = "expired_by_ttl"
	// UnreadableInNew: a cell in the entity's new range whose key does not
	// parse under the new layout, or belongs to another entity; in a check
	// of every entity, also a cell in no entity's range whose key does not
	// parse or reads back to no old key (Outside).
	UnreadableInNew Class = "unreadable_in_new"
	// Unclassified: counts or digests differ but the entity is too large
	// to compare cell by cell within Config.MaxDiffCells.
	Unclassified Class = "unclassified"
)

// Classes is every mismatch class, in report order.
var Classes = []Class{MissingInNew, ExtraInNew, ValueDiffers, ExtraVersions, MappedWrong, ExpiredByTTL, UnreadableInNew, Unclassified}

// Config sets up a comparison.
type Config struct {
	// Program holds both layouts: it reads entities from keys, maps old
	// cells forward and new cells back.
	Program *transform.Program
	// Method is how old and new cells are related [the zero Method:
	// Inverse when Program has an inverse, else Forward]. With Both,
	// Compare returns the inverse results, then the forward ones.
	Method Method
	// NewMapper makes the forward mapping one worker uses, as
	// pipeline.Options.NewMapper does for a run [Program.New]: a Go program
	// that ran a custom transform checks it the same way. The inverse
	// comparison never calls it.
	NewMapper func() transform.Mapper
	// Old reads the old layout (a snapshot); New the new layout.
	Old, New Reader
	// SnapshotTime is when the old snapshot was taken: new cells with a
	// later timestamp were written by the application (dual writes) and
	// are counted apart, not compared. Zero: none are.
	SnapshotTime time.Time
	// TargetTTL gives the TTL of new families that have one, to tell an
	// old cell HBase expired in the new table from a missing one.
	TargetTTL map[string]time.Duration
	// Workers read this many entities, or pieces of one, at once
	// [job.DefaultWorkers, as a run].
	Workers int
	// SplitBytes is the size of the pieces an entity is read in by several
	// workers at once when its old range holds more store file bytes than
	// that [a quarter of a worker's share of the old snapshot, at least
	// 1 MiB]; negative: entities are never split. See pieces.
	SplitBytes int64
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
		c.Workers = job.DefaultWorkers()
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
	// splits or merges rows). Cells and Bytes count its cells in one
	// layout, so both sides' bytes compare directly: the old layout in the
	// inverse comparison (new cells read back), the new one in the forward
	// comparison (old cells mapped); new cells newer than the snapshot are
	// excluded.
	Rows  int64 `json:"rows"`
	Cells int64 `json:"cells"`
	Bytes int64 `json:"bytes"`
	// Digest is an order-independent digest of those cells (row, family,
	// qualifier, timestamp, type, value): equal digests mean equal cell
	// sets, whatever the order they were read in.
	Digest string `json:"digest"`
	// Rejected counts old cells in the range whose key does not fit the old
	// layout (a run rejects them too), and in the forward comparison those
	// the mapping refuses; Unreadable counts new cells in the range that
	// are not this entity's. MappedWrong counts new cells whose key
	// disagrees with its own fields (inverse comparison).
	Rejected    int64 `json:"rejected,omitempty"`
	Unreadable  int64 `json:"unreadable,omitempty"`
	MappedWrong int64 `json:"mapped_wrong,omitempty"`
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
	// MapsTo is, in the inverse comparison, the old cell the new cell's
	// key leads back to (when it differs from Old); Reason says what is
	// wrong with a key that disagrees with its own fields.
	MapsTo string `json:"maps_to,omitempty"`
	Reason string `json:"reason,omitempty"`
	// OldFields, NewFields and MapsToFields are the keys of Old, New and
	// MapsTo decoded by the job's layouts, as name=value pairs
	// (user=u00253 ts=2026-03-01T10:00:00.000Z): what a person reads
	// beside the hex. Empty where the key does not parse.
	OldFields    string `json:"old_fields,omitempty"`
	NewFields    string `json:"new_fields,omitempty"`
	MapsToFields string `json:"maps_to_fields,omitempty"`
}

// Result is the comparison of one entity.
type Result struct {
	Entity string `json:"entity"`
	// Key is the entity key in hex (transform.Rekey.SourceEntity).
	Key string `json:"key"`
	// ChosenBy says why the entity was checked: heaviest-cells,
	// heaviest-bytes, sample, named, all, only.
	ChosenBy []string `json:"chosen_by"`
	// Method is how this result was compared: inverse or forward.
	Method Method `json:"method"`
	Old    Side   `json:"old"`
	New    Side   `json:"new"`
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
// result per target, in the targets' order; with Method Both, the inverse
// results and then the forward ones. Each side is read over the entities'
// own key ranges; a side whose layout gives an entity no single range (its
// entity fields do not lead the row, as in a re-key that moves a timestamp
// first) is read whole, once, collecting the chosen entities' cells in that
// pass. An error (a read that fails, a method the program has no inverse
// for) stops the comparison.
func Compare(ctx context.Context, cfg Config, targets []Target) ([]Result, error) {
	cfg.fill()
	if cfg.Program == nil || cfg.Old == nil || cfg.New == nil {
		return nil, errors.New("verify: Config needs Program, Old and New")
	}
	m, _, err := ChooseMethod(cfg.Program, cfg.Method)
	if err != nil {
		return nil, err
	}
	res, _, err := compareBy(ctx, &cfg, targets, m, false)
	return res, err
}

// CompareAll is Compare for targets that are every entity of the old side
// (rekey verify --all), and also checks what the new side holds beyond
// them, in the same pass: its first pass reads the new side whole (the
// parts in no target's range along with the ranges, see outside.go). An
// entity the old side does not have is compared like the targets (its old
// side empty, so every cell of it is extra_in_new unless newer than the
// snapshot), its result after theirs, chosen ByNewOnly; cells no entity
// can be given are returned in Outside (nil when none). With Method Both,
// Outside is the inverse comparison's.
func CompareAll(ctx context.Context, cfg Config, targets []Target) ([]Result, *Outside, error) {
	cfg.fill()
	if cfg.Program == nil || cfg.Old == nil || cfg.New == nil {
		return nil, nil, errors.New("verify: Config needs Program, Old and New")
	}
	m, _, err := ChooseMethod(cfg.Program, cfg.Method)
	if err != nil {
		return nil, nil, err
	}
	return compareBy(ctx, &cfg, targets, m, true)
}

// compareBy is Compare (every false) or CompareAll by method m.
func compareBy(ctx context.Context, cfg *Config, targets []Target, m Method, every bool) ([]Result, *Outside, error) {
	if m != Both {
		return compare(ctx, cfg, targets, m, every)
	}
	inv, out, err := compare(ctx, cfg, targets, Inverse, every)
	if err != nil {
		return nil, nil, err
	}
	fwd, _, err := compare(ctx, cfg, targets, Forward, every)
	if err != nil {
		return nil, nil, err
	}
	return append(inv, fwd...), out, nil
}

// compare is Compare by one method, Inverse or Forward; with every,
// CompareAll.
func compare(ctx context.Context, cfg *Config, targets []Target, m Method, every bool) ([]Result, *Outside, error) {
	res, err := compareOne(ctx, cfg, targets, m, every)
	if err != nil {
		return nil, nil, err
	}
	return res.res, res.outside.result(), nil
}

// compareOne runs one comparison, returning its state.
func compareOne(ctx context.Context, cfg *Config, targets []Target, m Method, every bool) (*comparison, error) {
	p := cfg.Program
	targets = append([]Target(nil), targets...) // entities found only on the new side are added
	c := &comparison{cfg: cfg, method: m, targets: targets, res: make([]Result, len(targets)), keys: map[string]int{}}
	if every {
		c.outside = &outsideAcc{rk: p.New(), examples: cfg.Examples, extra: map[string]*sideCount{}}
	}
	if cs, ok := cfg.New.(ceilinged); ok {
		c.ceil = cs.MaxTimestampMillis()
	}
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
		c.res[i] = Result{Entity: p.FormatEntity(t.Key), Key: hex.EncodeToString(t.Key), ChosenBy: t.ChosenBy, Method: m}
	}

	// The first pass reads both sides at once; a live new side that
	// disagrees is read again, alone.
	olds, news, err := c.count(ctx, all, all)
	if err != nil {
		return nil, err
	}
	if c.outside != nil {
		var extra []int
		if olds, news, extra, err = c.addExtras(olds, news); err != nil {
			return nil, err
		}
		all = append(all, extra...)
	}
	for i := range olds {
		c.res[i].Old = olds[i].t.side
		c.res[i].Old.Rejected = olds[i].rejected
		c.res[i].Old.Digest = olds[i].t.d.String()
		c.res[i].Old.Range, c.res[i].Old.FullScan = sideRange(c.oldR, i)
	}
	pending, wait := all, cfg.Backoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if _, news, err = c.count(ctx, nil, pending); err != nil {
				return nil, err
			}
		}
		var still []int
		for _, i := range pending {
			r, n := &c.res[i], &news[i]
			r.New = n.t.side
			r.New.Unreadable, r.New.MappedWrong = n.unreadable, n.wrong
			r.New.Digest = n.t.d.String()
			r.New.Range, r.New.FullScan = sideRange(c.newR, i)
			r.Newer = n.newer
			r.Reads++
			if r.New.Cells == r.Old.Cells && n.t.d == olds[i].t.d && n.unreadable == 0 && n.wrong == 0 {
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
	return c, nil
}

// comparison is the state of one compare.
type comparison struct {
	cfg        *Config
	method     Method // Inverse or Forward
	targets    []Target
	res        []Result
	keys       map[string]int        // entity key -> target index, to refuse duplicates
	oldR, newR []*transform.KeyRange // nil: that side has no entity range
	// plans says how each entity's sides are read in pieces (plan), once
	// made.
	plans []plan
	// ceil is the new side's largest timestamp (ms) when it has one below
	// HBase's (Bigtable: ceilinged), else 0. The new side holds every
	// old cell from there on at ceil, so old cells are compared there too,
	// and a new cell at ceil is never counted as written after the
	// snapshot.
	ceil int64
	// outside gathers what the first pass of a check of every entity
	// (CompareAll) finds in no target's new range; nil otherwise.
	outside *outsideAcc
}

// ceilinged is a new side whose timestamps stop below HBase's largest:
// a cell written past MaxTimestampMillis is held at it.
type ceilinged interface {
	MaxTimestampMillis() int64
}

// atCeil is cl as the new side holds it: at c.ceil when its timestamp is
// past it (a copy), else cl itself.
func (c *comparison) atCeil(cl *cell.Cell) *cell.Cell {
	if c.ceil == 0 || cl.Timestamp <= c.ceil {
		return cl
	}
	cc := *cl
	cc.Timestamp = c.ceil
	return &cc
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

// newerThanSnapshot says whether a new cell at ts (ms) was written after
// the snapshot (snapMs, c.snapMs's; 0: no snapshot time) and is counted
// apart: never one at the new side's ceiling, where the run put every old
// cell from there on (comparison.ceil).
func (c *comparison) newerThanSnapshot(ts, snapMs int64) bool {
	return snapMs != 0 && ts > snapMs && ts != c.ceil
}

// mapper is the forward mapping of one reader.
func (c *comparison) mapper() transform.Mapper {
	if c.cfg.NewMapper != nil {
		return c.cfg.NewMapper()
	}
	return c.cfg.Program.New()
}

// oldVisit calls fn for what one old cell of entity i gives the
// comparison: the cell as it is (inverse), or the cells the forward
// mapping makes of it. A cell the mapping refuses (ErrBadKey) is counted
// rejected, as a run rejects it; another error stops the comparison.
func (c *comparison) oldVisit(m transform.Mapper, rejected *int64, i int, cl *cell.Cell, fn func(int, *cell.Cell, []byte)) error {
	if c.method == Inverse {
		fn(i, c.atCeil(cl), cl.Row)
		return nil
	}
	err := m.Map(*cl, func(out cell.Cell) { fn(i, c.atCeil(&out), cl.Row) })
	if errors.Is(err, transform.ErrBadKey) {
		*rejected++
		return nil
	}
	return err
}

// flushOld hands the forward mapping's held cells (a row-level Mapper) to
// fn, for entity i when the read covered one entity, else (i < 0) for the
// entity each cell's new key reads as.
func (c *comparison) flushOld(m transform.Mapper, i int, want map[string]int, fn func(int, *cell.Cell, []byte)) error {
	fl, ok := m.(transform.Flusher)
	if c.method == Inverse || !ok {
		return nil
	}
	rk := c.cfg.Program.New()
	var ent []byte
	return fl.Flush(func(out cell.Cell) {
		j := i
		if j < 0 {
			var err error
			if ent, err = rk.TargetEntity(ent[:0], &out); err != nil {
				return
			}
			if j, ok = want[string(ent)]; !ok {
				return
			}
		}
		fn(j, c.atCeil(&out), out.Row)
	})
}

// visitOld calls fn(i, cell, old row) for every old cell of the entities
// in idx, the cell as oldVisit gives it. In range mode fn runs for
// different entities at once, never for one entity at once; it must touch
// only entity i's state.
func (c *comparison) visitOld(ctx context.Context, idx []int, fn func(i int, cl *cell.Cell, oldRow []byte)) error {
	p := c.cfg.Program
	if c.oldR == nil {
		want := c.wanted(idx)
		rk, m := p.New(), c.mapper()
		var ent []byte
		err := c.cfg.Old.Read(ctx, transform.KeyRange{}, func(cl *cell.Cell) error {
			var err error
			if ent, err = rk.SourceEntity(ent[:0], cl); err != nil {
				return nil // not any entity's: the run rejects it
			}
			i, ok := want[string(ent)]
			if !ok {
				return nil
			}
			return c.oldVisit(m, &c.res[i].Old.Rejected, i, cl, fn)
		})
		if err != nil {
			return err
		}
		return c.flushOld(m, -1, want, fn)
	}
	return c.each(ctx, idx, func(ctx context.Context, i int) error {
		key, r := c.targets[i].Key, *c.oldR[i]
		rk, m := p.New(), c.mapper()
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
			return c.oldVisit(m, &c.res[i].Old.Rejected, i, cl, fn)
		})
		if err == nil {
			err = c.flushOld(m, i, nil, fn)
		}
		if err != nil {
			return fmt.Errorf("verify: entity %s: %w", p.FormatEntity(key), err)
		}
		return nil
	})
}

// newCell is one new cell as the comparison sees it.
type newCell struct {
	// c is the cell read from the new side.
	c *cell.Cell
	// key is what is compared with the old side: c itself (forward), or
	// the old cell c reads back to (inverse); nil when c's fields build no
	// old key.
	key *cell.Cell
	// wrong says c's key disagrees with its own fields (inverse).
	wrong error
}

// newReader reads new cells for one comparison worker.
type newReader struct {
	c   *comparison
	rk  *transform.Rekey
	ent []byte
	old cell.Cell
}

// read returns new cell cl as the comparison sees it, and the entity it
// belongs to (nil when unknown). ok is false when cl's key does not parse
// under the new layout.
func (nr *newReader) read(cl *cell.Cell) (n newCell, ent []byte, ok bool) {
	n.c = cl
	if nr.c.method == Forward {
		var err error
		nr.ent, err = nr.rk.TargetEntity(nr.ent[:0], cl)
		n.key = cl
		return n, nr.ent, err == nil
	}
	old, err := nr.rk.Unmap(cl)
	switch {
	case err == nil:
	case errors.Is(err, transform.ErrMappedWrong):
		n.wrong = err
		if old.Row == nil {
			return n, nil, true
		}
	default:
		return n, nil, false
	}
	nr.old = old
	n.key = &nr.old
	nr.ent = nr.rk.LastEntity(nr.ent[:0])
	return n, nr.ent, true
}

// visitNew calls fn(i, cell) for every new cell of the entities in idx
// (newer ones included: fn tells them apart). A cell in an entity's range
// that does not parse, or is another entity's, counts as unreadable for
// it, unless its key disagrees with its own fields (then fn gets it, to
// count it mapped wrong). A side read whole passes the cells of no entity
// of idx to other, when given (CompareAll's first pass), with the reader
// to read them again.
func (c *comparison) visitNew(ctx context.Context, idx []int, fn func(int, newCell), other func(*newReader, *cell.Cell)) error {
	p := c.cfg.Program
	if c.newR == nil {
		want := c.wanted(idx)
		nr := &newReader{c: c, rk: p.New()}
		return c.cfg.New.Read(ctx, transform.KeyRange{}, func(cl *cell.Cell) error {
			// A whole-table read cannot say whose a cell with no entity is.
			if n, ent, ok := nr.read(cl); ok && ent != nil {
				if i, ok := want[string(ent)]; ok {
					fn(i, n)
					return nil
				}
			}
			if other != nil {
				other(nr, cl)
			}
			return nil
		})
	}
	return c.each(ctx, idx, func(ctx context.Context, i int) error {
		key := c.targets[i].Key
		nr := &newReader{c: c, rk: p.New()}
		err := c.cfg.New.Read(ctx, *c.newR[i], func(cl *cell.Cell) error {
			n, ent, ok := nr.read(cl)
			switch {
			case !ok:
				c.res[i].New.Unreadable++
			case n.wrong != nil || bytes.Equal(ent, key):
				fn(i, n)
			default:
				c.res[i].New.Unreadable++
			}
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

// hasher hashes one cell after another with one SHA-256 state: the
// one-shot sha256.Sum256 allocates a state per call, which cost a quarter
// of a comparison's CPU in garbage (measured: 0.83 of 3.56 s).
type hasher struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// add adds cell c, with scratch as room to lay out its bytes.
func (d *digest) add(c *cell.Cell, scratch []byte, hs *hasher) []byte {
	scratch = appendCellID(scratch[:0], c)
	scratch = binary.BigEndian.AppendUint32(scratch, uint32(len(c.Value)))
	scratch = append(scratch, c.Value...)
	if hs.h == nil {
		hs.h = sha256.New()
	}
	hs.h.Reset()
	hs.h.Write(scratch)
	h := hs.h.Sum(hs.sum[:0])
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

// contentID is a hash of what a cell holds apart from its row and
// qualifier (family, timestamp, type, value): a new cell with an old
// cell's content under another key was mapped to the wrong key.
func contentID(scratch []byte, c *cell.Cell) ([]byte, string) {
	scratch = append(scratch[:0], byte(len(c.Family)))
	scratch = append(scratch, c.Family...)
	scratch = binary.BigEndian.AppendUint64(scratch, uint64(c.Timestamp))
	scratch = append(scratch, byte(c.Type))
	scratch = append(scratch, c.Value...) // last: its length is the rest
	h := sha256.Sum256(scratch)
	return scratch, string(h[:16])
}

// tally counts one side of one entity.
type tally struct {
	side    Side
	d       digest
	lastRow []byte
	scratch []byte
	hs      hasher
	// firstRow is the row of the first cell counted: a piece of an entity
	// read apart may start inside the row the piece before ends in, and
	// joining the two counts that row once (join).
	firstRow []byte
}

// add counts cell c, which lies in row (the old row for an old cell, whose
// mapped row c.Row may differ; the new row for a new cell read back): rows
// arrive in order, so a change of row is a new row.
func (t *tally) add(c *cell.Cell, row []byte) {
	if !bytes.Equal(row, t.lastRow) || t.side.Cells == 0 {
		if t.side.Cells == 0 {
			t.firstRow = append(t.firstRow[:0], row...)
		}
		t.side.Rows++
		t.lastRow = append(t.lastRow[:0], row...)
	}
	t.side.Cells++
	t.side.Bytes += cell.Size(c)
	t.scratch = t.d.add(c, t.scratch, &t.hs)
}

// oldCell is one old cell held while classifying (mapped, in the forward
// comparison).
type oldCell struct {
	c    cell.Cell
	seen bool
}

// unmatched is a new cell held while classifying because no old cell has
// its key and value: c as read, key what is compared (c itself, or the old
// cell c reads back to; nil when none), wrong why its key is wrong.
type unmatched struct {
	c, key *cell.Cell
	wrong  error
}

// held is what classification keeps of one entity.
type held struct {
	cells     map[string]*oldCell
	byContent map[string][]*oldCell
	cols      map[string]bool
	newerCols map[string]bool
	unmatched []unmatched
	tooBig    bool
	diffs     []Difference
	id        []byte
	// rk decodes the differing cells' keys for the report; oldForm says
	// the old cells held are in the old key's form (the inverse
	// comparison), not mapped to the new key's.
	rk      *transform.Rekey
	oldForm bool
}

// fields decodes c's key by the old layouts (old) or the new ones, as
// name=value pairs; "" when it does not parse.
func (h *held) fields(c *cell.Cell, old bool) string {
	if h.rk == nil {
		return ""
	}
	var err error
	if old {
		_, err = h.rk.SourceEntity(nil, c)
	} else {
		_, err = h.rk.TargetEntity(nil, c)
	}
	if err != nil {
		return ""
	}
	return string(h.rk.AppendFields(nil))
}

// full reports whether the entity holds max old cells, and from then on
// gives up on it.
func (h *held) full(max int) bool {
	if len(h.cells) >= max {
		h.tooBig = true
	}
	return h.tooBig
}

// hold keeps an old cell by key, by content and by column.
func (h *held) hold(cl *cell.Cell) {
	o := &oldCell{c: cl.Clone()}
	h.id = appendCellID(h.id[:0], cl)
	h.cells[string(h.id)] = o
	var k string
	h.id, k = contentID(h.id, cl)
	h.byContent[k] = append(h.byContent[k], o)
	h.id = columnID(h.id[:0], cl)
	h.cols[string(h.id)] = true
}

// keep holds a new cell that matched no old cell.
func (h *held) keep(n newCell) {
	u := unmatched{c: new(cell.Cell), wrong: n.wrong}
	*u.c = n.c.Clone()
	switch {
	case n.key == n.c:
		u.key = u.c
	case n.key != nil:
		u.key = new(cell.Cell)
		*u.key = n.key.Clone()
	}
	h.unmatched = append(h.unmatched, u)
}

// sameContent returns an old cell not yet given by any new cell whose
// family, timestamp, type and value are key's, or nil.
func (h *held) sameContent(key *cell.Cell) *oldCell {
	var k string
	h.id, k = contentID(h.id, key)
	for _, o := range h.byContent[k] {
		if !o.seen && o.c.Timestamp == key.Timestamp && o.c.Type == key.Type &&
			bytes.Equal(o.c.Family, key.Family) && bytes.Equal(o.c.Value, key.Value) {
			return o
		}
	}
	return nil
}

// note records one difference: o the old cell, u the new one (either may
// be nil); MapsTo shows where u's key leads back to when that is not o.
func (h *held) note(res *Result, cl Class, o *cell.Cell, u *unmatched, reason string) {
	res.Mismatches[cl]++
	d := Difference{Class: cl, Reason: reason}
	if o != nil {
		d.Old, d.OldFields = string(cell.AppendDump(nil, o)), h.fields(o, h.oldForm)
	}
	if u != nil {
		d.New, d.NewFields = string(cell.AppendDump(nil, u.c)), h.fields(u.c, false)
		if u.key != nil && u.key != u.c && (o == nil || !bytes.Equal(appendCellID(nil, o), appendCellID(nil, u.key))) {
			d.MapsTo, d.MapsToFields = string(cell.AppendDump(nil, u.key)), h.fields(u.key, h.oldForm)
		}
		if u.wrong != nil && reason == "" {
			d.Reason = u.wrong.Error()
		}
	}
	h.diffs = append(h.diffs, d)
}

// explain classifies a new cell that matched no old cell: mapped wrong
// when its key disagrees with its fields, when it holds the content of an
// old cell it does not lead back to, or when it leads back to an old cell
// another new cell already gave; else value_differs, extra_versions or
// extra_in_new by what the old side has at its key.
func (h *held) explain(res *Result, u *unmatched) {
	var o *oldCell
	if u.key != nil {
		h.id = appendCellID(h.id[:0], u.key)
		o = h.cells[string(h.id)]
	}
	var other *oldCell
	if u.key != nil {
		other = h.sameContent(u.key)
	}
	switch {
	case u.wrong != nil:
		// Pair it with the old cell it leads back to, else one with its
		// content, so that cell is not reported missing as well.
		if o == nil || o.seen {
			o = other
		}
		var oc *cell.Cell
		if o != nil {
			o.seen, oc = true, &o.c
		}
		h.note(res, MappedWrong, oc, u, "")
	case other != nil:
		other.seen = true
		h.note(res, MappedWrong, &other.c, u, "its key does not lead back to the old cell whose content it holds")
	case o != nil && !o.seen:
		o.seen = true
		h.note(res, ValueDiffers, &o.c, u, "")
	case o != nil:
		h.note(res, MappedWrong, &o.c, u, "another new cell already gives this old cell")
	default:
		h.id = columnID(h.id[:0], u.key)
		if h.cols[string(h.id)] {
			h.note(res, ExtraVersions, nil, u, "")
		} else {
			h.note(res, ExtraInNew, nil, u, "")
		}
	}
}

// classify reads both sides again for the entities that differ, holding
// their old cells by key and the new cells that match none, and sorts
// every difference into its class.
func (c *comparison) classify(ctx context.Context, idx []int) error {
	cfg := c.cfg
	hs := make([]*held, len(c.targets))
	// One decoder for all: settle runs entity after entity.
	rk := cfg.Program.New()
	for _, i := range idx {
		hs[i] = &held{cells: map[string]*oldCell{}, byContent: map[string][]*oldCell{}, cols: map[string]bool{}, newerCols: map[string]bool{},
			rk: rk, oldForm: c.method == Inverse}
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
		if h := hs[i]; !h.full(cfg.MaxDiffCells) {
			h.hold(cl)
		}
	}); err != nil {
		return err
	}
	for _, i := range idx {
		c.res[i].Mismatches = map[Class]int64{}
		c.res[i].New.Unreadable = 0
	}
	snapMs := c.snapMs()
	// New cells that match no old cell are held too, at most MaxDiffCells
	// of them across the batch (entities are read at once).
	var heldNew atomic.Int64
	if err := c.visitNew(ctx, idx, func(i int, n newCell) {
		h := hs[i]
		if h.tooBig {
			return
		}
		if c.newerThanSnapshot(n.c.Timestamp, snapMs) {
			if n.key != nil {
				h.id = columnID(h.id[:0], n.key)
				h.newerCols[string(h.id)] = true
			}
			return
		}
		if n.wrong == nil {
			h.id = appendCellID(h.id[:0], n.key)
			if o := h.cells[string(h.id)]; o != nil && !o.seen && bytes.Equal(o.c.Value, n.key.Value) {
				o.seen = true
				return
			}
		}
		if heldNew.Add(1) > int64(cfg.MaxDiffCells) {
			h.tooBig = true
			return
		}
		h.keep(n)
	}, nil); err != nil {
		return err
	}
	for _, i := range idx {
		c.settle(hs[i], &c.res[i])
	}
	return nil
}

// settle classifies what an entity's classification pass held: the new
// cells that matched nothing, then the old cells no new cell gave.
func (c *comparison) settle(h *held, res *Result) {
	cfg := c.cfg
	if unr := res.New.Unreadable; unr > 0 {
		res.Mismatches[UnreadableInNew] += unr
	}
	if h.tooBig {
		res.Mismatches = map[Class]int64{Unclassified: abs(res.Old.Cells-res.New.Cells) + 1}
		res.Match = false
		return
	}
	for k := range h.unmatched {
		h.explain(res, &h.unmatched[k])
	}
	now := cfg.Now
	if now.IsZero() {
		now = time.Now()
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
		fam := o.c.Family
		if c.method == Inverse {
			fam = cfg.Program.NewFamily(fam) // TTLs are the new families'
		}
		if ttl, ok := cfg.TargetTTL[string(fam)]; ok && ttl > 0 && o.c.Timestamp < now.Add(-ttl).UnixMilli() {
			h.note(res, ExpiredByTTL, &o.c, nil, "")
			continue
		}
		h.note(res, MissingInNew, &o.c, nil, "")
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
