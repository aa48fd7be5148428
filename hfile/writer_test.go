package hfile

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os/exec"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rekeyhq/rekey/cell"
)

// This file is a test-only HFile writer. It lays files out the way HBase
// 2.x does (blocks, inline leaf index and bloom chunks, intermediate index
// levels, load-on-open section, trailer) and encodes cells with each data
// block encoding, so the reader can be tested on every encoding, codec and
// index depth, including ones the corpus lacks. It follows the format facts
// in docs/formats.md; agreement with HBase itself is checked separately
// against HBase-written files (corpus, testdata fixtures, the oracle).

type writeOpts struct {
	enc            Encoding
	codec          Codec
	tags           bool // write MAX_TAGS_LEN: every cell has a tags section
	tagsCompressed bool // dictionary-compress tags (encoded blocks only)
	mvcc           bool // write KEY_VALUE_VERSION=1 and per-cell memstore ts
	blockSize      int  // uncompressed data block target (default 64 KiB)
	// leafEntries > 0 makes a multi-level index: a leaf block is written
	// inline after that many data block entries; rootEntries > 0 adds
	// intermediate levels until the root has at most that many entries.
	leafEntries, rootEntries int
	checksum                 byte // 0 means CRC32C; use checksumNone for NULL
	bytesPerChecksum         int
	major, minor             int
	bloomChunks              bool  // interleave BLMFBLK2 blocks
	zstdPlain                bool  // zstd without Hadoop block framing
	chunkSize                int   // Hadoop block framing chunk size (default 256 KiB)
	trailerCodec             Codec // overrides the trailer's codec ordinal when non-zero
	encrypted                bool  // write a (fake) wrapped key in the trailer
	lzo                      bool  // claim LZO (ordinal 0) in the trailer
	comparator               string
	extraInfo                map[string][]byte // added to / overriding the file info
}

const checksumNone = 0xFF // writeOpts.checksum value for NULL checksums

type testWriter struct {
	o        writeOpts
	buf      bytes.Buffer
	prevOff  map[BlockType]int64
	totalUnc uint64
}

func (w *testWriter) compress(p []byte) []byte {
	chunked := func(enc func([]byte) []byte) []byte {
		cs := w.o.chunkSize
		if cs == 0 {
			cs = 256 << 10
		}
		var out []byte
		out = binary.BigEndian.AppendUint32(out, uint32(len(p)))
		for rest := p; len(rest) > 0; {
			n := min(cs, len(rest))
			c := enc(rest[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(c)))
			out = append(out, c...)
			rest = rest[n:]
		}
		return out
	}
	switch w.o.codec {
	case CodecNone:
		return p
	case CodecGZ:
		var b bytes.Buffer
		zw := kgzip.NewWriter(&b)
		zw.Write(p)
		zw.Close()
		return b.Bytes()
	case CodecSnappy:
		return chunked(func(x []byte) []byte { return snappy.Encode(nil, x) })
	case CodecLZ4:
		return chunked(func(x []byte) []byte {
			dst := make([]byte, lz4.CompressBlockBound(len(x)))
			var c lz4.Compressor
			n, err := c.CompressBlock(x, dst)
			if err != nil || n == 0 {
				panic("lz4 compress failed")
			}
			return dst[:n]
		})
	case CodecBZip2:
		// Go has no bzip2 writer; tests that need one check for the tool.
		cmd := exec.Command("bzip2", "-c")
		cmd.Stdin = bytes.NewReader(p)
		out, err := cmd.Output()
		if err != nil {
			panic("bzip2: " + err.Error())
		}
		return out
	case CodecZstd:
		enc, _ := zstd.NewWriter(nil)
		defer enc.Close()
		if w.o.zstdPlain {
			return enc.EncodeAll(p, nil)
		}
		return chunked(func(x []byte) []byte { return enc.EncodeAll(x, nil) })
	}
	panic("codec not supported by the test writer")
}

