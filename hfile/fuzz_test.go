package hfile

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// Fuzz targets for every decoder. Seeds come from the test writer, so the
// fuzzer starts from well-formed inputs and mutates them. Each target only
// asserts what must hold for any input: no panic, no endless loop, and
// errors of the package's classes.

func seedFile(tb testing.TB, o writeOpts, n int) []byte {
	cells := genCells(7, n, o.tags, o.mvcc)
	for i := range cells {
		// Keep seeds small: the fuzzer mutates whole inputs.
		if len(cells[i].Value) > 100 {
			cells[i].Value = cells[i].Value[:100]
		}
	}
	return writeTestHFile(tb, cells, o)
}

// drain opens data and reads it to the end plus one seek, checking that
// failures are reported as corruption or unsupported input.
func drain(t *testing.T, data []byte) {
	r, err := Open(bytes.NewReader(data), int64(len(data)), "fuzz.hfile")
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Open: unclassified error %v", err)
		}
		return
	}
	it := r.NewIterator()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
		if n > len(data)*8 {
			t.Fatalf("more cells (%d) than a %d-byte file can hold", n, len(data))
		}
	}
	if err := it.Err(); err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("iteration: unclassified error %v", err)
	}
	key := cell.FirstOnRow([]byte("row-00010"))
	it.SeekGE(&key)
	if err := it.Err(); err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("seek: unclassified error %v", err)
	}
	if _, err := r.DataIndex(); err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("DataIndex: unclassified error %v", err)
	}
}

func FuzzOpen(f *testing.F) {
	f.Add(seedFile(f, writeOpts{blockSize: 512}, 40))
	f.Add(seedFile(f, writeOpts{enc: EncodingFastDiff, codec: CodecSnappy, blockSize: 512, checksum: checksumNone, tags: true, mvcc: true}, 40))
	f.Add(seedFile(f, writeOpts{enc: EncodingDiff, codec: CodecGZ, blockSize: 256, leafEntries: 2, rootEntries: 2, checksum: checksumNone}, 40))
	f.Add(seedFile(f, writeOpts{enc: EncodingPrefix, blockSize: 256, leafEntries: 2, bloomChunks: true, checksum: checksumNone}, 30))
	f.Add(seedFile(f, writeOpts{enc: EncodingRowIndexV1, codec: CodecLZ4, blockSize: 256, checksum: checksumNone}, 30))
	f.Fuzz(func(t *testing.T, data []byte) { drain(t, data) })
}

func FuzzTrailer(f *testing.F) {
	file := seedFile(f, writeOpts{}, 5)
	f.Add(file[len(file)-trailerSizeV3:])
	f.Add(seedFile(f, writeOpts{major: 2, minor: 3}, 5))
	f.Fuzz(func(t *testing.T, tail []byte) {
		_, err := parseTrailer(tail, int64(len(tail))+100, "fuzz")
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("unclassified error %v", err)
		}
	})
}

func FuzzBlockHeader(f *testing.F) {
	file := seedFile(f, writeOpts{codec: CodecGZ, bytesPerChecksum: 64}, 5)
	f.Add(file[:200])
	f.Add(seedFile(f, writeOpts{checksum: checksumCRC32, bytesPerChecksum: 40}, 3)[:300])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(b, 0, int64(len(b)))
		if err != nil {
			return
		}
		if h.onDiskSize() > len(b) {
			t.Fatalf("header accepted an on-disk size %d beyond the %d available bytes", h.onDiskSize(), len(b))
		}
		verifyChecksums(&h, b[:h.onDiskSize()])
	})
}

// blockSeeds encodes a few blocks with enc for the decoder targets.
func blockSeeds(f *testing.F, enc Encoding) {
	for i, o := range []writeOpts{{}, {tags: true, mvcc: true}, {tags: true, tagsCompressed: true, mvcc: true}} {
		o.enc = enc
		cells := genCells(uint64(i), 25, o.tags, o.mvcc)
		for j := range cells {
			if len(cells[j].Value) > 100 {
				cells[j].Value = cells[j].Value[:100]
			}
		}
		f.Add(o.decoderFlags(), encodeBlock(o, cells))
	}
}

