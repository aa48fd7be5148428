package hfiles

import (
	"container/heap"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/vfs"
)

// partRun is one run holding cells of a partition.
type partRun struct {
	fs   vfs.FS // the staging folder's file system, or the local run folder's
	name string // path in fs
	size int64  // the file's bytes, as its record says (0: not recorded)
	part RunPart
	// order places the run among the partition's sources (split ID, run
	// index): a collision keeps the cell of the first.
	order string
}

// keptPart is one kept split's share of a partition, in memory.
type keptPart struct {
	mp    memPart
	order string // the split's ID
}

// cursor is one sorted source of a merge: a run's partition or a kept
// split's. at is the current cell, valid until the next call of next.
type cursor interface {
	next() bool
	at() *cell.Cell
	fail() error
	close() error
}

// head is a cursor in the merge's heap, with its current cell.
type head struct {
	c   *cell.Cell
	seq int
	src cursor
}

// merger is a k-way merge over cursors in cell order; cells with equal
// keys come out in source order (seq), so which one a collision keeps
// does not depend on timing.
type merger struct {
	h   cursorHeap
	all []cursor
}

type cursorHeap []head

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if c := cell.Compare(h[i].c, h[j].c); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(head)) }
func (h *cursorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// source is a merge input not opened yet: a run, a kept part or a
// segment.
type source struct {
	run   *partRun
	kept  *keptPart
	seg   *partSeg
	order string
}

// sources orders runs, kept parts and segments by their order keys.
func sources(runs []partRun, kept []keptPart, segs []partSeg) []source {
	out := make([]source, 0, len(runs)+len(kept)+len(segs))
	for i := range runs {
		out = append(out, source{run: &runs[i], order: runs[i].order})
	}
	for i := range kept {
		out = append(out, source{kept: &kept[i], order: kept[i].order})
	}
	for i := range segs {
		out = append(out, source{seg: &segs[i], order: segs[i].order})
	}
	slices.SortStableFunc(out, func(a, b source) int { return strings.Compare(a.order, b.order) })
	return out
}

// newMerger opens a merge of runs, kept parts and segs; fsys and root
// are the staging folder's, where runs without a file system of their own
// and the segments are.
func newMerger(fsys vfs.FS, root string, runs []partRun, kept []keptPart, segs []partSeg) (*merger, error) {
	m := &merger{}
	for i, src := range sources(runs, kept, segs) {
		var cur cursor
		switch {
		case src.seg != nil:
			sc, err := openSegCursor(fsys, root, src.seg.seg)
			if err != nil {
				m.close()
				return nil, err
			}
			cur = sc
		case src.run != nil:
			rfs := src.run.fs
			if rfs == nil {
				rfs = fsys
			}
			rc, err := openCursor(rfs, src.run.name, src.run.size, src.run.part, i)
			if err != nil {
				m.close()
				return nil, err
			}
			cur = rc
		default:
			cur = &memCursor{mp: src.kept.mp}
		}
		m.all = append(m.all, cur)
		if cur.next() {
			m.h = append(m.h, head{c: cur.at(), seq: i, src: cur})
		} else if err := cur.fail(); err != nil {
			m.close()
			return nil, err
		}
	}
	heap.Init(&m.h)
	return m, nil
}

// each calls fn with every cell in order; the cell is valid during the
// call only.
func (m *merger) each(fn func(c *cell.Cell) error) error {
	for len(m.h) > 0 {
		top := m.h[0].src
		if err := fn(m.h[0].c); err != nil {
			return err
		}
		if top.next() {
			heap.Fix(&m.h, 0)
		} else {
			if err := top.fail(); err != nil {
				return err
			}
			heap.Pop(&m.h)
		}
	}
	return nil
}

func (m *merger) close() {
	for _, c := range m.all {
		c.close()
	}
	m.all, m.h = nil, nil
}

// reduce merges runs in passes of at most fan runs each until at most
// fan are left, writing each pass's output to the merge folder (the local
// run folder's when the runs are there). It returns the runs to read and
// the files it wrote (the caller removes them once the partition is
// done).
func (s *Sink) reduce(runs []partRun, region int, family string, fan int) ([]partRun, []partRun, error) {
	var made []partRun
	fsys, dir := s.fs, path.Join(s.root, mergeDir)
	if s.local != nil {
		fsys, dir = s.local.fs, path.Join(s.local.root, mergeDir)
	}
	pass := 0
	for len(runs) > fan {
		var next []partRun
		for i := 0; i < len(runs); i += fan {
			group := runs[i:min(i+fan, len(runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			name := path.Join(dir, fmt.Sprintf("%d-%x-p%d-%d%s", region, family, pass, i/fan, runSuffix))
			pr, size, err := s.mergeToRun(fsys, group, name, region)
			pr.order = group[0].order
			if err != nil {
				return nil, made, err
			}
			made = append(made, pr)
			if s.local != nil {
				s.local.held.Add(size)
			} else if err := s.addStaged(size); err != nil {
				return nil, made, fmt.Errorf("hfiles: merge pass for region %s family %s: %w", s.regions.Regions[region].Dir, family, err)
			}
			next = append(next, pr)
		}
		runs = next
		pass++
		s.mu.Lock()
		s.stats.MergePasses++
		s.mu.Unlock()
	}
	return runs, made, nil
}

// mergeToRun merges runs into one run file holding one partition.
func (s *Sink) mergeToRun(fsys vfs.WriteFS, runs []partRun, name string, region int) (partRun, int64, error) {
	if err := fsys.MkdirAll(path.Dir(name)); err != nil {
		return partRun{}, 0, fmt.Errorf("hfiles: create %s: %w", path.Dir(name), err)
	}
	m, err := newMerger(s.fs, s.root, runs, nil, nil)
	if err != nil {
		return partRun{}, 0, err
	}
	defer m.close()
	if fsys == s.fs {
		if err := s.fenced("creating merge pass run " + name); err != nil {
			return partRun{}, 0, err
		}
	}
	f, err := fsys.Create(name)
	if err != nil {
		return partRun{}, 0, fmt.Errorf("hfiles: create %s: %w", name, err)
	}
	rw, err := newRunWriter(f, s.o.RunCompression, s.o.BatchBytes)
	if err != nil {
		vfs.Abort(f)
		return partRun{}, 0, err
	}
	if fsys == s.fs {
		rw.publish = func() error { return s.publish(f, "writing merge pass run "+name) }
	}
	if err := m.each(func(c *cell.Cell) error { return rw.add(region, c) }); err != nil {
		rw.abort()
		return partRun{}, 0, err
	}
	parts, size, err := rw.close()
	if err != nil {
		return partRun{}, 0, err
	}
	if len(parts) != 1 {
		return partRun{}, 0, fmt.Errorf("hfiles: merge pass %s: wrote %d partitions, want 1", name, len(parts))
	}
	return partRun{fs: fsys, name: name, size: size, part: parts[0]}, size, nil
}
