package main

import (
	"os"
	"runtime/debug"

	"github.com/rekeyhq/rekey/job"
)

// jobGCPercent is the collector's GOGC for rekey run and rekey load: the
// heap may grow to three times what survived the last collection before
// the next one starts, instead of Go's default two.
//
// Why: a run's live heap is small against its budget (about 30 MB of a
// 1 GiB budget in the large staged bench job), while HDFS writes allocate
// a fresh buffer per 64 KiB packet inside colinmarc/hdfs: about 725 MB
// allocated in that job, one collection per 35 MB. Measured there (SIZE=
// large, 2 workers, staged on HDFS with --no-load, 3 alternating pairs
// each): 10.71 user CPU s at GOGC 100, 10.27 at 200, 10.15 at 400, 10.22 at
// 1000; peak RSS 110, 145, 235 and 376 MB. 200 keeps most of the saving at
// the least memory. The soft memory limit (job.Budget.SoftLimit) still
// bounds the heap whatever GOGC says, so a larger live heap collects at
// the limit as before.
const jobGCPercent = 200

// setRuntimeLimits applies the run's memory budget to the Go runtime: the
// soft memory limit unless $GOMEMLIMIT sets one, and jobGCPercent unless
// $GOGC sets one.
func setRuntimeLimits(b job.Budget) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(b.SoftLimit)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(jobGCPercent)
	}
}
