package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/snapshot"
)

// runFlags are the options of rekey run; each overrides the job file.
type runFlags struct {
	// since and assumeAt make the run a catch-up from an earlier
	// snapshot (pipeline.Options.Since and AssumeAt).
	since, assumeAt string
	// waitReady: a merge or load task waits this long for its input
	// phase to finish before it gives up with exit 4.
	waitReady time.Duration
	// timeout bounds one operation on the target cluster with its
	// retries (job: target.timeout).
	timeout string
	// workersSet says --workers was given (0 then is a mistake, not
	// "unset").
	workersSet                                                                   bool
	sink, checkpoint, table, zk, znode, from, to, memory, splitBytes, batchBytes string
	staging, stagingMax, spillDir                                                string
	noLoad, offline, noDirect                                                    bool
	controlAddr, controlToken, progress, only, setTS, shard                      string
	metricsAddr, sourceSnapshot                                                  string
	phase, part                                                                  string
	workers, batchCells, callsPerServer                                          int
	cellsPerSec, readMBPerSec                                                    float64
	resume, fresh, forceTakeover, raw, create, json                              bool
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run JOB",
		Short: "Run a job: read the snapshot, re-key every cell, write the target",
		Long: `run reads the job's source snapshot split by split with a pool of workers, maps
every cell into the new key layout and writes it through the sink: batched
puts into the live target table, staged HFiles for a bulk load, or nothing
(dry-run: read, map and count). Each split is recorded in a checkpoint once
the sink has made it durable; --resume skips those splits after a crash or
an interrupt. Timestamps are kept, so a redone split writes the same cells
again and adds no versions.

Every flag overrides the job file's value (run, sink, source.name,
source.scan, target).

A run holds a lease on its checkpoint and staging folder until it ends: a
second run of the same state is refused (exit 2) with the name of the run
that holds it. A local lease is a lock that ends with its process; an HDFS
lease expires a minute after its owner stopped renewing it, and the next
run then takes it over (--force-takeover takes it at once, for an owner
known to be dead).

While it runs, Ctrl-C or SIGTERM stops reading, lets in-flight writes land,
writes the checkpoint and exits 3; a second signal exits at once. With
--control-addr, a loopback HTTP endpoint serves GET /status, POST /pause,
POST /resume, POST /limits?cells_per_sec=N&read_mb_per_sec=M and
GET /metrics (Prometheus) to requests that carry the run's token
(Authorization: Bearer TOKEN): --control-token, or a random one the run
writes to a file only its user can read, beside the checkpoint (the run
logs where). Requests from a web page (an Origin header) or through
another host name (a Host header) are refused. --metrics-addr serves
GET /metrics alone, read only and without a token, on any interface: what
a Prometheus scrapes on a pod's IP.

In phases (the hfiles sink only), one job runs as many tasks over one
shared staging folder, for a scheduler (YARN, Kubernetes) to run:
--phase spill --shard I/N reads shard I's splits and stages sorted runs in
the folder; --phase merge --part J/R merges the partitions (target region
and family) dealt to part J into HFiles, once every spill shard is
committed; --phase load (or rekey load) bulk loads them. Each task leases
its own share of the folder and records what it finished there, so a task
run again after a crash redoes only the rest. rekey status shows the
tasks. Without --phase, the run does all three in one process.

` + exitStatusHelp,
		Example: `  rekey run configs/demo.yaml --sink dry-run
  rekey run jobs/events.yaml --workers 8 --resume
  rekey run jobs/events.yaml --from 2026-11-29T00:00:00Z --to 2026-11-30T00:00:00Z --resume
  rekey run jobs/events.yaml --max-cells-per-sec 50000 --control-addr 127.0.0.1:7070
  rekey run jobs/events.yaml --json > summary.json
  rekey run jobs/events.yaml --shard $JOB_COMPLETION_INDEX/8 --resume   # one of 8 pods
  rekey run jobs/events.yaml --phase spill --shard 3/8 --resume         # phases: spill shard 3 of 8
  rekey run jobs/events.yaml --phase merge --part 1/2                   # then merge part 1 of 2
  rekey load jobs/events.yaml                                           # then the load`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runJob(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.sink, "sink", "", "puts, hfiles or dry-run (job: sink.type; default puts)")
	fl.StringVar(&f.staging, "staging", "", "hfiles sink: staging folder, local or hdfs:// (job: sink.staging; default JOB.rekey/staging); to bulk load it must be on the cluster's HDFS")
	fl.BoolVar(&f.noLoad, "no-load", false, "hfiles sink: write the HFiles but do not bulk load them; print the command that loads them")
	fl.BoolVar(&f.offline, "offline", false, "hfiles sink: no cluster: plan the target regions from target.create.split_keys or the snapshot, and do not load")
	fl.StringVar(&f.spillDir, "spill-dir", "", "hfiles sink, one process: a local folder for the sorted runs, or 'staging' to keep them in the staging folder (job: sink.spill_dir; default CHECKPOINT.spill when the checkpoint is local and the staging folder is not)")
	fl.BoolVar(&f.noDirect, "no-direct", false, "hfiles sink: sort every split through runs, even one whose cells come in order (job: sink.direct: false; by default such a split writes its HFiles itself)")
	fl.StringVar(&f.stagingMax, "staging-max", "", "hfiles sink: fail rather than put more than this in the staging folder, e.g. 500GiB")
	fl.IntVar(&f.workers, "workers", 0, "splits read at once (job: run.workers; default the number of CPUs)")
	fl.StringVar(&f.splitBytes, "split-bytes", "", "cut regions larger than this into pieces, e.g. 256MiB; off = one split per region; default: cut the regions far above the mean (job: run.split_bytes)")
	fl.StringVar(&f.checkpoint, "checkpoint", "", "checkpoint file, local or hdfs:// (job: run.checkpoint; default JOB.rekey/checkpoint.json beside the job file)")
	fl.BoolVar(&f.resume, "resume", false, "skip the splits the checkpoint records done (starts fresh when there is none)")
	fl.BoolVar(&f.fresh, "fresh", false, "discard an existing checkpoint and start over")
	fl.BoolVar(&f.forceTakeover, "force-takeover", false, "take over the HDFS lease on the checkpoint or staging folder before it expires, when the run that holds it is known to be dead")
	fl.StringVar(&f.from, "from", "", "copy only cells with timestamp >= this (epoch ms, RFC 3339, or whole UTC days or hours from the start of the current one: -1d, 0d, -6h; job: source.scan.from)")
	fl.StringVar(&f.to, "to", "", "copy only cells with timestamp < this (epoch ms, RFC 3339, or relative like --from: --from=-1d --to=0d is yesterday, UTC; job: source.scan.to)")
	fl.StringVar(&f.sourceSnapshot, "source-snapshot", "", "read this snapshot of the old table, in the job's source root (job: source.name): a scheduled run names each night's snapshot here, with one job file for every night")
	fl.BoolVar(&f.raw, "raw", false, "carry delete markers through to the target (job: source.scan.raw)")
	fl.StringVar(&f.table, "table", "", "target table (job: target.table)")
	fl.StringVar(&f.zk, "zk", "", "ZooKeeper quorum of the target, host:port[,...] (job: target.zookeeper; default from $HBASE_CONF_DIR/hbase-site.xml)")
	fl.StringVar(&f.timeout, "timeout", "", "give up one operation on the target cluster, with its retries, or the wait for an HDFS NameNode that does not answer, after this long, then exit 4 (job: target.timeout; default 2m)")
	fl.StringVar(&f.znode, "znode-parent", "", "zookeeper.znode.parent of the target (default /hbase)")
	fl.BoolVar(&f.create, "create", false, "create the target table when it is missing (job: target.create)")
	fl.Float64Var(&f.cellsPerSec, "max-cells-per-sec", 0, "cap on cells written per second, whole run (job: run.max_cells_per_sec)")
	fl.Float64Var(&f.readMBPerSec, "max-read-mb-per-sec", 0, "cap on MB read per second from the snapshot (job: run.max_read_mb_per_sec)")
	fl.IntVar(&f.callsPerServer, "max-calls-per-server", 0, "cap on write calls in flight per region server (job: run.max_calls_per_server)")
	fl.IntVar(&f.batchCells, "batch-cells", 0, "cells per Multi call (job: sink.batch_cells; default 5000)")
	fl.StringVar(&f.batchBytes, "batch-bytes", "", "bytes per Multi call (job: sink.batch_bytes; default 2MiB)")
	fl.StringVar(&f.memory, "memory", "", "memory budget, e.g. 1GiB (job: run.memory)")
	fl.StringVar(&f.setTS, "set-timestamp", "", "replace every cell's timestamp (epoch ms or RFC 3339); breaks idempotent reruns")
	fl.StringVar(&f.controlAddr, "control-addr", "", "serve status, pause/resume, limits and metrics on this loopback host:port, to requests with the run's bearer token (job: run.control_addr)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics alone (GET /metrics: no status, pause or limits) on this host:port, any interface, without a token, for a scraper on another host, e.g. :9090 (job: run.metrics_addr)")
	fl.StringVar(&f.controlToken, "control-token", "", "the control endpoint's bearer token (job: run.control_token; default a random one, written beside the checkpoint with .control-token for .json: checkpoint.control-token, mode 0600)")
	fl.StringVar(&f.progress, "progress", "auto", "auto (a bar on a terminal, else log lines), bar, log or none")
	fl.StringVar(&f.only, "only", "", "redo only the old key ranges a rekey verify JSON `REPORT` lists to redo (its redo list); keeps its own checkpoint")
	fl.StringVar(&f.shard, "shard", "", "I/N: do only share I (0-based) of N of the splits, size-balanced and the same in every process; each shard keeps its own checkpoint")
	fl.StringVar(&f.phase, "phase", "", "run one phase of the job in phases (hfiles sink): spill (with --shard), merge (with --part) or load; default all three in this process")
	fl.DurationVar(&f.waitReady, "wait-ready", 0, "with --phase merge or load: wait up to this long for the phase before to finish (polling, with a log line), then exit 4 so a scheduler retries; default 0: exit 2 at once")
	fl.StringVar(&f.part, "part", "", "J/R: with --phase merge, merge part J (0-based) of R of the target partitions, balanced by bytes")
	fl.BoolVar(&f.json, "json", false, "print the summary as JSON")
	fl.StringVar(&f.since, "since", "", "catch up from this earlier `SNAPSHOT` of the same table (same root): write only what changed between it and the job's snapshot, deletes included, into a target the job's last run brought to it (puts, hfiles or bigtable sink; staged with --no-load, rekey load JOB --since SNAPSHOT loads it); refused (exit 2) when the job's reached record does not put the target there; \"last\": the snapshot that record names (a nightly catch-up)")
	fl.StringVar(&f.assumeAt, "assume-at", "", "with or instead of --since: take the target to be at this `SNAPSHOT` without the reached record (a target brought there by other means); it is read as of its creation time")
	return cmd
}

