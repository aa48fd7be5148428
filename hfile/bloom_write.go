package hfile

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/rekeyhq/rekey/cell"
)

// Compound bloom filters, as HBase's StoreFileWriter builds them for a
// family with BLOOMFILTER => ROW or ROWCOL:
//
//   - Keys: ROW adds each new row; ROWCOL each new row+column, hashed as
//     u16 row length, row, a 0 family length (the family is left out),
//     qualifier, LATEST_TIMESTAMP and type Maximum.
//   - Bits: MurmurHash2 of the key with seed 0 gives h1, with seed h1 gives
//     h2; key k sets bit (h1 + i*h2) mod bits for i < hashCount (32-bit
//     wrapping sums, absolute value of the remainder), bit b of a byte being
//     1<<b.
//   - Chunks: 128 KiB (io.storefile.bloom.block.size) sized for an error
//     rate of 1% (ROW) or 1-sqrt(0.99) (ROWCOL, two lookups per get); a
//     chunk that reached its key capacity is written inline (BLMFBLK2, its
//     payload the bit array) after the next data block; the last one is
//     folded in halves while it stays under half full, up to 7 times.
//   - Meta (BLMFMET2, after the file info): i32 version 3, i64 total bytes,
//     i32 hash count, i32 hash type (1, murmur), i64 keys, i64 capacity,
//     i32 chunks, the comparator name as a Hadoop byte array (empty for
//     ROW), then a root-format index of the chunks by their first key (the
//     row, or for ROWCOL the key of row, empty family, qualifier,
//     LATEST_TIMESTAMP, Maximum).
//   - File info: BLOOM_FILTER_TYPE and LAST_BLOOM_KEY (the last such key).
const (
	bloomChunkBytes     = 128 << 10
	bloomErrorRate      = float32(0.01)
	bloomMaxFold        = 7
	bloomHashMurmur     = 1
	bloomMetaVersion    = 3
	bloomRowColCompName = "org.apache.hadoop.hbase.CellComparatorImpl"
)

type bloomChunk struct {
	bits    []byte
	keys    int64
	maxKeys int64
	first   []byte
}

// bloomWriter builds a compound bloom filter while cells are appended.
type bloomWriter struct {
	typ       BloomType
	byteSize  int
	hashCount int
	maxKeys   int64

	cur   *bloomChunk
	ready []*bloomChunk
	spare [][]byte // bit arrays of written chunks, for reuse

	index                     indexChunk
	keys                      int64
	totalBytes, totalMaxKeys  int64
	lastKey, hashKey, scratch []byte
}

func newBloomWriter(t BloomType) *bloomWriter {
	rate := float64(bloomErrorRate)
	if t == BloomRowCol {
		rate = float64(float32(1 - math.Sqrt(float64(1-bloomErrorRate))))
	}
	b := &bloomWriter{typ: t, byteSize: foldableByteSize(bloomChunkBytes*8, bloomMaxFold)}
	bits := int64(b.byteSize) * 8
	ln2sq := math.Ln2 * math.Ln2
	maxKeys := int64(float64(bits) * (ln2sq / -math.Log(rate)))
	b.hashCount = int(math.Ceil(math.Ln2 * float64(bits/maxKeys)))
	b.maxKeys = int64(-float64(bits) * 1.0 / float64(b.hashCount) * math.Log(1-math.Exp(math.Log(rate)/float64(b.hashCount))))
	return b
}

// foldableByteSize rounds bits up to bytes that halve evenly fold times.
func foldableByteSize(bits int64, fold int) int {
	n := (bits + 7) / 8
	mask := int64(1)<<fold - 1
	if n&mask != 0 {
		n = (n>>fold + 1) << fold
	}
	return int(n)
}

