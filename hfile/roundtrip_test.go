package hfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// genCells makes n sorted cells of one family with the shapes that
// exercise the encoders: shared and differing row prefixes and lengths,
// several qualifiers and versions per row, all delete types, repeated and
// empty values, a few big values, tags from a small set, sequence ids.
func genCells(seed uint64, n int, withTags, withSeq bool) []cell.Cell {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	types := []cell.Type{cell.Put, cell.Put, cell.Put, cell.Delete, cell.DeleteColumn, cell.DeleteFamily, cell.DeleteFamilyVersion}
	tagSet := [][]byte{
		tagBytes(1, "ttl"), tagBytes(2, "visibility-secret"), tagBytes(8, "x"),
	}
	cells := make([]cell.Cell, 0, n)
	for len(cells) < n {
		row := []byte(fmt.Sprintf("row-%05d", rng.IntN(n)))
		if rng.IntN(10) == 0 {
			row = append(row, bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(40))...)
		}
		for q := rng.IntN(4); q >= 0 && len(cells) < n; q-- {
			qual := []byte(fmt.Sprintf("q%d", rng.IntN(50)))
			if rng.IntN(8) == 0 {
				qual = nil
			}
			for v := rng.IntN(3); v >= 0 && len(cells) < n; v-- {
				c := cell.Cell{
					Row: row, Family: []byte("cf"), Qualifier: qual,
					Timestamp: 1700000000000 + int64(rng.IntN(1000000)),
					Type:      types[rng.IntN(len(types))],
				}
				switch rng.IntN(12) {
				case 0:
					c.Timestamp = int64(rng.IntN(300))
				case 1:
					c.Timestamp = cell.LatestTimestamp - 1
				}
				switch rng.IntN(10) {
				case 0:
					c.Value = nil
				case 1:
					c.Value = []byte("same-value")
				case 2:
					if rng.IntN(30) == 0 {
						c.Value = bytes.Repeat([]byte("big"), 100000+rng.IntN(100000))
						break
					}
					fallthrough
				default:
					c.Value = []byte(fmt.Sprintf("value-%d-%s", rng.IntN(1e6), bytes.Repeat([]byte("v"), rng.IntN(60))))
				}
				if withTags && rng.IntN(3) > 0 {
					for k := rng.IntN(3); k >= 0; k-- {
						c.Tags = append(c.Tags, tagSet[rng.IntN(len(tagSet))]...)
					}
				}
				if withSeq {
					c.SeqID = uint64(rng.IntN(1 << 20))
					if rng.IntN(5) == 0 {
						c.SeqID = uint64(rng.Int64())
					}
				}
				cells = append(cells, c)
			}
		}
	}
	slices.SortFunc(cells, func(a, b cell.Cell) int { return cell.CompareWithSeqID(&a, &b) })
	return cells
}

func tagBytes(typ byte, v string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(1+len(v)))
	b = append(b, typ)
	return append(b, v...)
}

var allEncodings = []Encoding{EncodingNone, EncodingPrefix, EncodingDiff, EncodingFastDiff, EncodingRowIndexV1}

type codecCase struct {
	name  string
	codec Codec
	plain bool
}

var allCodecs = []codecCase{
	{"NONE", CodecNone, false}, {"GZ", CodecGZ, false}, {"SNAPPY", CodecSnappy, false},
	{"LZ4", CodecLZ4, false}, {"ZSTD", CodecZstd, false}, {"ZSTD-plain", CodecZstd, true},
}

type variant struct {
	name string
	o    writeOpts
	tags bool
	seq  bool
}

var variants = []variant{
	{"plain", writeOpts{}, false, false},
	{"tags+mvcc", writeOpts{tags: true, mvcc: true}, true, true},
	{"compressed-tags", writeOpts{tags: true, tagsCompressed: true, mvcc: true}, true, true},
	{"empty-tags+mvcc", writeOpts{tags: true, mvcc: true}, false, true},
	{"2-level+blooms+crc32", writeOpts{blockSize: 2048, leafEntries: 4, bloomChunks: true, checksum: checksumCRC32, bytesPerChecksum: 512}, false, false},
	{"3-level+null-checksum+v2.3", writeOpts{blockSize: 1024, leafEntries: 3, rootEntries: 3, checksum: checksumNone, major: 2, minor: 3, chunkSize: 700, tags: true, mvcc: true}, true, true},
}

