package hfile

import (
	"fmt"
	"io"
	"strconv"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// cellSource makes an endless sorted stream of cells shaped like the
// oracle's bench-write-hfile (rows of five columns, 32-byte values half
// repeated) without allocating per cell.
var family = []byte("f")

type cellSource struct {
	i      int64
	row, q []byte
	value  [32]byte
	c      cell.Cell
	tags   []byte
}

func (s *cellSource) next() *cell.Cell {
	s.row = strconv.AppendInt(append(s.row[:0], "row"...), 1e10+s.i/5, 10)
	s.q = strconv.AppendInt(append(s.q[:0], "col"...), s.i%5, 10)
	x := uint64(s.i) * 0x9E3779B97F4A7C15
	for j := 0; j < 16; j++ {
		s.value[j] = byte(x >> (8 * (j % 8)))
	}
	for j := 16; j < 32; j++ {
		s.value[j] = 'x'
	}
	s.c = cell.Cell{Row: s.row, Family: family, Qualifier: s.q, Timestamp: 1767225600000 + s.i, Type: cell.Put, Value: s.value[:], Tags: s.tags}
	s.i++
	return &s.c
}

var benchWriterCases = []struct {
	enc   Encoding
	codec Codec
	bloom BloomType
}{
	{EncodingNone, CodecNone, BloomNone},
	{EncodingFastDiff, CodecSnappy, BloomNone},
	{EncodingPrefix, CodecGZ, BloomNone},
	{EncodingDiff, CodecLZ4, BloomRow},
	{EncodingRowIndexV1, CodecZstd, BloomRowCol},
}

// BenchmarkWriter appends one cell per iteration; run with -benchmem: the
// allocations per cell must be 0 (blocks and index entries allocate only
// while their buffers grow).
func BenchmarkWriter(b *testing.B) {
	for _, bc := range benchWriterCases {
		b.Run(fmt.Sprintf("%s-%s-%s", bc.enc, bc.codec, bc.bloom), func(b *testing.B) {
			w, err := NewWriter(io.Discard, WriterOptions{Encoding: bc.enc, Codec: bc.codec, Bloom: bc.bloom, Tags: true})
			if err != nil {
				b.Fatal(err)
			}
			var src cellSource
			b.ReportAllocs()
			b.SetBytes(8 + 9 + 14 + 4 + 32)
			for b.Loop() {
				if err := w.Append(src.next()); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestWriterSteadyStateAllocs holds Append to zero allocations per cell
// once the writer's buffers have grown, for every encoding, a codec and a
// bloom filter, with tags compressed.
func TestWriterSteadyStateAllocs(t *testing.T) {
	for _, bc := range benchWriterCases {
		t.Run(fmt.Sprintf("%s-%s-%s", bc.enc, bc.codec, bc.bloom), func(t *testing.T) {
			w, err := NewWriter(io.Discard, WriterOptions{Encoding: bc.enc, Codec: bc.codec, Bloom: bc.bloom, Tags: true, CompressTags: true, SeqIDs: true})
			if err != nil {
				t.Fatal(err)
			}
			src := cellSource{tags: tagBytes(1, "ttl")}
			for i := 0; i < 200000; i++ { // grow blocks, index and bloom
				if err := w.Append(src.next()); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(100000, func() {
				if err := w.Append(src.next()); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per appended cell, want 0", allocs)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
