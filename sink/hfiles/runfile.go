package hfiles

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/vfs"
)

// A run file holds cells sorted by (region, family, cell.Compare), one
// partition after another, in blocks that each hold cells of one
// partition only, so the merge of one partition reads just its byte range
// (RunPart.Offset, RunPart.Length) and never the rest. The format is
// rekey's own, made to cost little to write and read back: a spilled cell
// is written once and read once, so what matters is the work per cell,
// not what other tools can open. (It replaced Arrow IPC files, whose
// per-column builders and per-buffer compression cost more than writing
// the HFiles did.)
//
// The file starts with a 16-byte header: the magic runMagic, then the
// codec byte, then zeros. Then the blocks, each a 16-byte header of four
// little-endian uint32 (the stored payload's length, the raw length, the
// cells in the block, the CRC-32C of the raw bytes) and the payload: the
// raw bytes compressed by the file's codec. The raw bytes are the cells
// back to back, each:
//
//	uvarint  bytes of the row shared with the previous cell's (0 first)
//	uvarint  length of the rest of the row, then those bytes
//	uvarint  qualifier length, qualifier
//	varint   timestamp minus the previous cell's (the first: minus 0)
//	byte     type
//	uvarint  value length, value
//	uvarint  0 for no tags, else tags length + 1, then the tags
//
// The family is the partition's (RunPart.Family). Nothing in a file says
// where it ends: the split record that names it holds its size and each
// partition's range, cells and bytes, and a reader checks all of them, so
// a file cut short, overwritten or damaged fails instead of giving fewer
// cells.
const (
	runMagic       = "RKRUN\x00\x01\n"
	runHeaderSize  = 16
	blockHeadSize  = 16
	maxRunBlockRaw = 1 << 30 // no block is written larger
)

// arrowMagic opens the Arrow IPC run files earlier rekey versions wrote.
const arrowMagic = "ARROW1"

// Run file codecs, as the header's codec byte says.
const (
	codecNone byte = iota
	codecS2
	codecLZ4
	codecZstd
)

// runCodec returns the codec byte of a RunCompression name.
func runCodec(name string) (byte, error) {
	switch name {
	case "", "s2":
		return codecS2, nil
	case "lz4":
		return codecLZ4, nil
	case "zstd":
		return codecZstd, nil
	case "none":
		return codecNone, nil
	}
	return 0, fmt.Errorf("hfiles: run compression %q: want s2, lz4, zstd or none", name)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The zstd coder's EncodeAll and DecodeAll may be called from many
// goroutines at once; one of each serves the process.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRunBlockRaw))
		return d
	})
)

// RunPart locates one partition's cells inside a run file.
type RunPart struct {
	Region  int    `json:"region"`
	Family  string `json:"family"`
	Offset  int64  `json:"offset"`  // where its first block starts
	Length  int64  `json:"length"`  // the bytes of its blocks
	Batches int    `json:"batches"` // its blocks
	Cells   int64  `json:"cells"`
	Bytes   int64  `json:"bytes"` // the cells' KeyValue size (cell.Size)
}

// runWriter writes one run file, one partition after another.
type runWriter struct {
	f vfs.WriteFile
	// publish closes f once it is whole (f.Close unless the sink fences
	// it: Sink.publish).
	publish    func() error
	codec      byte
	batchBytes int64
	raw        []byte // the open block's cells
	out        []byte // a block's header and stored payload
	lz4        lz4.Compressor
	rows       uint32 // cells in the open block
	prevRow    []byte // a copy of the open block's last row
	prevTS     int64
	parts      []RunPart
	cur        *RunPart
	count      countingWriter
}

// countingWriter counts the bytes that reached a file. For an open HFile
// it also keeps them in the sink's total of open HFiles (total), so a
// staging folder that fills says what it holds, the files still being
// written included; that total moves per buffer flushed, not per cell.
type countingWriter struct {
	w     io.Writer
	n     int64
	total *atomic.Int64 // nil for run files
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.total != nil {
		c.total.Add(int64(n))
	}
	return n, err
}

// closed takes a finished or dropped file's bytes out of the total.
func (c *countingWriter) closed() {
	if c.total != nil {
		c.total.Add(-c.n)
	}
	c.n = 0
}

