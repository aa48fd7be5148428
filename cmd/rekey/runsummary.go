package main

import (
	"encoding/json"
	"path"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/vfs"
)

// keepSummary writes the summary of a run in one process to its state
// folder (job.RunSummaryFile), where rekey verify finds it and puts the
// run's counts in its report. A summary that cannot be written is told,
// not a failure of the run: the run's output stands.
func keepSummary(stateDir string, sum *pipeline.Summary, logf func(string, ...any)) {
	b, err := json.MarshalIndent(withBuild(sum), "", " ")
	if err == nil {
		var loc *vfs.Location
		if loc, err = vfs.OpenWith(stateDir, locOptions()); err == nil {
			defer loc.Close()
			if wfs, ok := loc.FS.(vfs.WriteFS); ok {
				err = vfs.WriteFileAtomic(wfs, path.Join(loc.Path, job.RunSummaryFile), append(b, '\n'))
			}
		}
	}
	if err != nil {
		logf("the run's summary was not kept in %s (rekey verify reports without it): %v", stateDir, err)
	}
}