// runJob is rekey run: flags onto the job, then pipeline.Prepare, Start and
// Wait. An error after a signal is an interruption (exit 3), whatever step
// it cut short.
func runJob(cmd *cobra.Command, path string, f runFlags) (err error) {
	j, err := job.Load(path)
	if err != nil {
		return usageError{err}
	}
	useJobSecurity(j)
	f.workersSet = cmd.Flags().Changed("workers")
	if err := applyRunFlags(j, f); err != nil {
		return usageError{err}
	}
	switch phase, err := phaseOf(f); {
	case err != nil:
		return usageError{err}
	case phase == pipeline.PhaseMerge || phase == pipeline.PhaseLoad:
		return runTask(cmd, path, j, f, phase)
	}
	stderr := cmd.ErrOrStderr()
	// On a terminal the progress line is rewritten in place with no
	// newline: a log line first clears it (and a ^C echoed at its end), and
	// the next tick draws it again below.
	clearLine := ""
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, clearLine+"rekey: "+format+"\n", args...) }
	opts, err := runOptions(f, stderr, logf)
	if err != nil {
		return usageError{err}
	}
	if opts.Interactive {
		clearLine = "\r\033[K"
	}
	opts.LoadCommand = loadCommand(path, f.staging)
	if f.sourceSnapshot != "" {
		// The load checks the folder holds this snapshot's output: the
		// job file's may name another (a nightly run names each night's).
		opts.LoadCommand += " --source-snapshot " + shellQuote(f.sourceSnapshot)
	}
	opts.Kerberos = runIdentity
	// The Go runtime's soft limit is the budget's (job.Budget.SoftLimit,
	// below the budget), so garbage collection works harder before the
	// process overshoots the budget (unless GOMEMLIMIT says otherwise).
	setRuntimeLimits(j.Run.Budget())
	ctx, signalled, stop := stopOnSignal(cmd.Context(), logf)
	defer stop()
	defer func() {
		if err != nil && signalled() && !errors.Is(err, errInterrupted) {
			logf("stopped by a signal: %v", err)
			err = errInterrupted
		}
	}()

	r, err := pipeline.Prepare(ctx, j, opts)
	if err != nil {
		return runError(path, err)
	}
	if err := r.Start(ctx); err != nil {
		r.Close()
		return err
	}
	sum, err := r.Wait()
	if sum != nil && opts.Shard.Count <= 1 && opts.Phase == pipeline.PhaseAll && opts.Only == nil {
		keepSummary(j.StateDir(), sum, logf)
	}
	if sum != nil {
		if f.json {
			// One line, so scripts can take the last line of the output.
			json.NewEncoder(cmd.OutOrStdout()).Encode(withBuild(sum))
		} else {
			printRunSummary(cmd.OutOrStdout(), sum)
		}
	}
	if err != nil {
		if errors.Is(err, pipeline.ErrInterrupted) {
			logf("%v", err)
		}
		return runError(path, err)
	}
	if sum.Problems() {
		return errProblems
	}
	return nil
}

