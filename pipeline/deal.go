package pipeline

import "sync"

// dealer hands a run's splits to its workers as they come free: the
// largest split left whose source region no other worker is reading, or,
// when every split left is of a region being read, the largest one left
// (a worker never waits for another's region).
//
// Why by region: the pieces of one region, and above all the in-row pieces
// of one huge row, hold the same entities, and a re-key keeps an entity's
// new rows together (the entity leads the new key), so they write into
// the same target region. Dealt largest first, the equal pieces of a heavy
// region come one after the other and every worker writes them at once
// into that one region, which its region server then serves alone (one
// memstore, one region's flushes and write locks) while the other target
// regions wait. Dealt by region, the heavy region's pieces are read one at
// a time beside the pieces of other regions, and the workers' writes
// spread over the target's regions and servers.
//
// The order only changes when each split runs: every split is still read
// exactly once, and a split's record in the checkpoint is its own, so a
// resume deals what is left in the same way.
type dealer struct {
	mu   sync.Mutex
	left []work         // largest first, as cutWork ordered them
	busy map[string]int // source region -> workers reading it
}

func newDealer(todo []work) *dealer {
	return &dealer{left: append([]work(nil), todo...), busy: map[string]int{}}
}

// pickLocked returns the index in d.left of the split take would hand out; -1
// when none is left. d.mu is held.
func (d *dealer) pickLocked() int {
	if len(d.left) == 0 {
		return -1
	}
	for i, w := range d.left {
		if d.busy[w.split.Region.EncodedName] == 0 {
			return i
		}
	}
	return 0
}

// take hands out the next split, marks its region busy and returns the
// split the next take would hand out now (next is false when none), so
// that the caller may prepare its files while it reads; ok is false when
// no split is left.
func (d *dealer) take() (w work, next work, hasNext, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := d.pickLocked()
	if i < 0 {
		return work{}, work{}, false, false
	}
	w = d.left[i]
	d.left = append(d.left[:i], d.left[i+1:]...)
	d.busy[w.split.Region.EncodedName]++
	if j := d.pickLocked(); j >= 0 {
		next, hasNext = d.left[j], true
	}
	return w, next, hasNext, true
}

// done marks w's region one reader less.
func (d *dealer) done(w work) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[w.split.Region.EncodedName]--; d.busy[w.split.Region.EncodedName] <= 0 {
		delete(d.busy, w.split.Region.EncodedName)
	}
}
