package stage

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/vfs"
)

// A run file is an Arrow IPC file (random-access format, with a footer)
// holding cells sorted by (region, family, cell.Compare). Each record
// batch holds cells of one partition only, so the merge of one partition
// reads just its batches (RunPart.First, RunPart.Batches) and never the
// rest. Columns:
//
//	row binary, family binary, qualifier binary, ts int64, type uint8,
//	value binary, tags binary (null when the cell has none)
//
// Buffers are LZ4-frame or ZSTD compressed, as the writer was told.
var runSchema = arrow.NewSchema([]arrow.Field{
	{Name: "row", Type: arrow.BinaryTypes.Binary},
	{Name: "family", Type: arrow.BinaryTypes.Binary},
	{Name: "qualifier", Type: arrow.BinaryTypes.Binary},
	{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
	{Name: "type", Type: arrow.PrimitiveTypes.Uint8},
	{Name: "value", Type: arrow.BinaryTypes.Binary},
	{Name: "tags", Type: arrow.BinaryTypes.Binary, Nullable: true},
}, nil)

// RunPart locates one partition's cells inside a run file.
type RunPart struct {
	Region  int    `json:"region"`
	Family  string `json:"family"`
	First   int    `json:"first"`   // first record batch
	Batches int    `json:"batches"` // consecutive record batches
	Cells   int64  `json:"cells"`
	Bytes   int64  `json:"bytes"` // the cells' KeyValue size (cell.Size)
}

// runWriter writes one run file, one partition after another.
type runWriter struct {
	f          vfs.WriteFile
	w          *ipc.FileWriter
	b          *array.RecordBuilder
	batchBytes int64
	batch      int64 // bytes in the open batch
	rows       int   // cells in the open batch
	batches    int   // batches written
	parts      []RunPart
	cur        *RunPart
	count      countingWriter
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// newRunWriter starts a run file on f, compressing with codec "lz4" or
// "zstd" and cutting batches at batchBytes.
func newRunWriter(f vfs.WriteFile, codec string, batchBytes int64) (*runWriter, error) {
	rw := &runWriter{f: f, batchBytes: batchBytes}
	rw.count.w = f
	opts := []ipc.Option{ipc.WithSchema(runSchema), ipc.WithAllocator(memory.DefaultAllocator)}
	switch codec {
	case "", "lz4":
		opts = append(opts, ipc.WithLZ4())
	case "zstd":
		opts = append(opts, ipc.WithZstd())
	default:
		return nil, fmt.Errorf("stage: run compression %q: want lz4 or zstd", codec)
	}
	w, err := ipc.NewFileWriter(&rw.count, opts...)
	if err != nil {
		return nil, fmt.Errorf("stage: run file %s: %w", f.Name(), err)
	}
	rw.w = w
	rw.b = array.NewRecordBuilder(memory.DefaultAllocator, runSchema)
	return rw, nil
}

// add appends c to partition (region, family); partitions must come in
// order and cells in cell order within one.
func (rw *runWriter) add(region int, c *cell.Cell) error {
	if rw.cur == nil || rw.cur.Region != region || rw.cur.Family != string(c.Family) {
		if err := rw.flush(); err != nil {
			return err
		}
		rw.parts = append(rw.parts, RunPart{Region: region, Family: string(c.Family), First: rw.batches})
		rw.cur = &rw.parts[len(rw.parts)-1]
	}
	fs := rw.b.Fields()
	fs[0].(*array.BinaryBuilder).Append(c.Row)
	fs[1].(*array.BinaryBuilder).Append(c.Family)
	fs[2].(*array.BinaryBuilder).Append(c.Qualifier)
	fs[3].(*array.Int64Builder).Append(c.Timestamp)
	fs[4].(*array.Uint8Builder).Append(uint8(c.Type))
	fs[5].(*array.BinaryBuilder).Append(c.Value)
	if c.Tags == nil {
		fs[6].(*array.BinaryBuilder).AppendNull()
	} else {
		fs[6].(*array.BinaryBuilder).Append(c.Tags)
	}
	n := cell.Size(c)
	rw.cur.Cells++
	rw.cur.Bytes += n
	rw.batch += n
	rw.rows++
	if rw.batch >= rw.batchBytes {
		return rw.flush()
	}
	return nil
}

// flush writes the open batch, if any.
func (rw *runWriter) flush() error {
	if rw.rows == 0 {
		return nil
	}
	rec := rw.b.NewRecordBatch()
	defer rec.Release()
	if err := rw.w.Write(rec); err != nil {
		return fmt.Errorf("stage: run file %s: write batch %d: %w", rw.f.Name(), rw.batches, err)
	}
	rw.batches++
	rw.cur.Batches++
	rw.batch, rw.rows = 0, 0
	return nil
}

// close finishes the file (footer), syncs and closes it, and returns its
// partitions and size.
func (rw *runWriter) close() ([]RunPart, int64, error) {
	defer rw.b.Release()
	if err := rw.flush(); err != nil {
		rw.f.Close()
		return nil, 0, err
	}
	if err := rw.w.Close(); err != nil {
		rw.f.Close()
		return nil, 0, fmt.Errorf("stage: run file %s: footer: %w", rw.f.Name(), err)
	}
	if err := rw.f.Sync(); err != nil {
		rw.f.Close()
		return nil, 0, fmt.Errorf("stage: run file %s: sync: %w", rw.f.Name(), err)
	}
	if err := rw.f.Close(); err != nil {
		return nil, 0, fmt.Errorf("stage: run file %s: close: %w", rw.f.Name(), err)
	}
	return rw.parts, rw.count.n, nil
}

// abort closes the file without finishing it; the caller removes it.
func (rw *runWriter) abort() {
	rw.b.Release()
	rw.f.Close()
}

// runCursor reads the cells of one partition of one run file in order.
// The cell it returns points into the current batch and is valid until the
// next call of next.
type runCursor struct {
	name  string
	file  vfs.File
	r     *ipc.FileReader
	part  RunPart
	batch int // index within the partition of the loaded batch
	rec   arrow.RecordBatch
	i, n  int
	cols  struct {
		row, fam, qual, val, tags *array.Binary
		ts                        *array.Int64
		typ                       *array.Uint8
	}
	c   cell.Cell
	err error
	// seq orders cursors with equal cells (the run's position in the
	// merge), so collisions keep a deterministic winner.
	seq int
}

// openCursor opens partition part of the run file name.
func openCursor(fsys vfs.FS, name string, part RunPart, seq int) (*runCursor, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("stage: open run %s: %w", name, err)
	}
	r, err := ipc.NewFileReader(io.NewSectionReader(f, 0, f.Size()), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stage: run %s is not a readable Arrow IPC file (torn or overwritten?): %w", name, err)
	}
	if !r.Schema().Equal(runSchema) {
		r.Close()
		f.Close()
		return nil, fmt.Errorf("stage: run %s: schema %s is not a run file's", name, r.Schema())
	}
	if part.First+part.Batches > r.NumRecords() {
		r.Close()
		f.Close()
		return nil, fmt.Errorf("stage: run %s: partition %d/%s needs batches %d..%d but the file has %d (manifest and file disagree)",
			name, part.Region, part.Family, part.First, part.First+part.Batches-1, r.NumRecords())
	}
	return &runCursor{name: name, file: f, r: r, part: part, batch: -1, seq: seq}, nil
}

// next advances to the next cell; false at the end or on error (see err).
func (rc *runCursor) next() bool {
	for rc.i >= rc.n {
		if rc.err != nil || rc.batch+1 >= rc.part.Batches {
			return false
		}
		if !rc.load(rc.batch + 1) {
			return false
		}
	}
	i := rc.i
	rc.i++
	k := &rc.cols
	rc.c = cell.Cell{
		Row:       k.row.Value(i),
		Family:    k.fam.Value(i),
		Qualifier: k.qual.Value(i),
		Timestamp: k.ts.Value(i),
		Type:      cell.Type(k.typ.Value(i)),
		Value:     k.val.Value(i),
	}
	if k.tags.IsValid(i) {
		rc.c.Tags = k.tags.Value(i)
	}
	return true
}

func (rc *runCursor) load(b int) bool {
	if rc.rec != nil {
		rc.rec.Release()
		rc.rec = nil
	}
	idx := rc.part.First + b
	rec, err := rc.r.RecordBatchAt(idx)
	if err != nil {
		rc.err = fmt.Errorf("stage: run %s: batch %d: %w", rc.name, idx, err)
		return false
	}
	if rec.NumCols() != 7 {
		rec.Release()
		rc.err = fmt.Errorf("stage: run %s: batch %d has %d columns, want 7", rc.name, idx, rec.NumCols())
		return false
	}
	var ok [7]bool
	k := &rc.cols
	k.row, ok[0] = rec.Column(0).(*array.Binary)
	k.fam, ok[1] = rec.Column(1).(*array.Binary)
	k.qual, ok[2] = rec.Column(2).(*array.Binary)
	k.ts, ok[3] = rec.Column(3).(*array.Int64)
	k.typ, ok[4] = rec.Column(4).(*array.Uint8)
	k.val, ok[5] = rec.Column(5).(*array.Binary)
	k.tags, ok[6] = rec.Column(6).(*array.Binary)
	for j, o := range ok {
		if !o {
			rec.Release()
			rc.err = fmt.Errorf("stage: run %s: batch %d: column %d has the wrong type", rc.name, idx, j)
			return false
		}
	}
	rc.rec = rec
	rc.batch = b
	rc.i, rc.n = 0, int(rec.NumRows())
	return true
}

func (rc *runCursor) at() *cell.Cell { return &rc.c }
func (rc *runCursor) fail() error    { return rc.err }

func (rc *runCursor) close() error {
	if rc.rec != nil {
		rc.rec.Release()
		rc.rec = nil
	}
	rc.r.Close()
	return rc.file.Close()
}
