package snapshot

import "testing"

// TestDefaultSplitBytesRule checks the default cut's rule on region sizes:
// the mean region, at most 1/16 of the snapshot, at least the floor, and 0
// (nothing cut) when no region is above it.
func TestDefaultSplitBytesRule(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		name  string
		sizes []int64
		floor int64
		want  int64
	}{
		{"no regions", nil, 8 * MiB, 0},
		{"small table: every region under the floor", []int64{3 * MiB, 7 * MiB, 1 * MiB}, 8 * MiB, 0},
		// 6 regions, 33 MiB: mean 5.5, 1/16 = 2.06, so the floor 8 MiB; the
		// 18 MiB region is above it (the bench's SIZE=default shape).
		{"one heavy region, floor", []int64{18 * MiB, 2 * MiB, 2 * MiB, 5 * MiB, 2 * MiB, 4 * MiB}, 8 * MiB, 8 * MiB},
		// 8 regions, 800 MiB: mean 100, 1/16 = 50.
		{"many workers' share", []int64{450 * MiB, 50 * MiB, 50 * MiB, 50 * MiB, 50 * MiB, 50 * MiB, 50 * MiB, 50 * MiB}, 8 * MiB, 50 * MiB},
		// 40 even regions of 100 MiB and one of 1 GiB: 5 GiB in all, mean
		// 124.9 MiB, 1/16 = 320: the mean.
		{"mean region", append(even(40, 100*MiB), 1024*MiB), 8 * MiB, (40*100*MiB + 1024*MiB) / 41},
		// Even regions of the mean size: nothing above it, nothing cut.
		{"even regions", even(40, 100*MiB), 8 * MiB, 0},
		{"one region", []int64{160 * MiB}, 8 * MiB, 10 * MiB},
	} {
		if got := defaultSplitBytes(tc.sizes, tc.floor); got != tc.want {
			t.Errorf("%s: defaultSplitBytes = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func even(n int, size int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = size
	}
	return out
}
