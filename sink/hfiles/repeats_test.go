package hfiles

import (
	"context"
	"errors"
	"testing"
)

// TestOneToOneRefusesCellsStagedTwice: two splits that staged the same
// cells (what overlapping cuts of the snapshot produce) merge into one
// copy with the duplicates counted; under a job that maps old cells one to
// one, where no two cells can be equal, the merge fails instead, naming
// the count, so a split read twice (and maybe another never) is not
// passed off as collapsed duplicates.
func TestOneToOneRefusesCellsStagedTwice(t *testing.T) {
	ctx := context.Background()
	cells := orderedCells(rowNames("d", 20), 10, "a")
	for _, oneToOne := range []bool{false, true} {
		dir := t.TempDir()
		s, err := New(ctx, Options{Staging: dir, Table: "t", SplitKeys: [][]byte{[]byte("m")},
			Memory: 16 << 20, Workers: 2, OneToOne: oneToOne})
		if err != nil {
			t.Fatal(err)
		}
		writeSplit(t, s, "a", cells)
		writeSplit(t, s, "a-again", cells[50:])
		err = s.Finish(ctx, logRep{t})
		st := s.Stats()
		s.Close()
		want := int64(len(cells) - 50)
		if st.Duplicates != want {
			t.Errorf("one to one %v: %d duplicates counted, want %d", oneToOne, st.Duplicates, want)
		}
		switch {
		case !oneToOne && err != nil:
			t.Errorf("a job that may collide: %v", err)
		case oneToOne && !errors.Is(err, ErrRepeatedCells):
			t.Errorf("a one-to-one job that staged %d cells twice: %v, want ErrRepeatedCells", want, err)
		}
	}
}