// encodeBlock encodes cells as one data block with o's encoding and
// options and returns its payload (the bytes after the block header).
func encodeBlock(o writeOpts, cells []cell.Cell) []byte {
	e := &blockEncoder{enc: o.enc, tags: o.tags, mvcc: o.mvcc, compressTags: o.tagsCompressed && o.enc != EncodingNone && o.enc != EncodingRowIndexV1}
	e.reset()
	for j := range cells {
		var prev *cell.Cell
		if j > 0 {
			prev = &cells[j-1]
		}
		e.add(&cells[j], prev)
	}
	e.finish()
	return bytes.Clone(e.buf[headerSize:])
}

// decoderFlags packs o's tag and memstore-timestamp options the way the
// decoder fuzz targets take them: 1 tags, 2 mvcc, 4 compressed tags.
func (o writeOpts) decoderFlags() byte {
	var f byte
	if o.tags {
		f |= 1
	}
	if o.mvcc {
		f |= 2
	}
	if o.tagsCompressed {
		f |= 4
	}
	return f
}

func fuzzDecoder(f *testing.F, enc Encoding) {
	blockSeeds(f, enc)
	f.Fuzz(func(t *testing.T, flags byte, payload []byte) {
		d := blockDecoder{tags: flags&1 != 0, mvcc: flags&2 != 0, keepSeqID: true, tagsCompressed: flags&4 != 0}
		if err := d.reset(payload, enc != EncodingNone, enc); err != nil {
			return
		}
		var c cell.Cell
		for n := 0; ; n++ {
			ok, err := d.next(&c)
			if err != nil || !ok {
				return
			}
			if n > len(payload) {
				t.Fatalf("decoded %d cells from %d bytes", n, len(payload))
			}
			_ = cell.AppendDump(nil, &c)
		}
	})
}

func FuzzDecodeNone(f *testing.F)       { fuzzDecoder(f, EncodingNone) }
func FuzzDecodePrefix(f *testing.F)     { fuzzDecoder(f, EncodingPrefix) }
func FuzzDecodeDiff(f *testing.F)       { fuzzDecoder(f, EncodingDiff) }
func FuzzDecodeFastDiff(f *testing.F)   { fuzzDecoder(f, EncodingFastDiff) }
func FuzzDecodeRowIndexV1(f *testing.F) { fuzzDecoder(f, EncodingRowIndexV1) }

func fuzzCodec(f *testing.F, c Codec, plain bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 10, 3000, 70000} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.IntN(4))
		}
		w := &testWriter{o: writeOpts{codec: c, zstdPlain: plain, chunkSize: 1000}}
		f.Add(w.compress(p), uint32(n))
	}
	f.Fuzz(func(t *testing.T, src []byte, n uint32) {
		var d decompressor
		out, err := d.decompress(c, nil, src, int(n%(1<<22)))
		if err == nil && len(out) != int(n%(1<<22)) {
			t.Fatalf("decompressed %d bytes, asked for %d", len(out), n)
		}
	})
}

func FuzzDecompressGZ(f *testing.F)        { fuzzCodec(f, CodecGZ, false) }
func FuzzDecompressSnappy(f *testing.F)    { fuzzCodec(f, CodecSnappy, false) }
func FuzzDecompressLZ4(f *testing.F)       { fuzzCodec(f, CodecLZ4, false) }
func FuzzDecompressZstd(f *testing.F)      { fuzzCodec(f, CodecZstd, false) }
func FuzzDecompressZstdPlain(f *testing.F) { fuzzCodec(f, CodecZstd, true) }

// TestCorruption flips bytes and truncates well-formed files at many
// places; every outcome must be a clean read, ErrCorrupt or
// ErrUnsupported, never a panic or a hang.
func TestCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, o := range []writeOpts{
		{enc: EncodingFastDiff, codec: CodecSnappy, blockSize: 512, checksum: checksumNone, tags: true, tagsCompressed: true, mvcc: true},
		{enc: EncodingDiff, codec: CodecNone, blockSize: 300, leafEntries: 2, rootEntries: 2, checksum: checksumNone, mvcc: true},
		{enc: EncodingPrefix, codec: CodecGZ, blockSize: 400, leafEntries: 3, checksum: checksumNone, tags: true},
		{enc: EncodingRowIndexV1, codec: CodecLZ4, blockSize: 400, checksum: checksumNone},
		{enc: EncodingNone, codec: CodecZstd, blockSize: 400},
	} {
		good := seedFile(t, o, 60)
		for i := 0; i < 400; i++ {
			data := bytes.Clone(good)
			switch i % 4 {
			case 0:
				data = data[:rng.IntN(len(data))]
			default:
				for k := 0; k <= i%3; k++ {
					data[rng.IntN(len(data))] ^= byte(1 + rng.IntN(255))
				}
			}
			drain(t, data)
		}
	}
}

