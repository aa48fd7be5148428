package main

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

// checkFolders refuses a local state or staging folder that cannot be one
// because its path runs through a file (--staging FILE, --checkpoint
// FILE/c.json): the user named a wrong path, exit 2, where the run's
// mkdir failed with "not a directory" and exit 1, which a scheduler takes
// for a failed job. The error names the flag, else the job file field,
// that gave the path. Paths on HDFS or an object store are checked where
// they are opened.
func checkFolders(j *job.Job, f runFlags) error {
	ck := "run.checkpoint"
	if f.checkpoint != "" {
		ck = "--checkpoint"
	}
	if j.Run.Checkpoint != "" || f.checkpoint != "" {
		if err := throughFile(j.StateDir()); err != nil {
			return fmt.Errorf("%s %s: %w", ck, j.CheckpointPath(), err)
		}
	}
	if !pipeline.Staged(j.Sink.Kind) {
		return nil
	}
	st := "sink.staging"
	switch {
	case f.staging != "":
		st = "--staging"
	case j.Sink.Staging == "":
		// The default staging folder is in the state folder.
		st = ck
		if j.Run.Checkpoint == "" {
			return nil // beside the job file: made by the run itself
		}
	}
	if err := throughFile(j.StagingPath()); err != nil {
		return fmt.Errorf("%s %s: %w", st, j.StagingPath(), err)
	}
	return nil
}

// throughFile reports a local folder path dir that is, or is under, an
// existing file that is not a folder. A folder not there yet is fine: the
// run makes it.
func throughFile(dir string) error {
	if strings.Contains(dir, "://") {
		return nil
	}
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return nil
		case err == nil && p == filepath.Clean(dir):
			return fmt.Errorf("%s is a file, not a folder", p)
		case err == nil:
			return fmt.Errorf("%s is a file, not a folder, so %s cannot be made", p, dir)
		case !errors.Is(err, iofs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return nil // unreadable: the open that follows says why
		}
		if next := filepath.Dir(p); next == p {
			return nil
		}
	}
}