// writeBlock frames, compresses and checksums one block at the end of the
// file and returns its offset and on-disk size.
func (w *testWriter) writeBlock(bt BlockType, payload []byte) (int64, int) {
	off := int64(w.buf.Len())
	stored := payload
	if len(payload) > 0 {
		stored = w.compress(payload)
	}
	ck := w.o.checksum
	if ck == 0 {
		ck = checksumCRC32C
	} else if ck == checksumNone {
		ck = checksumNull
	}
	bpc := w.o.bytesPerChecksum
	if bpc == 0 {
		bpc = 16384
	}
	dataWithHeader := headerSize + len(stored)
	chunks := (dataWithHeader + bpc - 1) / bpc
	h := make([]byte, 0, dataWithHeader+4*chunks)
	h = append(h, blockMagics[bt]...)
	h = binary.BigEndian.AppendUint32(h, uint32(len(stored)+4*chunks))
	h = binary.BigEndian.AppendUint32(h, uint32(len(payload)))
	prev, ok := w.prevOff[bt]
	if !ok {
		prev = -1
	}
	h = binary.BigEndian.AppendUint64(h, uint64(prev))
	h = append(h, ck)
	h = binary.BigEndian.AppendUint32(h, uint32(bpc))
	h = binary.BigEndian.AppendUint32(h, uint32(dataWithHeader))
	h = append(h, stored...)
	for i := 0; i < chunks; i++ {
		c := h[i*bpc : min((i+1)*bpc, dataWithHeader)]
		var s uint32
		switch ck {
		case checksumCRC32C:
			s = crc32.Checksum(c, castagnoli)
		case checksumCRC32:
			s = crc32.ChecksumIEEE(c)
		}
		h = binary.BigEndian.AppendUint32(h, s)
	}
	w.buf.Write(h)
	key := bt
	if bt == BlockEncodedData {
		key = BlockData
	}
	w.prevOff[key] = off
	w.totalUnc += uint64(headerSize + len(payload))
	return off, len(h)
}

// testBlockEncoder encodes the cells of one data block.
type testBlockEncoder struct {
	o       *writeOpts
	out     []byte
	unenc   int
	prev    *cell.Cell
	rowOffs []int
	dict    tagDict
	n       int
}

// flatKeyCommon is HBase's common prefix of two flat keys over row length,
// row, family (assumed equal) and qualifier, and with withTsType the
// timestamp and type when the qualifiers have equal length.
func flatKeyCommon(c, p *cell.Cell, withTsType bool) int {
	var l1, l2 [2]byte
	binary.BigEndian.PutUint16(l1[:], uint16(len(c.Row)))
	binary.BigEndian.PutUint16(l2[:], uint16(len(p.Row)))
	if l1 != l2 {
		return commonPrefix(l1[:], l2[:])
	}
	n := 2 + commonPrefix(c.Row, p.Row)
	if n-2 != len(c.Row) {
		return n
	}
	n += 1 + len(c.Family)
	q := commonPrefix(c.Qualifier, p.Qualifier)
	n += q
	if !withTsType || max(len(c.Qualifier), len(p.Qualifier)) != q {
		return n
	}
	var t1, t2 [8]byte
	binary.BigEndian.PutUint64(t1[:], uint64(c.Timestamp))
	binary.BigEndian.PutUint64(t2[:], uint64(p.Timestamp))
	tc := commonPrefix(t1[:], t2[:])
	n += tc
	if tc == 8 && c.Type == p.Type {
		n++
	}
	return n
}

func longFitsIn(v int64) int {
	if v < 0 {
		return 8
	}
	n := 1
	for v >= 1<<8 && n < 8 {
		v >>= 8
		n++
	}
	return n
}

