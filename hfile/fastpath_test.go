package hfile

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// The FAST_DIFF fast path (fastDiffSameRow) must be invisible: on any
// block, intact or damaged, a decoder using it gives what the general
// decoder alone gives: the same cells, repeat hints and column keys, and
// the same error at the same cell. The files HBase wrote (corpus and
// oracle tests) check it against HBase; this checks it against nextDiff on
// blocks built to reach its every branch, and on thousands of damaged ones.

// decodeBlock decodes a FAST_DIFF payload to the end or the first error,
// one line per cell.
func decodeBlock(payload []byte, flags byte, generalOnly bool) (lines []string, err error) {
	d := blockDecoder{tags: flags&1 != 0, mvcc: flags&2 != 0, keepSeqID: true, tagsCompressed: flags&4 != 0, generalOnly: generalOnly}
	if err := d.reset(payload, true, EncodingFastDiff); err != nil {
		return nil, err
	}
	var c cell.Cell
	for len(lines) <= len(payload) {
		ok, err := d.next(&c)
		if err != nil || !ok {
			return lines, err
		}
		line := cell.AppendDump(nil, &c)
		line = fmt.Appendf(line, " seq=%d repeat=%d colkey=%q", c.SeqID, d.repeat, d.colKey)
		lines = append(lines, string(line))
	}
	return lines, fmt.Errorf("more cells than bytes")
}

// fastDiffBlocks encodes cell sets that reach every branch of the fast
// path: long rows, qualifiers and values (lengths of two bytes), repeated
// values, types and timestamps, tags (plain and compressed) and memstore
// timestamps, many columns per row.
func fastDiffBlocks() (payloads [][]byte, flags []byte) {
	opts := []writeOpts{{}, {mvcc: true}, {tags: true, mvcc: true}, {tags: true, tagsCompressed: true, mvcc: true}}
	for i, o := range opts {
		for seed := uint64(0); seed < 6; seed++ {
			var cells []cell.Cell
			if seed%2 == 0 {
				cells = genCells(seed*10+uint64(i), 300, o.tags, o.mvcc)
			} else {
				cells = wideRows(seed, 300, o.tags, o.mvcc)
			}
			o.enc = EncodingFastDiff
			payloads = append(payloads, encodeBlock(o, cells))
			flags = append(flags, o.decoderFlags())
		}
	}
	return payloads, flags
}

// wideRows makes rows of many columns, with qualifiers and values that
// cross the one-byte length limit, repeated values and shared timestamps.
func wideRows(seed uint64, n int, withTags, withSeq bool) []cell.Cell {
	rng := rand.New(rand.NewPCG(seed, 99))
	var cells []cell.Cell
	for r := 0; len(cells) < n; r++ {
		row := []byte(fmt.Sprintf("wide-%04d", r))
		if r%3 == 0 {
			row = append(row, bytes.Repeat([]byte{'x'}, 130)...)
		}
		for q := 0; q < 20 && len(cells) < n; q++ {
			qual := []byte(fmt.Sprintf("c%03d", q))
			if rng.IntN(5) == 0 {
				qual = append(qual, bytes.Repeat([]byte{'q'}, 120+rng.IntN(20))...)
			}
			for v := 0; v < 1+rng.IntN(3) && len(cells) < n; v++ {
				c := cell.Cell{Row: row, Family: []byte("f"), Qualifier: qual,
					Timestamp: 1767225600000 - int64(v*rng.IntN(1<<20)), Type: cell.Put}
				switch rng.IntN(4) {
				case 0:
					c.Value = bytes.Repeat([]byte{'v'}, 100+rng.IntN(60))
				case 1:
					if len(cells) > 0 {
						c.Value = cells[len(cells)-1].Value
					}
				default:
					c.Value = []byte(fmt.Sprintf("val%d", rng.IntN(1000)))
				}
				if rng.IntN(10) == 0 {
					c.Type = cell.Delete
				}
				if withTags && rng.IntN(4) == 0 {
					c.Tags = tagBytes(byte(1+rng.IntN(3)), "t")
				}
				if withSeq {
					c.SeqID = uint64(rng.IntN(1 << 20))
				}
				cells = append(cells, c)
			}
		}
	}
	return cells
}

func TestFastDiffSameRowAgreesWithGeneral(t *testing.T) {
	payloads, flags := fastDiffBlocks()
	rng := rand.New(rand.NewPCG(5, 6))
	check := func(name string, p []byte, f byte) {
		t.Helper()
		want, wantErr := decodeBlock(p, f, true)
		got, gotErr := decodeBlock(p, f, false)
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) {
			t.Fatalf("%s: error %v, the general decoder's %v (after %d and %d cells)", name, gotErr, wantErr, len(got), len(want))
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d cells, the general decoder %d", name, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: cell %d:\n got %s\nwant %s", name, i, got[i], want[i])
			}
		}
	}
	damaged := 0
	for i, p := range payloads {
		if lines, err := decodeBlock(p, flags[i], true); err != nil || len(lines) < 100 {
			t.Fatalf("block %d: the general decoder read %d cells: %v", i, len(lines), err)
		}
		check(fmt.Sprintf("block %d", i), p, flags[i])
		for m := 0; m < 120; m++ {
			q := bytes.Clone(p)
			switch m % 4 {
			case 0: // one byte set at random
				q[6+rng.IntN(len(q)-6)] = byte(rng.IntN(256))
			case 1: // one bit flipped
				q[6+rng.IntN(len(q)-6)] ^= 1 << rng.IntN(8)
			case 2: // cut short
				q = q[:6+rng.IntN(len(q)-6)]
			case 3: // a flag or length byte made long (0x80 and up)
				q[6+rng.IntN(len(q)-6)] |= 0x80
			}
			if _, err := decodeBlock(q, flags[i], true); err != nil {
				damaged++
			}
			check(fmt.Sprintf("block %d mutation %d", i, m), q, flags[i])
		}
	}
	// The mutations must reach the error paths, not just change values.
	if damaged < 500 {
		t.Fatalf("only %d damaged blocks were refused: the mutations miss the lengths", damaged)
	}
}
