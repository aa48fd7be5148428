package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

func newStatusCmd() *cobra.Command {
	var staging, checkpoint string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job's record and coverage, and a job in phases' tasks, cells so far, an ETA",
		Long: `status reads the job's state (and nothing else: no task is asked). For
every job it prints the job record (docs/guarantees.md): its shards and
splits, how many shards have committed their splits, and whether those
cover the record exactly once. For a job in phases it reads the staging
folder and prints, for a one-process run, the splits staged, the HFiles
written and the regions loaded; for a job in phases, for the spill, the
merge and the load, how many tasks
are done, running (their lease is live), failed (started, not done, no
live lease) and left, the cells and bytes so far, and an estimate of the
time left to the end of the merge. It only reads, while the tasks write:
run it as often as you like.

` + exitStatusHelp,
		Example: `  rekey status jobs/events.yaml
  rekey status jobs/events.yaml --staging hdfs://nn/tmp/rekey/events --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := job.Load(args[0])
			if err != nil {
				return usageError{err}
			}
			if checkpoint != "" {
				j.Run.Checkpoint = checkpoint
			}
			// Its state may be on a Kerberized HDFS: log in as the job says.
			useJobSecurity(j)
			js, err := pipeline.ReadJobStatus(j, staging)
			if err != nil {
				return err
			}
			if !pipeline.Staged(j.Sink.Kind) && staging == "" {
				// Puts and dry-run jobs have no staging folder: the
				// record and the shards' commits are the job's state.
				if js == nil {
					return usageError{fmt.Errorf("%s: no job record beside the checkpoint %s: no task of this job has started (or its checkpoint is elsewhere: --checkpoint)", args[0], j.CheckpointPath())}
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
						Job *pipeline.JobStatus `json:"job"`
					}{js})
				}
				printJobStatus(cmd.OutOrStdout(), js)
				return nil
			}
			st, err := pipeline.ReadStagingStatus(j, staging)
			if errors.Is(err, pipeline.ErrNoStaging) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					*pipeline.StagingStatus
					Job *pipeline.JobStatus `json:"job,omitempty"`
				}{st, js})
			}
			printStatus(cmd.OutOrStdout(), st)
			if js != nil {
				printJobStatus(cmd.OutOrStdout(), js)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&staging, "staging", "", "the staging folder, local or hdfs:// (job: sink.staging; default JOB.rekey/staging)")
	cmd.Flags().StringVar(&checkpoint, "checkpoint", "", "the job's checkpoint, beside which a puts or dry-run job keeps its record (job: run.checkpoint; default JOB.rekey/checkpoint.json)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

// printJobStatus prints the job record's line and the coverage.
func printJobStatus(w io.Writer, js *pipeline.JobStatus) {
	size := "a split per region"
	if js.SplitBytes > 0 {
		size = "split size " + human.Bytes(js.SplitBytes)
	}
	fmt.Fprintf(w, "  job    %d shards, %d splits (%s, cut %s), record %s published by %s at %s\n", js.Shards, js.Splits, size, js.CutRule, js.Record, js.PublishedBy, js.Published.Format(time.RFC3339))
	switch {
	case js.Proven:
		fmt.Fprintf(w, "  cover  proven: all %d shards committed, every split of the record exactly once\n", js.Shards)
	case js.Problem != "":
		fmt.Fprintf(w, "  cover  FAILED: %s\n", js.Problem)
	default:
		fmt.Fprintf(w, "  cover  %d of %d shards committed; proven once all have\n", js.Committed, js.Shards)
	}
}

func printStatus(w io.Writer, st *pipeline.StagingStatus) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("staging %s: table %s, %d target regions\n", st.Staging, st.Table, st.Regions)
	if op := st.OneProcess; op != nil {
		p("  staged  in one process: %d splits staged, %d cells\n", op.Splits, op.Cells)
		state := "being written"
		if op.Written {
			state = "all written"
		}
		p("  hfiles  %s: %d files, %s, %d cells\n", state, op.HFiles, human.Bytes(op.HFileBytes), op.HFileCells)
		switch {
		case op.Loaded == 0:
			p("  load    not loaded (rekey load)\n")
		case op.Loaded < op.Regions:
			p("  load    %d of %d regions loaded (rekey load resumes)\n", op.Loaded, op.Regions)
		default:
			p("  load    all %d regions loaded\n", op.Regions)
		}
		return
	}
	phase := func(name, output string, tasks, done, running, failed, left int, cells, bytes int64) {
		if tasks == 0 {
			p("  %-6s not started\n", name)
			return
		}
		p("  %-6s %d tasks: %d done, %d running, %d failed, %d left; %d cells, %s %s\n", name, tasks, done, running, failed, left, cells, human.Bytes(bytes), output)
	}
	phase("spill", "staged", st.Spill.Tasks, st.Spill.Done, st.Spill.Running, st.Spill.Failed, st.Spill.Left, st.Spill.Cells, st.Spill.Bytes)
	for _, t := range st.Spill.List {
		if t.Superseded {
			p("         spill shard %d: its commit was made under a lease another attempt took over; it does not count, the shard is %s\n", t.Index, t.State)
		}
	}
	phase("merge", "in HFiles", st.Merge.Tasks, st.Merge.Done, st.Merge.Running, st.Merge.Failed, st.Merge.Left, st.Merge.Cells, st.Merge.Bytes)
	if l := st.Load.List; len(l) == 1 && l[0].State != "left" {
		p("  load   %s: %d of %d regions loaded; %d cells, %s\n", l[0].State, l[0].PartitionsDone, l[0].Partitions, l[0].Cells, human.Bytes(l[0].Bytes))
	} else {
		p("  load   not started\n")
	}
	switch {
	case st.Merge.Tasks > 0 && st.Merge.Done == st.Merge.Tasks:
		// Nothing left to estimate: "0s to the end of the merge" read as
		// work still to come.
		p("  eta    none: the merge is done\n")
	case st.ETASeconds >= 0:
		p("  eta    %s to the end of the merge (%s)\n", time.Duration(st.ETASeconds*float64(time.Second)).Round(time.Second), st.ETABasis)
	default:
		p("  eta    unknown (%s)\n", st.ETABasis)
	}
}
