package entity

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// event is one Add: an entity run of cells.
type event struct {
	key          string
	cells, bytes int64
}

// zipfStream makes a skewed stream over d entities: a few heavy, a long
// tail, each entity's cells split into several runs in random order, as a
// runner sees them across regions.
func zipfStream(seed uint64, d int, runs int) []event {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.3, 1, uint64(d-1))
	var out []event
	for i := 0; i < runs; i++ {
		e := z.Uint64()
		cells := int64(1 + r.IntN(20))
		// Bytes vary independently of cells, so the two rankings differ.
		per := int64(20 + (e*7919)%500)
		out = append(out, event{key: entityKey(e), cells: cells, bytes: cells * per})
	}
	return out
}

func entityKey(i uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], i)
	return string(b[:])
}

// truth counts a stream with a plain map: the expected answer.
func truth(evs []event) map[string][2]int64 {
	m := map[string][2]int64{}
	for _, e := range evs {
		t := m[e.key]
		t[0] += e.cells
		t[1] += e.bytes
		m[e.key] = t
	}
	return m
}

func topTruth(m map[string][2]int64, by By, k int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := m[keys[i]][by], m[keys[j]][by]
		if a != b {
			return a > b
		}
		return keys[i] < keys[j]
	})
	if len(keys) > k {
		keys = keys[:k]
	}
	return keys
}

func TestExactCountsAndLimit(t *testing.T) {
	e := NewExact(2)
	e.SetNamer(func(k []byte) string { return "user=" + string(k) })
	e.Add([]byte("a"), 1, 3, 30)
	e.Add([]byte("b"), 1, 5, 10)
	e.Add([]byte("a"), 2, 4, 40)
	e.Add([]byte("c"), 1, 100, 1000) // beyond the limit
	if got, _ := e.Get([]byte("a")); got.Rows != 3 || got.Cells != 7 || got.Bytes != 70 || got.Name != "user=a" {
		t.Fatalf("a = %+v", got)
	}
	if _, ok := e.Get([]byte("c")); ok {
		t.Fatal("c remembered beyond the limit")
	}
	if tr, c, b := e.Truncated(); !tr || c != 100 || b != 1000 {
		t.Fatalf("Truncated = %v %d %d, want true 100 1000", tr, c, b)
	}
	if h := e.Heaviest(ByCells, 0); string(h[0].Key) != "a" || string(h[1].Key) != "b" {
		t.Fatalf("by cells: %s, %s", h[0].Key, h[1].Key)
	}
	if h := e.Heaviest(ByBytes, 1); len(h) != 1 || string(h[0].Key) != "a" {
		t.Fatalf("by bytes top 1: %+v", h)
	}
	o := NewExact(0)
	o.Add([]byte("b"), 1, 1, 1)
	e.Merge(o)
	if got, _ := e.Get([]byte("b")); got.Cells != 6 || got.Rows != 2 {
		t.Fatalf("merged b = %+v", got)
	}
}

// checkBounds holds every held count to the space-saving guarantee against
// the truth: an upper bound, off by at most its Error.
func checkBounds(t *testing.T, s *Sketch, m map[string][2]int64, by By) {
	t.Helper()
	for _, c := range s.Heaviest(by) {
		tr := m[string(c.Key)][by]
		if got := c.Measure(by); got < tr || got-c.Error > tr {
			t.Errorf("%s of %x: %d (error %d), true %d", by, c.Key, got, c.Error, tr)
		}
	}
}

func TestSketchFindsHeaviest(t *testing.T) {
	evs := zipfStream(7, 50_000, 200_000)
	m := truth(evs)
	s := NewSketch(10, 100, 42)
	for _, e := range evs {
		s.Add([]byte(e.key), e.cells, e.bytes)
	}
	for _, by := range []By{ByCells, ByBytes} {
		want := topTruth(m, by, 10)
		got := s.Heaviest(by)
		if len(got) != 10 {
			t.Fatalf("%s: %d heaviest, want 10", by, len(got))
		}
		for i, c := range got {
			if string(c.Key) != want[i] {
				t.Errorf("%s #%d: %x (%d), want %x (%d)", by, i, c.Key, c.Measure(by), want[i], m[want[i]][by])
			}
		}
		checkBounds(t, s, m, by)
	}
	if _, c, b := s.Totals(); c != sum(m, 0) || b != sum(m, 1) {
		t.Fatalf("totals %d cells %d bytes", c, b)
	}
}

