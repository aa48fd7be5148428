package main

import (
	"testing"
	"time"

	"github.com/rekeyhq/rekey/job"
)

// TestParseInstantFlag: relative forms count whole UTC days or hours from
// the start of the current one, whatever the time of day and zone of now;
// absolute forms read as the job file reads them.
func TestParseInstantFlag(t *testing.T) {
	// 01:30 UTC on 30 November, given in a zone 5 hours behind (the local
	// date there is still the 29th): relative days follow the UTC date.
	now := time.Date(2026, 11, 29, 20, 30, 15, 0, time.FixedZone("EST", -5*3600))
	utc := func(y int, mo time.Month, d, h int) int64 {
		return time.Date(y, mo, d, h, 0, 0, 0, time.UTC).UnixMilli()
	}
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0d", utc(2026, 11, 30, 0)},
		{"-1d", utc(2026, 11, 29, 0)},
		{"+1d", utc(2026, 12, 1, 0)},
		{"-30d", utc(2026, 10, 31, 0)},
		{"0h", utc(2026, 11, 30, 1)},
		{"-6h", utc(2026, 11, 29, 19)},
		{"1767225600000", 1767225600000},
		{"2026-11-29T00:00:00Z", utc(2026, 11, 29, 0)},
	} {
		got, err := parseInstantFlag(c.in, now)
		if err != nil || got != c.want {
			t.Errorf("%q: got %d, %v; want %d (%s)", c.in, got, err, c.want, time.UnixMilli(c.want).UTC())
		}
	}
	for _, bad := range []string{"-1", "1w", "-1D", "d", "-1.5d", "yesterday", "-999999d"} {
		if got, err := parseInstantFlag(bad, now); err == nil {
			t.Errorf("%q: got %d, want an error", bad, got)
		}
	}
}

// TestRelativeFromToFlags: rekey run's --from and --to take the relative
// forms (the = form too, which a manifest's args use for a leading minus).
func TestRelativeFromToFlags(t *testing.T) {
	cmd := newRunCmd()
	if err := cmd.ParseFlags([]string{"--from=-1d", "--to", "0d"}); err != nil {
		t.Fatal(err)
	}
	from, _ := cmd.Flags().GetString("from")
	to, _ := cmd.Flags().GetString("to")
	if from != "-1d" || to != "0d" {
		t.Fatalf("flags read %q and %q", from, to)
	}
	j, err := job.Load(demoJob(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyRunFlags(j, runFlags{from: from, to: to}); err != nil {
		t.Fatal(err)
	}
	if d := j.Source.Scan.To - j.Source.Scan.From; d != 24*3600*1000 {
		t.Errorf("--from=-1d --to 0d spans %d ms, want one day", d)
	}
	if j.Source.Scan.To%(24*3600*1000) != 0 {
		t.Errorf("--to 0d = %d, not a UTC midnight", j.Source.Scan.To)
	}
}