// TestChecksumNamesBlock checks the corruption message a user sees.
func TestChecksumNamesBlock(t *testing.T) {
	data := seedFile(t, writeOpts{enc: EncodingFastDiff, blockSize: 512}, 60)
	data[700] ^= 0x40 // inside the second or third data block
	r, err := openBytes(t, "bad.hfile", data)
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, r)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %v, want ErrCorrupt", err)
	}
	for _, want := range []string{"bad.hfile", "DATABLKE block at offset", "CRC32C checksum mismatch", "stored", "computed"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestRejects checks that valid files this package cannot read, and
// inconsistent ones, fail with the right class and a message that says why.
func TestRejects(t *testing.T) {
	// The first cell of every seedFile(…, 20): a LASTKEY that understates a
	// file of several data blocks.
	firstKey := cell.AppendKey(nil, &genCells(7, 20, false, false)[0])
	for _, tc := range []struct {
		name    string
		o       writeOpts
		class   error
		message string
		atRead  bool
	}{
		{"unknown codec", writeOpts{trailerCodec: 9}, ErrUnsupported, "compression codec Codec(9)", false},
		{"LZO", writeOpts{lzo: true}, ErrUnsupported, "compression codec LZO", false},
		{"encrypted", writeOpts{encrypted: true}, ErrUnsupported, "encrypted", false},
		{"raw byte keys", writeOpts{comparator: "org.apache.hadoop.hbase.util.Bytes$ByteArrayComparator"}, ErrUnsupported, "raw bytes", false},
		{"PREFIX_TREE", writeOpts{extraInfo: map[string][]byte{"DATA_BLOCK_ENCODING": []byte("PREFIX_TREE")}}, ErrUnsupported, "PREFIX_TREE", false},
		{"unknown encoding name", writeOpts{extraInfo: map[string][]byte{"DATA_BLOCK_ENCODING": []byte("BITSET")}}, ErrCorrupt, "BITSET", false},
		{"block encoding differs from file info", writeOpts{enc: EncodingDiff, extraInfo: map[string][]byte{"DATA_BLOCK_ENCODING": []byte("FAST_DIFF")}}, ErrCorrupt, "encoded with DIFF but the file info says FAST_DIFF", true},
		{"bad AVG_KEY_LEN", writeOpts{extraInfo: map[string][]byte{"hfile.AVG_KEY_LEN": {1, 2}}}, ErrCorrupt, "hfile.AVG_KEY_LEN is 2 bytes", false},
		// A scan trusts LASTKEY to skip its stop-row test, so a whole pass
		// must find it to be the last cell's key.
		{"LASTKEY past the last cell", writeOpts{extraInfo: map[string][]byte{"hfile.LASTKEY": cell.AppendKey(nil, &cell.Cell{Row: []byte("zzzz"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: 1, Type: cell.Put})}}, ErrCorrupt, "is not the file info's LASTKEY", true},
		{"LASTKEY does not parse", writeOpts{extraInfo: map[string][]byte{"hfile.LASTKEY": {0, 9, 1}}}, ErrCorrupt, "LASTKEY does not parse", true},
		// A reader that stops early never reaches the end check, so a
		// LASTKEY before the last data block's index key fails at open.
		{"LASTKEY before the last data block", writeOpts{blockSize: 200, extraInfo: map[string][]byte{"hfile.LASTKEY": firstKey}}, ErrCorrupt, "sorts before", false},
		{"LASTKEY before the last data block, 3-level index", writeOpts{blockSize: 200, leafEntries: 2, rootEntries: 2, extraInfo: map[string][]byte{"hfile.LASTKEY": firstKey}}, ErrCorrupt, "sorts before", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := seedFile(t, tc.o, 20)
			r, err := openBytes(t, "reject.hfile", data)
			if tc.atRead {
				if err != nil {
					t.Fatal(err)
				}
				_, err = readAll(t, r)
			}
			if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), "reject.hfile") {
				t.Fatalf("error %v, want %v mentioning %q and the file", err, tc.class, tc.message)
			}
		})
	}
}

