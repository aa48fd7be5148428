package pipeline

import (
	"fmt"

	"github.com/rekeyhq/rekey/vfs"
)

// checkOutputs makes sure the files a run writes only at its end can be
// written, before the first cell is read (the plan's sample included): a
// reject file that cannot be written would otherwise fail the run after
// all its work. The job's reject file is rebuilt at the end from the
// per-split ones, so only its folder is probed.
func (r *Run) checkOutputs() error {
	if f := r.j.BadKeys.File; f != "" {
		if err := vfs.ProbeCreate(f); err != nil {
			return fmt.Errorf("%w: bad_keys.file: %w", ErrInvalid, err)
		}
	}
	return nil
}