func (e *testBlockEncoder) tail(c *cell.Cell, plain bool) {
	if e.o.tags {
		if plain {
			e.out = binary.BigEndian.AppendUint16(e.out, uint16(len(c.Tags)))
			e.out = append(e.out, c.Tags...)
		} else {
			e.out = appendCInt(e.out, len(c.Tags))
			if len(c.Tags) > 0 && e.o.tagsCompressed {
				for t := c.Tags; len(t) >= 2; {
					l := int(binary.BigEndian.Uint16(t))
					tag := t[2 : 2+l]
					t = t[2+l:]
					idx := -1
					for i := 0; i < e.dict.n; i++ {
						if bytes.Equal(e.dict.entries[i], tag) {
							idx = i
						}
					}
					if idx >= 0 {
						e.dict.get(idx)
						e.out = binary.BigEndian.AppendUint16(e.out, uint16(idx))
					} else {
						e.dict.add(tag)
						e.out = append(e.out, 0xFF)
						e.out = appendCInt(e.out, len(tag))
						e.out = append(e.out, tag...)
					}
				}
			} else {
				e.out = append(e.out, c.Tags...)
			}
		}
	}
	if e.o.mvcc {
		e.out = appendVLong(e.out, int64(c.SeqID))
	}
}

func (e *testBlockEncoder) add(c *cell.Cell) {
	kl := cell.KeyLen(c)
	e.unenc += 8 + kl + len(c.Value)
	if e.o.tags {
		e.unenc += 2 + len(c.Tags)
	}
	if e.o.mvcc {
		e.unenc += len(appendVLong(nil, int64(c.SeqID)))
	}
	p := e.prev
	switch e.o.enc {
	case EncodingNone, EncodingRowIndexV1:
		if e.o.enc == EncodingRowIndexV1 && (p == nil || !bytes.Equal(p.Row, c.Row)) {
			e.rowOffs = append(e.rowOffs, len(e.out))
		}
		e.out = binary.BigEndian.AppendUint32(e.out, uint32(kl))
		e.out = binary.BigEndian.AppendUint32(e.out, uint32(len(c.Value)))
		e.out = cell.AppendKey(e.out, c)
		e.out = append(e.out, c.Value...)
		e.tail(c, true)
	case EncodingPrefix:
		key := cell.AppendKey(nil, c)
		common := 0
		if p != nil {
			common = flatKeyCommon(c, p, true)
		}
		e.out = appendCInt(e.out, kl-common)
		e.out = appendCInt(e.out, len(c.Value))
		e.out = appendCInt(e.out, common)
		e.out = append(e.out, key[common:]...)
		e.out = append(e.out, c.Value...)
		e.tail(c, false)
	case EncodingDiff:
		var flag byte
		ts := c.Timestamp
		common := 0
		var tsBytes []byte
		if p == nil {
			if ts < 0 {
				flag |= 0x80
				ts = -ts
			}
			n := longFitsIn(ts)
			flag |= byte(n-1) << 4
			e.out = append(e.out, byte(len(c.Family)))
			e.out = append(e.out, c.Family...)
			tsBytes = leBytes(ts, n)
		} else {
			common = flatKeyCommon(c, p, false)
			if kl == cell.KeyLen(p) {
				flag |= 0x01
			}
			if len(c.Value) == len(p.Value) {
				flag |= 0x02
			}
			if c.Type == p.Type {
				flag |= 0x04
			}
			diff := p.Timestamp - ts
			neg := ts < 0
			if neg {
				ts = -ts
			}
			tn := longFitsIn(ts)
			dneg := diff < 0
			if dneg {
				diff = -diff
			}
			dn := longFitsIn(diff)
			if dn < tn {
				flag |= byte(dn-1)<<4 | 0x08
				if dneg {
					flag |= 0x80
				}
				tsBytes = leBytes(diff, dn)
			} else {
				flag |= byte(tn-1) << 4
				if neg {
					flag |= 0x80
				}
				tsBytes = leBytes(ts, tn)
			}
		}
		e.out = append(e.out, flag)
		if flag&0x01 == 0 {
			e.out = appendCInt(e.out, kl)
		}
		if flag&0x02 == 0 {
			e.out = appendCInt(e.out, len(c.Value))
		}
		e.out = appendCInt(e.out, common)
		e.out = e.diffKeyPart(c, common)
		e.out = append(e.out, tsBytes...)
		if flag&0x04 == 0 {
			e.out = append(e.out, byte(c.Type))
		}
		e.out = append(e.out, c.Value...)
		e.tail(c, false)
	case EncodingFastDiff:
		if p == nil {
			e.out = append(e.out, 0)
			e.out = appendCInt(e.out, kl)
			e.out = appendCInt(e.out, len(c.Value))
			e.out = appendCInt(e.out, 0)
			e.out = cell.AppendKey(e.out, c)
			e.out = append(e.out, c.Value...)
		} else {
			var flag byte
			common := flatKeyCommon(c, p, false)
			if kl == cell.KeyLen(p) {
				flag |= 0x08
			}
			if len(c.Value) == len(p.Value) {
				flag |= 0x10
			}
			if c.Type == p.Type {
				flag |= 0x20
			}
			var t1, t2 [8]byte
			binary.BigEndian.PutUint64(t1[:], uint64(c.Timestamp))
			binary.BigEndian.PutUint64(t2[:], uint64(p.Timestamp))
			tc := min(commonPrefix(t1[:], t2[:]), 7)
			flag |= byte(tc)
			if bytes.Equal(c.Value, p.Value) {
				flag |= 0x40
			}
			e.out = append(e.out, flag)
			if flag&0x08 == 0 {
				e.out = appendCInt(e.out, kl)
			}
			if flag&0x10 == 0 {
				e.out = appendCInt(e.out, len(c.Value))
			}
			e.out = appendCInt(e.out, common)
			e.out = e.diffKeyPart(c, common)
			e.out = append(e.out, t1[tc:]...)
			if flag&0x20 == 0 {
				e.out = append(e.out, byte(c.Type))
			}
			if flag&0x40 == 0 {
				e.out = append(e.out, c.Value...)
			}
		}
		e.tail(c, false)
	}
	e.prev = c
	e.n++
}