// newRunWriter starts a run file on f, compressing with codec (a
// RunCompression name) and cutting blocks at batchBytes of cells.
func newRunWriter(f vfs.WriteFile, codec string, batchBytes int64) (*runWriter, error) {
	cb, err := runCodec(codec)
	if err != nil {
		return nil, err
	}
	batchBytes = min(max(batchBytes, 4<<10), maxRunBlockRaw/2)
	rw := &runWriter{f: f, publish: f.Close, codec: cb, batchBytes: batchBytes}
	rw.count.w = f
	var head [runHeaderSize]byte
	copy(head[:], runMagic)
	head[len(runMagic)] = cb
	if _, err := rw.count.Write(head[:]); err != nil {
		return nil, fmt.Errorf("hfiles: run file %s: write header: %w", f.Name(), err)
	}
	return rw, nil
}

// add appends c to partition (region, family); partitions must come in
// order and cells in cell order within one.
func (rw *runWriter) add(region int, c *cell.Cell) error {
	if rw.cur == nil || rw.cur.Region != region || rw.cur.Family != string(c.Family) {
		if err := rw.flush(); err != nil {
			return err
		}
		rw.parts = append(rw.parts, RunPart{Region: region, Family: string(c.Family), Offset: rw.count.n})
		rw.cur = &rw.parts[len(rw.parts)-1]
	}
	if rw.raw == nil {
		rw.raw = make([]byte, 0, rw.batchBytes+rw.batchBytes/8)
	}
	shared := 0
	if rw.rows > 0 {
		n := min(len(rw.prevRow), len(c.Row))
		for shared < n && rw.prevRow[shared] == c.Row[shared] {
			shared++
		}
	}
	b := rw.raw
	b = binary.AppendUvarint(b, uint64(shared))
	b = binary.AppendUvarint(b, uint64(len(c.Row)-shared))
	b = append(b, c.Row[shared:]...)
	b = binary.AppendUvarint(b, uint64(len(c.Qualifier)))
	b = append(b, c.Qualifier...)
	b = binary.AppendVarint(b, c.Timestamp-rw.prevTS)
	b = append(b, byte(c.Type))
	b = binary.AppendUvarint(b, uint64(len(c.Value)))
	b = append(b, c.Value...)
	if c.Tags == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(c.Tags))+1)
		b = append(b, c.Tags...)
	}
	rw.raw = b
	rw.prevRow = append(rw.prevRow[:shared], c.Row[shared:]...)
	rw.prevTS = c.Timestamp
	rw.rows++
	rw.cur.Cells++
	rw.cur.Bytes += cell.Size(c)
	if int64(len(rw.raw)) >= rw.batchBytes {
		return rw.flush()
	}
	return nil
}

