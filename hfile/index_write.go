package hfile

import (
	"encoding/binary"
	"sort"
)

// Index building, as HBase's block index writer does it:
//
//   - every data block adds an entry (its first key, or a shorter key that
//     sorts between it and the previous block) to the current leaf chunk;
//   - when that chunk's non-root form reaches maxIndexChunk bytes it is
//     written inline, among the data blocks, as a leaf index block, and the
//     root gains an entry for it (with the count of data blocks so far, for
//     the mid-key);
//   - at close, a file that never wrote a leaf keeps its entries in the root
//     (one level); otherwise the last leaf is written and, while the root
//     is larger than maxIndexChunk and has more than minIndexEntries
//     entries, it is cut into intermediate blocks, one level at a time.
const (
	maxIndexChunk   = 128 << 10 // hfile.index.block.max.size
	minIndexEntries = 16        // hfile.index.block.min.entries
	maxIndexLevels  = 16
)

// indexChunk holds index entries, keys in one arena, and knows its size
// in both the root and the non-root block formats.
type indexChunk struct {
	arena   []byte
	ends    []int
	offsets []int64
	sizes   []int32
	// subs[i] counts the data blocks under entries 0..i (root of a
	// multi-level index only), for the mid-key metadata.
	subs        []int64
	nonRootSize int // entries only: 12 + key per entry
	rootSize    int
}

func (c *indexChunk) n() int { return len(c.ends) }

func (c *indexChunk) key(i int) []byte {
	s := 0
	if i > 0 {
		s = c.ends[i-1]
	}
	return c.arena[s:c.ends[i]]
}

func (c *indexChunk) add(key []byte, off int64, size int32, sub int64) {
	c.arena = append(c.arena, key...)
	c.ends = append(c.ends, len(c.arena))
	c.offsets = append(c.offsets, off)
	c.sizes = append(c.sizes, size)
	if sub >= 0 {
		c.subs = append(c.subs, sub)
	}
	c.nonRootSize += 12 + len(key)
	c.rootSize += 12 + vlongSize(int64(len(key))) + len(key)
}

func (c *indexChunk) clear() {
	c.arena, c.ends, c.offsets, c.sizes, c.subs = c.arena[:0], c.ends[:0], c.offsets[:0], c.sizes[:0], c.subs[:0]
	c.nonRootSize, c.rootSize = 0, 0
}

// blockSize is the chunk's payload size in the non-root format.
func (c *indexChunk) blockSize() int { return 4 + 4*(c.n()+1) + c.nonRootSize }

// appendNonRoot appends the leaf/intermediate format: i32 count, count+1
// i32 offsets of each entry relative to the entries area (the last is its
// size), then entries of i64 offset, i32 on-disk size, key.
func (c *indexChunk) appendNonRoot(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(c.n()))
	rel := 0
	for i := 0; i < c.n(); i++ {
		b = binary.BigEndian.AppendUint32(b, uint32(rel))
		rel += 12 + len(c.key(i))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(rel))
	for i := 0; i < c.n(); i++ {
		b = binary.BigEndian.AppendUint64(b, uint64(c.offsets[i]))
		b = binary.BigEndian.AppendUint32(b, uint32(c.sizes[i]))
		b = append(b, c.key(i)...)
	}
	return b
}

// appendRoot appends the root format: per entry i64 offset, i32 on-disk
// size, VInt key length, key.
func (c *indexChunk) appendRoot(b []byte) []byte {
	for i := 0; i < c.n(); i++ {
		b = binary.BigEndian.AppendUint64(b, uint64(c.offsets[i]))
		b = binary.BigEndian.AppendUint32(b, uint32(c.sizes[i]))
		k := c.key(i)
		b = appendVLong(b, int64(len(k)))
		b = append(b, k...)
	}
	return b
}

// midKeyMetadata is the 16 bytes after a multi-level root index: the leaf
// block holding the middle data block's entry (offset, on-disk size) and
// that entry's position inside it.
func (c *indexChunk) midKeyMetadata(b []byte) []byte {
	total := c.subs[len(c.subs)-1]
	mid := (total - 1) / 2
	// The first leaf whose cumulative count exceeds mid holds it.
	i := sort.Search(len(c.subs), func(i int) bool { return c.subs[i] > mid })
	before := int64(0)
	if i > 0 {
		before = c.subs[i-1]
	}
	b = binary.BigEndian.AppendUint64(b, uint64(c.offsets[i]))
	b = binary.BigEndian.AppendUint32(b, uint32(c.sizes[i]))
	return binary.BigEndian.AppendUint32(b, uint32(mid-before))
}