func leBytes(v int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

// diffKeyPart writes the key bytes DIFF and FAST_DIFF store: the row part
// after the common prefix and the whole qualifier when the row differs,
// else the rest of the qualifier.
func (e *testBlockEncoder) diffKeyPart(c *cell.Cell, common int) []byte {
	out := e.out
	rws := 2 + len(c.Row)
	if common < rws {
		var rl [2]byte
		binary.BigEndian.PutUint16(rl[:], uint16(len(c.Row)))
		rowWithLen := append(rl[:], c.Row...)
		out = append(out, rowWithLen[common:]...)
		return append(out, c.Qualifier...)
	}
	q := common - rws - 1 - len(c.Family)
	return append(out, c.Qualifier[q:]...)
}

func (e *testBlockEncoder) finish() (BlockType, []byte) {
	switch e.o.enc {
	case EncodingNone:
		return BlockData, e.out
	case EncodingRowIndexV1:
		p := binary.BigEndian.AppendUint16(nil, uint16(e.o.enc))
		p = append(p, e.out...)
		p = binary.BigEndian.AppendUint32(p, uint32(len(e.rowOffs)))
		for _, o := range e.rowOffs {
			p = binary.BigEndian.AppendUint32(p, uint32(o))
		}
		return BlockEncodedData, binary.BigEndian.AppendUint32(p, uint32(len(e.out)))
	}
	p := binary.BigEndian.AppendUint16(nil, uint16(e.o.enc))
	p = binary.BigEndian.AppendUint32(p, uint32(e.unenc))
	return BlockEncodedData, append(p, e.out...)
}

func rootIndexBytes(entries []IndexEntry) []byte {
	var p []byte
	for _, e := range entries {
		p = binary.BigEndian.AppendUint64(p, uint64(e.Offset))
		p = binary.BigEndian.AppendUint32(p, uint32(e.Size))
		p = appendVLong(p, int64(len(e.Key)))
		p = append(p, e.Key...)
	}
	return p
}

func nonRootIndexBytes(entries []IndexEntry) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(len(entries)))
	off := 0
	for _, e := range entries {
		p = binary.BigEndian.AppendUint32(p, uint32(off))
		off += 12 + len(e.Key)
	}
	p = binary.BigEndian.AppendUint32(p, uint32(off))
	for _, e := range entries {
		p = binary.BigEndian.AppendUint64(p, uint64(e.Offset))
		p = binary.BigEndian.AppendUint32(p, uint32(e.Size))
		p = append(p, e.Key...)
	}
	return p
}

