package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/vfs"
)

func newLoadCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "load JOB",
		Short: "Bulk load the HFiles a job staged (the load phase)",
		Long: `load bulk loads the HFiles in the job's staging folder into its target
table, region by region: those of every merge part of a job run in phases,
or those of a run with --no-load (with --since, of a catch-up). It is
rekey run JOB --phase load. Each
region loaded is recorded in the folder, so a load run again after a crash
or an interrupt goes on with the next region, and sends no file twice; a
target region that split since the files were written has its files split
again at the new boundaries.

` + exitStatusHelp,
		Example: `  rekey load jobs/events.yaml
  rekey load jobs/events.yaml --staging hdfs://nn/tmp/rekey/events --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := job.Load(args[0])
			if err != nil {
				return usageError{err}
			}
			// Its state may be on a Kerberized HDFS: log in as the job says.
			useJobSecurity(j)
			if err := applyRunFlags(j, f); err != nil {
				return usageError{err}
			}
			return runTask(cmd, args[0], j, f, pipeline.PhaseLoad)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.staging, "staging", "", "the staging folder, local or hdfs:// (job: sink.staging; default JOB.rekey/staging)")
	fl.StringVar(&f.sourceSnapshot, "source-snapshot", "", "the snapshot the staged run read, when its rekey run named it with --source-snapshot (job: source.name): the load refuses a folder that holds another snapshot's output")
	fl.StringVar(&f.since, "since", "", "load the catch-up from this earlier `SNAPSHOT` that rekey run JOB --since SNAPSHOT --no-load staged (its folder is the staging folder's name with .since-SNAPSHOT): refused (exit 2) unless the job's reached record puts the target at that snapshot; once loaded, the record says the target reached the job's")
	fl.StringVar(&f.zk, "zk", "", "ZooKeeper quorum of the target, host:port[,...] (job: target.zookeeper)")
	fl.StringVar(&f.timeout, "timeout", "", "give up one operation on the target cluster, with its retries, or the wait for an HDFS NameNode that does not answer, after this long, then exit 4 (job: target.timeout; default 2m)")
	fl.StringVar(&f.znode, "znode-parent", "", "zookeeper.znode.parent of the target (default /hbase)")
	fl.StringVar(&f.table, "table", "", "target table (job: target.table)")
	fl.DurationVar(&f.waitReady, "wait-ready", 0, "wait up to this long for every merge part to finish (polling, with a log line), then exit 4 so a scheduler retries; default 0: exit 2 at once")
	fl.BoolVar(&f.forceTakeover, "force-takeover", false, "take over the HDFS lease on the load before it expires, when the load that holds it is known to be dead")
	fl.BoolVar(&f.json, "json", false, "print the summary as JSON")
	return cmd
}

// phaseOf checks --phase and the flags that go with it: a spill shard
// takes --shard, a merge part --part, and only the hfiles sink runs in
// phases.
func phaseOf(f runFlags) (pipeline.Phase, error) {
	p := pipeline.Phase(f.phase)
	switch p {
	case pipeline.PhaseAll, pipeline.PhaseSpill, pipeline.PhaseMerge, pipeline.PhaseLoad:
	default:
		return p, fmt.Errorf("--phase %q: expected spill, merge or load", f.phase)
	}
	switch {
	case f.part != "" && p != pipeline.PhaseMerge:
		return p, errors.New("--part is the merge's: use it with --phase merge")
	case p == pipeline.PhaseMerge && f.part == "":
		return p, errors.New("--phase merge needs --part J/R")
	case f.shard != "" && (p == pipeline.PhaseMerge || p == pipeline.PhaseLoad):
		return p, fmt.Errorf("--shard is the spill's: the %s phase reads no splits", p)
	case f.only != "" && p != pipeline.PhaseAll:
		return p, errors.New("--only redoes ranges in one process; it does not run in phases")
	}
	return p, nil
}

// runTask runs a merge or load task: its lease, its part of the staging
// folder, its summary.
func runTask(cmd *cobra.Command, path string, j *job.Job, f runFlags, phase pipeline.Phase) (err error) {
	if phase == pipeline.PhaseLoad {
		// The staging folder says what it holds: a job whose sink section
		// is puts staged it with --sink hfiles --no-load, and its summary
		// printed this very command.
		j.Sink.Kind = job.SinkHFiles
		// A catch-up staged beside the job's folder, named after the
		// snapshot it started from (what its run printed).
		j.Sink.Staging = pipeline.CatchupStaging(j.StagingPath(), f.since)
	} else if f.since != "" {
		return usageError{fmt.Errorf("--since: a catch-up runs in one process (rekey run JOB --since A), and its staged HFiles load with rekey load JOB --since A; it has no %s phase", phase)}
	}
	if !pipeline.Staged(j.Sink.Kind) {
		return usageError{fmt.Errorf("%s: the %s phase needs the hfiles sink (sink.type: hfiles, or --sink hfiles); with puts, shards write directly", path, phase)}
	}
	o := pipeline.TaskOptions{Phase: phase, Workers: j.Run.Workers, Memory: j.Run.Memory, ForceTakeover: f.forceTakeover, Kerberos: runIdentity}
	if phase == pipeline.PhaseMerge {
		if o.Part, err = parseShare("--part", f.part); err != nil {
			return usageError{err}
		}
	}
	setRuntimeLimits(j.Run.Budget()) // as rekey run does
	stderr := cmd.ErrOrStderr()
	o.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, "rekey: "+format+"\n", args...) }
	ctx, signalled, stop := stopOnSignal(cmd.Context(), o.Logf)
	defer stop()
	sum, err := runWhenReady(ctx, j, o, f.waitReady)
	if sum != nil {
		if f.json {
			json.NewEncoder(cmd.OutOrStdout()).Encode(withBuild(sum))
		} else {
			printTaskSummary(cmd.OutOrStdout(), sum)
		}
	}
	if err != nil && signalled() {
		o.Logf("stopped by a signal: %v", err)
		return errInterrupted
	}
	var ue usageError
	if errors.Is(err, errNotReadyInTime) || errors.As(err, &ue) {
		return err // exit 4, a scheduler retries; or the caller's mistake
	}
	if err != nil {
		return runError(path, err)
	}
	// Collisions across splits are reported, not a failure: as in one
	// process, one cell per key is kept, and the task's output stands.
	return nil
}

// errNotReadyInTime is the error of a merge or load task whose input phase
// did not finish within --wait-ready: a scheduler retries it (exit 4),
// where a task without --wait-ready exits 2 at once.
var errNotReadyInTime = errors.New("the phase before this task's did not finish within --wait-ready")

// readyPoll is how often a task waiting for its input phase looks again.
var readyPoll = 10 * time.Second

// runWhenReady runs the task, and while it finds the phase before it not
// finished (pipeline.ErrNotReady; for the load, also no staging folder
// yet) runs it again every readyPoll, for up to wait.
func runWhenReady(ctx context.Context, j *job.Job, o pipeline.TaskOptions, wait time.Duration) (*pipeline.TaskSummary, error) {
	deadline := time.Now().Add(wait)
	for {
		var sum *pipeline.TaskSummary
		var err error
		if o.Phase == pipeline.PhaseLoad {
			// The load creates nothing: a folder not there yet was not
			// staged into (yet).
			if err = stagingExists(j.StagingPath()); err != nil && wait <= 0 {
				return nil, usageError{err}
			}
		}
		if err == nil {
			sum, err = pipeline.RunTask(ctx, j, o)
		} else {
			err = fmt.Errorf("%w: %v", pipeline.ErrNotReady, err)
		}
		if wait <= 0 || !errors.Is(err, pipeline.ErrNotReady) || ctx.Err() != nil {
			return sum, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return sum, fmt.Errorf("%w (%s): %v", errNotReadyInTime, wait, err)
		}
		o.Logf("%v; waiting for it (%s left of --wait-ready)", err, left.Round(time.Second))
		select {
		case <-ctx.Done():
			return sum, err
		case <-time.After(min(readyPoll, left)):
		}
	}
}

// stagingExists refuses a staging folder that is not there, so the load
// creates nothing (its lease would): nothing was staged into it.
func stagingExists(staging string) error {
	loc, err := vfs.OpenWith(staging, locOptions())
	if err != nil {
		return fmt.Errorf("staging folder: %w", err)
	}
	defer loc.Close()
	fi, err := loc.FS.Stat(loc.Path)
	switch {
	case err != nil && (errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist)):
		return fmt.Errorf("staging folder %s does not exist: nothing was staged there (rekey run JOB --sink hfiles --no-load stages into it; --staging names another folder)", staging)
	case err != nil:
		return fmt.Errorf("staging folder %s: %w", staging, err)
	case !fi.IsDir():
		return fmt.Errorf("staging folder %s is not a folder", staging)
	}
	return nil
}

// loadCommand is the command that loads a job's staged HFiles later.
func loadCommand(path, staging string) string {
	c := "rekey load " + shellQuote(path)
	if staging != "" {
		c += " --staging " + shellQuote(staging)
	}
	return c
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func printTaskSummary(w io.Writer, s *pipeline.TaskSummary) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	state := "done"
	switch {
	case s.Interrupted:
		state = "interrupted (run it again to go on)"
	case s.Error != "":
		state = "failed"
	}
	st := s.Stats
	p("%s of %s: %s\n", s.Task, s.Job, state)
	p("  target    %s\n", s.Table)
	p("  staging   %s\n", s.Staging)
	p("  spilled   %d runs (%.1f MB), %d cells, from every spill shard\n", st.Runs, float64(st.RunBytes)/1e6, st.CellsStaged)
	p("  HFiles    %d (%.1f MB, %d cells), %d duplicate cells collapsed, %d collisions\n", st.HFiles, float64(st.HFileBytes)/1e6, st.Cells, st.Duplicates, st.Collisions)
	if st.RegionsLoaded > 0 || st.LoadSeconds > 0 {
		p("  loaded    %d regions, %d files split again\n", st.RegionsLoaded, st.FilesResplit)
	}
	p("  time      %.1f s (merge %.1f s, load %.1f s)\n", s.Seconds, st.MergeSeconds, st.LoadSeconds)
	for _, e := range st.Examples {
		p("  collision %s\n", e)
	}
	if s.Error != "" {
		p("  error     %s\n", strings.ReplaceAll(s.Error, "\n", " "))
	}
}
