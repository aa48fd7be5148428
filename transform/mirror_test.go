package transform

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// forwardBugs are bugs of the forward codec that its parser and builder
// share, so that a key round-trips through them, only in a byte form
// other than the documented one. Each edits the compiled description the
// forward code reads; Unmap reads its own copy, made at compile time, so
// the bug is the forward code's alone, as a bug in its functions would be.
var forwardBugs = map[string]func(p *Program){
	// Buckets floored to twice their length, offsets measured from those.
	"time buckets twice as long": func(p *Program) {
		for _, c := range comps(p.dstRow, p.dstQual) {
			if c.typ == TimeBucket || c.typ == Offset {
				c.span *= 2
			}
		}
	},
	"string separator | for 0x00": func(p *Program) {
		for _, c := range comps(p.dstRow, p.dstQual) {
			if c.typ == String && c.hasSep && c.sep == 0 {
				c.sep = '|'
			}
		}
	},
	"salt modulo one bucket fewer": func(p *Program) {
		for _, c := range comps(p.dstRow, p.dstQual) {
			if c.typ == Salt {
				c.buckets--
			}
		}
	},
	// Written and read with the sign bit flipped.
	"uint as sortable_int": func(p *Program) {
		for _, c := range comps(p.dstRow, p.dstQual) {
			if c.typ == Uint {
				c.typ = SortableInt
			}
		}
	},
	"reversed_ts not reversed in the new key": func(p *Program) {
		for _, c := range comps(p.dstRow, p.dstQual) {
			if c.typ == ReversedTS {
				c.typ = Int
			}
		}
	},
	// The old key's reversed time read (and, by a forward comparison,
	// written back) as it is stored: the new key gets it unreversed.
	"reversed_ts not reversed in the old key": func(p *Program) {
		for _, c := range comps(p.srcRow, p.srcQual) {
			if c.typ == ReversedTS {
				c.typ = Int
			}
		}
	},
}

// comps lists the components of the layouts given.
func comps(ls ...*Layout) []*component {
	var out []*component
	for _, l := range ls {
		if l == nil {
			continue
		}
		for i := range l.comps {
			out = append(out, &l.comps[i])
		}
	}
	return out
}

// breakForward returns a copy of p whose forward codec has the named bug.
func breakForward(t *testing.T, p *Program, bug string) *Program {
	t.Helper()
	edit, ok := forwardBugs[bug]
	if !ok {
		t.Fatalf("no bug %q", bug)
	}
	b := *p
	clone := func(l *Layout) *Layout {
		if l == nil {
			return nil
		}
		return &Layout{comps: slices.Clone(l.comps), fixedLen: l.fixedLen, minLen: l.minLen}
	}
	b.srcRow, b.srcQual, b.dstRow, b.dstQual = clone(p.srcRow), clone(p.srcQual), clone(p.dstRow), clone(p.dstQual)
	edit(&b)
	return &b
}

// forwardBack reads new cell nw back to an old cell with the forward codec
// on both sides: its key parsed by the forward parser of the new layout,
// the old key built by the forward builder of the old layout. It is the
// comparison a verification without an independent inverse makes.
func forwardBack(p *Program, nw *cell.Cell) (cell.Cell, error) {
	r := p.New()
	if err := r.parseTarget(nw); err != nil {
		return cell.Cell{}, err
	}
	old := nw.Clone()
	var err error
	if old.Row, err = p.srcRow.build(nil, &r.rec); err != nil {
		return cell.Cell{}, err
	}
	old.Qualifier = bytes.Clone(r.rec.vals[idxQualifier].Bytes)
	if p.srcQual != nil {
		if old.Qualifier, err = p.srcQual.build(nil, &r.rec); err != nil {
			return cell.Cell{}, err
		}
	}
	old.Family, err = p.oldFamily(nw.Family)
	return old, err
}

func sameCell(a, b *cell.Cell) bool {
	return bytes.Equal(a.Row, b.Row) && bytes.Equal(a.Family, b.Family) && bytes.Equal(a.Qualifier, b.Qualifier) &&
		a.Timestamp == b.Timestamp && a.Type == b.Type && bytes.Equal(a.Value, b.Value)
}

// checkMirroredBug maps random old cells of p through a copy of p whose
// forward codec has the bug, and reads each new cell back two ways. With
// the forward codec on both sides every cell comes back as it was: the
// bug is invisible to it. Unmap, with its own codec, flags exactly the
// cells whose new key differs from the one p builds without the bug
// (refuses them, or gives back another old cell); at least least of them.
func checkMirroredBug(t *testing.T, p *Program, bug string, seed uint64, least int) {
	t.Helper()
	b := breakForward(t, p, bug)
	rng := rand.New(rand.NewPCG(seed, 11))
	right, broken, back := p.New(), b.New(), b.New()
	mapped, caught := 0, 0
	for n := 0; n < 2000; n++ {
		old, err := randomOldCell(rng, p)
		if err != nil {
			continue
		}
		want, errW := right.Apply(&old)
		want = want.Clone()
		got, errG := broken.Apply(&old)
		if errors.Is(errW, ErrBadKey) || errors.Is(errG, ErrBadKey) {
			continue // refused, loudly, by one of the two
		}
		if errW != nil || errG != nil {
			t.Fatal(errW, errG)
		}
		got = got.Clone()
		mapped++
		if fb, err := forwardBack(b, &got); err != nil || !sameCell(&fb, &old) {
			t.Fatalf("the forward codec on both sides sees the bug (it is not mirrored): old %s, new %s, back %s, %v", old.String(), got.String(), fb.String(), err)
		}
		un, err := back.Unmap(&got)
		flagged := err != nil || !sameCell(&un, &old)
		differs := !bytes.Equal(got.Row, want.Row) || !bytes.Equal(got.Qualifier, want.Qualifier)
		switch {
		case flagged && !differs:
			t.Fatalf("old %s: the new key %s is the right one, but Unmap gives %s, %v", old.String(), got.String(), un.String(), err)
		case differs && !flagged:
			t.Fatalf("old %s: the bug writes %s (right: %s), and Unmap gives the old cell back", old.String(), got.String(), want.String())
		case flagged:
			caught++
		}
	}
	t.Logf("%s: %d of %d cells mapped by both get another new key; the forward comparison passes all, Unmap flags those %d", bug, caught, mapped, caught)
	if caught < least {
		t.Fatalf("the bug changes only %d new keys, want %d: the test shows little", caught, least)
	}
}