// flush writes the open block, if any.
func (rw *runWriter) flush() error {
	if rw.rows == 0 {
		return nil
	}
	raw := rw.raw
	if len(raw) > maxRunBlockRaw {
		return fmt.Errorf("hfiles: run file %s: a block of %d bytes (one cell larger than %d?)", rw.f.Name(), len(raw), maxRunBlockRaw)
	}
	out := rw.out[:0]
	if need := blockHeadSize + s2.MaxEncodedLen(len(raw)); cap(out) < need {
		out = make([]byte, 0, max(need, lz4.CompressBlockBound(len(raw))+blockHeadSize))
	}
	out = out[:blockHeadSize]
	payload := raw
	switch rw.codec {
	case codecS2:
		payload = s2.Encode(out[blockHeadSize:cap(out)], raw)
	case codecLZ4:
		n, err := rw.lz4.CompressBlock(raw, out[blockHeadSize:cap(out)])
		if err != nil {
			return fmt.Errorf("hfiles: run file %s: lz4: %w", rw.f.Name(), err)
		}
		if n > 0 && n < len(raw) {
			payload = out[blockHeadSize : blockHeadSize+n]
		} else {
			// Incompressible (lz4 says so with 0): the block is stored
			// raw, which its equal lengths say to the reader.
			payload = raw
		}
	case codecZstd:
		payload = zstdEncoder().EncodeAll(raw, out[blockHeadSize:blockHeadSize])
	}
	head := out[:blockHeadSize]
	binary.LittleEndian.PutUint32(head[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(head[4:], uint32(len(raw)))
	binary.LittleEndian.PutUint32(head[8:], rw.rows)
	binary.LittleEndian.PutUint32(head[12:], crc32.Checksum(raw, castagnoli))
	var err error
	if len(payload) > 0 && &payload[0] == &out[blockHeadSize:cap(out)][0] {
		_, err = rw.count.Write(out[:blockHeadSize+len(payload)])
	} else {
		if _, err = rw.count.Write(head); err == nil {
			_, err = rw.count.Write(payload)
		}
	}
	if err != nil {
		return fmt.Errorf("hfiles: run file %s: write block %d: %w", rw.f.Name(), rw.cur.Batches, err)
	}
	rw.out = out
	rw.cur.Batches++
	rw.cur.Length = rw.count.n - rw.cur.Offset
	rw.raw = rw.raw[:0]
	rw.rows, rw.prevRow, rw.prevTS = 0, rw.prevRow[:0], 0
	return nil
}

// close finishes the file, syncs and closes it, and returns its
// partitions and size.
func (rw *runWriter) close() ([]RunPart, int64, error) {
	if err := rw.flush(); err != nil {
		vfs.Abort(rw.f)
		return nil, 0, err
	}
	if err := rw.f.Sync(); err != nil {
		vfs.Abort(rw.f)
		return nil, 0, fmt.Errorf("hfiles: run file %s: sync: %w", rw.f.Name(), err)
	}
	if err := rw.publish(); err != nil {
		return nil, 0, fmt.Errorf("hfiles: run file %s: close: %w", rw.f.Name(), err)
	}
	return rw.parts, rw.count.n, nil
}

// abort drops the file without finishing it (unpublished on an object
// store); the caller removes it.
func (rw *runWriter) abort() {
	vfs.Abort(rw.f)
}

// runCursor reads the cells of one partition of one run file in order.
// The cell it returns points into the current block and is valid until
// the next call of next.
type runCursor struct {
	name   string
	file   vfs.File
	codec  byte
	part   RunPart
	family []byte

	pos, end int64  // the next block's offset; the partition's end
	head     []byte // the next block's header, when read ahead
	buf      []byte // a block's stored payload and the next header
	blk      []byte // the current block's raw bytes
	raw      []byte // those of them not decoded yet
	left     uint32 // cells of the current block not read yet
	blocks   int
	cells    int64
	bytes    int64
	row      []byte
	prevTS   int64

	c   cell.Cell
	err error
	// seq orders cursors with equal cells (the run's position in the
	// merge), so collisions keep a deterministic winner.
	seq int
}

// errRunFormat is a run file written by an earlier rekey (Arrow IPC).
var errRunFormat = errors.New("hfiles: run file in an earlier rekey's format")

// openCursor opens partition part of the run file name, whose record says
// it holds size bytes (0: not recorded, a merge pass's own output).
func openCursor(fsys vfs.FS, name string, size int64, part RunPart, seq int) (*runCursor, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("hfiles: open run %s: %w", name, err)
	}
	rc, err := startCursor(f, name, size, part, seq)
	if err != nil {
		f.Close()
		return nil, err
	}
	return rc, nil
}

func startCursor(f vfs.File, name string, size int64, part RunPart, seq int) (*runCursor, error) {
	if size > 0 && f.Size() != size {
		return nil, fmt.Errorf("hfiles: run %s holds %d bytes, its record says %d (torn or overwritten?)", name, f.Size(), size)
	}
	var head [runHeaderSize]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("hfiles: run %s: read header: %w (torn?)", name, err)
	}
	if bytes.HasPrefix(head[:], []byte(arrowMagic)) {
		return nil, fmt.Errorf("%w: %s is an Arrow IPC run, which this rekey no longer reads; stage into a fresh folder (or finish the job with the rekey that staged it)", errRunFormat, name)
	}
	if string(head[:len(runMagic)]) != runMagic || head[len(runMagic)] > codecZstd || !allZero(head[len(runMagic)+1:]) {
		return nil, fmt.Errorf("hfiles: run %s is not a run file (header %q)", name, head[:])
	}
	if part.Offset < runHeaderSize || part.Length < 0 || part.Offset+part.Length > f.Size() || (part.Cells > 0) != (part.Length > 0) {
		return nil, fmt.Errorf("hfiles: run %s: partition %d/%s at %d+%d (%d cells), but the file has %d bytes (record and file disagree)",
			name, part.Region, part.Family, part.Offset, part.Length, part.Cells, f.Size())
	}
	return &runCursor{name: name, file: f, codec: head[len(runMagic)], part: part, family: []byte(part.Family),
		pos: part.Offset, end: part.Offset + part.Length, seq: seq}, nil
}

