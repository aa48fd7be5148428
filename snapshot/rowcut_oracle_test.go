package snapshot

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestInRowCutOnHBase: a table HBase wrote, one region, whose row "big"
// holds about 30,000 cells over two families (small blocks, one of them
// FAST_DIFF), two and three versions a column, Puts with an empty
// qualifier, and in a newer flush every kind of delete marker: a
// DeleteFamily and a DeleteFamilyVersion in each family, DeleteColumns
// and Deletes here and there; a third flush adds newer versions. Cut with
// InRow into pieces of an eighth of the region, row "big" is cut inside
// several times, and the pieces' scans, one after the other, must be
// exactly HBase's own scan of the snapshot, in normal mode, raw mode and
// with one version: no cell lost, none in two pieces, every family marker
// applied by the pieces after the one that holds it.
func TestInRowCutOnHBase(t *testing.T) {
	st := testenv.Require(t)
	name := os.Getenv("REKEY_TEST_PREFIX") + "rowcut"
	base := futureBase()
	r := rand.New(rand.NewSource(28))
	val := func() []byte {
		v := make([]byte, 4+r.Intn(12))
		r.Read(v)
		return v
	}
	put := func(row, fam, q string, ts int64) cell.Cell {
		return cell.Cell{Row: []byte(row), Family: []byte(fam), Qualifier: []byte(q), Timestamp: ts, Type: cell.Put, Value: val()}
	}
	var puts, newer, marks []cell.Cell
	for _, row := range []string{"a01", "a02", "big", "c01", "c02"} {
		na, nb := 20, 10
		if row == "big" {
			na, nb = 9000, 4000
			puts = append(puts, put(row, "a", "", base+5), put(row, "a", "", base+1), put(row, "b", "", base+7))
		}
		for i := 0; i < na; i++ {
			for v := int64(0); v < 2; v++ {
				puts = append(puts, put(row, "a", fmt.Sprintf("q%05d", i), base+v*10))
			}
		}
		for i := 0; i < nb; i++ {
			for v := int64(0); v < 3; v++ {
				puts = append(puts, put(row, "b", fmt.Sprintf("x%05d", i), base+v*10))
			}
		}
	}
	mark := func(fam, q string, ts int64, typ cell.Type) {
		marks = append(marks, cell.Cell{Row: []byte("big"), Family: []byte(fam), Qualifier: []byte(q), Timestamp: ts, Type: typ})
	}
	mark("a", "", base, cell.DeleteFamily)           // a's oldest versions, all columns
	mark("b", "", base+10, cell.DeleteFamilyVersion) // b's middle versions, all columns
	mark("b", "", base+5, cell.DeleteFamily)         // b's oldest versions (the empty-qualifier put at +7 stays)
	for i := 0; i < 9000; i += 700 {
		mark("a", fmt.Sprintf("q%05d", i), base+10, cell.DeleteColumn)
		mark("a", fmt.Sprintf("q%05d", i+350), base+10, cell.Delete)
	}
	for i := 0; i < 4000; i += 900 {
		mark("b", fmt.Sprintf("x%05d", i), base+20, cell.DeleteColumn)
	}
	for i := 0; i < 9000; i += 97 {
		newer = append(newer, put("big", "a", fmt.Sprintf("q%05d", i), base+30))
	}
	testenv.DropAfter(t, name, name)
	writeSpecs(t, []map[string]any{{
		"table": name,
		"families": []map[string]any{
			{"name": "a", "versions": 3, "blocksize": 4096},
			{"name": "b", "versions": 3, "blocksize": 4096, "encoding": "FAST_DIFF"},
		},
		"steps": []map[string]any{
			{"op": "cells", "file": writeCells(t, puts)}, {"op": "flush"},
			{"op": "cells", "file": writeCells(t, marks)}, {"op": "flush"},
			{"op": "cells", "file": writeCells(t, newer)}, {"op": "flush"},
			{"op": "snapshot", "name": name},
		},
	}})

	s, err := Open(t.Context(), st.RootDir, name, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	whole, err := s.Splits(SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) != 1 {
		t.Fatalf("%d regions, want 1", len(whole))
	}
	splits, err := s.Splits(SplitOptions{TargetBytes: whole[0].Bytes / 8, InRow: true})
	if err != nil {
		t.Fatal(err)
	}
	inBig := 0
	for _, sp := range splits {
		if sp.StartColumn != nil && string(sp.StartRow) == "big" {
			inBig++
		}
	}
	if inBig < 3 {
		t.Fatalf("%d of %d pieces start inside row big, want 3 or more", inBig, len(splits))
	}
	scans := map[string]ScanOptions{"normal": {}, "raw": {Raw: true}, "one version": {MaxVersions: 1}}
	var labels []string
	var dumps [][]string
	for label, o := range scans {
		labels = append(labels, label)
		dumps = append(dumps, append([]string{"dump-snapshot", st.RootDir, name}, oracleScanArgs(o)...))
	}
	outs := testenv.OracleDumps(t, dumps)
	for i, label := range labels {
		var got []byte
		var per []int
		var streamed int64
		for _, sp := range splits {
			sc, err := s.NewScanner(t.Context(), sp, scans[label])
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for sc.Next() {
				got = cell.AppendDump(got, sc.Cell())
				n++
			}
			if err := sc.Close(); err != nil {
				t.Fatalf("split %s: %v", sp.ID, err)
			}
			per = append(per, n)
			streamed += sc.Stats().ReadAhead.StreamBytes
		}
		// Each piece streams its own blocks and at most a block of each
		// file past its end (4 KiB blocks, 8 KiB allowed); streams bounded
		// only by the end of the data read ahead into the next pieces'
		// bytes: 1,368,739 bytes here, 1.4 times the region.
		if slack := int64(len(splits)) * 3 * 8 << 10; streamed > whole[0].Bytes+slack {
			t.Errorf("%s: the pieces streamed %d bytes of a %d-byte region (allowed: %d more)", label, streamed, whole[0].Bytes, slack)
		}
		if d := testenv.DiffDumps(got, outs[i]); d != "" {
			t.Errorf("%s: the pieces vs HBase: %s", label, d)
		}
		if d := testenv.DiffDumps(readDump(t, st.RootDir, name, scans[label], false), outs[i]); d != "" {
			t.Errorf("%s: the whole region vs HBase: %s", label, d)
		}
		t.Logf("%s: %d cells from HBase, per piece %v, %d bytes streamed of a %d-byte region", label, bytes.Count(outs[i], []byte("\n")), per, streamed, whole[0].Bytes)
	}
}
