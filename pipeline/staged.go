package pipeline

import (
	"encoding/json"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/hfiles"
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
	return hfiles.ReadStatus(staging, leaseLive, leaseHolder, time.Now(), vfs.Options{Kerberos: Identity(j, nil)})
}

// leaseLive reports whether the lease file p is held by a live run,
// without taking it (a status poll must never make a task's start fail).
func leaseLive(fsys vfs.FS, p string) bool {
	if _, ok := fsys.(vfs.Local); ok {
		b, err := os.ReadFile(p)
		var rec leaseRecord
		if err != nil || json.Unmarshal(b, &rec) != nil || rec.PID == 0 {
			return false
		}
		return rec.Host == self().Host && processAlive(rec.PID)
	}
	if fi, err := fsys.Stat(p); err == nil && !fi.IsDir() {
		// The single lease file of a rekey from before generations.
		lf, err := readLeaseFile(fsys, p, DefaultLeaseTTL)
		return err == nil && lf.rec.Token != "" && time.Now().Before(lf.rec.Expires)
	}
	_, lf, err := currentLease(fsys, p, DefaultLeaseTTL)
	return err == nil && lf != nil && lf.rec.Token != "" && !lf.rec.Released && time.Now().Before(lf.rec.Expires)
}

// processAlive reports whether a process with this PID exists here.
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// Staged reports whether a job whose sink is k keeps a staging folder
// whose tasks `rekey status` reads (a sink that runs in phases, hfiles);
// the other sinks' state is the job record and the shards' commits.
func Staged(k job.SinkKind) bool {
	kind, ok := sink.Lookup(k)
	return ok && kind.Phases
}