// runError maps what stopped a run to its exit code: an interruption
// (3), the caller's mistake in the job, flags, checkpoint or target (2),
// anything else (1).
func runError(path string, err error) error {
	switch {
	case errors.Is(err, pipeline.ErrInterrupted):
		return errInterrupted
	case errors.Is(err, snapshot.ErrNotFound):
		return usageError{fmt.Errorf("%s: %w", path, err)}
	case errors.Is(err, pipeline.ErrCheckpointExists), errors.Is(err, pipeline.ErrCheckpointMismatch),
		errors.Is(err, pipeline.ErrTargetFamilies), errors.Is(err, pipeline.ErrInvalid),
		errors.Is(err, hbase.ErrNoCluster), errors.Is(err, pipeline.ErrLeased), errors.Is(err, pipeline.ErrNotReady),
		errors.Is(err, pipeline.ErrOtherKind), errors.Is(err, pipeline.ErrJobMismatch), errors.Is(err, pipeline.ErrLoadBegan),
		errors.Is(err, pipeline.ErrNotAt), errors.Is(err, pipeline.ErrIncompatible):
		return usageError{err}
	}
	return err
}

// stopOnSignal returns a context that ends at the first SIGINT or SIGTERM
// (the run then stops cleanly and writes its checkpoint); a second signal
// exits at once. signalled reports whether a signal came; stop releases
// the handler.
func stopOnSignal(parent context.Context, logf func(string, ...any)) (ctx context.Context, signalled func() bool, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var got atomic.Bool
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		got.Store(true)
		logf("stopping: finishing in-flight writes and writing the checkpoint (signal again to exit at once)")
		cancel()
		if _, ok := <-sigs; ok {
			os.Exit(exitInterrupted)
		}
	}()
	return ctx, got.Load, func() { signal.Stop(sigs); cancel() }
}