func sum(m map[string][2]int64, i int) int64 {
	var n int64
	for _, v := range m {
		n += v[i]
	}
	return n
}

// Two rankings must differ when the measures do: an entity with few cells
// of large values is heavy by bytes only.
func TestSketchRanksBytesApart(t *testing.T) {
	s := NewSketch(1, 0, 1)
	s.Add([]byte("many-small"), 1000, 10_000)
	s.Add([]byte("few-large"), 10, 1_000_000)
	if h := s.Heaviest(ByCells); string(h[0].Key) != "many-small" {
		t.Fatalf("by cells: %s", h[0].Key)
	}
	if h := s.Heaviest(ByBytes); string(h[0].Key) != "few-large" {
		t.Fatalf("by bytes: %s", h[0].Key)
	}
}

func TestSketchSampleIsExactAndOrderFree(t *testing.T) {
	evs := zipfStream(3, 5_000, 50_000)
	m := truth(evs)
	a := NewSketch(5, 200, 99)
	for _, e := range evs {
		a.Add([]byte(e.key), e.cells, e.bytes)
	}
	// The same events in another order, over four workers, merged.
	r := rand.New(rand.NewPCG(5, 5))
	shuf := append([]event(nil), evs...)
	r.Shuffle(len(shuf), func(i, j int) { shuf[i], shuf[j] = shuf[j], shuf[i] })
	parts := make([]*Sketch, 4)
	for i := range parts {
		parts[i] = NewSketch(5, 200, 99)
	}
	for i, e := range shuf {
		parts[i%4].Add([]byte(e.key), e.cells, e.bytes)
	}
	b := parts[0]
	for _, p := range parts[1:] {
		b.Merge(p)
	}
	sa, sb := a.Sample(), b.Sample()
	if len(sa) != 200 {
		t.Fatalf("sample of %d, want 200", len(sa))
	}
	if !reflect.DeepEqual(sa, sb) {
		t.Fatal("the sample depends on the order of adds or on merging")
	}
	for _, c := range sa {
		tr := m[string(c.Key)]
		if c.Cells != tr[0] || c.Bytes != tr[1] {
			t.Errorf("sampled %x: %d cells %d bytes, true %d %d", c.Key, c.Cells, c.Bytes, tr[0], tr[1])
		}
	}
	// Merged heavy hitters keep their bounds and find the same top.
	for _, by := range []By{ByCells, ByBytes} {
		checkBounds(t, b, m, by)
		want := topTruth(m, by, 5)
		for i, c := range b.Heaviest(by) {
			if string(c.Key) != want[i] {
				t.Errorf("merged %s #%d: %x, want %x", by, i, c.Key, want[i])
			}
		}
	}
	// Another seed picks another sample.
	c := NewSketch(5, 200, 100)
	for _, e := range evs {
		c.Add([]byte(e.key), e.cells, e.bytes)
	}
	if reflect.DeepEqual(c.Sample(), sa) {
		t.Fatal("seed does not change the sample")
	}
}

// The sample is uniform over distinct entities, not weighted by how often
// or how heavily an entity appears: over many seeds, heavy and light
// entities are each chosen with probability n/d.
func TestSketchSampleUniformOverDistinct(t *testing.T) {
	const d, n, seeds = 100, 10, 1000
	hits := make([]int, d)
	for sd := uint64(0); sd < seeds; sd++ {
		s := NewSketch(1, n, sd)
		for i := uint64(0); i < d; i++ {
			// Entity i appears i+1 times: heavy ones would dominate a
			// sample weighted by appearance.
			for j := uint64(0); j <= i; j++ {
				s.Add([]byte(entityKey(i)), 1, 1)
			}
		}
		for _, c := range s.Sample() {
			hits[binary.BigEndian.Uint64(c.Key)]++
		}
	}
	p := float64(n) / d
	mean, sd := seeds*p, math.Sqrt(seeds*p*(1-p))
	var light, heavy int
	for i, h := range hits {
		if math.Abs(float64(h)-mean) > 5*sd {
			t.Errorf("entity %d chosen %d times, expected %.0f ± %.0f", i, h, mean, sd)
		}
		if i < d/2 {
			light += h
		} else {
			heavy += h
		}
	}
	// Halves: each expects seeds*n/2; appearance-weighted would give ~3:1.
	if r := float64(heavy) / float64(light); r < 0.9 || r > 1.1 {
		t.Errorf("heavy half chosen %d times, light half %d: ratio %.2f, want 1", heavy, light, r)
	}
}

