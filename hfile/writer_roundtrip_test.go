package hfile

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// writeCells writes cells with the production Writer and returns the file.
func writeCells(tb testing.TB, cells []cell.Cell, o WriterOptions) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, o)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range cells {
		if err := w.Append(&cells[i]); err != nil {
			tb.Fatalf("cell %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	if got := w.Stats().Written; got != int64(buf.Len()) {
		tb.Fatalf("Stats().Written = %d, file is %d bytes", got, buf.Len())
	}
	return buf.Bytes()
}

// writerVariants are the option sets the writer round-trips; each
// combines with every encoding and codec.
var writerVariants = []struct {
	name      string
	o         WriterOptions
	tags, seq bool
}{
	{"plain", WriterOptions{}, false, false},
	{"tags+seqids", WriterOptions{Tags: true, SeqIDs: true}, true, true},
	{"compressed-tags", WriterOptions{Tags: true, CompressTags: true, SeqIDs: true}, true, true},
	{"empty-tags", WriterOptions{Tags: true}, false, false},
	{"small-blocks+2-level", WriterOptions{BlockSize: 2048, IndexBlockSize: 256, BytesPerChecksum: 512}, false, false},
	{"tiny-index+deep", WriterOptions{BlockSize: 512, IndexBlockSize: 64, Tags: true, SeqIDs: true}, true, true},
}

// TestWriterRoundTrip writes every encoding x codec x variant with the
// Writer and reads it back with the Reader: every cell, the file info a
// bulk load needs, and seeks through the written index.
func TestWriterRoundTrip(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 500
	}
	for vi, v := range writerVariants {
		cells := genCells(uint64(vi+40), n, v.tags, v.seq)
		for _, enc := range allEncodings {
			for _, cc := range allCodecs {
				if cc.plain {
					continue
				}
				o := v.o
				o.Encoding, o.Codec = enc, cc.codec
				t.Run(fmt.Sprintf("%s/%s/%s", v.name, enc, cc.name), func(t *testing.T) {
					data := writeCells(t, cells, o)
					r, err := openBytes(t, "written.hfile", data)
					if err != nil {
						t.Fatal(err)
					}
					got, err := readAll(t, r)
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(cells) {
						t.Fatalf("read %d cells, wrote %d", len(got), len(cells))
					}
					for i := range cells {
						want := cells[i]
						if !o.SeqIDs {
							want.SeqID = 0
						}
						if !sameCell(&got[i], &want) {
							t.Fatalf("cell %d: got %s tags %x seq %d value %.20q, want %s tags %x seq %d value %.20q", i, &got[i], got[i].Tags, got[i].SeqID, got[i].Value, &want, want.Tags, want.SeqID, want.Value)
						}
					}
					checkWrittenInfo(t, r, cells, o)
					if o.IndexBlockSize > 0 && o.IndexBlockSize < 100 && r.Trailer().NumDataIndexLevels < 3 {
						t.Fatalf("a %d-byte index block size gave %d index levels, want >= 3", o.IndexBlockSize, r.Trailer().NumDataIndexLevels)
					}
					if testing.Short() && vi > 1 {
						return
					}
					checkSeeks(t, r, got)
				})
			}
		}
	}
}

