package entity

import (
	"math"
	"sort"
)

// Sketch finds the heaviest entities of a stream and samples its distinct
// entities, in memory fixed by its sizes.
//
// Heavy hitters: two space-saving summaries (Metwally, Agrawal and El
// Abbadi, 2005), one ranked by cells and one by bytes, each with
// Capacity(k) counters. An entity's count in a summary is never below its
// true count, and exceeds it by at most the Error it carries; any entity
// heavier than total/Capacity is certain to be held.
//
// Sample: the n distinct entities whose seeded 64-bit hash is smallest (a
// bottom-n sample). Which entities are chosen depends only on the set of
// entities and the seed, not on the order or number of times they are added,
// so the sample is uniform over distinct entities, deterministic, and two
// workers' samples merge into the sample of the union. An entity that ends
// in the sample was held from its first Add, so its counts are exact.
type Sketch struct {
	k, n  int
	seed  uint64
	cells summary
	bytes summary
	samp  sample
	// total counts everything added, for the share of the heaviest.
	adds, totalCells, totalBytes int64
	name                         func([]byte) string
}

// Capacity returns the number of counters a Sketch keeps per measure for
// the k heaviest: several times k, since a space-saving summary is accurate
// for the entities well inside its capacity.
func Capacity(k int) int {
	return max(8*k, 128)
}

// NewSketch returns a Sketch for the k heaviest entities by cells and by
// bytes and a sample of n distinct entities, hashed with seed.
func NewSketch(k, n int, seed uint64) *Sketch {
	k, n = max(k, 1), max(n, 0)
	c := Capacity(k)
	return &Sketch{
		k: k, n: n, seed: seed,
		cells: newSummary(ByCells, c),
		bytes: newSummary(ByBytes, c),
		samp:  sample{n: n, idx: map[string]*sampleSlot{}},
	}
}

// K returns the number of heaviest entities the sketch reports per measure.
func (s *Sketch) K() int { return s.k }

// N returns the sample size the sketch keeps.
func (s *Sketch) N() int { return s.n }

// Seed returns the hash seed of the sample.
func (s *Sketch) Seed() uint64 { return s.seed }

// SetNamer sets the function that renders keys for people (typically
// transform.Program.FormatEntity). It is called when the sketch is written
// or listed, for the entities listed.
func (s *Sketch) SetNamer(f func(key []byte) string) { s.name = f }

// Add counts cells and bytes for the entity with the given key. Call it
// once per run of consecutive cells of one entity where possible: the cost
// is per call, not per cell. The key is copied when it is kept.
func (s *Sketch) Add(key []byte, cells, bytes int64) {
	s.adds++
	s.totalCells += cells
	s.totalBytes += bytes
	s.cells.add(key, cells, bytes)
	s.bytes.add(key, cells, bytes)
	if s.n > 0 {
		s.samp.add(key, hashKey(s.seed, key), cells, bytes)
	}
}

// Totals returns the number of Add calls and the cells and bytes added.
func (s *Sketch) Totals() (adds, cells, bytes int64) {
	return s.adds, s.totalCells, s.totalBytes
}

// Heaviest returns the k heaviest entities by the measure, heaviest first,
// each with its Error bound on that measure. Fewer when fewer were added.
func (s *Sketch) Heaviest(by By) []Count {
	sm := &s.cells
	if by == ByBytes {
		sm = &s.bytes
	}
	out := s.named(sm.counts())
	sortCounts(out, by)
	if len(out) > s.k {
		out = out[:s.k]
	}
	return out
}

// Sample returns the sampled entities with their exact counts, in hash
// order: any prefix of it is itself a uniform sample of distinct entities.
func (s *Sketch) Sample() []Count {
	return s.named(s.samp.counts())
}

// Distinct estimates the number of distinct entities added: exact while
// fewer than n were seen, else the bottom-n estimate (n-1)/h where h is the
// n-th smallest hash as a fraction of the hash space, whose relative
// standard error is about 1/sqrt(n-2).
func (s *Sketch) Distinct() int64 {
	if len(s.samp.heap) < s.n || s.n < 2 {
		return int64(len(s.samp.heap))
	}
	h := float64(s.samp.heap[0].hash) / math.Exp2(64)
	if h == 0 {
		return int64(s.n)
	}
	return int64(math.Round(float64(s.n-1) / h))
}

