package bigtable

import (
	"math"

	"cloud.google.com/go/bigtable"
)

// MaxTimestamp is the largest timestamp Bigtable takes: microseconds,
// with millisecond granularity, so the largest int64 rounded down to a
// whole millisecond.
const MaxTimestamp = bigtable.Timestamp(math.MaxInt64 - math.MaxInt64%1000)

// overflowMillis is the first HBase timestamp (milliseconds) that does
// not fit below MaxTimestamp once multiplied by 1000. Google's HBase
// client for Bigtable writes every timestamp from here on (HBase's
// LATEST_TIMESTAMP among them) as MaxTimestamp; so do we, so that both
// tools put such a cell at the same place.
const overflowMillis = int64(MaxTimestamp) / 1000

// Micros maps an HBase timestamp in milliseconds to Bigtable's
// microseconds: ts×1000, or MaxTimestamp (clamped true) for a
// timestamp whose product would pass it. A negative HBase timestamp has
// no Bigtable form (HBase refuses one in a Put; Bigtable refuses any
// below 0 but -1, which is the server's clock): ok is false for it.
//
// Never the server's clock: a write with an explicit timestamp is
// idempotent, which is what lets the client retry it and a resumed run
// write it again without adding a version.
func Micros(ms int64) (ts bigtable.Timestamp, clamped, ok bool) {
	switch {
	case ms < 0:
		return 0, false, false
	case ms >= overflowMillis:
		return MaxTimestamp, true, true
	}
	return bigtable.Timestamp(ms * 1000), false, true
}