// next advances to the next cell; false at the end or on error (see err).
func (rc *runCursor) next() bool {
	if rc.err != nil {
		return false
	}
	for rc.left == 0 {
		if len(rc.raw) != 0 {
			rc.err = rc.fault("%d bytes after the block's last cell", len(rc.raw))
			return false
		}
		if rc.pos >= rc.end {
			rc.err = rc.finish()
			return false
		}
		if !rc.load() {
			return false
		}
	}
	if err := rc.decode(); err != nil {
		rc.err = err
		return false
	}
	rc.left--
	rc.cells++
	rc.bytes += cell.Size(&rc.c)
	return true
}

// finish checks the partition read in full against its record.
func (rc *runCursor) finish() error {
	if rc.cells != rc.part.Cells || rc.bytes != rc.part.Bytes || rc.blocks != rc.part.Batches {
		return fmt.Errorf("hfiles: run %s: partition %d/%s gave %d cells (%d bytes) in %d blocks, its record says %d (%d bytes) in %d (damaged run or record)",
			rc.name, rc.part.Region, rc.part.Family, rc.cells, rc.bytes, rc.blocks, rc.part.Cells, rc.part.Bytes, rc.part.Batches)
	}
	return nil
}

func (rc *runCursor) fault(format string, args ...any) error {
	return fmt.Errorf("hfiles: run %s: partition %d/%s, block at %d: %s (damaged run)", rc.name, rc.part.Region, rc.part.Family, rc.pos, fmt.Sprintf(format, args...))
}

// load reads and checks the block at pos, with the next block's header
// in the same read when the partition has one.
func (rc *runCursor) load() bool {
	if rc.head == nil {
		if rc.end-rc.pos < blockHeadSize {
			rc.err = rc.fault("partition ends %d bytes into a block header", rc.end-rc.pos)
			return false
		}
		h := make([]byte, blockHeadSize)
		if _, err := rc.file.ReadAt(h, rc.pos); err != nil {
			rc.err = rc.fault("read block header: %v", err)
			return false
		}
		rc.head = h
	}
	stored := int64(binary.LittleEndian.Uint32(rc.head[0:]))
	rawLen := int(binary.LittleEndian.Uint32(rc.head[4:]))
	n := binary.LittleEndian.Uint32(rc.head[8:])
	sum := binary.LittleEndian.Uint32(rc.head[12:])
	bodyAt := rc.pos + blockHeadSize
	if stored > rc.end-bodyAt || rawLen > maxRunBlockRaw || n == 0 || int64(n) > int64(rawLen) {
		rc.err = rc.fault("header says %d bytes stored, %d raw, %d cells; %d bytes left in the partition", stored, rawLen, n, rc.end-bodyAt)
		return false
	}
	read := stored
	nextHead := rc.end-(bodyAt+stored) >= blockHeadSize
	if nextHead {
		read += blockHeadSize
	}
	if int64(cap(rc.buf)) < read {
		rc.buf = make([]byte, read)
	}
	buf := rc.buf[:read]
	if _, err := rc.file.ReadAt(buf, bodyAt); err != nil {
		rc.err = rc.fault("read %d bytes: %v", read, err)
		return false
	}
	payload := buf[:stored]
	raw, err := rc.decompress(payload, rawLen)
	if err != nil {
		rc.err = rc.fault("%v", err)
		return false
	}
	if crc32.Checksum(raw, castagnoli) != sum {
		rc.err = rc.fault("checksum mismatch")
		return false
	}
	if nextHead {
		rc.head = append(rc.head[:0], buf[stored:]...)
	} else {
		rc.head = nil
	}
	rc.raw, rc.left = raw, n
	rc.pos = bodyAt + stored
	rc.blocks++
	rc.row, rc.prevTS = rc.row[:0], 0
	return true
}

