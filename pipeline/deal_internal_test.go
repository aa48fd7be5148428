package pipeline

import (
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/snapshot"
)

func dealItem(region, id string, bytes int64) work {
	return work{id: id, split: snapshot.Split{ID: id, Region: snapshot.Region{EncodedName: region}}, bytes: bytes}
}

// TestDealerSpreadsRegions: the four equal pieces of region a come first
// in the largest-first order, yet two workers never read two of them at
// once while a split of another region is left; once only a's pieces are
// left, a free worker takes one anyway; every split is handed out once.
func TestDealerSpreadsRegions(t *testing.T) {
	todo := []work{
		dealItem("a", "a1", 100), dealItem("a", "a2", 100), dealItem("a", "a3", 100), dealItem("a", "a4", 100),
		dealItem("b", "b", 90), dealItem("c", "c", 80), dealItem("d", "d", 10),
	}
	d := newDealer(todo)
	take := func() work {
		t.Helper()
		w, _, _, ok := d.take()
		if !ok {
			t.Fatal("nothing handed out; splits are left")
		}
		return w
	}
	// Two workers: each takes one, and the one whose split ends first
	// takes the next (here always the first worker's, then the other's).
	var order []string
	w1, w2 := take(), take()
	order = append(order, w1.id, w2.id)
	for {
		d.done(w1)
		w, next, hasNext, ok := d.take()
		if !ok {
			break
		}
		order = append(order, w.id)
		if hasNext && next.split.Region.EncodedName == w.split.Region.EncodedName && next.id != "a4" {
			t.Errorf("after %s the dealer would hand out %s of the same region", w.id, next.id)
		}
		w1, w2 = w2, w
	}
	got := strings.Join(order, " ")
	// a1 beside b, a2 beside c, a3 beside d, then a4 (only a is left).
	if want := "a1 b a2 c a3 d a4"; got != want {
		t.Errorf("dealt %q, want %q", got, want)
	}
	if _, _, _, ok := d.take(); ok {
		t.Error("a split was handed out twice")
	}

	// Only one region left and busy: a second worker is not kept idle.
	d = newDealer([]work{dealItem("a", "a1", 100), dealItem("a", "a2", 100)})
	if a, b := take(), take(); a.id != "a1" || b.id != "a2" {
		t.Errorf("dealt %s, %s; want a1, a2 (a free worker never waits)", a.id, b.id)
	}

	// One worker: the largest-first order as it was.
	d = newDealer(todo)
	order = order[:0]
	for {
		w, _, _, ok := d.take()
		if !ok {
			break
		}
		order = append(order, w.id)
		d.done(w)
	}
	if got, want := strings.Join(order, " "), "a1 a2 a3 a4 b c d"; got != want {
		t.Errorf("one worker: dealt %q, want %q", got, want)
	}
}