// TestRoundTrip writes every encoding x codec x variant with the test
// writer and reads it back, comparing every cell and seeking.
func TestRoundTrip(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 500
	}
	for vi, v := range variants {
		cells := genCells(uint64(vi+1), n, v.tags, v.seq)
		for _, enc := range allEncodings {
			for _, cc := range allCodecs {
				o := v.o
				o.enc, o.codec, o.zstdPlain = enc, cc.codec, cc.plain
				if enc == EncodingNone || enc == EncodingRowIndexV1 {
					o.tagsCompressed = false
				}
				t.Run(fmt.Sprintf("%s/%s/%s", v.name, enc, cc.name), func(t *testing.T) {
					data := writeTestHFile(t, cells, o)
					r, err := openBytes(t, "test.hfile", data)
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
						if !o.mvcc {
							want.SeqID = 0
						}
						if !sameCell(&got[i], &want) {
							t.Fatalf("cell %d: got %s tags %x seq %d value %.20q, want %s tags %x seq %d value %.20q", i, &got[i], got[i].Tags, got[i].SeqID, got[i].Value, &want, want.Tags, want.SeqID, want.Value)
						}
					}
					if o.leafEntries > 0 {
						want := uint32(2)
						if o.rootEntries > 0 {
							want = 3
						}
						if r.Trailer().NumDataIndexLevels < want {
							t.Fatalf("index has %d levels, want >= %d", r.Trailer().NumDataIndexLevels, want)
						}
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

// TestBZip2 reads a BZIP2 file (Hadoop's BZip2Codec writes a plain bzip2
// stream per block); it needs the bzip2 tool to write one.
func TestBZip2(t *testing.T) {
	if _, err := exec.LookPath("bzip2"); err != nil {
		t.Skip("bzip2 tool not installed")
	}
	cells := genCells(9, 800, true, true)
	for _, enc := range []Encoding{EncodingNone, EncodingFastDiff} {
		data := writeTestHFile(t, cells, writeOpts{enc: enc, codec: CodecBZip2, tags: true, mvcc: true, blockSize: 4096})
		r, err := openBytes(t, "bzip2.hfile", data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(cells) {
			t.Fatalf("%s: read %d cells, wrote %d", enc, len(got), len(cells))
		}
		for i := range cells {
			if !sameCell(&got[i], &cells[i]) {
				t.Fatalf("%s: cell %d = %s, want %s", enc, i, &got[i], &cells[i])
			}
		}
	}
}

// TestConcurrentIterators runs iterators of one Reader in parallel (run
// under -race in CI): the Reader is shared, each iterator owns its buffers.
func TestConcurrentIterators(t *testing.T) {
	cells := genCells(11, 1500, true, true)
	data := writeTestHFile(t, cells, writeOpts{enc: EncodingFastDiff, codec: CodecGZ, tags: true, mvcc: true, blockSize: 1024, leafEntries: 4})
	r, err := openBytes(t, "concurrent", data)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func(g int) {
			it := r.NewIterator()
			defer it.Close()
			i := g * 100
			for i > 0 && cell.Compare(&cells[i-1], &cells[i]) == 0 {
				i-- // SeekGE lands on the first of equal keys
			}
			if !it.SeekGE(&cells[i]) {
				errs <- fmt.Errorf("goroutine %d: seek failed: %v", g, it.Err())
				return
			}
			for ; ; i++ {
				if cell.Compare(it.Cell(), &cells[i]) != 0 || !bytes.Equal(it.Cell().Value, cells[i].Value) {
					errs <- fmt.Errorf("goroutine %d: cell %d = %s, want %s", g, i, it.Cell(), &cells[i])
					return
				}
				if !it.Next() {
					break
				}
			}
			if i != len(cells)-1 || it.Err() != nil {
				errs <- fmt.Errorf("goroutine %d: stopped at %d: %v", g, i, it.Err())
				return
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