// runOptions turns the flags that are not job file settings into the
// run's options: resume or start over, the shard, the ranges to redo, and
// how progress is shown.
func runOptions(f runFlags, stderr io.Writer, logf func(string, ...any)) (pipeline.Options, error) {
	o := pipeline.Options{Resume: f.resume, Fresh: f.fresh, ForceTakeover: f.forceTakeover, Logf: logf,
		Phase: pipeline.Phase(f.phase), Since: f.since}
	if f.assumeAt != "" {
		if f.since != "" && f.since != f.assumeAt {
			return o, fmt.Errorf("--since %s and --assume-at %s name different snapshots", f.since, f.assumeAt)
		}
		o.Since, o.AssumeAt = f.assumeAt, true
	}
	if f.shard != "" {
		sh, err := parseShard(f.shard)
		if err != nil {
			return o, err
		}
		o.Shard = sh
	}
	if f.only != "" {
		var err error
		if o.Only, err = onlyRanges(f.only); err != nil {
			return o, err
		}
	}
	switch mode := f.progress; mode {
	case "auto":
		o.Progress = stderr
		o.Interactive = isTerminal(stderr)
	case "bar":
		o.Progress, o.Interactive = stderr, true
	case "log":
		o.Progress = stderr
	case "none":
	default:
		return o, fmt.Errorf("--progress %q: expected auto, bar, log or none", mode)
	}
	return o, nil
}

