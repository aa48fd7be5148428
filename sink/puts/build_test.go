package puts

import (
	"testing"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/snapshot"
)

// TestFloor: the puts sink's floor, as the run asks its kind for it, is
// a quarter of a small snapshot and the 8 MiB of the other sinks from
// 32 MiB on.
func TestFloor(t *testing.T) {
	const MiB = 1 << 20
	kind, ok := sink.Lookup(job.SinkPuts)
	if !ok || kind.SplitFloor == nil {
		t.Fatal("the puts kind declares no split floor")
	}
	for _, tc := range []struct{ total, want int64 }{
		{0, 1},
		{3257532, 3257532 / 4}, // SIZE=small's snapshot
		{32 * MiB, 8 * MiB},
		{34 * MiB, 8 * MiB}, // SIZE=default's
		{800 * MiB, 8 * MiB},
	} {
		if got := kind.SplitFloor(tc.total, snapshot.MinDefaultSplitBytes); got != tc.want {
			t.Errorf("SplitFloor(%d) = %d, want %d", tc.total, got, tc.want)
		}
	}
}