func TestSketchDistinctEstimate(t *testing.T) {
	s := NewSketch(1, 1000, 11)
	const d = 100_000
	for i := uint64(0); i < d; i++ {
		s.Add([]byte(entityKey(i)), 1, 1)
		s.Add([]byte(entityKey(i)), 1, 1)
	}
	got := float64(s.Distinct())
	if math.Abs(got-d)/d > 4/math.Sqrt(998) { // 4 standard errors
		t.Fatalf("distinct estimate %.0f, true %d", got, d)
	}
	small := NewSketch(1, 1000, 11)
	small.Add([]byte("a"), 1, 1)
	small.Add([]byte("a"), 1, 1)
	small.Add([]byte("b"), 1, 1)
	if small.Distinct() != 2 {
		t.Fatalf("small distinct = %d, want 2", small.Distinct())
	}
}

func TestSketchJSONRoundTrip(t *testing.T) {
	evs := zipfStream(9, 2_000, 20_000)
	s := NewSketch(4, 50, 7)
	namer := func(k []byte) string { return fmt.Sprintf("id=%d", binary.BigEndian.Uint64(k)) }
	s.SetNamer(namer)
	for _, e := range evs[:10_000] {
		s.Add([]byte(e.key), e.cells, e.bytes)
	}
	var buf bytes.Buffer
	if err := s.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"entity":"id=`) {
		t.Fatalf("no printable names in %.300s", buf.String())
	}
	l, err := ReadSketch(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := l.WriteJSON(&again); err != nil {
		t.Fatal(err)
	}
	if again.String() != buf.String() {
		t.Fatal("a loaded sketch writes a different file")
	}
	// A loaded sketch goes on as the original would.
	l.SetNamer(namer)
	for _, e := range evs[10_000:] {
		s.Add([]byte(e.key), e.cells, e.bytes)
		l.Add([]byte(e.key), e.cells, e.bytes)
	}
	for _, by := range []By{ByCells, ByBytes} {
		if !reflect.DeepEqual(s.Heaviest(by), l.Heaviest(by)) {
			t.Errorf("%s: loaded sketch ranks differently", by)
		}
	}
	if !reflect.DeepEqual(s.Sample(), l.Sample()) {
		t.Error("loaded sketch samples differently")
	}
}

func TestReadSketchRefusesBadFiles(t *testing.T) {
	for name, in := range map[string]string{
		"not json":     `{`,
		"other format": `{"format":"x","version":1,"k":1,"n":1,"capacity":128}`,
		"capacity":     `{"format":"rekey-entity-sketch","version":1,"k":1,"n":1,"capacity":5}`,
		"unknown key":  `{"format":"rekey-entity-sketch","version":1,"k":1,"n":1,"capacity":128,"extra":1}`,
		"bad hex":      `{"format":"rekey-entity-sketch","version":1,"k":1,"n":1,"capacity":128,"sample":[{"key":"zz","cells":1,"bytes":1}]}`,
		"big sample":   `{"format":"rekey-entity-sketch","version":1,"k":1,"n":1,"capacity":128,"sample":[{"key":"00","cells":1,"bytes":1},{"key":"01","cells":1,"bytes":1}]}`,
		"duplicate":    `{"format":"rekey-entity-sketch","version":1,"k":1,"n":1,"capacity":128,"by_cells":[{"key":"00","cells":1,"bytes":1},{"key":"00","cells":1,"bytes":1}]}`,
	} {
		if _, err := ReadSketch(strings.NewReader(in)); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestMergeRefusesUnlikeSketches(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic merging sketches with different seeds")
		}
	}()
	NewSketch(1, 10, 1).Merge(NewSketch(1, 10, 2))
}

