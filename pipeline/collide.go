package pipeline

import (
	"encoding/binary"
	"hash/fnv"

	"github.com/rekeyhq/rekey/cell"
)

// collisionSet remembers, per new cell key, which old cell produced it, by
// 64-bit hashes: two different old cells with the same new key collide.
// A false collision needs two 64-bit hashes to clash, about one in 10^10
// for a split of 10^5 cells.
type collisionSet struct {
	m     map[uint64]uint64
	limit int
	full  bool
}

func newCollisionSet(limit int) *collisionSet {
	return &collisionSet{m: map[uint64]uint64{}, limit: max(limit, 1024)}
}

func keyHash(c *cell.Cell) uint64 {
	h := fnv.New64a()
	var n [8]byte
	for _, b := range [][]byte{c.Row, c.Family, c.Qualifier} {
		binary.BigEndian.PutUint32(n[:4], uint32(len(b)))
		h.Write(n[:4])
		h.Write(b)
	}
	binary.BigEndian.PutUint64(n[:], uint64(c.Timestamp))
	h.Write(n[:])
	h.Write([]byte{byte(c.Type)})
	return h.Sum64()
}

// add records that src became c and reports a collision.
func (s *collisionSet) add(c, src *cell.Cell) bool {
	k, v := keyHash(c), keyHash(src)
	if old, ok := s.m[k]; ok {
		return old != v
	}
	if len(s.m) >= s.limit {
		s.full = true
		return false
	}
	s.m[k] = v
	return false
}
