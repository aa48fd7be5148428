package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
)

// planFlags are the options of rekey plan.
type planFlags struct {
	json        bool
	sample      int64
	regions     int
	maxRowSize  int64
	maxCellSize int64
	offline     bool
	since       string
	assumeAt    bool
	checkpoint  string
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan JOB",
		Short: "Show what a job would write, from its layouts and a sample of the snapshot",
		Long: `plan loads a job file, reads a bounded sample of the source snapshot (the first
cells of every split) and reports: old keys beside their new keys, the entity
count and the heaviest entities, the largest new row and cell, suggested split
keys for the new table, and warnings (write hotspots, unbounded rows, rows or
cells above HBase's limits, encodings that sort wrongly, dropped fields,
colliding keys). It writes nothing.

With --since A it also estimates a catch-up from snapshot A to the job's
(rekey run --since A): the store files and bytes it reads and skips, from
the two manifests and the files' indexes alone, beside what a whole run
reads, and whether the reached record puts the target at A (exit 2 when
rekey run --since would refuse for that).

` + exitStatusHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd.Context(), cmd.OutOrStdout(), args[0], f)
		},
	}
	cmd.Flags().BoolVar(&f.json, "json", false, "print the plan as JSON")
	cmd.Flags().BoolVar(&f.offline, "offline", false, "check the job and its layouts without reading the snapshot")
	cmd.Flags().Int64Var(&f.sample, "sample", 200_000, "cells to sample, spread over the splits (0: the whole snapshot)")
	cmd.Flags().IntVar(&f.regions, "regions", 0, "regions to suggest split keys for (default: as many as the snapshot has)")
	cmd.Flags().Int64Var(&f.maxRowSize, "max-row-size", transform.DefaultMaxRowSize, "hbase.table.max.rowsize of the target cluster")
	cmd.Flags().Int64Var(&f.maxCellSize, "max-cell-size", transform.DefaultMaxCellSize, "hbase.client.keyvalue.maxsize of the target cluster")
	cmd.Flags().StringVar(&f.since, "since", "", "estimate a catch-up from this snapshot (or \"last\": the one the reached record names) to the job's")
	cmd.Flags().BoolVar(&f.assumeAt, "assume-at", false, "with --since: take the target to be at that snapshot, as rekey run --assume-at does")
	cmd.Flags().StringVar(&f.checkpoint, "checkpoint", "", "the checkpoint rekey run is given, beside which the reached record is (default: the job's)")
	return cmd
}

// planOutput is the JSON form of a plan.
type planOutput struct {
	Job      string   `json:"job"`
	Snapshot string   `json:"snapshot"`
	Root     string   `json:"root"`
	Table    string   `json:"source_table"`
	Target   string   `json:"target_table"`
	Regions  int      `json:"source_regions"`
	Entity   []string `json:"entity"`
	OldKey   string   `json:"old_key"`
	NewKey   string   `json:"new_key"`
	// Catchup is the estimate of a catch-up (--since).
	Catchup *pipeline.CatchupPlan `json:"catchup,omitempty"`
	*transform.PlanReport
}

