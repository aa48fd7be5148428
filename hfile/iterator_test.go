package hfile

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

var _ cell.Iterator = (*Iterator)(nil)

// TestIteratorContract holds hfile.Iterator to cell.Iterator's written
// contract: a fresh iterator's Next moves to the first cell, Cell is nil
// once Next returned false, exhaustion is not an error, Close returns the
// error that stopped the iterator, and nothing moves after Close.
func TestIteratorContract(t *testing.T) {
	cells := genCells(3, 400, false, false)
	data := writeTestHFile(t, cells, writeOpts{enc: EncodingFastDiff, codec: CodecGZ, blockSize: 1024})
	r, err := openBytes(t, "contract", data)
	if err != nil {
		t.Fatal(err)
	}
	it := r.NewIterator()
	n := 0
	for it.Next() {
		if cell.Compare(it.Cell(), &cells[n]) != 0 {
			t.Fatalf("cell %d = %s, want %s", n, it.Cell(), &cells[n])
		}
		n++
	}
	if n != len(cells) || it.Err() != nil || it.Cell() != nil {
		t.Fatalf("read %d of %d cells, err %v, Cell() after the end %v", n, len(cells), it.Err(), it.Cell())
	}
	if it.Next() {
		t.Fatal("Next after the end returned true")
	}
	if err := it.Close(); err != nil {
		t.Fatalf("Close after a clean end: %v", err)
	}
	if it.Next() || it.First() {
		t.Fatal("the iterator moved after Close")
	}

	// A corrupt data block: Next stops, Err and Close both report it.
	bad := bytes.Clone(data)
	bad[r.Trailer().FirstDataBlockOffset+headerSize+5] ^= 0xff
	rb, err := openBytes(t, "contract-corrupt", bad)
	if err != nil {
		t.Fatal(err)
	}
	it = rb.NewIterator()
	for it.Next() {
	}
	if !errors.Is(it.Err(), ErrCorrupt) {
		t.Fatalf("Err = %v, want ErrCorrupt", it.Err())
	}
	if err := it.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Close = %v, want the iterator's ErrCorrupt", err)
	}
}

// countingReaderAt counts the reads that reach it.
type countingReaderAt struct {
	r     *bytes.Reader
	reads atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.reads.Add(1)
	return c.r.ReadAt(p, off)
}

// TestStreamIterator checks that a stream iterator reads its data blocks
// from the stream it was given, and its index blocks from the reader's own
// ReaderAt, and returns the same cells as a plain iterator, also after a
// seek.
func TestStreamIterator(t *testing.T) {
	cells := genCells(5, 2000, true, true)
	data := writeTestHFile(t, cells, writeOpts{enc: EncodingDiff, codec: CodecSnappy, tags: true, mvcc: true, blockSize: 1024, leafEntries: 4})
	base := &countingReaderAt{r: bytes.NewReader(data)}
	r, err := Open(base, int64(len(data)), "stream")
	if err != nil {
		t.Fatal(err)
	}
	opened := base.reads.Load()
	stream := &countingReaderAt{r: bytes.NewReader(data)}
	it := r.NewStreamIterator(stream)
	var got []cell.Cell
	if err := cell.ForEach(it, func(c *cell.Cell) error { got = append(got, c.Clone()); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cells) {
		t.Fatalf("%d cells, want %d", len(got), len(cells))
	}
	for i := range got {
		if cell.CompareWithSeqID(&got[i], &cells[i]) != 0 || !bytes.Equal(got[i].Value, cells[i].Value) {
			t.Fatalf("cell %d = %s, want %s", i, &got[i], &cells[i])
		}
	}
	if stream.reads.Load() == 0 || base.reads.Load() != opened {
		t.Fatalf("a full scan made %d stream reads and %d reads of the file itself; want all data reads on the stream", stream.reads.Load(), base.reads.Load()-opened)
	}
	// A seek into a 3-level index reads index blocks from the file and the
	// data block from the stream.
	it = r.NewStreamIterator(stream)
	defer it.Close()
	before := stream.reads.Load()
	k := len(cells) / 2
	for k > 0 && cell.Compare(&cells[k-1], &cells[k]) == 0 {
		k--
	}
	if !it.SeekGE(&cells[k]) || cell.Compare(it.Cell(), &cells[k]) != 0 {
		t.Fatalf("SeekGE(%s) = %s, %v", &cells[k], it.Cell(), it.Err())
	}
	if base.reads.Load() == opened || stream.reads.Load() == before {
		t.Fatalf("seek: %d index reads from the file, %d data reads from the stream; want both", base.reads.Load()-opened, stream.reads.Load()-before)
	}
}
