package hfiles

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// identityWait bounds how long claimIdentity waits for an identity file
// another task created but has not yet written.
var identityWait = 10 * time.Second

// CheckIdentity records in the staging folder which job's output it
// holds (job.StagedIdentityFile), or, when a run or task of some job
// recorded it first, refuses the folder (state.ErrMismatch, exit 2) if
// that job writes other cells or other keys than j: a different layout,
// table, family mapping, entity or snapshot. Without it, a second job
// staged into the folder found the first one's committed splits and
// HFiles beside its own, and verify of the wrong job reported every cell
// missing. The record is an exclusive create, like the kind file's, so
// two jobs that start together cannot both claim the folder.
func CheckIdentity(staging string, j *job.Job, vo vfs.Options) error {
	return checkIdentity(staging, j, "", vo)
}

// checkIdentity is CheckIdentity for a run that catches up from the
// snapshot since ("" for a whole run), which the record names: a folder
// holding a catch-up's difference is refused to a whole run, and the
// other way round, whatever else agrees.
func checkIdentity(staging string, j *job.Job, since string, vo vfs.Options) error {
	loc, err := vfs.OpenWith(staging, vo)
	if err != nil {
		return fmt.Errorf("hfiles: staging folder: %w", err)
	}
	defer loc.Close()
	wfs, ok := loc.FS.(vfs.WriteFS)
	if !ok {
		return fmt.Errorf("hfiles: staging folder %s: file system is read-only", loc.URL)
	}
	ex, ok := wfs.(vfs.ExclusiveFS)
	if !ok {
		return fmt.Errorf("hfiles: staging folder %s cannot create a file exclusively, so runs cannot agree on whose folder it is", loc.URL)
	}
	if err := wfs.MkdirAll(loc.Path); err != nil {
		return fmt.Errorf("hfiles: staging folder %s: %w", loc.URL, err)
	}
	ours := job.StagedIdentity{Format: 1, JobFile: j.Path, Identity: j.OutputIdentity(), StateDir: absLocal(j.StateDir()), Since: since}
	b, err := json.MarshalIndent(ours, "", " ")
	if err != nil {
		return err
	}
	name := path.Join(loc.Path, job.StagedIdentityFile)
	won, err := vfs.WriteExclusive(ex, name, b)
	if err != nil {
		return fmt.Errorf("hfiles: claim %s: %w", name, err)
	}
	if won {
		return nil
	}
	theirs, err := readIdentity(wfs, name)
	if err != nil {
		return fmt.Errorf("hfiles: staging folder %s: %w", loc.URL, err)
	}
	if err := otherJob(loc.URL, theirs, ours.Identity, "stage this job into a folder of its own"); err != nil {
		return err
	}
	if theirs.Since != since {
		return fmt.Errorf("%w: staging folder %s holds %s (recorded by %s in %s), and this run is %s: stage it into a folder of its own",
			state.ErrMismatch, loc.URL, catchupOrWhole(theirs.Since), theirs.JobFile, job.StagedIdentityFile, catchupOrWhole(since))
	}
	return nil
}

// catchupOrWhole names the kind of run that stages a folder: a whole run,
// or a catch-up from a snapshot.
func catchupOrWhole(since string) string {
	if since == "" {
		return "a whole run"
	}
	return "a catch-up from snapshot " + since
}

// absLocal is p made absolute when it is a local path, so that a verify
// run from another working folder finds it; a URL stays as it is.
func absLocal(p string) string {
	if strings.Contains(p, "://") {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// checkRecordedIdentity is CheckIdentity for a task that stages nothing
// (a merge part, the load): it claims nothing, and refuses a folder whose
// record names another job, so that `rekey load` of one job never loads
// another job's HFiles into the table that job's record names. A folder
// with no record (staged before it existed) is taken as it is.
func checkRecordedIdentity(staging string, j *job.Job, vo vfs.Options) error {
	loc, err := vfs.OpenWith(staging, vo)
	if err != nil {
		return fmt.Errorf("hfiles: staging folder: %w", err)
	}
	defer loc.Close()
	name := path.Join(loc.Path, job.StagedIdentityFile)
	if _, err := loc.FS.Stat(name); notExist(err) {
		return nil
	}
	theirs, err := readIdentity(loc.FS, name)
	if err != nil {
		return fmt.Errorf("hfiles: staging folder %s: %w", loc.URL, err)
	}
	return otherJob(loc.URL, theirs, j.OutputIdentity(), "run this task with the job that staged it")
}

// otherJob is the refusal of a folder whose record theirs names another
// job than ours, or nil when they agree.
func otherJob(url string, theirs *job.StagedIdentity, ours []job.IdentityField, hint string) error {
	if diff := job.Mismatch(theirs.Identity, ours); diff != "" {
		return fmt.Errorf("%w: staging folder %s holds the output of another job (%s, recorded by %s in %s): %s",
			state.ErrMismatch, url, diff, theirs.JobFile, job.StagedIdentityFile, hint)
	}
	return nil
}

// readIdentity reads an identity file, waiting a little for one another
// task created and is still writing.
func readIdentity(fsys vfs.FS, name string) (*job.StagedIdentity, error) {
	deadline := time.Now().Add(identityWait)
	for {
		b, err := vfs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		var id job.StagedIdentity
		err = json.Unmarshal(b, &id)
		if err == nil && id.Format > 0 {
			return &id, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is not a whole identity record after %s (%d bytes): if the run that began the folder died while writing it, remove the file", name, identityWait, len(b))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