// Merge adds o into s, as if everything added to o had been added to s. o is
// unchanged. The sketches must have the same sizes and seed; Merge panics
// otherwise, since merging unlike sketches would silently lose the sample's
// guarantees.
func (s *Sketch) Merge(o *Sketch) {
	if s.k != o.k || s.n != o.n || s.seed != o.seed || s.cells.cap != o.cells.cap {
		panic("entity: Merge of sketches with different sizes or seeds")
	}
	s.adds += o.adds
	s.totalCells += o.totalCells
	s.totalBytes += o.totalBytes
	s.cells.merge(&o.cells)
	s.bytes.merge(&o.bytes)
	for _, sl := range o.samp.heap {
		s.samp.add([]byte(sl.key), sl.hash, sl.cells, sl.bytes)
	}
}

func (s *Sketch) named(cs []Count) []Count {
	if s.name != nil {
		for i := range cs {
			if cs[i].Name == "" {
				cs[i].Name = s.name(cs[i].Key)
			}
		}
	}
	return cs
}

// slot is one counter of a space-saving summary.
type slot struct {
	key          string
	name         string // kept from a loaded sketch
	cells, bytes int64
	err          int64
	pos          int
}

// summary is a space-saving summary: at most cap counters in a min-heap on
// the ranked measure, so the lightest is replaced in O(log cap).
type summary struct {
	by   By
	cap  int
	idx  map[string]*slot
	heap []*slot
}

func newSummary(by By, c int) summary {
	return summary{by: by, cap: c, idx: make(map[string]*slot, c)}
}

func (m *summary) measure(s *slot) int64 {
	if m.by == ByBytes {
		return s.bytes
	}
	return s.cells
}

func (m *summary) add(key []byte, cells, bytes int64) {
	if s := m.idx[string(key)]; s != nil {
		s.cells += cells
		s.bytes += bytes
		m.down(s.pos)
		return
	}
	if len(m.heap) < m.cap {
		s := &slot{key: string(key), cells: cells, bytes: bytes, pos: len(m.heap)}
		m.idx[s.key] = s
		m.heap = append(m.heap, s)
		m.up(s.pos)
		return
	}
	// Replace the lightest counter: the newcomer inherits its count as
	// possible error, which keeps every count an upper bound.
	s := m.heap[0]
	delete(m.idx, s.key)
	floor := m.measure(s)
	s.key, s.name, s.err = string(key), "", floor
	if m.by == ByBytes {
		s.bytes, s.cells = floor+bytes, cells
	} else {
		s.cells, s.bytes = floor+cells, bytes
	}
	m.idx[s.key] = s
	m.down(0)
}

// floor is what an entity not held may have had: the lightest count when
// the summary is full, else nothing.
func (m *summary) floor() int64 {
	if len(m.heap) < m.cap || len(m.heap) == 0 {
		return 0
	}
	return m.measure(m.heap[0])
}

// merge combines two summaries (Agarwal et al., "Mergeable summaries",
// 2012): a key missing from one side may have had up to that side's floor,
// so it gets the floor added to both its count and its error, keeping counts
// upper bounds; then the cap heaviest are kept.
func (m *summary) merge(o *summary) {
	fa, fb := m.floor(), o.floor()
	all := make(map[string]*slot, len(m.heap)+len(o.heap))
	for _, s := range m.heap {
		c := *s
		all[c.key] = &c
	}
	for _, s := range o.heap {
		if c := all[s.key]; c != nil {
			c.cells += s.cells
			c.bytes += s.bytes
			c.err += s.err
			c.name = max(c.name, s.name)
			c.pos = -1 // seen on both sides
			continue
		}
		c := *s
		c.pos = -2 // only in o
		all[c.key] = &c
	}
	list := make([]*slot, 0, len(all))
	for _, c := range all {
		switch c.pos {
		case -1:
		case -2:
			m.bump(c, fa)
		default:
			m.bump(c, fb)
		}
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := m.measure(list[i]), m.measure(list[j])
		if a != b {
			return a > b
		}
		return list[i].key < list[j].key
	})
	if len(list) > m.cap {
		list = list[:m.cap]
	}
	m.rebuild(list)
}

func (m *summary) bump(c *slot, f int64) {
	if m.by == ByBytes {
		c.bytes += f
	} else {
		c.cells += f
	}
	c.err += f
}

