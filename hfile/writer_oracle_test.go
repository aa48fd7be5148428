package hfile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// Proof by HBase: files from our Writer are read by HBase's own HFile
// reader (the oracle's check-hfile, which also checks order, bounds, the
// bloom filter, the time range and seeks through the index), and one is
// bulk-loaded into a live table.

// dumpWithTags is the oracle's check-hfile --tags line for c: the
// canonical dump plus a column of the raw tags in hex.
func dumpWithTags(dst []byte, c *cell.Cell) []byte {
	dst = cell.AppendDump(dst, c)
	dst = append(dst[:len(dst)-1], '\t')
	dst = hex.AppendEncode(dst, c.Tags)
	return append(dst, '\n')
}

// checkedFile is one file's section of check-hfile's output.
type checkedFile struct {
	facts map[string]string // "# key value" lines
	info  map[string]string // "# info KEY HEX" lines
	cells []byte
}

// runCheckHFile runs the oracle's check-hfile --tags over paths and splits
// its output by file.
func runCheckHFile(t *testing.T, paths ...string) map[string]*checkedFile {
	t.Helper()
	out := testenv.Oracle(t, append([]string{"check-hfile", "--tags"}, paths...)...)
	files := map[string]*checkedFile{}
	var cur *checkedFile
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# file "); ok {
			cur = &checkedFile{facts: map[string]string{}, info: map[string]string{}}
			files[strings.TrimPrefix(rest, "file:")] = cur
			continue
		}
		if cur == nil {
			t.Fatalf("check-hfile output starts with %q", line)
		}
		if rest, ok := strings.CutPrefix(line, "# info "); ok {
			k, v, _ := strings.Cut(rest, " ")
			cur.info[k] = v
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			k, v, _ := strings.Cut(rest, " ")
			cur.facts[k] = v
			continue
		}
		cur.cells = append(append(cur.cells, line...), '\n')
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return files
}

