package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

func newStatusCmd() *cobra.Command {
	var staging string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a job run in phases: each phase's tasks, cells so far, an ETA",
		Long: `status reads the job's staging folder (and nothing else: no task is asked)
and prints, for the spill, the merge and the load, how many tasks are done,
running (their lease is live), failed (started, not done, no live lease)
and left, the cells and bytes so far, and an estimate of the time left to
the end of the merge. It only reads, while the tasks write: run it as
often as you like.

Exit status: 0 shown; 2 the job or flags are wrong; 1 the folder cannot be
read.`,
		Example: `  rekey status jobs/events.yaml
  rekey status jobs/events.yaml --staging hdfs://nn/tmp/rekey/events --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := job.Load(args[0])
			if err != nil {
				return usageError{err}
			}
			st, err := pipeline.ReadStagingStatus(j, staging)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(st)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().StringVar(&staging, "staging", "", "the staging folder, local or hdfs:// (job: sink.staging; default JOB.rekey/staging)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func printStatus(w io.Writer, st *pipeline.StagingStatus) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("staging %s: table %s, %d target regions\n", st.Staging, st.Table, st.Regions)
	phase := func(name, output string, tasks, done, running, failed, left int, cells, bytes int64) {
		if tasks == 0 {
			p("  %-6s not started\n", name)
			return
		}
		p("  %-6s %d tasks: %d done, %d running, %d failed, %d left; %d cells, %s %s\n", name, tasks, done, running, failed, left, cells, human.Bytes(bytes), output)
	}
	phase("spill", "staged", st.Spill.Tasks, st.Spill.Done, st.Spill.Running, st.Spill.Failed, st.Spill.Left, st.Spill.Cells, st.Spill.Bytes)
	phase("merge", "in HFiles", st.Merge.Tasks, st.Merge.Done, st.Merge.Running, st.Merge.Failed, st.Merge.Left, st.Merge.Cells, st.Merge.Bytes)
	if l := st.Load.List; len(l) == 1 && l[0].State != "left" {
		p("  load   %s: %d of %d regions loaded; %d cells, %s\n", l[0].State, l[0].PartitionsDone, l[0].Partitions, l[0].Cells, human.Bytes(l[0].Bytes))
	} else {
		p("  load   not started\n")
	}
	if st.ETASeconds >= 0 {
		p("  eta    %s to the end of the merge (%s)\n", time.Duration(st.ETASeconds*float64(time.Second)).Round(time.Second), st.ETABasis)
	} else {
		p("  eta    unknown (%s)\n", st.ETABasis)
	}
}
