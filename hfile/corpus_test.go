package hfile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// The golden corpus holds HFiles written by real HBase in other projects
// (see SOURCES.txt there). These tests read them in place, or straight out
// of their archives, and check the content the upstream tests promise.

// storeFileName matches HBase store file names: 32 hex digits (0.92+) or a
// long decimal id (0.90).
var storeFileName = regexp.MustCompile(`^([0-9a-f]{32}|[0-9]{10,})$`)

// storeFiles keeps the non-empty members that sit in a column family
// directory and are named like store files.
func storeFiles(files []testenv.ArchiveMember) []testenv.ArchiveMember {
	var out []testenv.ArchiveMember
	for _, f := range files {
		base := filepath.Base(f.Name)
		parent := filepath.Base(filepath.Dir(f.Name))
		if len(f.Data) == 0 || strings.HasPrefix(parent, ".") || !storeFileName.MatchString(base) {
			continue
		}
		out = append(out, f)
	}
	return out
}

func openBytes(t *testing.T, name string, b []byte) (*Reader, error) {
	t.Helper()
	return Open(bytes.NewReader(b), int64(len(b)), name)
}

// readAll reads every cell, cloned, checking the iterator contract and
// that ColumnKey is the cell's row, family length, family and qualifier.
func readAll(t *testing.T, r *Reader) ([]cell.Cell, error) {
	t.Helper()
	it := r.NewIterator()
	defer it.Close()
	var cells []cell.Cell
	var scratch []byte
	for ok := it.First(); ok; ok = it.Next() {
		scratch = checkColumnKey(t, r.Name(), it, scratch)
		cells = append(cells, it.Cell().Clone())
	}
	if it.Next() {
		t.Fatalf("%s: Next returned true after exhaustion", r.Name())
	}
	return cells, it.Err()
}

// checkColumnKey holds it.ColumnKey to the current cell's row, family
// length, family and qualifier; scratch is reused for the expected bytes
// and returned.
func checkColumnKey(t *testing.T, name string, it *Iterator, scratch []byte) []byte {
	t.Helper()
	c := it.Cell()
	want := append(append(append(append(scratch[:0], c.Row...), byte(len(c.Family))), c.Family...), c.Qualifier...)
	if !bytes.Equal(it.ColumnKey(), want) {
		t.Fatalf("%s: %s: ColumnKey %q, want %q", name, c, it.ColumnKey(), want)
	}
	return want
}

// checkSorted asserts cells are in cell order, equal keys newest first.
func checkSorted(t *testing.T, name string, cells []cell.Cell, strict bool) {
	t.Helper()
	for i := 1; i < len(cells); i++ {
		c := cell.Compare(&cells[i-1], &cells[i])
		if c > 0 || (strict && c == 0) {
			t.Fatalf("%s: cell %d %s not after cell %d %s", name, i, &cells[i], i-1, &cells[i-1])
		}
	}
}