// writeFile writes cells to a local file with the Writer.
func writeFile(t *testing.T, p string, cells []cell.Cell, o WriterOptions) Stats {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 256<<10)
	o.Name = p
	w, err := NewWriter(bw, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cells {
		if err := w.Append(&cells[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return w.Stats()
}

// writerCodecs are the codecs the Writer compresses with.
var writerCodecs = []Codec{CodecNone, CodecGZ, CodecSnappy, CodecLZ4, CodecZstd}

// TestWriterOracle writes every encoding x codec x bloom filter and has
// HBase's reader check and dump each file: the cells (with their tags)
// must be exactly those appended, and the facts HBase reads (entries,
// encoding, codec, tags, bounds, bloom type, bulk-load file info) must be
// what was asked for. The cells have tags (dictionary-compressed in half
// the encoded files), empty values, deletes of every kind, values of
// several hundred KB and one of 1 MiB in the files without a bloom.
func TestWriterOracle(t *testing.T) {
	testenv.Require(t)
	dir := t.TempDir()
	base := genCells(77, 1500, true, false)
	big := cell.Cell{Row: []byte("zz-big"), Family: []byte("cf"), Qualifier: []byte("mib"), Timestamp: 42, Type: cell.Put, Value: bytes.Repeat([]byte("0123456789abcdef"), 1<<16)}
	type fileCase struct {
		o     WriterOptions
		cells []cell.Cell
		stats Stats
	}
	cases := map[string]*fileCase{}
	var paths []string
	i := 0
	for _, enc := range allEncodings {
		for _, codec := range writerCodecs {
			for _, bloom := range []BloomType{BloomNone, BloomRow, BloomRowCol} {
				i++
				o := WriterOptions{Encoding: enc, Codec: codec, Bloom: bloom, Tags: true, CompressTags: i%2 == 0, SeqIDs: i%3 == 0, BlockSize: 8 << 10, BulkLoadTime: 1700000000123}
				cells := base
				if bloom == BloomNone {
					cells = append(append([]cell.Cell(nil), base...), big)
				}
				p := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.hfile", enc, codec, bloom))
				fc := &fileCase{o: o, cells: cells}
				fc.stats = writeFile(t, p, cells, o)
				cases[p] = fc
				paths = append(paths, p)
			}
		}
	}
	got := runCheckHFile(t, paths...)
	for _, p := range paths {
		fc := cases[p]
		t.Run(filepath.Base(p), func(t *testing.T) {
			cf := got[p]
			if cf == nil {
				t.Fatalf("check-hfile printed nothing for %s", p)
			}
			var want []byte
			for j := range fc.cells {
				want = dumpWithTags(want, &fc.cells[j])
			}
			sameDump(t, p, cf.cells, want)
			codec := fc.o.Codec.String()
			if fc.o.Codec == CodecNone {
				codec = "NONE"
			}
			facts := map[string]string{
				"version":       "3.3",
				"entries":       strconv.Itoa(len(fc.cells)),
				"encoding":      fc.o.Encoding.String(),
				"codec":         codec,
				"includes_tags": "true",
				"includes_mvcc": strconv.FormatBool(fc.o.SeqIDs),
				"bloom":         fc.o.Bloom.String(),
				"first_row":     hex.EncodeToString(fc.stats.FirstRow),
				"last_row":      hex.EncodeToString(fc.stats.LastRow),
				"checked":       fmt.Sprintf("%d cells ok", len(fc.cells)),
			}
			if !strings.HasSuffix(cf.facts["checksums"], " blocks ok") {
				t.Errorf("HBase's checksum check says %q", cf.facts["checksums"])
			}
			for k, v := range facts {
				if cf.facts[k] != v {
					t.Errorf("HBase reads %s = %q, want %q", k, cf.facts[k], v)
				}
			}
			if fc.stats.Entries != int64(len(fc.cells)) || !bytes.Equal(fc.stats.FirstRow, fc.cells[0].Row) || !bytes.Equal(fc.stats.LastRow, fc.cells[len(fc.cells)-1].Row) {
				t.Errorf("Stats %d cells, rows %q..%q do not describe the cells", fc.stats.Entries, fc.stats.FirstRow, fc.stats.LastRow)
			}
			info := map[string]string{
				"BULKLOAD_TIMESTAMP":            "0000018bcfe5687b",
				"BULKLOAD_SOURCE_TASK":          hex.EncodeToString([]byte("rekey")),
				"MAJOR_COMPACTION_KEY":          "ff",
				"EXCLUDE_FROM_MINOR_COMPACTION": "00",
				"hfile.LASTKEY":                 hex.EncodeToString(cell.AppendKey(nil, &fc.cells[len(fc.cells)-1])),
			}
			for k, v := range info {
				if cf.info[k] != v {
					t.Errorf("file info %s = %q, want %q", k, cf.info[k], v)
				}
			}
		})
	}
}

// TestWriterOracleChecksums has HBase verify the CRC32C checksums of
// every block the Writer wrote, and shows the check is real: one flipped
// bit in a data block and HBase's checksum code refuses the file.
func TestWriterOracleChecksums(t *testing.T) {
	testenv.Require(t)
	dir := t.TempDir()
	data := writeCells(t, genCells(5, 2000, true, false), WriterOptions{Encoding: EncodingDiff, Codec: CodecGZ, Bloom: BloomRow, Tags: true, BlockSize: 4096, BytesPerChecksum: 1024})
	good, bad := filepath.Join(dir, "good.hfile"), filepath.Join(dir, "bad.hfile")
	if err := os.WriteFile(good, data, 0o644); err != nil {
		t.Fatal(err)
	}
	data[100] ^= 1
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if f := runCheckHFile(t, good)[good]; f == nil || !strings.HasSuffix(f.facts["checksums"], " blocks ok") {
		t.Fatalf("HBase's checksum check of the good file: %v", f)
	}
	_, err := testenv.RunOracle("check-hfile", bad)
	if err == nil || !strings.Contains(err.Error(), "checksum check fails for the DATABLKE block at offset 0") {
		t.Fatalf("a flipped bit: check-hfile says %v", err)
	}
}

// TestWriterOracleBigRow writes one row of a million cells (FAST_DIFF,
// ZSTD, a ROWCOL bloom, a 3-level index) and has HBase read it back.
func TestWriterOracleBigRow(t *testing.T) {
	testenv.Require(t)
	const n = 1_000_000
	mk := func(i int, c *cell.Cell, q, v []byte) {
		q = fmt.Appendf(q[:0], "q%07d", i)
		v = fmt.Appendf(v[:0], "v%d", i%1000)
		*c = cell.Cell{Row: []byte("the-wide-row"), Family: []byte("f"), Qualifier: q, Timestamp: 1700000000000, Type: cell.Put, Value: v}
	}
	p := filepath.Join(t.TempDir(), "bigrow.hfile")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := NewWriter(bw, WriterOptions{Name: p, Encoding: EncodingFastDiff, Codec: CodecZstd, Bloom: BloomRowCol, BlockSize: 4 << 10, IndexBlockSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var c cell.Cell
	var q, v []byte
	for i := 0; i < n; i++ {
		mk(i, &c, q, v)
		q, v = c.Qualifier, c.Value
		if err := w.Append(&c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "testenv", "bin", "oracle"), "check-hfile", p)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	i := 0
	var want []byte
	facts := map[string]string{}
	for sc.Scan() {
		line := sc.Bytes()
		if rest, ok := bytes.CutPrefix(line, []byte("# ")); ok {
			k, v, _ := strings.Cut(string(rest), " ")
			facts[k] = v
			continue
		}
		mk(i, &c, q, v)
		q, v = c.Qualifier, c.Value
		want = cell.AppendDump(want[:0], &c)
		if !bytes.Equal(append(line, '\n'), want) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("cell %d: HBase read %q, wrote %q", i, line, want)
		}
		i++
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("check-hfile: %v\n%s", err, stderr.String())
	}
	if i != n || facts["checked"] != fmt.Sprintf("%d cells ok", n) || facts["bloom"] != "ROWCOL" {
		t.Fatalf("HBase read %d cells (facts %v), wrote %d", i, facts, n)
	}
	if lv, _ := strconv.Atoi(facts["index_levels"]); lv < 3 {
		t.Errorf("a million cells in 4 KiB blocks with 4 KiB index blocks gave a %d-level index, want >= 3", lv)
	}
}

// TestWriterBulkLoad writes an HFile with the Writer straight to the
// cluster's HDFS, bulk-loads it through the hbase client with the bounds
// the Writer reports, and compares HBase's dump of the table with the
// cells written.
func TestWriterBulkLoad(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum, ZNodeParent: st.ZNodeParent, OperationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	table := fmt.Sprintf("writer_bulk_%d", time.Now().UnixNano())
	if err := c.CreateTable(ctx, hbase.TableSpec{Name: table, Families: []hbase.Family{{Name: "f"}}, SplitKeys: [][]byte{[]byte("m")}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.DisableTable(ctx, table); err == nil {
			c.DeleteTable(ctx, table)
		}
	}()
	// Two files, one per region: puts of one version each, so the table
	// dump shows exactly the cells written. Some values are empty, one is
	// 1 MiB.
	var lo, hi []cell.Cell
	for i := 0; i < 4000; i++ {
		for j := 0; j < 3; j++ {
			row := fmt.Sprintf("%c%05d", 'a'+byte(i%26), i)
			v := []byte(fmt.Sprintf("value-%d-%d", i, j))
			if (i+j)%17 == 0 {
				v = nil
			}
			if i == 123 && j == 1 {
				v = bytes.Repeat([]byte{'V'}, 1<<20)
			}
			x := cell.Cell{Row: []byte(row), Family: []byte("f"), Qualifier: []byte{'q', '0' + byte(j)}, Timestamp: 1700000000000 + int64(i), Type: cell.Put, Value: v}
			if row < "m" {
				lo = append(lo, x)
			} else {
				hi = append(hi, x)
			}
		}
	}
	for _, cs := range [][]cell.Cell{lo, hi} {
		sortCells(cs)
	}
	fs, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{st.NameNode}, User: hdfsUser()})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	staging := fmt.Sprintf("/user/%s/writer-bulk-%d/f", hdfsUser(), time.Now().UnixNano())
	if err := fs.MkdirAll(staging, 0o777); err != nil {
		t.Fatal(err)
	}
	defer fs.RemoveAll(path.Dir(staging))
	var files []hbase.BulkFile
	for k, cs := range [][]cell.Cell{lo, hi} {
		p := path.Join(staging, fmt.Sprintf("file%d", k))
		out, err := fs.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		bw := bufio.NewWriterSize(out, 1<<20)
		w, err := NewWriter(bw, WriterOptions{Name: p, Encoding: EncodingFastDiff, Codec: CodecGZ, Bloom: BloomRow, Tags: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range cs {
			if err := w.Append(&cs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			err := out.Close()
			if err == nil {
				break
			}
			if !errors.Is(err, hdfs.ErrReplicating) || i == 50 {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		s := w.Stats()
		files = append(files, hbase.BulkFile{Family: s.Family, Path: p, FirstRow: s.FirstRow, LastRow: s.LastRow})
	}
	if err := c.BulkLoad(ctx, table, files); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, cs := range [][]cell.Cell{lo, hi} {
		for i := range cs {
			want = cell.AppendDump(want, &cs[i])
		}
	}
	sameDump(t, "table "+table, testenv.Oracle(t, "dump-table", table), want)
}

func sortCells(cs []cell.Cell) {
	slices.SortFunc(cs, func(a, b cell.Cell) int { return cell.Compare(&a, &b) })
}
