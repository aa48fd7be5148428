package pipeline

import (
	"time"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// StagingStatus is a job in phases as its staging folder shows it
// (hfiles.Status): each phase's tasks done, running, failed and left, the
// cells and bytes so far, and an ETA.
type StagingStatus = hfiles.Status

// ErrNoStaging is matched by ReadStagingStatus's error for a folder that
// does not exist or holds no staged job (hfiles.ErrNoStaging).
var ErrNoStaging = hfiles.ErrNoStaging

// ReadStagingStatus reads the status of the job in phases from its staging folder
// alone (staging, or the job's sink.staging when empty): no task is asked.
// A task counts as running while its lease is live: on HDFS or an object
// store, a current lease generation not released nor past its expiry; on a local folder, a lock file whose owner process
// is alive on this host.
func ReadStagingStatus(j *job.Job, staging string) (*StagingStatus, error) {
	if staging == "" {
		staging = j.StagingPath()
	}
	return hfiles.ReadStatus(staging, state.LeaseLive, state.LeaseHolder, time.Now(), vfs.Options{Kerberos: Identity(j, nil)})
}

// Staged reports whether a job whose sink is k keeps a staging folder
// whose tasks `rekey status` reads (a sink that runs in phases, hfiles);
// the other sinks' state is the job record and the shards' commits.
func Staged(k job.SinkKind) bool {
	kind, ok := sink.Lookup(k)
	return ok && kind.Phases
}