// checkWrittenInfo checks the trailer and file info against the cells.
func checkWrittenInfo(t *testing.T, r *Reader, cells []cell.Cell, o WriterOptions) {
	t.Helper()
	tr, fi := r.Trailer(), r.Info()
	codec := o.Codec
	if codec == CodecLZO {
		codec = CodecNone // the zero value
	}
	if tr.EntryCount != uint64(len(cells)) || tr.Codec != codec {
		t.Fatalf("trailer: %d entries, codec %s; want %d, %s", tr.EntryCount, tr.Codec, len(cells), codec)
	}
	if tr.MajorVersion != 3 || tr.MinorVersion != 3 || tr.ComparatorClassName != "org.apache.hadoop.hbase.KeyValue$KVComparator" {
		t.Fatalf("trailer version %d.%d comparator %q", tr.MajorVersion, tr.MinorVersion, tr.ComparatorClassName)
	}
	if fi.Encoding != o.Encoding || fi.IncludesTags != o.Tags || fi.IncludesMVCC != o.SeqIDs {
		t.Fatalf("file info: encoding %s tags %v mvcc %v; want %s %v %v", fi.Encoding, fi.IncludesTags, fi.IncludesMVCC, o.Encoding, o.Tags, o.SeqIDs)
	}
	fk, _ := r.FirstKey()
	lk, _ := r.LastKey()
	if !bytes.Equal(fk, cell.AppendKey(nil, &cells[0])) || !bytes.Equal(lk, cell.AppendKey(nil, &cells[len(cells)-1])) {
		t.Fatalf("first/last key %x / %x do not match the cells", fk, lk)
	}
	lo, hi := cell.LatestTimestamp, int64(-1)
	for i := range cells {
		lo, hi = min(lo, cells[i].Timestamp), max(hi, cells[i].Timestamp)
		if cells[i].Type == cell.DeleteColumn || cells[i].Type == cell.DeleteFamily {
			lo = 0
		}
	}
	if !fi.HasTimeRange || fi.TimeRangeMin != lo || fi.TimeRangeMax != hi {
		t.Fatalf("TIMERANGE %v [%d, %d], want [%d, %d]", fi.HasTimeRange, fi.TimeRangeMin, fi.TimeRangeMax, lo, hi)
	}
	if !fi.HasBulkLoadTS || !fi.MajorCompaction {
		t.Fatalf("file info lacks the bulk load marks: BULKLOAD_TIMESTAMP %v, MAJOR_COMPACTION_KEY %v", fi.HasBulkLoadTS, fi.MajorCompaction)
	}
}

