package verify

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/vfs"
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
// folder), local or a URL.
func LoadSketch(path string) (*entity.Sketch, error) { return loadSketch(path, vfs.Options{}) }

// loadSketch is LoadSketch, opening path with vo (a Kerberos login).
func loadSketch(path string, vo vfs.Options) (*entity.Sketch, error) {
	loc, err := vfs.OpenWith(path, vo)
	if err != nil {
		return nil, fmt.Errorf("verify: %s: %w", path, err)
	}
	defer loc.Close()
	b, err := vfs.ReadFile(loc.FS, loc.Path)
	if err != nil {
		return nil, fmt.Errorf("verify: %w (run the job first, or use --find-worst)", err)
	}
	s, err := entity.ReadSketch(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("verify: %s: %w", path, err)
	}
	return s, nil
}

// LoadStateSketch reads the entity sketches a run left in its state
// folder dir (local or a URL): entity.SketchFile, or, after a sharded run,
// every shard's entities.shard-I-of-N.json. It returns them with the files
// read; AddSketches chooses from them.
func LoadStateSketch(dir string) ([]*entity.Sketch, []string, error) {
	return loadStateSketch(dir, vfs.Options{})
}

// loadStateSketch is LoadStateSketch, opening dir with vo.
func loadStateSketch(dir string, vo vfs.Options) ([]*entity.Sketch, []string, error) {
	loc, err := vfs.OpenWith(dir, vo)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: state folder %s: %w", dir, err)
	}
	defer loc.Close()
	one := path.Join(loc.Path, entity.SketchFile)
	if ok, _ := vfs.Exists(loc.FS, one); ok {
		s, err := readSketchFile(loc.FS, one)
		if err != nil {
			return nil, nil, err
		}
		return []*entity.Sketch{s}, []string{one}, nil
	}
	infos, err := loc.FS.ReadDir(loc.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: no entity sketch in %s (%v): run the job first, name the sketch the run wrote with --sketch PATH (its summary's \"entities\" line), or use --find-worst", dir, err)
	}
	var sks []*entity.Sketch
	var files []string
	for _, fi := range infos {
		name := fi.Name()
		if !strings.HasPrefix(name, "entities.shard-") || !strings.HasSuffix(name, ".json") {
			continue
		}
		p := path.Join(loc.Path, name)
		s, err := readSketchFile(loc.FS, p)
		if err != nil {
			return nil, nil, err
		}
		sks = append(sks, s)
		files = append(files, p)
	}
	if len(sks) == 0 {
		return nil, nil, fmt.Errorf("verify: no entity sketch in %s: run the job first, name the sketch the run wrote with --sketch PATH (its summary's \"entities\" line), or use --find-worst", dir)
	}
	return sks, files, nil
}

// AddSketches chooses the k heaviest and a sample of n from several
// sketches (one per shard of a run). Sketches of the same sizes and seed
// merge exactly. Otherwise (shards that hashed with different seeds) the
// heaviest are ranked by their counts summed over the sketches, and the
// sample takes an equal share of each sketch's sample: uniform within each
// shard, not across them.
func (c *Choice) AddSketches(sks []*entity.Sketch, k, n int) {
	if len(sks) == 0 {
		return
	}
	same := true
	for _, s := range sks[1:] {
		same = same && s.K() == sks[0].K() && s.N() == sks[0].N() && s.Seed() == sks[0].Seed()
	}
	if same {
		m := entity.NewSketch(sks[0].K(), sks[0].N(), sks[0].Seed())
		for _, s := range sks {
			m.Merge(s)
		}
		c.AddSketch(m, k, n)
		return
	}
	for _, by := range []entity.By{entity.ByCells, entity.ByBytes} {
		reason := ByHeaviestCells
		if by == entity.ByBytes {
			reason = ByHeaviestBytes
		}
		sum := map[string]*entity.Count{}
		for _, s := range sks {
			for _, e := range s.Heaviest(by) {
				if t := sum[string(e.Key)]; t != nil {
					t.Cells += e.Cells
					t.Bytes += e.Bytes
					continue
				}
				e := e
				sum[string(e.Key)] = &e
			}
		}
		list := make([]entity.Count, 0, len(sum))
		for _, e := range sum {
			list = append(list, *e)
		}
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i].Measure(by), list[j].Measure(by)
			if a != b {
				return a > b
			}
			return string(list[i].Key) < string(list[j].Key)
		})
		for i := 0; i < k && i < len(list); i++ {
			c.Add(list[i].Key, reason)
		}
	}
	share := (n + len(sks) - 1) / len(sks)
	for _, s := range sks {
		for i, e := range s.Sample() {
			if i >= share {
				break
			}
			c.Add(e.Key, BySample)
		}
	}
}

