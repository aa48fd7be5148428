package pipeline

import (
	"strings"
	"testing"
	"time"
)

// TestProgressLine: the one progress line says splits and bytes done of
// the total with the share, the cells written, the rates of the last
// seconds, and an ETA from the bytes left at that rate: under a cap that
// slowed the run to a tenth of its start, the ETA follows the recent
// rate, not the run's average; paused says paused; a window in which
// nothing was read gives no ETA of 0s.
func TestProgressLine(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	w := newRateWindow(10 * time.Second)
	w.add(t0, 0, 0)
	// 600 MB in the first minute, then 1 MB/s for 10 s.
	w.add(t0.Add(60*time.Second), 600e6, 6e6)
	for i := 1; i <= 10; i++ {
		w.add(t0.Add(time.Duration(60+i)*time.Second), int64(600e6+i*1e6), int64(6e6+i*1e4))
	}
	s := Status{Splits: 40, SplitsDone: 12, TotalBytes: 1_000_000_000 + 610e6, BytesRead: 610e6, Written: 6_100_000}
	line := progressLine(s, 0, w.rate())
	for _, want := range []string{"splits 12/40", "(38%)", "6.10M cells written", "10.0k cells/s", "976.6 KiB/s read", "ETA 16m40s"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	s.Paused = true
	if line := progressLine(s, 0, w.rate()); !strings.HasSuffix(line, ", paused") {
		t.Errorf("paused: %q", line)
	}
	s.Paused = false
	still := newRateWindow(10 * time.Second)
	still.add(t0, 5e6, 10)
	still.add(t0.Add(10*time.Second), 5e6, 10)
	if line := progressLine(s, 0, still.rate()); strings.Contains(line, "ETA 0s") || !strings.Contains(line, "ETA unknown (nothing read in 10s)") {
		t.Errorf("stalled: %q", line)
	}
}
