package main

import (
	"runtime/debug"
	"testing"

	"github.com/rekeyhq/rekey/job"
)

// TestSetRuntimeLimits: a run sets the soft memory limit from its budget
// and GOGC to jobGCPercent, and leaves either alone when the environment
// sets it.
func TestSetRuntimeLimits(t *testing.T) {
	oldGC := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(oldGC)
		debug.SetMemoryLimit(oldLimit)
	})
	b := job.NewBudget(1<<30, 2)

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	setRuntimeLimits(b)
	if got := debug.SetGCPercent(100); got != jobGCPercent {
		t.Errorf("GOGC unset: the collector runs at %d%%, want %d%%", got, jobGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != b.SoftLimit {
		t.Errorf("GOMEMLIMIT unset: soft limit %d, want the budget's %d", got, b.SoftLimit)
	}

	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(300 << 20)
	setRuntimeLimits(b)
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("GOGC=50: the collector runs at %d%%, want the environment's 50%%", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Errorf("GOMEMLIMIT=300MiB: soft limit %d, want the environment's %d", got, 300<<20)
	}
}