func readSketchFile(fsys vfs.FS, p string) (*entity.Sketch, error) {
	b, err := vfs.ReadFile(fsys, p)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	s, err := entity.ReadSketch(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("verify: %s: %w", p, err)
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
	// Of Rejected, ByRun are in the run's reject files
	// (CountOptions.rejects) and Unaccounted in none; Examples shows a
	// few, unaccounted ones first. All zero without the run's files.
	ByRun, Unaccounted int64
	Examples           []string
	exUn, exRun        []string // gathered from the workers
}

// CountOptions size a Count.
type CountOptions struct {
	// Limit is how many entities are counted exactly [10,000,000].
	Limit int
	// K, N and Seed size the sketch: the K heaviest, a sample of N.
	K, N int
	Seed uint64
	// Workers read this many regions at once [2].
	Workers int
	// rejects, when set, are the run's rejected cells, each rejected cell
	// the pass meets is looked up in.
	rejects *runRejects
}

// Count reads the whole old snapshot once and counts every entity:
// exactly, for up to Limit entities, and in a sketch of the K heaviest and
// a sample of N. It is --find-worst and --all. Regions are read by Workers
// at once, each into its own counters, merged as each region ends (an
// entity that spans regions is summed).
func Count(ctx context.Context, old *SnapshotReader, p *transform.Program, o CountOptions) (*Census, error) {
	if o.Limit <= 0 {
		o.Limit = 10_000_000
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	cs := &Census{Exact: entity.NewExact(o.Limit), Sketch: entity.NewSketch(o.K, o.N, o.Seed)}
	before := old.BytesRead()
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Workers)
	for i, sp := range old.splits {
		g.Go(func() error {
			ex, sk := entity.NewExact(o.Limit), entity.NewSketch(o.K, o.N, o.Seed)
			var cells, rejected, byRun, unaccounted int64
			var exUn, exRun []string
			var buf []byte
			reject := func(c *cell.Cell, why error) {
				rejected++
				if o.rejects == nil {
					return
				}
				var ok bool
				ok, buf = o.rejects.has(c, buf)
				ex := func() string { return fmt.Sprintf("%s: %v", bytes.TrimRight(buf, "\n"), why) }
				switch {
				case ok:
					byRun++
					if len(exRun) < 2 {
						exRun = append(exRun, ex())
					}
				default:
					unaccounted++
					if len(exUn) < 5 {
						exUn = append(exUn, ex())
					}
				}
			}
			rk := p.New()
			var cur, ent []byte
			var n, b int64
			have := false
			flush := func() {
				if have && n > 0 {
					ex.Add(cur, 0, n, b)
					sk.Add(cur, n, b)
				}
				n, b = 0, 0
			}
			sc, err := old.snap.NewScanner(gctx, sp, old.opts)
			if err != nil {
				return err
			}
			for sc.Next() {
				c := sc.Cell()
				cells++
				if ent, err = rk.SourceEntity(ent[:0], c); err != nil {
					reject(c, err)
					continue
				}
				// One Add per run of an entity's cells, not per cell.
				if !have || !bytes.Equal(ent, cur) {
					flush()
					cur = append(cur[:0], ent...)
					have = true
				}
				out, err := rk.Apply(c)
				if err != nil {
					reject(c, err)
					continue
				}
				n++
				b += cell.Size(&out)
			}
			flush()
			if err := sc.Close(); err != nil {
				return fmt.Errorf("verify: counting split %s: %w", sp.ID, err)
			}
			if err := sc.Err(); err != nil {
				return fmt.Errorf("verify: counting split %s: %w", sp.ID, err)
			}
			mu.Lock()
			defer mu.Unlock()
			cs.Exact.Merge(ex)
			cs.Sketch.Merge(sk)
			cs.Cells += cells
			cs.Rejected += rejected
			cs.ByRun += byRun
			cs.Unaccounted += unaccounted
			cs.exUn = append(cs.exUn, exUn...)
			cs.exRun = append(cs.exRun, exRun...)
			return nil
		})
		// The next split's files open while the workers read.
		if i+1 < len(old.splits) {
			old.snap.Prepare(old.splits[i+1], old.opts)
		}
	}
	err := g.Wait()
	cs.BytesRead = old.BytesRead() - before
	if err != nil {
		return nil, err
	}
	cs.Examples = append(cs.exUn[:min(len(cs.exUn), 5):min(len(cs.exUn), 5)], cs.exRun[:min(len(cs.exRun), 2)]...)
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