// writeTestHFile lays out cells (which must be sorted) as an HFile.
func writeTestHFile(tb testing.TB, cells []cell.Cell, o writeOpts) []byte {
	tb.Helper()
	if o.blockSize == 0 {
		o.blockSize = 64 << 10
	}
	if o.major == 0 {
		o.major, o.minor = 3, 3
	}
	if o.codec == CodecLZO { // the zero value; LZO is not writable here
		o.codec = CodecNone
	}
	w := &testWriter{o: o, prevOff: map[BlockType]int64{}}
	var leaf, leaves []IndexEntry
	var enc *testBlockEncoder
	first, last := int64(-1), int64(-1)
	var firstKey []byte
	// idxUnc sums the uncompressed payloads of every data index block,
	// which HBase records in the trailer.
	var idxUnc uint64
	flushLeaf := func(final bool) {
		if o.leafEntries == 0 || len(leaf) == 0 || (!final && len(leaf) < o.leafEntries) {
			return
		}
		lp := nonRootIndexBytes(leaf)
		idxUnc += uint64(len(lp))
		off, size := w.writeBlock(BlockLeafIndex, lp)
		leaves = append(leaves, IndexEntry{Key: leaf[0].Key, Offset: off, Size: int32(size)})
		leaf = nil
	}
	flush := func() {
		if enc == nil || enc.n == 0 {
			return
		}
		bt, p := enc.finish()
		off, size := w.writeBlock(bt, p)
		if first < 0 {
			first = off
		}
		last = off
		leaf = append(leaf, IndexEntry{Key: firstKey, Offset: off, Size: int32(size)})
		enc = nil
		if o.bloomChunks && len(leaf)%3 == 1 {
			w.writeBlock(BlockBloomChunk, bytes.Repeat([]byte{0xA5}, 64))
		}
		flushLeaf(false)
	}
	var maxTags int
	var maxTS uint64
	for i := range cells {
		c := &cells[i]
		if enc != nil && len(enc.out) >= o.blockSize && cell.Compare(enc.prev, c) != 0 {
			flush()
		}
		if enc == nil {
			enc = &testBlockEncoder{o: &w.o}
			enc.dict.clear()
			firstKey = cell.AppendKey(nil, c)
			// Like HBase, index later blocks by a shorter fake key when
			// one fits between the previous block and this one.
			if i > 0 && !bytes.Equal(cells[i-1].Row, c.Row) {
				f := cell.FirstOnRow(c.Row)
				firstKey = cell.AppendKey(nil, &f)
			}
		}
		enc.add(c)
		maxTags = max(maxTags, len(c.Tags))
		maxTS = max(maxTS, c.SeqID)
	}
	flush()
	flushLeaf(true)
	// A meta block in the non-scanned section.
	metaOff, metaSize := w.writeBlock(BlockMeta, []byte("meta block payload"))
	levels := 1
	root := leaf
	if o.leafEntries > 0 && len(cells) > 0 {
		levels = 2
		root = leaves
		for o.rootEntries > 0 && len(root) > o.rootEntries {
			var up []IndexEntry
			for i := 0; i < len(root); i += o.rootEntries {
				chunk := root[i:min(i+o.rootEntries, len(root))]
				ip := nonRootIndexBytes(chunk)
				idxUnc += uint64(len(ip))
				off, size := w.writeBlock(BlockIntermediateIndex, ip)
				up = append(up, IndexEntry{Key: chunk[0].Key, Offset: off, Size: int32(size)})
			}
			root = up
			levels++
		}
	}
	loadOnOpen := int64(w.buf.Len())
	rp := rootIndexBytes(root)
	if levels >= 2 && len(leaves) > 0 {
		mid := leaves[len(leaves)/2]
		rp = binary.BigEndian.AppendUint64(rp, uint64(mid.Offset))
		rp = binary.BigEndian.AppendUint32(rp, uint32(mid.Size))
		rp = binary.BigEndian.AppendUint32(rp, 0)
	}
	idxUnc += uint64(len(rp))
	w.writeBlock(BlockRootIndex, rp)
	w.writeBlock(BlockRootIndex, rootIndexBytes([]IndexEntry{{Key: []byte("meta"), Offset: metaOff, Size: int32(metaSize)}}))
	// File info.
	info := map[string][]byte{
		"hfile.AVG_KEY_LEN":    binary.BigEndian.AppendUint32(nil, 20),
		"hfile.AVG_VALUE_LEN":  binary.BigEndian.AppendUint32(nil, 10),
		"hfile.CREATE_TIME_TS": binary.BigEndian.AppendUint64(nil, 1700000000000),
		"TIMERANGE":            append(binary.BigEndian.AppendUint64(nil, 1), binary.BigEndian.AppendUint64(nil, 2)...),
	}
	if len(cells) > 0 {
		info["hfile.LASTKEY"] = cell.AppendKey(nil, &cells[len(cells)-1])
	}
	if o.tags {
		info["hfile.MAX_TAGS_LEN"] = binary.BigEndian.AppendUint32(nil, uint32(maxTags))
		tc := byte(0)
		if o.tagsCompressed {
			tc = 0xFF
		}
		info["hfile.TAGS_COMPRESSED"] = []byte{tc}
	}
	if o.mvcc {
		info["KEY_VALUE_VERSION"] = binary.BigEndian.AppendUint32(nil, 1)
		info["MAX_MEMSTORE_TS_KEY"] = binary.BigEndian.AppendUint64(nil, maxTS)
	}
	if o.enc != EncodingNone {
		info["DATA_BLOCK_ENCODING"] = []byte(o.enc.String())
	}
	for k, v := range o.extraInfo {
		info[k] = v
	}
	var fi []byte
	for k, v := range info {
		var pair []byte
		pair = protowire.AppendTag(pair, 1, protowire.BytesType)
		pair = protowire.AppendBytes(pair, []byte(k))
		pair = protowire.AppendTag(pair, 2, protowire.BytesType)
		pair = protowire.AppendBytes(pair, v)
		fi = protowire.AppendTag(fi, 1, protowire.BytesType)
		fi = protowire.AppendBytes(fi, pair)
	}
	fiOff, _ := w.writeBlock(BlockFileInfo, append(protowire.AppendVarint([]byte("PBUF"), uint64(len(fi))), fi...))
	w.writeBlock(BlockGeneralBloomMeta, bytes.Repeat([]byte{1}, 40))
	// Trailer.
	var tp []byte
	field := func(n protowire.Number, v uint64) {
		tp = protowire.AppendTag(tp, n, protowire.VarintType)
		tp = protowire.AppendVarint(tp, v)
	}
	field(1, uint64(fiOff))
	field(2, uint64(loadOnOpen))
	field(3, idxUnc)
	field(4, w.totalUnc)
	field(5, uint64(len(root)))
	field(6, 1)
	field(7, uint64(len(cells)))
	field(8, uint64(levels))
	field(9, uint64(first))
	field(10, uint64(last))
	comparator := o.comparator
	if comparator == "" {
		comparator = "org.apache.hadoop.hbase.CellComparatorImpl"
	}
	tp = protowire.AppendTag(tp, 11, protowire.BytesType)
	tp = protowire.AppendString(tp, comparator)
	if o.encrypted {
		tp = protowire.AppendTag(tp, 13, protowire.BytesType)
		tp = protowire.AppendBytes(tp, []byte("wrapped-key"))
	}
	field(12, uint64(o.codec))
	if o.trailerCodec != 0 {
		field(12, uint64(o.trailerCodec)) // a repeated field: last one wins
	}
	if o.lzo {
		field(12, uint64(CodecLZO))
	}
	tp = protowire.AppendTag(tp, 99, protowire.BytesType) // unknown field: must be skipped
	tp = protowire.AppendString(tp, "future")
	ts, _ := trailerSize(o.major)
	tr := append([]byte(nil), trailerMagic...)
	tr = protowire.AppendVarint(tr, uint64(len(tp)))
	tr = append(tr, tp...)
	tr = append(tr, make([]byte, ts-4-len(tr))...)
	tr = binary.BigEndian.AppendUint32(tr, uint32(o.minor)<<24|uint32(o.major))
	w.buf.Write(tr)
	return w.buf.Bytes()
}
