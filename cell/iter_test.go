package cell

import (
	"errors"
	"testing"
)

// listIter is a minimal Iterator over fixed cells that records Close and
// can fail after a number of cells.
type listIter struct {
	cells   []Cell
	i       int
	failAt  int // fail instead of returning cell failAt (-1: never)
	err     error
	closed  int
	current *Cell
}

func (it *listIter) Next() bool {
	it.current = nil
	if it.err != nil || it.i >= len(it.cells) {
		return false
	}
	if it.i == it.failAt {
		it.err = errors.New("read failed")
		return false
	}
	it.current = &it.cells[it.i]
	it.i++
	return true
}
func (it *listIter) Cell() *Cell  { return it.current }
func (it *listIter) Err() error   { return it.err }
func (it *listIter) Close() error { it.closed++; return it.err }

func rows(names ...string) []Cell {
	var out []Cell
	for _, n := range names {
		out = append(out, Cell{Row: []byte(n), Type: Put})
	}
	return out
}

func TestForEach(t *testing.T) {
	fnErr := errors.New("sink full")
	cases := []struct {
		name    string
		failAt  int
		stopAt  string // fn returns ErrStop at this row
		errAt   string // fn returns fnErr at this row
		seen    string
		wantErr error
		wantAny bool // an error is wanted, not a particular one
	}{
		{name: "reads to the end and returns nil", failAt: -1, seen: "abc"},
		{name: "ErrStop ends early without an error", failAt: -1, stopAt: "b", seen: "a"},
		{name: "the callback's error is returned", failAt: -1, errAt: "b", seen: "a", wantErr: fnErr},
		{name: "the iterator's error is returned", failAt: 2, seen: "ab", wantAny: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := &listIter{cells: rows("a", "b", "c"), failAt: tc.failAt}
			var seen string
			err := ForEach(it, func(c *Cell) error {
				switch string(c.Row) {
				case tc.stopAt:
					return ErrStop
				case tc.errAt:
					return fnErr
				}
				seen += string(c.Row)
				return nil
			})
			if seen != tc.seen {
				t.Errorf("saw %q, want %q", seen, tc.seen)
			}
			if it.closed != 1 {
				t.Errorf("Close called %d times, want 1", it.closed)
			}
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
			case tc.wantAny:
				if err == nil {
					t.Error("err = nil, want the iterator's error")
				}
			case err != nil:
				t.Errorf("err = %v, want nil", err)
			}
		})
	}
}
