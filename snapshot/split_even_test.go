package snapshot

import (
	"fmt"
	"testing"
)

// heavyTailPositions is the shape of SIZE=small's heavy region, scaled to
// 1000 bytes: a few short rows, then row "h" from 20 to 830 with a column
// start every 50 bytes, then short rows every 30 bytes to the end.
func heavyTailPositions() (pos []cut, at []int64) {
	for b := int64(10); b < 20; b += 10 {
		pos, at = append(pos, cut{row: []byte(fmt.Sprintf("a%04d", b))}), append(at, b)
	}
	pos, at = append(pos, cut{row: []byte("h")}), append(at, 20)
	for b := int64(50); b < 830; b += 50 {
		pos, at = append(pos, cut{row: []byte("h"), col: &Column{Family: []byte("d"), Qualifier: []byte(fmt.Sprintf("%04d", b))}}), append(at, b)
	}
	for b := int64(840); b < 1000; b += 30 {
		pos, at = append(pos, cut{row: []byte(fmt.Sprintf("t%04d", b))}), append(at, b)
	}
	return pos, at
}

// pieceBytes returns the bytes of each piece the cuts make of total.
func pieceBytes(cuts []cut, total int64) []int64 {
	var out []int64
	last := int64(0)
	for _, c := range cuts {
		b := int64(c.before*float64(total) + 0.5)
		out = append(out, b-last)
		last = b
	}
	return append(out, total-last)
}

// TestEvenCutsBalanceAHeavyRow: where a huge row ends a little past the
// second share of three, the greedy rule cuts once (its next cut would leave
// a last piece under half a unit, and a column cut so near the row's end
// is not allowed), so one piece is twice the other; the even rule cuts at
// both shares, inside the row, and no piece is more than a tenth off the
// mean.
func TestEvenCutsBalanceAHeavyRow(t *testing.T) {
	pos, at := heavyTailPositions()
	const total, pieces = 1000, 3
	greedy := pieceBytes(greedyCuts(pos, at, total, pieces), total)
	if len(greedy) != 2 || greedy[1] < 2*greedy[0]-100 {
		t.Fatalf("greedy pieces %v: the shape no longer shows the greedy rule's imbalance", greedy)
	}
	even := evenCuts(pos, at, total, pieces)
	got := pieceBytes(even, total)
	if len(got) != pieces {
		t.Fatalf("even pieces %v, want %d", got, pieces)
	}
	for _, b := range got {
		if b < total/pieces*9/10 || b > total/pieces*11/10 {
			t.Errorf("even pieces %v: %d is more than a tenth off the mean", got, b)
		}
	}
	for _, c := range even {
		if string(c.row) != "h" || c.col == nil {
			t.Errorf("cut at %s %v, want a column of row h", c.row, c.col)
		}
	}
}

// TestEvenCutsPreferRowStarts: a row start within a quarter unit of a
// share is taken over a nearer column start; one further away is not.
func TestEvenCutsPreferRowStarts(t *testing.T) {
	col := func(row string, b int64) cut {
		return cut{row: []byte(row), col: &Column{Family: []byte("d"), Qualifier: []byte(fmt.Sprintf("%04d", b))}}
	}
	// Shares of 1000 in 2 pieces: 500; the unit is 500, a quarter 125.
	for _, tc := range []struct {
		name string
		pos  []cut
		at   []int64
		want int64
	}{
		{"row start near", []cut{col("a", 450), col("a", 500), {row: []byte("b")}}, []int64{450, 500, 600}, 600},
		{"row start far", []cut{col("a", 450), col("a", 500), {row: []byte("b")}}, []int64{450, 500, 700}, 500},
		{"row start before", []cut{{row: []byte("b")}, col("b", 490), col("b", 510)}, []int64{400, 490, 510}, 400},
	} {
		cuts := evenCuts(tc.pos, tc.at, 1000, 2)
		if len(cuts) != 1 || int64(cuts[0].before*1000+0.5) != tc.want {
			t.Errorf("%s: cuts %v, want one at %d", tc.name, pieceBytes(cuts, 1000), tc.want)
		}
	}
}

// TestEvenCutsNoSmallPieces: positions that would leave a piece of under
// half a unit are passed over, and a share with none usable is not cut.
func TestEvenCutsNoSmallPieces(t *testing.T) {
	pos := []cut{{row: []byte("b")}, {row: []byte("y")}}
	// 3 shares of 1000 (unit 333): the only positions, 100 and 900, each
	// leave a piece under 166.
	if cuts := evenCuts(pos, []int64{100, 900}, 1000, 3); len(cuts) != 0 {
		t.Errorf("cuts %v, want none", pieceBytes(cuts, 1000))
	}
	if cuts := evenCuts(nil, nil, 1000, 3); len(cuts) != 0 {
		t.Errorf("no positions: cuts %v, want none", cuts)
	}
}