// add records c when it starts a new bloom key; prev is the cell appended
// before it (nil for the first), and sameRow says c has prev's row (the
// writer compared them already).
func (b *bloomWriter) add(c, prev *cell.Cell, sameRow bool) {
	if prev != nil && sameRow &&
		(b.typ == BloomRow || bytes.Equal(prev.Family, c.Family) && bytes.Equal(prev.Qualifier, c.Qualifier)) {
		return
	}
	if b.cur != nil && b.cur.keys >= b.cur.maxKeys {
		b.enqueue()
	}
	if b.typ == BloomRow {
		b.lastKey = append(b.lastKey[:0], c.Row...)
		b.hashKey = b.lastKey
	} else {
		// HBase's first-on-row-col cell has no family.
		fc := cell.Cell{Row: c.Row, Qualifier: c.Qualifier, Timestamp: cell.LatestTimestamp, Type: cell.Maximum}
		b.lastKey = cell.AppendKey(b.lastKey[:0], &fc)
		k := binary.BigEndian.AppendUint16(b.scratch[:0], uint16(len(c.Row)))
		k = append(k, c.Row...)
		k = append(k, 0)
		k = append(k, c.Qualifier...)
		k = binary.BigEndian.AppendUint64(k, uint64(cell.LatestTimestamp))
		b.scratch = append(k, byte(cell.Maximum))
		b.hashKey = b.scratch
	}
	if b.cur == nil {
		var bits []byte
		if n := len(b.spare); n > 0 {
			bits, b.spare = b.spare[n-1][:b.byteSize], b.spare[:n-1]
			clear(bits)
		} else {
			bits = make([]byte, b.byteSize)
		}
		b.cur = &bloomChunk{bits: bits, maxKeys: b.maxKeys, first: bytes.Clone(b.lastKey)}
	}
	h1 := murmur2(b.hashKey, 0)
	h2 := murmur2(b.hashKey, h1)
	nbits := int64(len(b.cur.bits)) * 8
	for i := 0; i < b.hashCount; i++ {
		loc := int64(h1+int32(i)*h2) % nbits
		if loc < 0 {
			loc = -loc
		}
		b.cur.bits[loc>>3] |= 1 << (loc & 7)
	}
	b.cur.keys++
	b.keys++
}

// enqueue closes the current chunk, folding it while it is less than
// half full, and queues it for writing.
func (b *bloomWriter) enqueue() {
	c := b.cur
	b.cur = nil
	size, maxKeys, pieces := len(c.bits), c.maxKeys, 1
	for size&1 == 0 && maxKeys > c.keys<<1 {
		pieces <<= 1
		size >>= 1
		maxKeys >>= 1
	}
	for p := 1; p < pieces; p++ {
		part := c.bits[p*size : (p+1)*size]
		for i := range size {
			c.bits[i] |= part[i]
		}
	}
	c.bits, c.maxKeys = c.bits[:size], maxKeys
	b.totalBytes += int64(size)
	b.totalMaxKeys += maxKeys
	b.ready = append(b.ready, c)
}

// flushChunks writes the queued chunks as inline bloom blocks; closing
// first queues the unfinished chunk.
func (b *bloomWriter) flushChunks(w *Writer, closing bool) error {
	if closing && b.cur != nil {
		b.enqueue()
	}
	for len(b.ready) > 0 {
		c := b.ready[0]
		w.ibuf = append(w.ibuf[:headerSize], c.bits...)
		off := w.off
		size, err := w.writeBlock(BlockBloomChunk, &w.ibuf)
		if err != nil {
			return err
		}
		b.index.add(c.first, off, int32(size), -1)
		b.spare = append(b.spare, c.bits[:cap(c.bits)])
		b.ready = b.ready[1:]
	}
	return nil
}

// appendMeta appends the BLMFMET2 payload.
func (b *bloomWriter) appendMeta(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, bloomMetaVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.totalBytes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(b.hashCount))
	dst = binary.BigEndian.AppendUint32(dst, bloomHashMurmur)
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.keys))
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.totalMaxKeys))
	dst = binary.BigEndian.AppendUint32(dst, uint32(b.index.n()))
	if b.typ == BloomRowCol {
		dst = appendVLong(dst, int64(len(bloomRowColCompName)))
		dst = append(dst, bloomRowColCompName...)
	} else {
		dst = appendVLong(dst, 0)
	}
	return b.index.appendRoot(dst)
}

// murmur2 is MurmurHash2 as HBase's MurmurHash computes it: 4-byte
// little-endian words, then up to 3 tail bytes taken as signed.
func murmur2(data []byte, seed int32) int32 {
	const m = uint32(0x5bd1e995)
	h := uint32(seed) ^ uint32(len(data))
	n4 := len(data) &^ 3
	for i := 0; i < n4; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= m
		k ^= k >> 24
		k *= m
		h *= m
		h ^= k
	}
	switch len(data) - n4 {
	case 3:
		h ^= uint32(int32(int8(data[n4+2])) << 16)
		fallthrough
	case 2:
		h ^= uint32(int32(int8(data[n4+1])) << 8)
		fallthrough
	case 1:
		h ^= uint32(int32(int8(data[n4])))
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}
