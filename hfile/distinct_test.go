package hfile

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// TestWriterAppendDistinct appends generated cells (with repeated keys
// and values) through AppendDistinct in every encoding and variant, each
// followed by a whole repeat and by repeats differing in value or tags:
// only the first cell of each key is written, the repeats are told apart
// as the rule below says, LastValue/LastRow/AppendLastKey describe the
// last cell written (across block boundaries too), and the file reads back
// as the cells with one per key.
func TestWriterAppendDistinct(t *testing.T) {
	n := 1500
	if testing.Short() {
		n = 400
	}
	for vi, v := range writerVariants {
		var cells []cell.Cell
		for i, c := range genCells(uint64(vi+90), n, v.tags, v.seq) {
			cells = append(cells, c)
			switch i % 7 {
			case 3: // the same cell again
				cells = append(cells, c)
			case 5: // its key with another value
				c.Value = append(bytes.Clone(c.Value), 'y')
				cells = append(cells, c)
			}
		}
		// The rule: a cell with the key (cell.Compare) of the one kept
		// before it is not written.
		var want []cell.Cell
		for i := range cells {
			if len(want) > 0 && cell.Compare(&want[len(want)-1], &cells[i]) == 0 {
				continue
			}
			want = append(want, cells[i])
		}
		if len(want) == len(cells) {
			t.Fatalf("variant %s: the generated cells repeat no key; the test needs some", v.name)
		}
		for _, enc := range allEncodings {
			o := v.o
			o.Encoding, o.Codec = enc, CodecSnappy
			t.Run(fmt.Sprintf("%s/%s", v.name, enc), func(t *testing.T) {
				var buf bytes.Buffer
				w, err := NewWriter(&buf, o)
				if err != nil {
					t.Fatal(err)
				}
				if w.LastValue() != nil || w.LastRow() != nil || w.AppendLastKey(nil) != nil {
					t.Fatal("an empty writer describes a last cell")
				}
				var last *cell.Cell
				for i := range cells {
					c := &cells[i]
					kept, err := w.AppendDistinct(c)
					if err != nil {
						t.Fatalf("cell %d: %v", i, err)
					}
					wantKept := Appended
					if last != nil && cell.Compare(last, c) == 0 {
						wantKept = Collision
						if bytes.Equal(last.Value, c.Value) && bytes.Equal(last.Tags, c.Tags) {
							wantKept = Duplicate
						}
					}
					if kept != wantKept {
						t.Fatalf("cell %d %s: got %d, want %d", i, c, kept, wantKept)
					}
					if kept == Appended {
						last = c
					}
					if !bytes.Equal(w.LastValue(), last.Value) || !bytes.Equal(w.LastRow(), last.Row) || !bytes.Equal(w.AppendLastKey(nil), cell.AppendKey(nil, last)) {
						t.Fatalf("cell %d: last value %.20q row %q, want %.20q %q", i, w.LastValue(), w.LastRow(), last.Value, last.Row)
					}
					again := *last
					if k, err := w.AppendDistinct(&again); err != nil || k != Duplicate {
						t.Fatalf("cell %d again: %d, %v; want a duplicate", i, k, err)
					}
					other := *last
					other.Value = append(bytes.Clone(last.Value), 'x')
					if k, err := w.AppendDistinct(&other); err != nil || k != Collision {
						t.Fatalf("cell %d with another value: %d, %v; want a collision", i, k, err)
					}
					if o.Tags {
						other := *last
						other.Tags = append(bytes.Clone(last.Tags), tagBytes(9, "other")...)
						if k, err := w.AppendDistinct(&other); err != nil || k != Collision {
							t.Fatalf("cell %d with other tags: %d, %v; want a collision", i, k, err)
						}
					}
				}
				before := *last
				before.Row = append([]byte{}, last.Row[:len(last.Row)-1]...)
				if _, err := w.AppendDistinct(&before); !errors.Is(err, ErrOutOfOrder) {
					t.Fatalf("a row before the last: got %v, want ErrOutOfOrder", err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				r, err := openBytes(t, "distinct.hfile", buf.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				got, err := readAll(t, r)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("read %d cells, want %d (of %d appended)", len(got), len(want), len(cells))
				}
				for i := range want {
					c := want[i]
					if !o.SeqIDs {
						c.SeqID = 0
					}
					if !sameCell(&got[i], &c) {
						t.Fatalf("cell %d: got %s value %.20q, want %s value %.20q", i, &got[i], got[i].Value, &c, c.Value)
					}
				}
			})
		}
	}
}
