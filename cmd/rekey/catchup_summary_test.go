package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/pipeline"
)

// TestCatchupSummaryLine: a catch-up's summary says what it read and
// skipped and what it changed; a whole run's has no such line.
func TestCatchupSummaryLine(t *testing.T) {
	var b bytes.Buffer
	s := &pipeline.Summary{Job: "j.yaml", Snapshot: "b", Finished: true, Catchup: &pipeline.CatchupSummary{
		Since: "a", FilesRead: 6, FilesSkipped: 2, BytesRead: 142_440, BytesSkipped: 21_782,
		RowsTouched: 293, CellsAdded: 6, CellsRemoved: 4, CellsReplace: 1,
	}}
	printRunSummary(&b, s)
	want := "  catch-up  since a: store files 6 read (0.1 MB), 2 skipped (0.0 MB); 293 rows touched; 6 cells added (1 replacing a value), 4 removed\n"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("summary:\n%s\nwant the line\n%s", b.String(), want)
	}
	b.Reset()
	s.Catchup = nil
	printRunSummary(&b, s)
	if strings.Contains(b.String(), "catch-up") {
		t.Fatalf("a whole run's summary mentions a catch-up:\n%s", b.String())
	}
}

// TestCatchupRefusalsExitTwo: a catch-up refused because the reached
// record does not put the target at its snapshot, or because the two
// snapshots cannot be compared by their files, is the user's to fix:
// exit 2, not a failure to retry or a damaged input.
func TestCatchupRefusalsExitTwo(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("prepare: %w: the target reached snapshot b", pipeline.ErrNotAt),
		fmt.Errorf("catch-up from a to b: %w: family f reads by other rules", pipeline.ErrIncompatible),
	} {
		if code := exitCode(runError("j.yaml", err)); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", err, code, exitUsage)
		}
	}
}
