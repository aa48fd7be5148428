package stage

import (
	"bytes"
	"container/heap"
	"fmt"
	"path"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/vfs"
)

// partRun is one run holding cells of a partition.
type partRun struct {
	name string // path in the staging folder's file system
	part RunPart
}

// merger is a k-way merge over run cursors in cell order; cells with
// equal keys come out in cursor order (seq), so which one a collision
// keeps does not depend on timing.
type merger struct {
	h   cursorHeap
	all []*runCursor
	err error
}

type cursorHeap []*runCursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if c := cell.Compare(&h[i].c, &h[j].c); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*runCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newMerger(fsys vfs.FS, runs []partRun) (*merger, error) {
	m := &merger{}
	for i, r := range runs {
		rc, err := openCursor(fsys, r.name, r.part, i)
		if err != nil {
			m.close()
			return nil, err
		}
		m.all = append(m.all, rc)
		if rc.next() {
			m.h = append(m.h, rc)
		} else if rc.err != nil {
			m.close()
			return nil, rc.err
		}
	}
	heap.Init(&m.h)
	return m, nil
}

// each calls fn with every cell in order; the cell is valid during the
// call only.
func (m *merger) each(fn func(c *cell.Cell) error) error {
	for len(m.h) > 0 {
		top := m.h[0]
		if err := fn(&top.c); err != nil {
			return err
		}
		if top.next() {
			heap.Fix(&m.h, 0)
		} else {
			if top.err != nil {
				return top.err
			}
			heap.Pop(&m.h)
		}
	}
	return nil
}

func (m *merger) close() {
	for _, rc := range m.all {
		rc.close()
	}
	m.all, m.h = nil, nil
}

// reduce merges runs in passes of at most fan runs each until at most
// fan are left, writing each pass's output to the merge folder. It
// returns the runs to read and the files it wrote (the caller removes
// them once the partition is done).
func (s *Sink) reduce(runs []partRun, region int, family string, fan int) ([]partRun, []string, error) {
	var made []string
	pass := 0
	for len(runs) > fan {
		var next []partRun
		for i := 0; i < len(runs); i += fan {
			group := runs[i:min(i+fan, len(runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			name := path.Join(s.root, mergeDir, fmt.Sprintf("%d-%x-p%d-%d%s", region, family, pass, i/fan, runSuffix))
			pr, size, err := s.mergeToRun(group, name, region)
			if err != nil {
				return nil, made, err
			}
			made = append(made, name)
			if err := s.addStaged(size); err != nil {
				return nil, made, fmt.Errorf("stage: merge pass for region %s family %s: %w", s.plan.Regions[region].Dir, family, err)
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
func (s *Sink) mergeToRun(runs []partRun, name string, region int) (partRun, int64, error) {
	if err := s.fs.MkdirAll(path.Dir(name)); err != nil {
		return partRun{}, 0, fmt.Errorf("stage: create %s: %w", path.Dir(name), err)
	}
	m, err := newMerger(s.fs, runs)
	if err != nil {
		return partRun{}, 0, err
	}
	defer m.close()
	f, err := s.fs.Create(name)
	if err != nil {
		return partRun{}, 0, fmt.Errorf("stage: create %s: %w", name, err)
	}
	rw, err := newRunWriter(f, s.o.RunCompression, s.o.BatchBytes)
	if err != nil {
		f.Close()
		return partRun{}, 0, err
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
		return partRun{}, 0, fmt.Errorf("stage: merge pass %s: wrote %d partitions, want 1", name, len(parts))
	}
	return partRun{name: name, part: parts[0]}, size, nil
}

// sameCell reports whether a and b (equal keys) also carry the same value
// and tags: a duplicate from a redone split rather than a collision.
func sameCell(a, b *cell.Cell) bool {
	return bytes.Equal(a.Value, b.Value) && bytes.Equal(a.Tags, b.Tags)
}
