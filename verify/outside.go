package verify

import (
	"bytes"
	"fmt"
	"sort"
	"sync"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/transform"
)

// A check of every entity (CompareAll, rekey verify --all) lists its
// entities from the old snapshot, so an entity the old side never had is in
// no entity's range: reading only the entities' ranges, a target holding
// rows that should not be there verified clean. So the first pass of such
// a check reads the new side whole, at no extra cost: each gap between
// the entities' new ranges (sorted) is read by the unit that reads the
// range after it, as one scan from the gap's start (a lead, usually empty),
// and the gap after the last range by a unit of its own. A side with no
// entity ranges is read whole anyway. A cell found there is
//
//   - a cell of an entity the old side does not have: that entity is
//     counted in the same pass and then compared like any other (its old
//     side empty), chosen ByNewOnly, every cell of it extra_in_new;
//   - or a cell no entity can be given (Outside): a key that does not
//     parse under the new layout, or reads back to no old key
//     (unreadable_in_new), or one of an entity whose key lies outside that
//     entity's own range or disagrees with its own fields (mapped_wrong).

// ByNewOnly is the reason, in Target.ChosenBy, of an entity a check of
// every entity found only on the new side.
const ByNewOnly = "new-only"

// Outside is what a check of every entity (CompareAll) found on the new
// side that no entity can be given: cells whose key does not parse under
// the new layout or reads back to no old key (UnreadableInNew), and cells
// whose key lies outside the key range of the entity it reads as, or
// disagrees with its own fields, in no checked entity's range
// (MappedWrong). Each is a mismatch; nothing in the old snapshot made
// them, so the fix is to delete them from the target (every such cell's
// row lies in Range). Cells are counted whatever their timestamp: a dual
// write with a key the layout does not read is as wrong as an old one.
type Outside struct {
	// Cells counts the cells; Mismatches counts them by class.
	Cells      int64           `json:"cells"`
	Mismatches map[Class]int64 `json:"mismatches"`
	// Range holds every such cell's row: from the first to just after the
	// last.
	Range Range `json:"range"`
	// Examples are the first few, in dump order.
	Examples []Difference `json:"examples,omitempty"`
}

// Line says in one sentence what Outside found and what to do.
func (o *Outside) Line() string {
	return fmt.Sprintf("outside every entity: %d new cells belong to no entity (%s), in rows %s: MISMATCH; nothing in the old snapshot made them: delete them from the target",
		o.Cells, ClassList(o.Mismatches), o.Range.String())
}

// outsideAcc gathers what a first pass finds outside every entity, from
// several units at once.
type outsideAcc struct {
	mu       sync.Mutex
	rk       *transform.Rekey
	examples int
	out      Outside
	first    []byte
	last     []byte
	// extra counts, by entity key, the new cells of entities the old side
	// does not have.
	extra map[string]*sideCount
}

// add records cell n (read as the comparison reads it) as belonging to no
// entity, for reason.
func (a *outsideAcc) add(class Class, n newCell, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o := &a.out
	if o.Mismatches == nil {
		o.Mismatches = map[Class]int64{}
	}
	o.Cells++
	o.Mismatches[class]++
	row := n.c.Row
	if a.first == nil || bytes.Compare(row, a.first) < 0 {
		a.first = append([]byte{}, row...)
	}
	if a.last == nil || bytes.Compare(row, a.last) > 0 {
		a.last = append([]byte{}, row...)
	}
	d := Difference{Class: class, New: string(cell.AppendDump(nil, n.c)), Reason: reason}
	if _, err := a.rk.TargetEntity(nil, n.c); err == nil {
		d.NewFields = string(a.rk.AppendFields(nil))
	}
	o.Examples = append(o.Examples, d)
	// Keep the first by dump, whatever order the units ran in.
	if len(o.Examples) > 4*a.examples {
		a.trim()
	}
}

func (a *outsideAcc) trim() {
	ex := a.out.Examples
	sort.Slice(ex, func(i, j int) bool { return ex[i].New < ex[j].New })
	if len(ex) > a.examples {
		a.out.Examples = ex[:a.examples]
	}
}

// extraCount returns the count of entity key, an entity the old side does
// not have, made on first sight.
func (a *outsideAcc) extraCount(key []byte) *sideCount {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.extra[string(key)]
	if s == nil {
		s = &sideCount{}
		a.extra[string(key)] = s
	}
	return s
}

