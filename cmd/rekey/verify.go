package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/verify"
)

// verifyFlags are the options of rekey verify.
type verifyFlags struct {
	heaviest, sample int
	seed             uint64
	entities         []string
	findWorst, all   bool
	only             string
	sketch           string
	table            string
	snapRoot, snap   string
	staging          string
	ttl              []string
	retries          int
	backoff          time.Duration
	workers          int
	json             bool
	html             string
	out              string
	zk, znodeParent  string
	timeout          time.Duration
}

func newVerifyCmd() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "verify JOB",
		Short: "Compare the new table with the old snapshot, entity by entity, worst entities first",
		Long: `verify compares, per entity, the old snapshot of a job with its new side (the
target table, a snapshot of it, or the HFiles a run staged): rows, cells, bytes and an order-independent
digest of the cells, with old cells mapped through the job's transform. It
reads only the chosen entities' key ranges on both sides; with a salted new
layout the salt is computed from the entity.

Which entities: the K heaviest by cells and by bytes and a sample of N, from
the sketch a run saved (<job>.rekey/entities.json), or found in one pass over
the old snapshot with --find-worst; entities named with --entity; every
entity with --all; or the entities of an earlier report with --only.

Mismatches are classified (missing_in_new, extra_in_new, value_differs,
extra_versions, expired_by_ttl) with the first differing cells. New cells
newer than the snapshot (dual writes) are counted apart; a live table that
differs is read again with back-off before a mismatch is declared.

Examples:
  rekey verify job.yaml --zk zk1:2181                  # worst 100 + sample 1000 from the run's sketch
  rekey verify job.yaml --find-worst --heaviest 20 --sample 200
  rekey verify job.yaml --entity user=u00042 --entity user=u00007
  rekey verify job.yaml --all --json > report.json
  rekey verify job.yaml --html report.html --out report.json
  rekey verify job.yaml --only report.json             # re-check what failed
  rekey verify job.yaml --snapshot new_snap --snapshot-root hdfs://nn:8020/hbase
  rekey verify job.yaml --staging /data/stage --all   # staged HFiles, before bulk load

Exit status: 0 every entity matches, 1 a mismatch, 2 an error (bad job file or
flags, unreadable snapshot, cluster unreachable).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return runVerify(ctx, cmd, cmd.OutOrStdout(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.heaviest, "heaviest", 0, "check the K heaviest entities by cells and by bytes (default: the job's verify.heaviest, else 100)")
	fl.IntVar(&f.sample, "sample", 0, "check a uniform sample of N entities (default: the job's verify.sample, else 1000)")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the sample with --find-worst (default: the job's verify.seed)")
	fl.StringArrayVar(&f.entities, "entity", nil, "check this entity, as name=value[,name=value] or hex:KEY (repeatable)")
	fl.BoolVar(&f.findWorst, "find-worst", false, "find the heaviest entities and the sample in one pass over the old snapshot, instead of the run's sketch")
	fl.BoolVar(&f.all, "all", false, "check every entity (one pass over the old snapshot to list them)")
	fl.StringVar(&f.only, "only", "", "check only the entities to redo in this JSON report")
	fl.StringVar(&f.sketch, "sketch", "", "the run's entity sketch (default: entities.json, or every shard's, in the job's state folder)")
	fl.StringVar(&f.table, "table", "", "compare against this live table (default: the job's target table)")
	fl.StringVar(&f.snap, "snapshot", "", "compare against this snapshot of the new table instead of the live table")
	fl.StringVar(&f.staging, "staging", "", "compare against the HFiles a run staged in this folder (STAGING/hfiles/REGION/FAMILY/*), before bulk load")
	fl.StringVar(&f.snapRoot, "snapshot-root", "", "root directory of --snapshot (default: the job's source root)")
	fl.StringArrayVar(&f.ttl, "target-ttl", nil, "TTL of a new family, FAMILY=DURATION (e.g. d=30d), to tell expired cells from missing ones (repeatable)")
	fl.IntVar(&f.retries, "retries", -1, "re-reads of a live table before a mismatch is declared (default: the job's, else 3)")
	fl.DurationVar(&f.backoff, "backoff", 0, "first wait before a re-read, doubling (default: the job's, else 1s)")
	fl.IntVar(&f.workers, "workers", 0, "entities checked at once (default: the job's, else 4)")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON instead of a table")
	fl.StringVar(&f.html, "html", "", "also write the report as one self-contained HTML page to this file")
	fl.StringVar(&f.out, "out", "", "also write the JSON report to this file (for --only)")
	fl.StringVar(&f.zk, "zk", "", "ZooKeeper quorum host:port[,host:port] of the target cluster (default $REKEY_ZK)")
	fl.StringVar(&f.znodeParent, "znode-parent", "/hbase", "zookeeper.znode.parent of the target cluster")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "bound on each HBase operation, retries included")
	return cmd
}

func runVerify(ctx context.Context, cmd *cobra.Command, w io.Writer, path string, f verifyFlags) error {
	started := time.Now()
	j, err := job.Load(path)
	if err != nil {
		return usageError{err}
	}
	v := j.Verify
	set := cmd.Flags().Changed
	if !set("heaviest") {
		f.heaviest = v.Heaviest
		if f.heaviest == 0 {
			f.heaviest = 100
		}
	}
	if !set("sample") {
		f.sample = v.Sample
		if f.sample == 0 {
			f.sample = 1000
		}
	}
	if !set("seed") {
		f.seed = v.Seed
	}
	if !set("find-worst") {
		f.findWorst = v.FindWorst
	}
	if !set("all") {
		f.all = v.All
	}
	if !set("retries") && v.Retries != nil {
		f.retries = *v.Retries
	}
	if !set("backoff") {
		f.backoff = v.Backoff
	}
	if !set("workers") {
		f.workers = v.Workers
	}
	if f.heaviest < 0 || f.sample < 0 || f.workers < 0 {
		return usageError{errors.New("--heaviest, --sample and --workers must be >= 0")}
	}
	ttl := map[string]time.Duration{}
	for fam, d := range v.TargetTTL {
		ttl[fam] = d
	}
	for _, s := range f.ttl {
		fam, ds, ok := strings.Cut(s, "=")
		d, err := job.ParseDuration(ds)
		if !ok || fam == "" || err != nil {
			return usageError{fmt.Errorf("--target-ttl %q: expected FAMILY=DURATION such as d=30d", s)}
		}
		ttl[fam] = d
	}

	// Entities named in the job file or on the command line.
	var choice verify.Choice
	for i, s := range v.Entities {
		k, err := j.Program.ParseEntity(s)
		if err != nil {
			return usageError{fmt.Errorf("%s:%d:%d: verify.entities[%d]: %w", path, v.EntityPos[i].Line, v.EntityPos[i].Col, i, err)}
		}
		choice.Add(k, verify.ByName)
	}
	for _, s := range f.entities {
		k, err := j.Program.ParseEntity(s)
		if err != nil {
			return usageError{fmt.Errorf("--entity: %w", err)}
		}
		choice.Add(k, verify.ByName)
	}
	if f.only != "" {
		fh, err := os.Open(f.only)
		if err != nil {
			return usageError{fmt.Errorf("--only: %w", err)}
		}
		rep, err := verify.ReadReport(fh)
		fh.Close()
		if err != nil {
			return usageError{fmt.Errorf("--only %s: %w", f.only, err)}
		}
		for _, r := range rep.Redo {
			k, err := j.Program.ParseEntity("hex:" + r.Key)
			if err != nil {
				return usageError{fmt.Errorf("--only %s: entity %s does not fit this job's entity fields: %w", f.only, r.Entity, err)}
			}
			choice.Add(k, verify.ByOnly)
		}
	}

	old, err := verify.OpenSnapshot(ctx, j.Source.Root, j.Source.Name, time.Time{})
	if err != nil {
		if errors.Is(err, snapshot.ErrNotFound) {
			return usageError{fmt.Errorf("%s: source snapshot: %w", path, err)}
		}
		return failed{fmt.Errorf("%s: source snapshot: %w", path, err)}
	}
	defer old.Close()

	// The heaviest and the sample. Entities named on the command line (or
	// --only) are all that is checked unless a flag asks for more: the job
	// file's choice is for a routine run.
	if f.only != "" || len(f.entities) > 0 {
		if !set("find-worst") && !set("all") {
			f.findWorst, f.all = false, false
		}
		if !set("heaviest") && !set("sample") {
			f.heaviest, f.sample = 0, 0
		}
	}
	var countBytes int64
	if f.findWorst || f.all {
		cs, err := verify.Count(ctx, old, j.Program, verify.CountOptions{K: max(f.heaviest, 1), N: f.sample, Seed: f.seed, Workers: max(f.workers, 2)})
		if err != nil {
			return failed{err}
		}
		if err := choice.AddCensus(cs, f.heaviest, f.sample, f.all); err != nil {
			return usageError{err}
		}
		countBytes = cs.BytesRead
	} else if f.heaviest > 0 || f.sample > 0 {
		var sks []*entity.Sketch
		if f.sketch != "" {
			sk, err := verify.LoadSketch(f.sketch)
			if err != nil {
				return usageError{err}
			}
			sks = append(sks, sk)
		} else {
			var err error
			if sks, _, err = verify.LoadStateSketch(j.StateDir()); err != nil {
				return usageError{err}
			}
		}
		choice.AddSketches(sks, f.heaviest, f.sample)
	}
	if choice.Len() == 0 {
		return usageError{errors.New("no entities to verify (give --entity, --find-worst, --all or --only, or run the job first)")}
	}

	// The new side.
	snapRoot, snapName := v.Against.Root, v.Against.Name
	table, staging := v.Against.Table, v.Against.Staging
	given := 0
	for _, s := range []string{f.snap, f.table, f.staging} {
		if s != "" {
			given++
		}
	}
	if given > 1 {
		return usageError{errors.New("give one of --table, --snapshot and --staging")}
	}
	if f.snap != "" {
		snapName, snapRoot, table, staging = f.snap, f.snapRoot, "", ""
		if snapRoot == "" {
			snapRoot = j.Source.Root
		}
	}
	if f.table != "" {
		table, snapName, staging = f.table, "", ""
	}
	if f.staging != "" {
		staging, snapName, table = f.staging, "", ""
	}
	var newSide verify.Reader
	if staging != "" {
		sr, err := verify.OpenStaging(strings.TrimSuffix(staging, "/") + "/hfiles")
		if err != nil {
			return failed{fmt.Errorf("new side: %w", err)}
		}
		defer sr.Close()
		newSide = sr
	} else if snapName != "" {
		ns, err := verify.OpenSnapshot(ctx, snapRoot, snapName, time.Time{})
		if err != nil {
			if errors.Is(err, snapshot.ErrNotFound) {
				return usageError{fmt.Errorf("new side: %w", err)}
			}
			return failed{fmt.Errorf("new side: %w", err)}
		}
		defer ns.Close()
		newSide = ns
	} else {
		if table == "" {
			table = j.Target.Table
		}
		if f.zk == "" {
			f.zk = os.Getenv("REKEY_ZK")
		}
		if f.zk == "" {
			return usageError{errors.New("no cluster for the live table: give --zk host:port or set REKEY_ZK (or --snapshot to compare against a snapshot)")}
		}
		c, err := hbase.NewClient(hbase.Config{ZKQuorum: f.zk, ZNodeParent: f.znodeParent, OperationTimeout: f.timeout})
		if err != nil {
			return failed{err}
		}
		defer c.Close()
		newSide = verify.NewTableReader(c, table)
	}

	cfg := verify.Config{
		Program: j.Program, Old: old, New: newSide,
		SnapshotTime: old.Snapshot().Info().CreationTime,
		TargetTTL:    ttl, Workers: f.workers, Retries: f.retries, Backoff: f.backoff,
	}
	switch {
	case f.retries == 0:
		cfg.Retries = -1 // asked for no re-reads
	case f.retries < 0:
		cfg.Retries = 0 // not given: the default
	}
	oldBefore, newBefore := old.BytesRead(), newSide.BytesRead()
	results, err := verify.Compare(ctx, cfg, choice.Targets())
	if err != nil {
		return failed{err}
	}
	rep := verify.NewReport(results)
	rep.Job, rep.Old, rep.New = path, old.String(), newSide.String()
	rep.Entity = j.Program.Entity()
	rep.Started = started.UTC().Truncate(time.Second)
	rep.Seconds = time.Since(started).Seconds()
	rep.Summary.OldBytesRead = old.BytesRead() - oldBefore
	rep.Summary.NewBytesRead = newSide.BytesRead() - newBefore
	rep.Summary.CountBytesRead = countBytes
	for _, r := range old.Snapshot().Regions() {
		rep.Summary.OldBytesAll += r.Bytes()
	}

	if f.out != "" {
		if err := writeFileWith(f.out, rep.WriteJSON); err != nil {
			return failed{err}
		}
	}
	if f.html != "" {
		if err := writeFileWith(f.html, rep.WriteHTML); err != nil {
			return failed{err}
		}
	}
	if f.json {
		err = rep.WriteJSON(w)
	} else {
		err = rep.WriteText(w)
	}
	if err != nil {
		return failed{err}
	}
	if !rep.OK() {
		return errProblems
	}
	return nil
}

// writeFileWith writes a file through fn, whole or not at all: a report
// half written would be read by --only as fewer entities.
func writeFileWith(path string, fn func(io.Writer) error) error {
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := fn(fh); err != nil {
		fh.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
