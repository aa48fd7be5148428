package entity

// Exact counts rows, cells and bytes of every entity it is given, exactly,
// up to a limit on how many entities it remembers.
type Exact struct {
	m     map[string]*Count
	limit int
	// dropped counts what was added for entities beyond the limit.
	droppedCells, droppedBytes int64
	truncated                  bool
	name                       func([]byte) string
}

// NewExact returns an Exact that remembers at most limit entities (0: no
// limit). Beyond the limit, new entities are counted only in Dropped and
// Truncated reports it.
func NewExact(limit int) *Exact {
	return &Exact{m: map[string]*Count{}, limit: limit}
}

// SetNamer sets the function that renders keys for people (typically
// transform.Program.FormatEntity); it is called once per entity remembered.
func (e *Exact) SetNamer(f func(key []byte) string) { e.name = f }

// Add adds rows, cells and bytes to the entity with the given key. The key
// is copied when a new entity is remembered.
func (e *Exact) Add(key []byte, rows, cells, bytes int64) {
	c := e.m[string(key)]
	if c == nil {
		if e.limit > 0 && len(e.m) >= e.limit {
			e.truncated = true
			e.droppedCells += cells
			e.droppedBytes += bytes
			return
		}
		k := string(key)
		c = &Count{Key: []byte(k)}
		if e.name != nil {
			c.Name = e.name(c.Key)
		}
		e.m[k] = c
	}
	c.Rows += rows
	c.Cells += cells
	c.Bytes += bytes
}

// Get returns the counts of one entity, or false when it was never added.
func (e *Exact) Get(key []byte) (Count, bool) {
	c := e.m[string(key)]
	if c == nil {
		return Count{}, false
	}
	return *c, true
}

// Len returns the number of entities remembered.
func (e *Exact) Len() int { return len(e.m) }

// Truncated reports that entities were left out because of the limit, and
// what they held.
func (e *Exact) Truncated() (truncated bool, cells, bytes int64) {
	return e.truncated, e.droppedCells, e.droppedBytes
}

// Merge adds o's counts into e (o is unchanged), under e's limit.
func (e *Exact) Merge(o *Exact) {
	for _, c := range o.m {
		e.Add(c.Key, c.Rows, c.Cells, c.Bytes)
	}
	if o.truncated {
		e.truncated = true
		e.droppedCells += o.droppedCells
		e.droppedBytes += o.droppedBytes
	}
}

// Heaviest returns the top entities by the measure, heaviest first (all of
// them when top <= 0). Ties are broken by key.
func (e *Exact) Heaviest(by By, top int) []Count {
	out := make([]Count, 0, len(e.m))
	for _, c := range e.m {
		out = append(out, *c)
	}
	sortCounts(out, by)
	if top > 0 && len(out) > top {
		out = out[:top]
	}
	return out
}