func runPlan(ctx context.Context, w io.Writer, path string, f planFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if f.sample < 0 {
		return usageError{fmt.Errorf("--sample %d: expected 0 or more cells", f.sample)}
	}
	if f.regions < 0 {
		return usageError{fmt.Errorf("--regions %d: expected 0 (as many as the snapshot has) or more", f.regions)}
	}
	if f.maxRowSize <= 0 || f.maxCellSize <= 0 {
		return usageError{fmt.Errorf("--max-row-size %d / --max-cell-size %d: expected sizes above 0", f.maxRowSize, f.maxCellSize)}
	}
	if f.since == "" && (f.assumeAt || f.checkpoint != "") {
		return usageError{errors.New("--assume-at and --checkpoint go with --since")}
	}
	if f.since != "" && f.offline {
		return usageError{errors.New("--since reads both snapshots' manifests; it cannot be --offline")}
	}
	j, err := job.Load(path)
	if err != nil {
		return usageError{err}
	}
	useJobSecurity(j)
	var cu *pipeline.CatchupPlan
	if f.since != "" {
		cu, err = pipeline.PlanCatchup(ctx, j, pipeline.Options{Since: f.since, AssumeAt: f.assumeAt, Checkpoint: f.checkpoint, Kerberos: runIdentity})
		if err != nil {
			if errors.Is(err, pipeline.ErrInvalid) || errors.Is(err, snapshot.ErrNotFound) {
				return usageError{fmt.Errorf("%s: %w", path, err)}
			}
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	var (
		table    = "(not read)"
		nregions int
		complete bool
		pl       *transform.Planner
	)
	opts := transform.PlanOptions{MaxRowSize: f.maxRowSize, MaxCellSize: f.maxCellSize, Regions: f.regions}
	if f.offline {
		pl = j.Program.NewPlanner(opts)
	} else {
		snap, err := snapshot.Open(ctx, j.Source.Root, j.Source.Name, snapshot.OpenOptions{Location: locOptions()})
		if err != nil {
			if errors.Is(err, snapshot.ErrNotFound) || errors.Is(err, snapshot.ErrInvalid) {
				return usageError{fmt.Errorf("%s: source snapshot: %w (--offline checks the layouts without it)", path, err)}
			}
			return fmt.Errorf("%s: source snapshot: %w", path, err)
		}
		defer snap.Close()
		table, nregions = snap.Info().Table, len(snap.Regions())
		// A source family the job does not rename keeps its name, which
		// HBase may allow and the sink's target not (Bigtable).
		if err := pipeline.CheckPlanFamilies(j, snap); err != nil {
			return usageError{fmt.Errorf("%s: target family: %w", path, err)}
		}
		if opts.Regions <= 0 {
			opts.Regions = nregions
		}
		pl = j.Program.NewPlanner(opts)
		if complete, err = pipeline.Sample(ctx, snap, pipeline.ScanOptions(j, snap.Info()), pl, f.sample); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	rep := pl.Report(complete)
	rep.Warnings = append(rep.Warnings, pipeline.PlanWarnings(j, rep)...)
	oldKey, newKey := j.Program.Describe()
	out := planOutput{
		OldKey: oldKey, NewKey: newKey,
		Job: path, Snapshot: j.Source.Name, Root: j.Source.Root, Table: table,
		Target: j.Target.Table, Regions: nregions, Entity: j.Program.Entity(), PlanReport: rep, Catchup: cu,
	}
	if f.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printPlan(w, &out)
	}
	if cu != nil && cu.Refused != "" {
		return usageError{fmt.Errorf("rekey run --since %s would refuse: %s", cu.Since, cu.Refused)}
	}
	if rep.Rejected > 0 || len(rep.Collisions) > 0 || len(rep.Unreadable) > 0 {
		return errProblems
	}
	return nil
}

// printCatchup prints the estimate of a catch-up (--since).
func printCatchup(w io.Writer, c *pipeline.CatchupPlan) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\ncatch-up from %s to %s (from the manifests, the store files' indexes and the rows of small files only one side has)\n", c.Since, c.Snapshot)
	if c.Refused != "" {
		p("  REFUSED now: %s\n", c.Refused)
	}
	p("  reads   %d store files, %s (a whole run of %s reads %s)\n", c.FilesRead, human.Bytes(c.BytesRead), c.Snapshot, human.Bytes(c.FullBytes))
	p("  skips   %d store files, %s\n", c.FilesSkipped, human.Bytes(c.BytesSkipped))
	p("  rows    %d ranges that can differ\n", c.Ranges)
	p("  TTLs    %s as of %s, %s as of %s\n", c.Since, c.TTLTimeA.UTC().Format(time.RFC3339), c.Snapshot, c.TTLTimeB.UTC().Format(time.RFC3339))
}

func printPlan(w io.Writer, o *planOutput) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("job %s\n", o.Job)
	if o.Regions == 0 {
		p("  source  snapshot %s at %s (not read: --offline)\n", o.Snapshot, o.Root)
	} else {
		p("  source  snapshot %s of %s (%d regions) at %s\n", o.Snapshot, o.Table, o.Regions, o.Root)
	}
	p("  target  table %s\n", o.Target)
	p("  old key %s\n", o.OldKey)
	p("  new key %s\n", o.NewKey)
	if o.Catchup != nil {
		printCatchup(w, o.Catchup)
	}
	if o.Regions == 0 {
		printSplitsAndWarnings(w, o)
		return
	}
	scope := "the whole snapshot"
	if !o.Complete {
		scope = "a sample: the first cells of every split; sizes are lower bounds"
	}
	p("  sampled %d cells (%s)\n\n", o.SampledCells, scope)

	p("old key -> new key (row/family:qualifier)\n")
	for _, e := range o.Examples {
		p("  %s\n    -> %s\n       %s\n", e.Old, e.New, e.Fields)
	}
	p("\nentities (%v): %d\n", o.Entity, o.Entities)
	for _, e := range o.HeaviestEntities {
		p("  %-30s %10d cells %12d bytes\n", e.Entity, e.Cells, e.Bytes)
	}
	p("\nold rows: %6d; largest: %-40s %8d cells %10d bytes\n", o.OldRows, o.WorstOldRow.Row, o.WorstOldRow.Cells, o.WorstOldRow.Bytes)
	p("new rows: %6d; largest: %-40s %8d cells %10d bytes\n", o.NewRows, o.WorstRow.Row, o.WorstRow.Cells, o.WorstRow.Bytes)
	p("largest new cell: %d bytes (%s)\n", o.MaxCellBytes, o.MaxCell)
	if o.Rejected > 0 {
		p("\nkeys that do not fit: %d\n", o.Rejected)
		for _, r := range o.RejectExamples {
			p("  %s\n", r)
		}
	}
	if len(o.Collisions) > 0 {
		p("\ncolliding keys:\n")
		for _, c := range o.Collisions {
			p("  %s\n", c)
		}
	}
	if len(o.Unreadable) > 0 {
		p("\nnew keys that do not read back:\n")
		for _, u := range o.Unreadable {
			p("  %s\n", u)
		}
	}
	printSplitsAndWarnings(w, o)
}

func printSplitsAndWarnings(w io.Writer, o *planOutput) {
	fmt.Fprintf(w, "\nsuggested split keys (%d):\n", len(o.SplitKeys))
	for _, k := range o.SplitKeys {
		fmt.Fprintf(w, "  %s\n", k)
	}
	fmt.Fprintf(w, "\nwarnings: %d\n", len(o.Warnings))
	for _, wn := range o.Warnings {
		fmt.Fprintf(w, "  [%s] %s\n", wn.Code, wn.Message)
	}
}
