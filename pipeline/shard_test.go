package pipeline

import (
	"fmt"
	"testing"
)

// TestShardsCoverEverySplitOnce: N shards together take every split
// exactly once, and their byte loads stay within one split of each other.
func TestShardsCoverEverySplitOnce(t *testing.T) {
	var items []work
	for i := 0; i < 37; i++ {
		items = append(items, work{id: fmt.Sprintf("r%02d", i), bytes: int64(1000 + (i*7919)%5000)})
	}
	for _, n := range []int{1, 2, 3, 8} {
		seen := map[string]int{}
		var loads []int64
		var biggest int64
		for _, w := range items {
			biggest = max(biggest, w.bytes)
		}
		for i := 0; i < n; i++ {
			var load int64
			for _, w := range shardOf(items, Shard{Index: i, Count: n}) {
				seen[w.id]++
				load += w.bytes
			}
			loads = append(loads, load)
		}
		for _, w := range items {
			if seen[w.id] != 1 {
				t.Errorf("%d shards: split %s taken %d times", n, w.id, seen[w.id])
			}
		}
		lo, hi := loads[0], loads[0]
		for _, l := range loads {
			lo, hi = min(lo, l), max(hi, l)
		}
		if hi-lo > biggest {
			t.Errorf("%d shards: loads %v differ by more than the largest split (%d)", n, loads, biggest)
		}
	}
}