func (m *summary) rebuild(list []*slot) {
	m.idx = make(map[string]*slot, m.cap)
	m.heap = m.heap[:0]
	for _, c := range list {
		c.pos = len(m.heap)
		m.heap = append(m.heap, c)
		m.idx[c.key] = c
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
}

func (m *summary) counts() []Count {
	out := make([]Count, len(m.heap))
	for i, s := range m.heap {
		out[i] = Count{Key: []byte(s.key), Name: s.name, Cells: s.cells, Bytes: s.bytes, Error: s.err}
	}
	return out
}

func (m *summary) less(i, j int) bool {
	a, b := m.measure(m.heap[i]), m.measure(m.heap[j])
	if a != b {
		return a < b
	}
	return m.heap[i].key > m.heap[j].key
}

func (m *summary) swap(i, j int) {
	m.heap[i], m.heap[j] = m.heap[j], m.heap[i]
	m.heap[i].pos, m.heap[j].pos = i, j
}

func (m *summary) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !m.less(i, p) {
			return
		}
		m.swap(i, p)
		i = p
	}
}

func (m *summary) down(i int) {
	n := len(m.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && m.less(r, l) {
			c = r
		}
		if !m.less(c, i) {
			return
		}
		m.swap(i, c)
		i = c
	}
}

// sampleSlot is one sampled entity.
type sampleSlot struct {
	key          string
	name         string
	hash         uint64
	cells, bytes int64
	pos          int
}

// sample keeps the n entities with the smallest (hash, key) in a max-heap,
// so a newcomer is compared with the largest held in O(1).
type sample struct {
	n    int
	idx  map[string]*sampleSlot
	heap []*sampleSlot
}

func sampleLess(a, b *sampleSlot) bool {
	if a.hash != b.hash {
		return a.hash < b.hash
	}
	return a.key < b.key
}

func (m *sample) add(key []byte, h uint64, cells, bytes int64) {
	if len(m.heap) == m.n {
		top := m.heap[0]
		if h > top.hash || h == top.hash && string(key) > top.key {
			return
		}
	}
	if s := m.idx[string(key)]; s != nil {
		s.cells += cells
		s.bytes += bytes
		return
	}
	s := &sampleSlot{key: string(key), hash: h, cells: cells, bytes: bytes}
	if len(m.heap) == m.n {
		// Evict the largest hash; it can never come back, since every
		// later entity it would compete with must hash below the new top.
		old := m.heap[0]
		delete(m.idx, old.key)
		s.pos = 0
		m.heap[0] = s
		m.idx[s.key] = s
		m.down(0)
		return
	}
	s.pos = len(m.heap)
	m.heap = append(m.heap, s)
	m.idx[s.key] = s
	m.up(s.pos)
}

func (m *sample) counts() []Count {
	list := append([]*sampleSlot(nil), m.heap...)
	sort.Slice(list, func(i, j int) bool { return sampleLess(list[i], list[j]) })
	out := make([]Count, len(list))
	for i, s := range list {
		out[i] = Count{Key: []byte(s.key), Name: s.name, Cells: s.cells, Bytes: s.bytes}
	}
	return out
}

// The sample heap is a max-heap: the parent is larger.
func (m *sample) swap(i, j int) {
	m.heap[i], m.heap[j] = m.heap[j], m.heap[i]
	m.heap[i].pos, m.heap[j].pos = i, j
}

func (m *sample) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !sampleLess(m.heap[p], m.heap[i]) {
			return
		}
		m.swap(i, p)
		i = p
	}
}

func (m *sample) down(i int) {
	n := len(m.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && sampleLess(m.heap[l], m.heap[r]) {
			c = r
		}
		if !sampleLess(m.heap[i], m.heap[c]) {
			return
		}
		m.swap(i, c)
		i = c
	}
}

// hashKey is a seeded 64-bit hash: FNV-1a over the seed and the key, then
// the murmur3 finalizer, whose avalanche makes every output bit depend on
// every input bit (FNV alone leaves the high bits weak for short keys, and
// the sample ranks by the whole value).
func hashKey(seed uint64, key []byte) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < 8; i++ {
		h ^= seed >> (8 * i) & 0xff
		h *= prime
	}
	for _, b := range key {
		h ^= uint64(b)
		h *= prime
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
