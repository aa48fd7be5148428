package bigtable_test

import (
	"math"
	"testing"

	"cloud.google.com/go/bigtable"

	bt "github.com/rekeyhq/rekey/sink/bigtable"
)

// TestMicros: HBase milliseconds become Bigtable microseconds ×1000;
// from the first millisecond whose product would pass Bigtable's largest
// timestamp (the largest int64 rounded down to a millisecond) every
// timestamp is that largest one, clamped; a negative one has no form.
func TestMicros(t *testing.T) {
	if bt.MaxTimestamp != 9_223_372_036_854_775_000 {
		t.Fatalf("MaxTimestamp = %d", bt.MaxTimestamp)
	}
	for _, tc := range []struct {
		name        string
		ms          int64
		want        bigtable.Timestamp
		clamped, ok bool
	}{
		{"the epoch", 0, 0, false, true},
		{"2026-01-01T00:00:00.123Z", 1767225600123, 1767225600123000, false, true},
		{"the last millisecond below the maximum", 9_223_372_036_854_774, 9_223_372_036_854_774_000, false, true},
		{"the first at the maximum", 9_223_372_036_854_775, bt.MaxTimestamp, true, true},
		{"one past it, whose product overflows", 9_223_372_036_854_776, bt.MaxTimestamp, true, true},
		{"HBase's LATEST_TIMESTAMP", math.MaxInt64, bt.MaxTimestamp, true, true},
		{"negative", -1, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, clamped, ok := bt.Micros(tc.ms)
			if got != tc.want || clamped != tc.clamped || ok != tc.ok {
				t.Errorf("Micros(%d) = %d, %v, %v; want %d, %v, %v", tc.ms, got, clamped, ok, tc.want, tc.clamped, tc.ok)
			}
			if ok && got%1000 != 0 {
				t.Errorf("Micros(%d) = %d is not a whole millisecond", tc.ms, got)
			}
		})
	}
}
