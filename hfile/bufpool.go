package hfile

import "sync"

// blockPool recycles the block buffers of closed iterators. A snapshot
// scan opens an iterator per store file per split, and each needs a
// buffer for the stored block and one for its decompressed payload; made
// fresh, they are a few MB of garbage per pass over a region, enough to
// keep the collector cycling, and while it marks, every pointer store of
// the merge pays a write barrier.
var blockPool sync.Pool // of *[]byte

// maxPooledBlock bounds what the pool keeps: blocks are about 64 KiB in
// most tables; a rare huge one (a single large cell) is not held on to.
const maxPooledBlock = 4 << 20

// getBlock returns a buffer of length n, from the pool when one there is
// large enough. Its contents are undefined.
func getBlock(n int) []byte {
	if p, _ := blockPool.Get().(*[]byte); p != nil && cap(*p) >= n {
		return (*p)[:n]
	}
	// A little headroom: block sizes vary by a cell either side of the
	// configured size, and a buffer sized exactly would be outgrown soon.
	return make([]byte, n, n+n/4)
}

// putBlock gives b back for reuse. The caller must hold no slice of it.
func putBlock(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledBlock {
		return
	}
	b = b[:0]
	blockPool.Put(&b)
}

// release gives the buffer's memory back to the pool.
func (b *blockBuf) release() {
	putBlock(b.raw)
	putBlock(b.payload)
	b.raw, b.payload = nil, nil
}