func TestCorpusHudi(t *testing.T) {
	dir := filepath.Join(testenv.Corpus(t), "hudi")
	cases := []struct {
		file      string
		n         int
		levels    uint32
		codec     Codec
		key       func(i int) string
		nonUnique bool
	}{
		{"hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile", 5000, 1, CodecNone, nil, false},
		{"hudi_1_0_hbase_2_4_9_64KB_NONE_5000.hfile", 5000, 1, CodecNone, nil, false},
		{"hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile", 20000, 1, CodecGZ, nil, false},
		{"hudi_1_0_hbase_2_4_9_512KB_GZ_20000.hfile", 20000, 1, CodecGZ, nil, false},
		{"hudi_1_0_hbase_2_4_9_no_entry.hfile", 0, 1, CodecGZ, nil, false},
		{"hudi_1_0_hbase_2_4_9_16KB_GZ_200_20_non_unique.hfile", 4200, 1, CodecGZ, nil, true},
		{"hudi_1_0_hbase_2_4_13_16KB_GZ_20000_fake_first_key.hfile", 20000, 1, CodecGZ,
			func(i int) string { return fmt.Sprintf("hudi-key-%09d-abcdefghij", i) }, false},
		{"hudi_1_0_hbase_2_4_13_1KB_GZ_20000_large_keys.hfile", 20000, 2, CodecGZ,
			func(i int) string { return "hudi-key-" + strings.Repeat("a", 100) + fmt.Sprintf("-%09d", i) }, false},
		{"hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile", 10000, 3, CodecGZ,
			func(i int) string { return "hudi-key-" + strings.Repeat("a", 100) + fmt.Sprintf("-%09d", i) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			r, err := OpenFile(filepath.Join(dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			tr := r.Trailer()
			if r.Entries() != uint64(tc.n) || tr.Codec != tc.codec || tr.NumDataIndexLevels != tc.levels {
				t.Fatalf("trailer: entries %d codec %s levels %d, want %d %s %d", r.Entries(), tr.Codec, tr.NumDataIndexLevels, tc.n, tc.codec, tc.levels)
			}
			// The empty file comes from a different Hudi test and has
			// its own file info (schema, bloom filter meta block).
			if got := string(r.Info().Raw["hudi_hfile_testing.custom_key"]); tc.n > 0 && got != "hudi_custom_value" {
				t.Errorf("custom file info = %q", got)
			}
			cells, err := readAll(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(cells) != tc.n {
				t.Fatalf("read %d cells, want %d", len(cells), tc.n)
			}
			key := tc.key
			if key == nil {
				key = func(i int) string { return fmt.Sprintf("hudi-key-%09d", i) }
			}
			for i := range cells {
				c := &cells[i]
				k, v := key(i), fmt.Sprintf("hudi-value-%09d", i)
				if tc.nonUnique {
					j := i / 21
					k, v = key(j), fmt.Sprintf("hudi-value-%09d", j)
					if m := i % 21; m > 0 {
						v += fmt.Sprintf("_%d", m-1)
					}
				}
				if string(c.Row) != k || string(c.Value) != v || len(c.Family) != 0 || len(c.Qualifier) != 0 ||
					c.Timestamp != cell.LatestTimestamp || c.Type != cell.Put || c.Tags != nil {
					t.Fatalf("cell %d = %s value %q, want row %q value %q", i, c, c.Value, k, v)
				}
			}
			checkSorted(t, tc.file, cells, !tc.nonUnique)
			if tc.n == 0 {
				if _, ok := r.FirstKey(); ok {
					t.Error("FirstKey of an empty file")
				}
				return
			}
			first, _ := r.FirstKey()
			last, _ := r.LastKey()
			if !bytes.Equal(first, cell.AppendKey(nil, &cells[0])) || !bytes.Equal(last, cell.AppendKey(nil, &cells[len(cells)-1])) {
				t.Errorf("FirstKey/LastKey %x / %x do not match the first and last cells", first, last)
			}
			idx, err := r.DataIndex()
			if err != nil {
				t.Fatal(err)
			}
			if len(idx) == 0 || idx[0].Offset != tr.FirstDataBlockOffset || idx[len(idx)-1].Offset != tr.LastDataBlockOffset {
				t.Fatalf("data index of %d entries does not span the data section", len(idx))
			}
			checkSeeks(t, r, cells)
		})
	}
}

// checkSeeks seeks to every 37th cell, to keys between cells, and past the
// end, comparing with the full scan.
func checkSeeks(t *testing.T, r *Reader, cells []cell.Cell) {
	t.Helper()
	it := r.NewIterator()
	defer it.Close()
	for i := 0; i < len(cells); i += 37 {
		if !it.SeekGE(&cells[i]) {
			t.Fatalf("SeekGE(%s) found nothing: %v", &cells[i], it.Err())
		}
		// Duplicates: SeekGE lands on the first equal cell.
		j := i
		for j > 0 && cell.Compare(&cells[j-1], &cells[i]) == 0 {
			j--
		}
		if !sameCell(it.Cell(), &cells[j]) {
			t.Fatalf("SeekGE(%s) = %s, want %s", &cells[i], it.Cell(), &cells[j])
		}
		// A key just after cells[i]'s row sorts before the next row.
		next := cell.FirstOnRow(append(append([]byte(nil), cells[i].Row...), 0))
		k := sortSearch(cells, &next)
		ok := it.SeekGE(&next)
		if ok != (k < len(cells)) || (ok && !sameCell(it.Cell(), &cells[k])) {
			t.Fatalf("SeekGE(first on %q) = %v %v, want cell %d", next.Row, ok, it.Cell(), k)
		}
		if ok && k+1 < len(cells) {
			if !it.Next() || !sameCell(it.Cell(), &cells[k+1]) {
				t.Fatalf("Next after SeekGE = %v, want %s", it.Cell(), &cells[k+1])
			}
		}
	}
	past := cell.FirstOnRow(append(append([]byte(nil), cells[len(cells)-1].Row...), 0xff, 0xff))
	if it.SeekGE(&past) || it.Err() != nil {
		t.Fatalf("SeekGE past the end = %v, err %v", it.Cell(), it.Err())
	}
	before := cell.FirstOnRow(nil)
	if !it.SeekGE(&before) || !sameCell(it.Cell(), &cells[0]) {
		t.Fatalf("SeekGE(empty row) = %v", it.Cell())
	}
	checkBlocksEnd(t, r, cells)
}

// checkBlocksEnd checks BlocksEnd against where the cells lie: no cell
// sorting before the key is in a block at or past the offset it returns
// (a stream bounded there reads all a scan stopping at the key needs),
// and the offset lies in the data section.
func checkBlocksEnd(t *testing.T, r *Reader, cells []cell.Cell) {
	t.Helper()
	it := r.NewIterator()
	defer it.Close()
	var blockOf []int64
	for ok := it.First(); ok; ok = it.Next() {
		blockOf = append(blockOf, it.blockOff)
	}
	if it.Err() != nil || len(blockOf) != len(cells) {
		t.Fatalf("read %d cells (%v), want %d", len(blockOf), it.Err(), len(cells))
	}
	tr := r.Trailer()
	check := func(key *cell.Cell) {
		end, err := r.BlocksEnd(key)
		if err != nil {
			t.Fatalf("BlocksEnd(%s): %v", key, err)
		}
		if end <= int64(tr.FirstDataBlockOffset) || end > int64(tr.LoadOnOpenOffset) {
			t.Fatalf("BlocksEnd(%s) = %d, outside the data section (%d, %d]", key, end, tr.FirstDataBlockOffset, tr.LoadOnOpenOffset)
		}
		// The first cell in a block at or past end must not sort before key.
		j := sort.Search(len(blockOf), func(i int) bool { return blockOf[i] >= end })
		if j < len(cells) && cell.Compare(&cells[j], key) < 0 {
			t.Fatalf("BlocksEnd(%s) = %d, but cell %d (%s) sorts before the key and lies in the block at %d", key, end, j, &cells[j], blockOf[j])
		}
	}
	for i := 0; i < len(cells); i += 37 {
		check(&cells[i])
		next := cell.FirstOnRow(append(append([]byte(nil), cells[i].Row...), 0))
		check(&next)
	}
	past := cell.FirstOnRow(append(append([]byte(nil), cells[len(cells)-1].Row...), 0xff, 0xff))
	if end, err := r.BlocksEnd(&past); err != nil || end <= blockOf[len(blockOf)-1] {
		t.Fatalf("BlocksEnd past the last cell = %d, %v; want past the last block (at %d)", end, err, blockOf[len(blockOf)-1])
	}
}

func sortSearch(cells []cell.Cell, key *cell.Cell) int {
	lo, hi := 0, len(cells)
	for lo < hi {
		m := (lo + hi) / 2
		if cell.Compare(&cells[m], key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func sameCell(a, b *cell.Cell) bool {
	return a != nil && cell.Compare(a, b) == 0 && bytes.Equal(a.Value, b.Value) && bytes.Equal(a.Tags, b.Tags) && a.SeqID == b.SeqID
}

// rowValue checks the bigtable test tables' content: one cell per row,
// cf:a = "value<N>" where N is the row number.
func checkRowValue(t *testing.T, name string, cells []cell.Cell, ts int64) {
	t.Helper()
	for _, c := range cells {
		n, err := strconv.Atoi(string(c.Row))
		if err != nil || string(c.Family) != "cf" || string(c.Qualifier) != "a" || string(c.Value) != fmt.Sprintf("value%d", n) || c.Type != cell.Put {
			t.Fatalf("%s: unexpected cell %s value %q", name, &c, c.Value)
		}
		if ts != 0 && c.Timestamp != ts {
			t.Fatalf("%s: cell %s timestamp %d, want %d", name, &c, c.Timestamp, ts)
		}
	}
}

func TestCorpusBigtable(t *testing.T) {
	root := filepath.Join(testenv.Corpus(t), "bigtable")
	t.Run("EndToEndIT-snapshot.zip", func(t *testing.T) {
		files := storeFiles(testenv.ReadArchive(t, filepath.Join(root, "EndToEndIT-snapshot.zip")))
		if len(files) == 0 {
			t.Fatal("no store files in the archive")
		}
		rows := map[string]map[string]bool{}
		for _, f := range files {
			r, err := openBytes(t, f.Name, f.Data)
			if err != nil {
				t.Fatal(err)
			}
			want := CodecNone
			if strings.Contains(f.Name, "snappy") {
				want = CodecSnappy
			}
			if r.Trailer().Codec != want {
				t.Errorf("%s: codec %s, want %s", f.Name, r.Trailer().Codec, want)
			}
			cells, err := readAll(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if uint64(len(cells)) != r.Entries() {
				t.Fatalf("%s: %d cells, trailer says %d", f.Name, len(cells), r.Entries())
			}
			checkSorted(t, f.Name, cells, true)
			checkRowValue(t, f.Name, cells, 1617828990)
			table := strings.Split(f.Name, "/")[4]
			if rows[table] == nil {
				rows[table] = map[string]bool{}
			}
			for _, c := range cells {
				if len(c.Row) != 2 {
					t.Fatalf("%s: row %q is not two digits", f.Name, c.Row)
				}
				rows[table][string(c.Row)] = true
			}
		}
		for table, rs := range rows {
			if len(rs) != 100 {
				t.Errorf("%s: %d distinct rows over all archived files, want 100", table, len(rs))
			}
		}
	})
	for _, set := range []string{"src-test-data-2021", "src-test-integration-test-data-2022"} {
		t.Run(set, func(t *testing.T) {
			var paths []string
			filepath.WalkDir(filepath.Join(root, set), func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(p)) == "cf" && !strings.HasPrefix(d.Name(), ".") {
					paths = append(paths, p)
				}
				return nil
			})
			if len(paths) == 0 {
				t.Fatal("no store files")
			}
			rows := map[string]int{}
			for _, p := range paths {
				r, err := OpenFile(p)
				if err != nil {
					t.Fatal(err)
				}
				cells, err := readAll(t, r)
				r.Close()
				if err != nil {
					t.Fatal(err)
				}
				if uint64(len(cells)) != r.Entries() {
					t.Fatalf("%s: %d cells, trailer says %d", p, len(cells), r.Entries())
				}
				checkSorted(t, p, cells, true)
				var ts int64
				if strings.Contains(p, "demo-1") {
					ts = 1617828990
				}
				checkRowValue(t, p, cells, ts)
				for _, c := range cells {
					if strings.Contains(p, "/test/") {
						rows[string(c.Row)]++
					}
				}
			}
			if len(rows) != 100 {
				t.Errorf("table test: %d distinct rows, want 100 (\"1\"..\"100\")", len(rows))
			}
		})
	}
}

func TestCorpusPhoenix(t *testing.T) {
	root := filepath.Join(testenv.Corpus(t), "phoenix")
	for _, tc := range []struct {
		archive string
		enc     Encoding
		counts  []uint64
	}{
		{"snapshots47.tar", EncodingFastDiff, []uint64{1457, 48, 10}},
		{"indexToolsnapshot.tar", EncodingNone, []uint64{26}},
	} {
		t.Run(tc.archive, func(t *testing.T) {
			files := storeFiles(testenv.ReadArchive(t, filepath.Join(root, tc.archive)))
			var counts []uint64
			for _, f := range files {
				r, err := openBytes(t, f.Name, f.Data)
				if err != nil {
					t.Fatal(err)
				}
				if r.Info().Encoding != tc.enc {
					t.Errorf("%s: encoding %s, want %s", f.Name, r.Info().Encoding, tc.enc)
				}
				cells, err := readAll(t, r)
				if err != nil {
					t.Fatal(err)
				}
				if uint64(len(cells)) != r.Entries() {
					t.Fatalf("%s: %d cells, trailer says %d", f.Name, len(cells), r.Entries())
				}
				checkSorted(t, f.Name, cells, true)
				for _, c := range cells {
					if string(c.Family) != "0" {
						t.Fatalf("%s: family %q, want \"0\"", f.Name, c.Family)
					}
				}
				last, _ := r.LastKey()
				if !bytes.Equal(last, cell.AppendKey(nil, &cells[len(cells)-1])) {
					t.Errorf("%s: LASTKEY differs from the last cell", f.Name)
				}
				checkSeeks(t, r, cells)
				counts = append(counts, uint64(len(cells)))
			}
			if fmt.Sprint(sortedU64(counts)) != fmt.Sprint(sortedU64(tc.counts)) {
				t.Errorf("cell counts %v, want %v", counts, tc.counts)
			}
		})
	}
}

func sortedU64(v []uint64) []uint64 {
	out := append([]uint64(nil), v...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestCorpusCorruptBlock(t *testing.T) {
	root := filepath.Join(testenv.Corpus(t), "hbase")
	for _, name := range []string{"TestCompaction_HFileWithCorruptBlock.master.gz", "TestCompaction_HFileWithCorruptBlock.branch-2.5.gz"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(root, name))
			if err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			r, err := openBytes(t, name, data)
			if err != nil {
				t.Fatalf("trailer and file info are intact, Open failed: %v", err)
			}
			var lk cell.Cell
			last, _ := r.LastKey()
			if err := cell.ParseKey(last, &lk); err != nil || (strings.Contains(name, "master") && string(lk.Row) != "aay") {
				t.Errorf("LASTKEY row %q (%v), want \"aay\"", lk.Row, err)
			}
			cells, err := readAll(t, r)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("after %d cells: error %v, want ErrCorrupt", len(cells), err)
			}
			if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "DATABLK* block at offset") {
				t.Errorf("error does not name the file and block: %v", err)
			}
			t.Logf("%d cells before: %v", len(cells), err)
			checkSorted(t, name, cells, true)
		})
	}
}

func TestCorpusUnsupported(t *testing.T) {
	root := testenv.Corpus(t)
	check := func(t *testing.T, name string, data []byte) {
		t.Helper()
		_, err := openBytes(t, name, data)
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%s: error %v, want ErrUnsupported", name, err)
		}
		if !strings.Contains(err.Error(), "HFile v1") && !strings.Contains(err.Error(), "HFile v2.0") {
			t.Errorf("%s: error does not name the version: %v", name, err)
		}
	}
	for _, p := range []string{"hbase/8e8ab58dcf39412da19833fcd8f687ac", "quiver/pairs.hfile"} {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		check(t, p, data)
	}
	for _, a := range []string{"hbase/hbase-4388-root.dir.tgz", "hbase/TestMetaMigrationConvertToPB.tgz", "hbase/TestNamespaceUpgrade.tgz"} {
		t.Run(filepath.Base(a), func(t *testing.T) {
			files := storeFiles(testenv.ReadArchive(t, filepath.Join(root, a)))
			if len(files) < 10 {
				t.Fatalf("only %d store files found", len(files))
			}
			for _, f := range files {
				check(t, f.Name, f.Data)
			}
		})
	}
	// A legacy Reference file is not an HFile at all.
	p := "hbase/a6a6562b777440fd9c34885428f5cb61.21e75333ada3d5bafb34bb918f29576c"
	data, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openBytes(t, p, data); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Reference file: error %v, want ErrCorrupt", err)
	}
}