func TestWriterRejectsOutOfOrder(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{}, WriterOptions{Name: "x.hfile"})
	if err != nil {
		t.Fatal(err)
	}
	a := cell.Cell{Row: []byte("b"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 5, Type: cell.Put}
	if err := w.Append(&a); err != nil {
		t.Fatal(err)
	}
	b := a
	b.Row = []byte("a")
	err = w.Append(&b)
	if !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("got %v, want ErrOutOfOrder", err)
	}
	for _, want := range []string{`"a"/f:"q"/5/Put`, `"b"/f:"q"/5/Put`, "x.hfile"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	// An older version of the same column is in order; a newer one is not.
	c := a
	c.Timestamp = 4
	if err := w.Append(&c); err != nil {
		t.Fatal(err)
	}
	c.Timestamp = 6
	if err := w.Append(&c); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("newer version after older: got %v", err)
	}
	d := c
	d.Timestamp, d.Family = 1, []byte("g")
	if err := w.Append(&d); err == nil {
		t.Fatal("a second family was accepted")
	}
	tagged := a
	tagged.Row, tagged.Tags = []byte("c"), tagBytes(1, "x")
	if err := w.Append(&tagged); err == nil {
		t.Fatal("a tagged cell was accepted by a writer without Tags")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWriterEmpty: a writer closed without cells leaves a valid HFile
// with no cells and no bounds.
func TestWriterEmpty(t *testing.T) {
	data := writeCells(t, nil, WriterOptions{Encoding: EncodingFastDiff, Codec: CodecGZ, Bloom: BloomRow})
	r, err := openBytes(t, "empty.hfile", data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r)
	if err != nil || len(got) != 0 || r.Entries() != 0 {
		t.Fatalf("empty file read %d cells (%d entries), err %v", len(got), r.Entries(), err)
	}
	if _, ok := r.FirstKey(); ok {
		t.Fatal("empty file has a first key")
	}
}

// TestWriterStats: the bounds and counts the sink hands to a bulk load.
func TestWriterStats(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{BlockSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.FirstRow != nil || s.Entries != 0 || s.Pending != 0 {
		t.Fatalf("fresh writer stats %+v", s)
	}
	for i, row := range []string{"b", "c", "c", "k"} {
		c := cell.Cell{Row: []byte(row), Family: []byte("f"), Qualifier: []byte{'q', '0' + byte(i)}, Timestamp: 1, Type: cell.Put, Value: bytes.Repeat([]byte("v"), 60)}
		if err := w.Append(&c); err != nil {
			t.Fatal(err)
		}
	}
	s := w.Stats()
	if string(s.FirstRow) != "b" || string(s.LastRow) != "k" || string(s.Family) != "f" || s.Entries != 4 || s.Written == 0 || s.Pending == 0 {
		t.Fatalf("stats %+v", s)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.Written != int64(buf.Len()) || s.Pending != 0 {
		t.Fatalf("after Close: written %d pending %d, file %d bytes", s.Written, s.Pending, buf.Len())
	}
	if err := w.Append(&cell.Cell{Row: []byte("z"), Family: []byte("f"), Type: cell.Put}); err == nil {
		t.Fatal("Append after Close succeeded")
	}
}

// TestWriterRollOver follows the roll-over rule StartsRow documents: files
// end at the first row boundary past the size limit, so every row lies in
// exactly one file, including a row bigger than the limit.
func TestWriterRollOver(t *testing.T) {
	const limit = 4 << 10
	var cells []cell.Cell
	for r := 0; r < 60; r++ {
		cols := 3
		if r == 17 {
			cols = 400 // one row far above the limit
		}
		for q := 0; q < cols; q++ {
			cells = append(cells, cell.Cell{Row: []byte(fmt.Sprintf("r%03d", r)), Family: []byte("f"), Qualifier: []byte(fmt.Sprintf("q%04d", q)), Timestamp: 7, Type: cell.Put, Value: bytes.Repeat([]byte{'v'}, 40)})
		}
	}
	var files []*bytes.Buffer
	var w *Writer
	for i := range cells {
		if w == nil || w.Size() >= limit && w.StartsRow(&cells[i]) {
			if w != nil {
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
			}
			files = append(files, &bytes.Buffer{})
			var err error
			if w, err = NewWriter(files[len(files)-1], WriterOptions{BlockSize: 1024}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Append(&cells[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("%d files, want several", len(files))
	}
	rowFile := map[string]int{}
	n := 0
	for k, f := range files {
		r, err := openBytes(t, fmt.Sprint(k), f.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !sameCell(&got[i], &cells[n]) {
				t.Fatalf("file %d cell %d: %s, want %s", k, i, &got[i], &cells[n])
			}
			n++
			row := string(got[i].Row)
			if prev, ok := rowFile[row]; ok && prev != k {
				t.Fatalf("row %s split across files %d and %d", row, prev, k)
			}
			rowFile[row] = k
		}
	}
	if n != len(cells) {
		t.Fatalf("read %d cells back, wrote %d", n, len(cells))
	}
}

// FuzzWriterRoundTrip: for any seed, encoding, codec, bloom and block and
// index sizes, what the Writer writes the Reader reads back cell for cell.
func FuzzWriterRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(0), uint8(0), uint16(300), uint16(64), true)
	f.Add(uint64(2), uint8(3), uint8(2), uint8(2), uint16(2000), uint16(200), false)
	f.Fuzz(func(t *testing.T, seed uint64, enc, codec, bloom uint8, block, index uint16, tags bool) {
		o := WriterOptions{
			Encoding:       allEncodings[int(enc)%len(allEncodings)],
			Codec:          writerCodecs[int(codec)%len(writerCodecs)],
			Bloom:          BloomType(bloom % 3),
			BlockSize:      int(block),
			IndexBlockSize: int(index),
			Tags:           tags,
			CompressTags:   seed%2 == 0,
			SeqIDs:         seed%3 == 0,
		}
		cells := genCells(seed, 200+int(seed%300), tags, o.SeqIDs)
		r, err := openBytes(t, "fuzz.hfile", writeCells(t, cells, o))
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(cells) {
			t.Fatalf("read %d cells, wrote %d", len(got), len(cells))
		}
		for i := range cells {
			if !sameCell(&got[i], &cells[i]) {
				t.Fatalf("cell %d: got %s, want %s", i, &got[i], &cells[i])
			}
		}
	})
}

// TestWriterFileInfo: extra file info entries land in the file; HBase's
// reserved "hfile." keys are refused.
func TestWriterFileInfo(t *testing.T) {
	c := cell.Cell{Row: []byte("r"), Family: []byte("f"), Timestamp: 3, Type: cell.Put}
	data := writeCells(t, []cell.Cell{c}, WriterOptions{FileInfo: map[string][]byte{"REKEY_JOB": []byte("job-1")}, SourceTask: "task-7", BulkLoadTime: 99})
	r, err := openBytes(t, "info.hfile", data)
	if err != nil {
		t.Fatal(err)
	}
	fi := r.Info()
	if string(fi.Raw["REKEY_JOB"]) != "job-1" || string(fi.Raw["BULKLOAD_SOURCE_TASK"]) != "task-7" || fi.BulkLoadTS != 99 {
		t.Fatalf("file info %q", fi.Raw)
	}
	if _, err := NewWriter(&bytes.Buffer{}, WriterOptions{FileInfo: map[string][]byte{"hfile.LASTKEY": nil}}); err == nil {
		t.Fatal("a reserved file info key was accepted")
	}
}
