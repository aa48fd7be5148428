package hfile

import (
	"encoding/binary"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/writable"
)

// IndexEntry points at one block: the first key of the block (for data
// blocks HBase may store a shorter "fake" key that sorts after the previous
// block's last key and no later than this block's first), its file offset,
// and its on-disk size including the header.
type IndexEntry struct {
	Key    []byte
	Offset int64
	Size   int32
}

// parseRootIndex reads count entries in root format:
// i64 offset, i32 onDiskSize, VInt keyLen, key. It returns the entries and
// the bytes after them (mid-key metadata in multi-level data indexes).
// Keys alias p.
func parseRootIndex(p []byte, count int) ([]IndexEntry, []byte, error) {
	if count < 0 || count > len(p)/13 {
		return nil, nil, errDecode("root index claims %d entries but has only %d bytes", count, len(p))
	}
	entries := make([]IndexEntry, count)
	for i := range entries {
		if len(p) < 12 {
			return nil, nil, errDecode("root index entry %d truncated", i)
		}
		off := int64(binary.BigEndian.Uint64(p))
		size := int32(binary.BigEndian.Uint32(p[8:]))
		kl, n, err := writable.ReadVLong(p[12:])
		if err != nil {
			return nil, nil, errDecode("root index entry %d key length: %v", i, err)
		}
		p = p[12+n:]
		if kl < 0 || kl > int64(len(p)) {
			return nil, nil, errDecode("root index entry %d key length %d overruns the block", i, kl)
		}
		entries[i] = IndexEntry{Key: p[:kl:kl], Offset: off, Size: size}
		p = p[kl:]
	}
	return entries, p, nil
}

// nonRootIndex is a leaf or intermediate index block payload:
// i32 n, (n+1) × i32 entry offsets relative to the entries area, entries of
// i64 offset, i32 onDiskSize, key (length from the next offset).
type nonRootIndex struct {
	n       int
	offsets []byte
	entries []byte
}

func parseNonRootIndex(p []byte) (nonRootIndex, error) {
	var x nonRootIndex
	if len(p) < 4 {
		return x, errDecode("index block too short for its entry count")
	}
	n := int(int32(binary.BigEndian.Uint32(p)))
	if n < 0 || n > (len(p)-8)/4 {
		return x, errDecode("index block claims %d entries in %d bytes", n, len(p))
	}
	x.n = n
	x.offsets = p[4 : 4+4*(n+1)]
	x.entries = p[4+4*(n+1):]
	// Check every offset up front so lookups never need to.
	prev := 0
	for i := 0; i <= n; i++ {
		o := int(int32(binary.BigEndian.Uint32(x.offsets[4*i:])))
		if o < prev || o > len(x.entries) || (i > 0 && o-prev < 12) || (i == 0 && o != 0) {
			return x, errDecode("index block entry %d offset %d out of order or out of bounds", i, o)
		}
		prev = o
	}
	return x, nil
}

func (x *nonRootIndex) entry(i int) IndexEntry {
	s := int(binary.BigEndian.Uint32(x.offsets[4*i:]))
	e := int(binary.BigEndian.Uint32(x.offsets[4*i+4:]))
	b := x.entries[s:e:e]
	return IndexEntry{
		Offset: int64(binary.BigEndian.Uint64(b)),
		Size:   int32(binary.BigEndian.Uint32(b[8:])),
		Key:    b[12:],
	}
}

// searchEntries returns the index of the last entry whose key is <= key in
// cell order, or 0 when key sorts before every entry (the first block then
// holds the first cell >= key).
func searchEntries(n int, keyAt func(int) []byte, key *cell.Cell) int {
	lo, hi := 0, n // find first entry with entry key > key
	var c cell.Cell
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if cell.ParseKey(keyAt(m), &c) != nil || cell.Compare(&c, key) > 0 {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return max(lo-1, 0)
}
