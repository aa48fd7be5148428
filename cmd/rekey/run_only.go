package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/verify"
)

// onlyRanges reads the ranges to redo from a `rekey verify` JSON report,
// for `rekey run --only REPORT.json`.
func onlyRanges(path string) ([]pipeline.KeyRange, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--only: %w", err)
	}
	defer fh.Close()
	rep, err := verify.ReadReport(fh)
	if err != nil {
		return nil, fmt.Errorf("--only %s: %w", path, err)
	}
	rs, err := rep.RedoRanges()
	if errors.Is(err, verify.ErrNeedsEntityFilter) {
		return nil, fmt.Errorf("--only %s: %w; the old layout scatters that entity over the table, so rerun the job instead", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("--only %s: %w", path, err)
	}
	if len(rs) == 0 {
		for _, e := range rep.Redo {
			if e.NewOnly {
				return nil, fmt.Errorf("--only %s: the report has nothing to redo: its entities are only on the new side (the old snapshot has no cell of them), so delete their cells in the target (each redo entry's new_range)", path)
			}
		}
		return nil, fmt.Errorf("--only %s: the report has nothing to redo", path)
	}
	out := make([]pipeline.KeyRange, len(rs))
	for i, r := range rs {
		out[i] = pipeline.KeyRange{Start: r.Start, Stop: r.Stop}
	}
	return out, nil
}