// offsetRecorder records where each read starts, except the read of the
// file's last bytes (the trailer, with whatever precedes it in Open's
// first read: in a small file, data blocks too, which Open does not
// decode).
type offsetRecorder struct {
	r    *bytes.Reader
	offs []int64
}

func (o *offsetRecorder) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) != o.r.Size() {
		o.offs = append(o.offs, off)
	}
	return o.r.ReadAt(p, off)
}

// TestLastKeyCheckedAtOpen checks the open-time bound on LASTKEY, the index
// key of the last data block, with one, two and three index levels. A
// LASTKEY that stops at the previous block's last cell (the tightest
// understatement the bound can see) fails Open without a data block read,
// so a reader that would stop early never gets a cell. A LASTKEY equal to
// the index key, a separator before the block's first cell, still opens:
// the bound is not the real first key, and only a whole pass finds it
// wrong.
func TestLastKeyCheckedAtOpen(t *testing.T) {
	// One cell per row: every later block starts a new row, so the test
	// writer, like HBase, indexes it by FirstOnRow(row), which sorts before
	// the block's first cell.
	var cells []cell.Cell
	for i := range 300 {
		cells = append(cells, cell.Cell{Row: fmt.Appendf(nil, "row-%04d", i), Family: []byte("cf"), Qualifier: []byte("q"), Timestamp: 1700000000000, Type: cell.Put, Value: bytes.Repeat([]byte("v"), 40)})
	}
	for _, tc := range []struct {
		name   string
		o      writeOpts
		levels uint32
	}{
		{"1 level", writeOpts{blockSize: 512}, 1},
		{"2 levels", writeOpts{enc: EncodingFastDiff, codec: CodecSnappy, blockSize: 512, leafEntries: 4}, 2},
		{"3 levels", writeOpts{enc: EncodingRowIndexV1, blockSize: 512, leafEntries: 3, rootEntries: 5}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withLastKey := func(k []byte) []byte {
				o := tc.o
				o.extraInfo = map[string][]byte{"hfile.LASTKEY": k}
				return writeTestHFile(t, cells, o)
			}
			r, err := openBytes(t, "good.hfile", writeTestHFile(t, cells, tc.o))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Trailer().NumDataIndexLevels; got != tc.levels {
				t.Fatalf("setup: %d index levels, want %d", got, tc.levels)
			}
			idx, err := r.DataIndex()
			if err != nil {
				t.Fatal(err)
			}
			lastIdx := idx[len(idx)-1]
			var sep cell.Cell
			if err := cell.ParseKey(lastIdx.Key, &sep); err != nil {
				t.Fatal(err)
			}
			// The last block's first cell and the cell before it.
			i := slices.IndexFunc(cells, func(c cell.Cell) bool { return cell.Compare(&c, &sep) >= 0 })
			if i < 1 || cell.Compare(&sep, &cells[i]) >= 0 {
				t.Fatalf("setup: the last block's index key %s is not a separator before a later block's first cell", &sep)
			}

			prevKey := cell.AppendKey(nil, &cells[i-1])
			bad := withLastKey(prevKey)
			rec := &offsetRecorder{r: bytes.NewReader(bad)}
			_, err = Open(rec, int64(len(bad)), "understated.hfile")
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open with LASTKEY %s before the last block = %v, want ErrCorrupt", &cells[i-1], err)
			}
			for _, want := range []string{"understated.hfile", "hfile.LASTKEY " + clipHex(prevKey) + " sorts before " + clipHex(lastIdx.Key), fmt.Sprintf("last data block (at offset %d)", lastIdx.Offset)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			for _, off := range rec.offs {
				if slices.ContainsFunc(idx, func(e IndexEntry) bool { return e.Offset == off }) {
					t.Errorf("Open read the data block at offset %d", off)
				}
			}

			r, err = openBytes(t, "separator.hfile", withLastKey(lastIdx.Key))
			if err != nil {
				t.Fatalf("Open with LASTKEY equal to the last block's index key: %v", err)
			}
			it := r.NewIterator()
			if !it.First() {
				t.Fatalf("an early-stopping reader found no first cell: %v", it.Err())
			}
			it.Close()
			if _, err := readAll(t, r); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "is not the file info's LASTKEY") {
				t.Fatalf("a whole pass = %v, want the end check's ErrCorrupt", err)
			}
		})
	}
}