func BenchmarkSketchAdd(b *testing.B) {
	evs := zipfStream(1, 1_000_000, 1<<16)
	s := NewSketch(100, 1000, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := &evs[i&(1<<16-1)]
		s.Add([]byte(e.key), e.cells, e.bytes)
	}
}

// Runs gives the sketch what per-cell adds would, with one Add per run.
func TestRunsFoldConsecutiveCells(t *testing.T) {
	evs := zipfStream(4, 300, 3000)
	perCell, runs := NewSketch(5, 50, 3), NewSketch(5, 50, 3)
	r := NewRuns(runs)
	for _, e := range evs {
		for i := int64(0); i < e.cells; i++ {
			perCell.Add([]byte(e.key), 1, e.bytes/e.cells)
			r.Add([]byte(e.key), e.bytes/e.cells)
		}
	}
	r.Flush()
	if a, _, _ := runs.Totals(); a >= int64(len(evs))+1 {
		t.Errorf("%d adds for %d runs", a, len(evs))
	}
	for _, by := range []By{ByCells, ByBytes} {
		if !reflect.DeepEqual(perCell.Heaviest(by), runs.Heaviest(by)) {
			t.Errorf("%s: runs rank differently from per-cell adds", by)
		}
	}
	if !reflect.DeepEqual(perCell.Sample(), runs.Sample()) {
		t.Error("runs sample differently from per-cell adds")
	}
}

// FuzzReadSketch: no input panics the loader, and a sketch that loads
// writes a file that loads to the same sketch.
func FuzzReadSketch(f *testing.F) {
	s := NewSketch(2, 3, 1)
	for i := 0; i < 50; i++ {
		s.Add([]byte{byte(i % 7)}, int64(i), int64(3*i))
	}
	var buf bytes.Buffer
	if err := s.WriteJSON(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"format":"rekey-entity-sketch","version":1,"k":1,"n":0,"capacity":128}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ReadSketch(bytes.NewReader(data))
		if err != nil {
			return
		}
		var a, b bytes.Buffer
		if err := l.WriteJSON(&a); err != nil {
			t.Fatal(err)
		}
		l2, err := ReadSketch(bytes.NewReader(a.Bytes()))
		if err != nil {
			t.Fatalf("a written sketch does not load: %v", err)
		}
		if err := l2.WriteJSON(&b); err != nil || a.String() != b.String() {
			t.Fatalf("reload differs: %v", err)
		}
	})
}

func TestReadSketchRefusesHugeSizes(t *testing.T) {
	in := fmt.Sprintf(`{"format":"rekey-entity-sketch","version":1,"k":%d,"n":1,"capacity":%d}`, 2_000_000_000, Capacity(2_000_000_000))
	if _, err := ReadSketch(strings.NewReader(in)); err == nil {
		t.Fatal("a sketch of k=2e9 loaded")
	}
}

// TestSketchJSONAsEncodingJSON holds the hand-written encoder to what
// encoding/json writes for the same struct (both decoded, then compared),
// with names that need escaping, rows and errors set and unset, and an
// empty list.
func TestSketchJSONAsEncodingJSON(t *testing.T) {
	names := []string{"id=1", `quote " only`, `back \ only`, "tab\tnewline\n", "<html>&", "caf\u00e9 \u2028", "\x00nul", "bad utf8 \xff\xfe", ""}
	j := sketchJSON{Format: sketchFormat, Version: 1, K: 3, N: 9, Seed: 1<<64 - 1, Capacity: 128,
		Adds: 5, Cells: -1, Bytes: 1 << 62, Distinct: 0, ByBytes: []Count{}}
	for i, n := range names {
		c := Count{Key: []byte{byte(i), 0xff}, Name: n, Cells: int64(i), Bytes: int64(i) << 40}
		if i%2 == 1 {
			c.Rows, c.Error = int64(i)*3, -int64(i)
		}
		j.ByCells = append(j.ByCells, c)
	}
	want, err := json.Marshal(&j)
	if err != nil {
		t.Fatal(err)
	}
	got := j.append(nil)
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("hand-written JSON does not parse: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("hand-written JSON differs from encoding/json's:\n got %s\nwant %s", got, want)
	}
}
