package pipeline

import "testing"

// TestPutsFloor: the puts sink's floor is a quarter of a small snapshot
// and the 8 MiB of the other sinks from 32 MiB on.
func TestPutsFloor(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct{ total, want int64 }{
		{0, 1},
		{3257532, 3257532 / 4}, // SIZE=small's snapshot
		{32 * MiB, 8 * MiB},
		{34 * MiB, 8 * MiB}, // SIZE=default's
		{800 * MiB, 8 * MiB},
	} {
		if got := putsFloor(tc.total); got != tc.want {
			t.Errorf("putsFloor(%d) = %d, want %d", tc.total, got, tc.want)
		}
	}
}