// applyRunFlags overrides the job file with the flags given.
func applyRunFlags(j *job.Job, f runFlags) error {
	if f.sink != "" {
		k := job.SinkKind(f.sink)
		if !k.Known() {
			return fmt.Errorf("--sink %q: expected %s", f.sink, job.SinkKindList())
		}
		j.Sink.Kind = k
		if err := j.CheckSinkTarget(); err != nil {
			return fmt.Errorf("--sink %s: %w", f.sink, err)
		}
	}
	if f.workers < 0 || f.workersSet && f.workers == 0 {
		return fmt.Errorf("--workers %d: expected 1 or more", f.workers)
	} else if f.workers > 0 {
		j.Run.Workers = f.workers
	}
	for _, s := range []struct {
		flag, v string
		dst     *int64
	}{{"--split-bytes", f.splitBytes, &j.Run.SplitBytes}, {"--memory", f.memory, &j.Run.Memory}, {"--batch-bytes", f.batchBytes, &j.Sink.BatchBytes}} {
		if s.v == "" {
			continue
		}
		parse := job.ParseSize
		if s.flag == "--split-bytes" {
			parse = job.ParseSplitBytes // also "off"
		}
		n, err := parse(s.v)
		if err != nil {
			return fmt.Errorf("%s: %w", s.flag, err)
		}
		if s.flag == "--memory" && n < job.MinMemory {
			return fmt.Errorf("--memory %s: %w", s.v, job.ErrMemoryTooSmall)
		}
		*s.dst = n
	}
	for _, t := range []struct {
		flag, v string
		dst     *int64
	}{{"--from", f.from, &j.Source.Scan.From}, {"--to", f.to, &j.Source.Scan.To}, {"--set-timestamp", f.setTS, &j.Run.SetTimestamp}} {
		if t.v == "" {
			continue
		}
		ms, err := parseInstantFlag(t.v, time.Now())
		if err != nil {
			return fmt.Errorf("%s: %w", t.flag, err)
		}
		if ms == 0 && t.flag == "--to" {
			// 0 is how the job file says "no bound", so it must not
			// also be the instant 1970-01-01: --to 0 would copy all
			// while --to 1 copies nothing.
			return fmt.Errorf("--to %s: %w", t.v, job.ErrZeroUpperBound)
		}
		*t.dst = ms
	}
	if s := j.Source.Scan; s.To != 0 && s.From >= s.To {
		return fmt.Errorf("empty time range: from %d is not before to %d", s.From, s.To)
	}
	if f.raw {
		j.Source.Scan.Raw = true
	}
	if f.checkpoint != "" {
		j.Run.Checkpoint = f.checkpoint
	}
	if f.timeout != "" {
		d, err := job.ParseDuration(f.timeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("--timeout %q: expected a duration such as 30s or 5m", f.timeout)
		}
		j.Target.Timeout = d
	}
	if f.table != "" {
		j.Target.Table = f.table
	}
	if f.zk != "" {
		j.Target.ZKQuorum = f.zk
	}
	if f.znode != "" {
		j.Target.ZNodeParent = f.znode
	}
	if f.create {
		j.Target.Create.Enabled = true
	}
	if f.staging != "" {
		j.Sink.Staging = f.staging
	}
	if f.spillDir != "" {
		if err := job.CheckSpillDir(f.spillDir); err != nil {
			return fmt.Errorf("--spill-dir %w", err)
		}
		j.Sink.SpillDir = f.spillDir
	}
	if f.noDirect {
		j.Sink.NoDirect = true
	}
	if f.noLoad {
		j.Sink.NoLoad = true
	}
	if f.offline {
		j.Sink.Offline = true
	}
	if j.Sink.Offline && (j.Sink.Kind == "" || j.Sink.Kind == job.SinkPuts) {
		// Puts go to the cluster; offline is the staged sink's way to run
		// without one (a dry run needs none in the first place).
		return errors.New("--offline (sink.offline) stages HFiles without a cluster: it needs --sink hfiles (sink.type: hfiles); the puts sink writes to the cluster, and --sink dry-run needs none")
	}
	if f.stagingMax != "" {
		n, err := job.ParseSize(f.stagingMax)
		if err != nil {
			return fmt.Errorf("--staging-max: %w", err)
		}
		j.Sink.MaxStagingBytes = n
	}
	if f.cellsPerSec < 0 || f.readMBPerSec < 0 || f.callsPerServer < 0 || f.batchCells < 0 {
		return errors.New("caps and batch sizes must be 0 (none) or more")
	}
	if f.cellsPerSec > 0 {
		j.Run.MaxCellsPerSec = f.cellsPerSec
	}
	if f.readMBPerSec > 0 {
		j.Run.MaxReadMBPerSec = f.readMBPerSec
	}
	if f.callsPerServer > 0 {
		j.Run.MaxCallsPerServer = f.callsPerServer
	}
	if f.batchCells > 0 {
		j.Sink.BatchCells = f.batchCells
	}
	if f.controlAddr != "" {
		j.Run.ControlAddr = f.controlAddr
	}
	if f.controlToken != "" {
		j.Run.ControlToken = f.controlToken
	}
	if f.metricsAddr != "" {
		j.Run.MetricsAddr = f.metricsAddr
	}
	if f.sourceSnapshot != "" {
		j.Source.Name = f.sourceSnapshot
	}
	if f.resume && f.fresh {
		return errors.New("--resume and --fresh exclude each other")
	}
	return checkFolders(j, f)
}

