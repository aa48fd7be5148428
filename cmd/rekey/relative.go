package main

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/rekeyhq/rekey/job"
)

// relativeForm is a --from or --to relative to the current UTC day or
// hour: a signed count and a unit, such as -1d, 0d or -6h.
var relativeForm = regexp.MustCompile(`^([+-]?\d{1,5})([hd])$`)

// parseInstantFlag reads a time flag: epoch milliseconds, RFC 3339, or a
// relative form, which counts whole UTC days (d) or hours (h) from the
// start of the current one: at 2026-11-30T01:30Z, -1d is 2026-11-29T00:00Z
// and 0d is 2026-11-30T00:00Z. A scheduled job (a CronJob, whose pods get
// no shell to compute dates) passes --from=-1d --to=0d for the last day.
// The start of a period, not now minus a duration: a retry of the same
// run computes the same range, so its checkpoint still matches, and runs
// on consecutive days tile time with no gap and no overlap.
func parseInstantFlag(s string, now time.Time) (int64, error) {
	m := relativeForm.FindStringSubmatch(s)
	if m == nil {
		return job.ParseInstant(s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, fmt.Errorf("relative time %q: %w", s, err)
	}
	now = now.UTC()
	var t time.Time
	switch m[2] {
	case "d":
		t = time.Date(now.Year(), now.Month(), now.Day()+n, 0, 0, 0, 0, time.UTC)
	case "h":
		t = now.Truncate(time.Hour).Add(time.Duration(n) * time.Hour)
	}
	if t.UnixMilli() < 0 {
		return 0, fmt.Errorf("relative time %q is before 1970", s)
	}
	return t.UnixMilli(), nil
}