// decompress returns the raw bytes of a block's payload.
func (rc *runCursor) decompress(payload []byte, rawLen int) ([]byte, error) {
	if rc.codec == codecNone || (rc.codec == codecLZ4 && len(payload) == rawLen) {
		if len(payload) != rawLen {
			return nil, fmt.Errorf("stored %d bytes of a %d-byte block", len(payload), rawLen)
		}
		// The payload is the block; keep it apart from buf, which the
		// next load overwrites while a cell may still point here.
		rc.blk = append(rc.blk[:0], payload...)
		return rc.blk, nil
	}
	if rc.codec == codecS2 {
		// Before the buffer is sized: a damaged header must not make it
		// allocate what it says.
		if n, err := s2.DecodedLen(payload); err != nil || n != rawLen {
			return nil, fmt.Errorf("s2 block decodes to %d bytes (%v), want %d", n, err, rawLen)
		}
	}
	if cap(rc.blk) < rawLen {
		rc.blk = make([]byte, rawLen)
	}
	dst := rc.blk[:rawLen]
	switch rc.codec {
	case codecS2:
		out, err := s2.Decode(dst, payload)
		if err != nil {
			return nil, fmt.Errorf("s2: %w", err)
		}
		return out, nil
	case codecLZ4:
		n, err := lz4.UncompressBlock(payload, dst)
		if err != nil || n != rawLen {
			return nil, fmt.Errorf("lz4 block decodes to %d bytes (%v), want %d", n, err, rawLen)
		}
		return dst, nil
	default:
		out, err := zstdDecoder().DecodeAll(payload, dst[:0])
		if err != nil || len(out) != rawLen {
			return nil, fmt.Errorf("zstd block decodes to %d bytes (%v), want %d", len(out), err, rawLen)
		}
		return out, nil
	}
}

// decode takes the next cell off the current block's raw bytes.
func (rc *runCursor) decode() error {
	b := rc.raw
	shared, b, ok := uvarint(b)
	rest, b, ok2 := uvarint(b)
	if !ok || !ok2 || shared > uint64(len(rc.row)) || rest > uint64(len(b)) || shared+rest > math.MaxUint16 {
		return rc.fault("bad row (shared %d of %d, rest %d of %d bytes left)", shared, len(rc.row), rest, len(b))
	}
	rc.row = append(rc.row[:shared], b[:rest]...)
	b = b[rest:]
	q, b, ok := uvarint(b)
	if !ok || q > uint64(len(b)) {
		return rc.fault("bad qualifier length %d", q)
	}
	qual := b[:q:q]
	b = b[q:]
	dts, n := binary.Varint(b)
	if n <= 0 || len(b) < n+1 {
		return rc.fault("bad timestamp")
	}
	b = b[n:]
	typ := cell.Type(b[0])
	b = b[1:]
	if !typ.Valid() {
		return rc.fault("bad type %d", typ)
	}
	v, b, ok := uvarint(b)
	if !ok || v > uint64(len(b)) {
		return rc.fault("bad value length %d", v)
	}
	val := b[:v:v]
	b = b[v:]
	t, b, ok := uvarint(b)
	if !ok || t > uint64(len(b))+1 {
		return rc.fault("bad tags length %d", t)
	}
	var tags []byte
	if t > 0 {
		tags = b[: t-1 : t-1]
		b = b[t-1:]
	}
	rc.raw = b
	rc.prevTS += dts
	rc.c = cell.Cell{Row: rc.row, Family: rc.family, Qualifier: qual, Timestamp: rc.prevTS, Type: typ, Value: val, Tags: tags}
	return nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// uvarint reads one uvarint off b.
func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

func (rc *runCursor) at() *cell.Cell { return &rc.c }
func (rc *runCursor) fail() error    { return rc.err }

func (rc *runCursor) close() error {
	return rc.file.Close()
}