// parseShard reads --shard "I/N" with 0 <= I < N.
func parseShard(s string) (pipeline.Shard, error) { return parseShare("--shard", s) }

// parseShare reads flag's "I/N" with 0 <= I < N.
func parseShare(flag, s string) (pipeline.Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	a, err1 := strconv.Atoi(i)
	b, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || b < 1 || a < 0 || a >= b {
		return pipeline.Shard{}, fmt.Errorf("%s %q: expected I/N with 0 <= I < N, e.g. 0/4", flag, s)
	}
	return pipeline.Shard{Index: a, Count: b}, nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func printRunSummary(w io.Writer, s *pipeline.Summary) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	state := "done"
	switch {
	case s.Interrupted:
		state = "interrupted (resume with --resume)"
	case s.Error != "":
		state = "failed"
	case !s.Finished:
		state = "unfinished (splits left; resume with --resume)"
	case s.Problems():
		state = "done, with problems"
	}
	p("run %s: %s\n", s.Job, state)
	p("  source    snapshot %s\n", s.Snapshot)
	p("  target    %s (sink %s)\n", s.Table, s.Sink)
	p("  splits    %d done of %d", s.Done, s.Splits)
	if s.Skipped > 0 {
		p(" (%d done by earlier runs)", s.Skipped)
	}
	p("\n")
	verb := "written"
	if s.Sink == "dry-run" {
		verb = "mapped (dry run: nothing written)"
	}
	p("  cells     %d read, %d %s, %d rejected, %d collided, %d failed\n", s.Read, s.Written, verb, s.Rejected, s.Collided, s.Failed)
	if s.ReadUnfinished > 0 {
		p("            and %d read in splits left unfinished, read again on --resume\n", s.ReadUnfinished)
	}
	p("  bytes     %.1f MB %s, %.1f MB read from the snapshot\n", float64(s.Bytes)/1e6, strings.Fields(verb)[0], float64(s.BytesRead)/1e6)
	if c := s.Catchup; c != nil {
		p("  catch-up  since %s: store files %d read (%.1f MB), %d skipped (%.1f MB); %d rows touched; %d cells added (%d replacing a value), %d removed\n",
			c.Since, c.FilesRead, float64(c.BytesRead)/1e6, c.FilesSkipped, float64(c.BytesSkipped)/1e6, c.RowsTouched, c.CellsAdded, c.CellsReplace, c.CellsRemoved)
	}
	for i, h := range s.Heaviest {
		if i == 0 {
			p("  heaviest  ")
		} else {
			p("            ")
		}
		p("%s: %d cells, %.1f KB\n", h.Name, h.Cells, float64(h.Bytes)/1e3)
	}
	p("  time      %.1f s, %s cells/s, %.1f MB/s read, peak RSS %d MB\n", s.Seconds, human.Rate(s.CellsPerSec), s.MBPerSec, s.PeakRSS>>20)
	if t := s.SplitTimes; t.Splits > 1 {
		p("  splits    %d: mean %.1f s, slowest %.1f s (%.1fx the mean, %s)\n", t.Splits, t.MeanSeconds, t.MaxSeconds, t.MaxToMean, t.Slowest)
	}
	if b := s.Budget; b.Total > 0 {
		p("  memory    %d workers, budget %d MiB: %d MiB sink buffers, %d MiB read-ahead, %d MiB collision sets, Go soft limit %d MiB\n", s.Workers, b.Total>>20, b.Sink>>20, b.ReadAhead>>20, b.Collisions>>20, b.SoftLimit>>20)
	}
	p("  integrity %d store files read whole, each cell count matching its trailer\n", s.FilesChecked)
	p("  collisions checked: %s\n", map[string]string{"none": "not needed (the new key keeps every old field)", "split": "within each split"}[s.CollisionScope])
	p("  checkpoint %s\n", s.Checkpoint)
	if s.Entities != "" {
		p("  entities  %s (heaviest and a sample, for rekey verify)\n", s.Entities)
	}
	if s.Rejects != "" {
		p("  rejects   %s\n", s.Rejects)
	}
	// A few examples are what a person reads; the JSON summary keeps all
	// the run kept, and the reject file every rejected cell.
	const shownExamples = 5
	for i, e := range s.Examples {
		if i == shownExamples {
			p("  example   ... and %d more (--json lists them; the reject file holds every rejected cell)\n", len(s.Examples)-shownExamples)
			break
		}
		p("  example   %s\n", e)
	}
	for _, wn := range s.Warnings {
		p("  warning   %s\n", wn)
	}
	if st, ok := s.Staged(); ok {
		p("  staged    %d runs (%.1f MB), %d HFiles (%.1f MB, %d cells), %d duplicate cells collapsed, %d collisions across splits, %d regions loaded\n",
			st.Runs, float64(st.RunBytes)/1e6, st.HFiles, float64(st.HFileBytes)/1e6, st.Cells, st.Duplicates, st.Collisions, st.RegionsLoaded)
		if st.MergeSeconds > 0 || st.LoadSeconds > 0 {
			p("  phases    merge %.1f s, load %.1f s (after the splits were read and spilled)\n", st.MergeSeconds, st.LoadSeconds)
		}
		for _, e := range st.Examples {
			p("  collision %s\n", e)
		}
		if st.LoadCommand != "" {
			p("  to load   %s\n", st.LoadCommand)
		}
	}
	for _, sp := range s.PerSplit {
		if sp.Error != "" {
			p("  split %s: %s\n", sp.ID, sp.Error)
		}
	}
	if s.Error != "" {
		p("  error     %s\n", strings.ReplaceAll(s.Error, "\n", " "))
	}
}