// result is what was found, nil when nothing.
func (a *outsideAcc) result() *Outside {
	if a == nil || a.out.Cells == 0 {
		return nil
	}
	a.trim()
	o := a.out
	o.Range = rangeOf(transform.KeyRange{Start: a.first, Stop: append(bytes.Clone(a.last), 0)})
	return &o
}

// outsideCell sorts a new cell read in no checked entity's range (a gap,
// or a whole read's cell of no wanted entity): an entity the old side does
// not have, counted in acc.extra, or a cell of no entity.
func (c *comparison) outsideCell(nr *newReader, cl *cell.Cell, snapMs int64) {
	acc := c.outside
	n, ent, ok := nr.read(cl)
	switch {
	case !ok:
		acc.add(UnreadableInNew, n, "its key does not parse under the new layout")
		return
	case n.wrong != nil && ent == nil:
		acc.add(UnreadableInNew, n, n.wrong.Error())
		return
	case n.wrong != nil:
		acc.add(MappedWrong, n, n.wrong.Error())
		return
	}
	if _, known := c.keys[string(ent)]; known {
		acc.add(MappedWrong, n, "outside the new key range of its entity")
		return
	}
	if c.newR != nil {
		// Compared by its entity's range from here on: a cell outside it
		// would not be found there again.
		r, err := c.cfg.Program.TargetRange(ent)
		if err != nil || bytes.Compare(cl.Row, r.Start) < 0 || (len(r.Stop) > 0 && bytes.Compare(cl.Row, r.Stop) >= 0) {
			acc.add(MappedWrong, n, "outside the new key range of its entity")
			return
		}
	}
	acc.extraCount(ent).addNew(c, n, snapMs)
}

// gaps finds the parts of the key space in no entity's new range (idx's):
// lead[i] is where the gap before entity i's range starts (absent: none),
// and tail where the gap after the last range starts (hasTail false: the
// ranges reach the end of the table).
func (c *comparison) gaps(idx []int) (lead map[int][]byte, tail []byte, hasTail bool) {
	order := append([]int(nil), idx...)
	sort.SliceStable(order, func(a, b int) bool { return bytes.Compare(c.newR[order[a]].Start, c.newR[order[b]].Start) < 0 })
	lead = map[int][]byte{}
	cur := []byte{} // the key space before cur is covered or assigned
	for _, i := range order {
		r := c.newR[i]
		if bytes.Compare(cur, r.Start) < 0 {
			lead[i] = cur
		}
		if len(r.Stop) == 0 {
			return lead, nil, false
		}
		if bytes.Compare(r.Stop, cur) > 0 {
			cur = r.Stop
		}
	}
	return lead, cur, true
}

// addExtras makes the entities the first pass found only on the new side
// targets of their own (ByNewOnly), in entity key order, with their new
// counts; their old side holds nothing. It returns their indexes.
func (c *comparison) addExtras(olds, news []sideCount) ([]sideCount, []sideCount, []int, error) {
	keys := make([]string, 0, len(c.outside.extra))
	for k := range c.outside.extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p := c.cfg.Program
	var idx []int
	for _, k := range keys {
		key := []byte(k)
		i := len(c.targets)
		c.targets = append(c.targets, Target{Key: key, ChosenBy: []string{ByNewOnly}})
		c.keys[k] = i
		c.res = append(c.res, Result{Entity: p.FormatEntity(key), Key: fmt.Sprintf("%x", key), ChosenBy: []string{ByNewOnly}, Method: c.method})
		if c.oldR != nil {
			r, err := p.SourceRange(key)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("verify: entity %s, found only on the new side: %w", p.FormatEntity(key), err)
			}
			c.oldR = append(c.oldR, &r)
		}
		if c.newR != nil {
			r, err := p.TargetRange(key)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("verify: entity %s, found only on the new side: %w", p.FormatEntity(key), err)
			}
			c.newR = append(c.newR, &r)
		}
		if c.plans != nil {
			c.plans = append(c.plans, plan{})
		}
		olds = append(olds, sideCount{})
		news = append(news, *c.outside.extra[k])
		idx = append(idx, i)
	}
	return olds, news, idx, nil
}
