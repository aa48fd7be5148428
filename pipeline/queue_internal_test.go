package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/source"
)

func queued(id, region string) work {
	return work{id: id, split: source.Split{ID: id, Region: region}}
}

// TestQueueSpreadsRegions: with spread, a free worker takes the largest
// split of a region no worker reads, and the first one left when every
// region left is being read; without, always the first (largest) one.
func TestQueueSpreadsRegions(t *testing.T) {
	todo := []work{queued("h1", "H"), queued("h2", "H"), queued("h3", "H"), queued("a", "A"), queued("b", "B")}
	ctx := context.Background()
	ids := func(q *queue, n int) (out []string, taken []work) {
		for range n {
			w, ok := q.take(ctx)
			if !ok {
				t.Fatal("take: nothing, want a split")
			}
			out, taken = append(out, w.id), append(taken, w)
		}
		return out, taken
	}
	q := newQueue(todo, 2, true)
	got, taken := ids(q, 2)
	if got[0] != "h1" || got[1] != "a" {
		t.Errorf("spread: the two workers took %v, want [h1 a]", got)
	}
	q.done(taken[1]) // a done; h1 still read
	got, taken2 := ids(q, 1)
	if got[0] != "b" {
		t.Errorf("spread: next %v, want b (H is being read)", got)
	}
	q.done(taken2[0]) // b done; only H's pieces are left, H still read
	if got, _ := ids(q, 1); got[0] != "h2" {
		t.Errorf("spread: next %v, want h2 (every region left is being read)", got)
	}

	q = newQueue(todo, 2, false)
	if got, _ := ids(q, 2); got[0] != "h1" || got[1] != "h2" {
		t.Errorf("no spread: %v, want [h1 h2]", got)
	}
}

// TestQueueBoundsWorkers: take waits for a worker to be done once as many
// splits as workers are out, ends when ctx does, and reports false when
// nothing is left.
func TestQueueBoundsWorkers(t *testing.T) {
	q := newQueue([]work{queued("a", "A"), queued("b", "B")}, 1, true)
	w, ok := q.take(context.Background())
	if !ok || w.id != "a" {
		t.Fatalf("first take: %v %v", w.id, ok)
	}
	// The one worker is busy: take waits until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, ok := q.take(ctx); ok || ctx.Err() == nil {
		t.Errorf("take with the one worker busy returned %v before ctx ended", ok)
	}
	q.done(w)
	if w, ok := q.take(context.Background()); !ok || w.id != "b" {
		t.Errorf("take after done: %v %v, want b", w.id, ok)
	}
	if _, ok := q.take(context.Background()); ok {
		t.Error("take with nothing left returned a split")
	}
}
