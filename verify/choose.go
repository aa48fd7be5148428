package verify

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/transform"
)

// Reasons an entity is chosen, as Target.ChosenBy lists them.
const (
	ByHeaviestCells = "heaviest-cells"
	ByHeaviestBytes = "heaviest-bytes"
	BySample        = "sample"
	ByName          = "named"
	ByAll           = "all"
	ByOnly          = "only"
)

// Choice collects target entities, each once, with every reason it was
// chosen for.
type Choice struct {
	list []Target
	idx  map[string]int
}

// Add chooses key for reason (again, if already chosen).
func (c *Choice) Add(key []byte, reason string) {
	if c.idx == nil {
		c.idx = map[string]int{}
	}
	if i, ok := c.idx[string(key)]; ok {
		for _, r := range c.list[i].ChosenBy {
			if r == reason {
				return
			}
		}
		c.list[i].ChosenBy = append(c.list[i].ChosenBy, reason)
		return
	}
	c.idx[string(key)] = len(c.list)
	c.list = append(c.list, Target{Key: append([]byte(nil), key...), ChosenBy: []string{reason}})
}

// Len returns the number of entities chosen.
func (c *Choice) Len() int { return len(c.list) }

// Targets returns the chosen entities in entity key order, which is the
// old table's order for most layouts, so reads move forward.
func (c *Choice) Targets() []Target {
	out := append([]Target(nil), c.list...)
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Key, out[j].Key) < 0 })
	return out
}

// AddSketch chooses the k heaviest by cells and by bytes and the first n of
// the sample of a sketch a run saved (at most what the sketch holds).
func (c *Choice) AddSketch(s *entity.Sketch, k, n int) {
	for _, by := range []entity.By{entity.ByCells, entity.ByBytes} {
		reason := ByHeaviestCells
		if by == entity.ByBytes {
			reason = ByHeaviestBytes
		}
		for i, e := range s.Heaviest(by) {
			if i >= k {
				break
			}
			c.Add(e.Key, reason)
		}
	}
	for i, e := range s.Sample() {
		if i >= n {
			break
		}
		c.Add(e.Key, BySample)
	}
}

// LoadSketch reads a sketch file (entity.SketchFile in a run's state
// folder).
func LoadSketch(path string) (*entity.Sketch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("verify: %w (run the job first, or use --find-worst)", err)
	}
	defer f.Close()
	s, err := entity.ReadSketch(f)
	if err != nil {
		return nil, fmt.Errorf("verify: %s: %w", path, err)
	}
	return s, nil
}

// Census is what one pass over the whole old snapshot found.
type Census struct {
	// Exact holds every entity's counts, up to its limit.
	Exact *entity.Exact
	// Sketch holds the heaviest and a sample, whatever the entity count.
	Sketch *entity.Sketch
	// Cells and Rejected count the cells read and those whose keys do not
	// fit the old layout.
	Cells, Rejected int64
	// BytesRead is the file bytes read.
	BytesRead int64
}

// Count reads the whole old snapshot once and counts every entity:
// exactly, for up to limit entities, and in a sketch of the k heaviest and
// a sample of n. It is --find-worst and --all.
func Count(ctx context.Context, old *SnapshotReader, p *transform.Program, limit, k, n int, seed uint64) (*Census, error) {
	cs := &Census{Exact: entity.NewExact(limit), Sketch: entity.NewSketch(k, n, seed)}
	before := old.BytesRead()
	rk := p.New()
	var cur, ent []byte
	var cells, bytes_ int64
	have := false
	flush := func() {
		if have {
			cs.Exact.Add(cur, 0, cells, bytes_)
			cs.Sketch.Add(cur, cells, bytes_)
		}
		cells, bytes_ = 0, 0
	}
	err := old.Read(ctx, transform.KeyRange{}, func(c *cell.Cell) error {
		cs.Cells++
		var err error
		ent, err = rk.SourceEntity(ent[:0], c)
		if err != nil {
			cs.Rejected++
			return nil
		}
		// Add once per run of one entity's cells, not per cell.
		if !have || !bytes.Equal(ent, cur) {
			flush()
			cur = append(cur[:0], ent...)
			have = true
		}
		out, err := rk.Apply(c)
		if err != nil {
			cs.Rejected++
			return nil
		}
		cells++
		bytes_ += cellSize(&out)
		return nil
	})
	flush()
	cs.BytesRead = old.BytesRead() - before
	if err != nil {
		return nil, err
	}
	return cs, nil
}

// AddCensus chooses the k heaviest by cells and by bytes, exactly when the
// census holds every entity, and the first n of its sample; with all, every
// entity (an error if the census did not hold them all).
func (c *Choice) AddCensus(cs *Census, k, n int, all bool) error {
	truncated, _, _ := cs.Exact.Truncated()
	if all {
		if truncated {
			return fmt.Errorf("verify: --all: more than %d entities; verify the worst and a sample instead", cs.Exact.Len())
		}
		for _, e := range cs.Exact.Heaviest(entity.ByCells, 0) {
			c.Add(e.Key, ByAll)
		}
	}
	if truncated {
		c.AddSketch(cs.Sketch, k, n)
		return nil
	}
	if k > 0 {
		for _, e := range cs.Exact.Heaviest(entity.ByCells, k) {
			c.Add(e.Key, ByHeaviestCells)
		}
		for _, e := range cs.Exact.Heaviest(entity.ByBytes, k) {
			c.Add(e.Key, ByHeaviestBytes)
		}
	}
	for i, e := range cs.Sketch.Sample() {
		if i >= n {
			break
		}
		c.Add(e.Key, BySample)
	}
	return nil
}
