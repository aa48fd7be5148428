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
// Why: a run's live heap is small against its budget, while HDFS writes
// allocate a fresh buffer per 64 KiB packet inside colinmarc/hdfs, so at
// Go's default the collector runs many times more often than the live
// heap needs. Doubling the room takes most of what a larger GOGC saves;
// beyond it the peak RSS grows with GOGC and the CPU barely moves (the
// measurement: docs/performance.md, "The collector's pace"). The soft
// memory limit (job.Budget.SoftLimit) still bounds the heap whatever GOGC
// says, so a larger live heap collects at the limit as before.
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
