package verify

import (
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/vfs"
)

// RunSummary is what a report says of the run whose output it checked:
// the part of the summary the run kept in its state folder
// (job.RunSummaryFile) that a reader of the report weighs the verdict by.
type RunSummary struct {
	// File is where the summary was read.
	File     string `json:"file"`
	Splits   int    `json:"splits"`
	Done     int    `json:"splits_done"`
	Read     int64  `json:"cells_read"`
	Written  int64  `json:"cells_written"`
	Rejected int64  `json:"cells_rejected"`
	Collided int64  `json:"cells_collided"`
	Failed   int64  `json:"cells_failed"`
	// Seconds is the run's wall time.
	Seconds     float64 `json:"seconds"`
	Finished    bool    `json:"finished"`
	Interrupted bool    `json:"interrupted"`
}

// Line renders the summary in one line, for the text and HTML reports.
func (s *RunSummary) Line() string {
	state := "finished"
	switch {
	case s.Interrupted:
		state = "interrupted"
	case !s.Finished:
		state = "not finished"
	}
	return fmt.Sprintf("the run (%s): %s, %d of %d splits done; %d cells read, %d written, %d rejected, %d collided, %d failed; %.1f s",
		s.File, state, s.Done, s.Splits, s.Read, s.Written, s.Rejected, s.Collided, s.Failed, s.Seconds)
}

// readRunSummary reads the summary a run in one process kept in its
// state folder dir; nil when there is none (a run in phases or shards, or
// one before the file existed). A file there that does not read as a
// summary is an error: the report would otherwise say nothing of a run
// that it claims to have checked.
func readRunSummary(dir string, vo vfs.Options) (*RunSummary, error) {
	loc, err := vfs.OpenWith(dir, vo)
	if err != nil {
		return nil, nil // no state folder to read: nothing to say
	}
	defer loc.Close()
	p := path.Join(loc.Path, job.RunSummaryFile)
	b, err := vfs.ReadFile(loc.FS, p)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("verify: the run's summary %s: %w", p, err)
	}
	s := &RunSummary{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("verify: the run's summary %s: %w (remove it to verify without it)", p, err)
	}
	s.File = loc.URL + "/" + job.RunSummaryFile
	return s, nil
}
