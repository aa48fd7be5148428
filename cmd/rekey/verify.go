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
	"github.com/spf13/pflag"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/transform"
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
	rejects          string
	verbose          bool
	table            string
	snapRoot, snap   string
	keepSnap         bool
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
	method           string
	// sourceSnapshot overrides the job's source.name, as rekey run's
	// --source-snapshot: a nightly catch-up's verify names that night's.
	sourceSnapshot string
}

// verifyLong is the help of rekey verify; its two %d are the default
// heaviest and sample counts.
const verifyLong = `verify compares, per entity, the old snapshot of a job with its new side (the
target table, a snapshot of it, or the HFiles a run staged): rows, cells, bytes and an order-independent
digest of the cells. It reads only the chosen entities' key ranges on both
sides; with a salted new layout the salt is computed from the entity.

How cells are compared (--method): inverse, the default when the new key
keeps every old field, reads each new cell back to its old key and compares
it with the old cells as they are, so a bug in the mapping itself shows;
forward, the default when the new key drops or merges fields, maps the old
cells through the job's transform; both runs the two, and an entity they
disagree on is mapped wrong by the transform. The report says which was
used and why.

Which entities: the K heaviest by cells and by bytes and a sample of N, from
the sketch a run saved (<job>.rekey/entities.json), or found in one pass over
the old snapshot with --find-worst; entities named with --entity; every
entity with --all, which also reads the rest of the new side and reports
an entity only it has and a key its layout cannot read (the others cannot
see these); or the entities of an earlier report with --only.

Mismatches are classified (missing_in_new, extra_in_new, value_differs,
extra_versions, mapped_wrong, expired_by_ttl, unreadable_in_new) with the
first differing cells. New cells
newer than the snapshot (dual writes) are counted apart; a live table that
differs is read again with back-off before a mismatch is declared.

The live table's cluster is the one --zk names, else the job's
target.zookeeper, else $REKEY_ZK, else $HBASE_CONF_DIR/hbase-site.xml.

Examples:
  rekey verify job.yaml --zk zk1:2181                  # worst %d + sample %d from the run's sketch
  rekey verify job.yaml --find-worst --heaviest 20 --sample 200
  rekey verify job.yaml --entity user=u00042 --entity user=u00007
  rekey verify job.yaml --all --json > report.json
  rekey verify job.yaml --html report.html --out report.json
  rekey verify job.yaml --only report.json             # re-check what failed
  rekey verify job.yaml --snapshot new_snap --snapshot-root hdfs://nn:8020/hbase
  rekey verify job.yaml --all --snapshot auto          # snapshot the target, read its HFiles, delete it after
  rekey verify job.yaml --staging /data/stage --all   # staged HFiles, before bulk load
  rekey verify job.yaml --method both                  # inverse and forward, disagreements named

` + exitStatusHelp

func newVerifyCmd() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "verify JOB",
		Short: "Compare the new table with the old snapshot, entity by entity, worst entities first",
		Long:  fmt.Sprintf(verifyLong, job.DefaultHeavyHitters, job.DefaultSampleEntities),
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return runVerify(ctx, cmd, cmd.OutOrStdout(), args[0], f)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// register defines the flags of rekey verify on fl, bound to f.
func (f *verifyFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&f.heaviest, "heaviest", 0, fmt.Sprintf("check the K heaviest entities by cells and by bytes (default: the job's verify.heaviest, else %d)", job.DefaultHeavyHitters))
	fl.IntVar(&f.sample, "sample", 0, fmt.Sprintf("check a uniform sample of N entities (default: the job's verify.sample, else %d)", job.DefaultSampleEntities))
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the sample with --find-worst (default: the job's verify.seed)")
	fl.StringArrayVar(&f.entities, "entity", nil, "check this entity, as name=value[,name=value] or hex:KEY (repeatable)")
	fl.BoolVar(&f.findWorst, "find-worst", false, "find the heaviest entities and the sample in one pass over the old snapshot, instead of the run's sketch")
	fl.BoolVar(&f.all, "all", false, "check every entity (one pass over the old snapshot to list them), and every row of the new side beyond them")
	fl.StringVar(&f.only, "only", "", "check only the entities to redo in this JSON report")
	fl.StringVar(&f.rejects, "rejects", "", "the run's reject file, or a folder of them, that old cells whose keys do not fit must be in (default: the per-split files in the job's state folder, STATE/rejects, else bad_keys.file)")
	fl.StringVar(&f.sketch, "sketch", "", "the run's entity sketch (default: entities.json, or every shard's, in the job's state folder)")
	fl.StringVar(&f.table, "table", "", "compare against this live table (default: the job's target table)")
	fl.StringVar(&f.snap, "snapshot", "", "compare against this snapshot of the new table instead of the live table; auto: snapshot the live table (the job's target, or --table) now, read its HFiles under --snapshot-root, and delete it after")
	fl.BoolVar(&f.keepSnap, "keep-snapshot", false, "keep the snapshot --snapshot auto takes")
	fl.StringVar(&f.sourceSnapshot, "source-snapshot", "", "the snapshot of the old table to compare with, in the job's source root (job: source.name), as rekey run's --source-snapshot: after a scheduled run or catch-up, the night's")
	fl.StringVar(&f.staging, "staging", "", "compare against the HFiles a run staged in this folder (STAGING/hfiles/REGION/FAMILY/*), before bulk load")
	fl.StringVar(&f.snapRoot, "snapshot-root", "", "root directory of --snapshot (default: the job's source root; with auto, hbase.rootdir of $HBASE_CONF_DIR/hbase-site.xml)")
	fl.StringArrayVar(&f.ttl, "target-ttl", nil, "TTL of a new family, FAMILY=DURATION (e.g. d=30d), to tell expired cells from missing ones (repeatable)")
	fl.IntVar(&f.retries, "retries", -1, "re-reads of a live table before a mismatch is declared (default: the job's, else 3)")
	fl.DurationVar(&f.backoff, "backoff", 0, "first wait before a re-read, doubling (default: the job's, else 1s)")
	fl.IntVar(&f.workers, "workers", 0, "entities, or pieces of a heavy one, checked at once (default: the job's verify.workers, else the run's: run.workers, else the cores Go may use)")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON instead of a table")
	fl.BoolVar(&f.verbose, "verbose", false, "list every entity checked in the text report, not only the mismatched ones")
	fl.StringVar(&f.html, "html", "", "also write the report as one self-contained HTML page to this file")
	fl.StringVar(&f.out, "out", "", "also write the JSON report to this file (for --only)")
	fl.StringVar(&f.zk, "zk", "", "ZooKeeper quorum host:port[,host:port] of the target cluster (default: the job's target.zookeeper, else $REKEY_ZK, else $HBASE_CONF_DIR/hbase-site.xml)")
	fl.StringVar(&f.znodeParent, "znode-parent", "", "zookeeper.znode.parent of the target cluster (default: the job's target.znode_parent, else hbase-site.xml's, else /hbase)")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "bound on each HBase operation, retries included")
	fl.StringVar(&f.method, "method", "", "inverse, forward or both (default: the job's verify.method, else inverse when the new key keeps every old field, else forward)")
}

// runVerify is rekey verify: the job file and the flags make a
// verify.Check, whose report is written as the flags ask; mismatches end
// in errProblems (exit 1), every other error in exit 2.
func runVerify(ctx context.Context, cmd *cobra.Command, w io.Writer, path string, f verifyFlags) error {
	j, err := job.Load(path)
	if err != nil {
		return usageError{err}
	}
	useJobSecurity(j)
	if f.sourceSnapshot != "" {
		j.Source.Name = f.sourceSnapshot
	}
	o, err := f.options(cmd.Flags().Changed)
	if err != nil {
		return usageError{err}
	}
	o.Kerberos = runIdentity
	stderr := cmd.ErrOrStderr()
	o.Logf = func(format string, args ...any) { fmt.Fprintf(stderr, "rekey: "+format+"\n", args...) }
	check, err := verify.Prepare(ctx, j, o)
	if err != nil {
		return verifyError(err)
	}
	defer check.Close()
	rep, err := check.Run(ctx)
	if err != nil {
		return failed{err}
	}
	rep.Build = currentBuild().String()
	rep.File = f.out
	if err := writeReport(w, rep, f); err != nil {
		return failed{err}
	}
	if !rep.OK() {
		return errProblems
	}
	return nil
}

// options turns the flags into verify.Options: a flag the user did not set
// (set reports which were) leaves the job's value.
func (f *verifyFlags) options(set func(name string) bool) (verify.Options, error) {
	o := verify.Options{
		Entities: f.entities, Only: f.only, Sketch: f.sketch, Rejects: f.rejects,
		Table: f.table, Snapshot: f.snap, SnapshotRoot: f.snapRoot, KeepSnapshot: f.keepSnap, Staging: f.staging,
		ZKQuorum: f.zk, ZNodeParent: f.znodeParent, Timeout: f.timeout,
	}
	o.Heaviest = given(set, "heaviest", &f.heaviest)
	o.Sample = given(set, "sample", &f.sample)
	o.Seed = given(set, "seed", &f.seed)
	o.FindWorst = given(set, "find-worst", &f.findWorst)
	o.All = given(set, "all", &f.all)
	o.Retries = given(set, "retries", &f.retries)
	o.Backoff = given(set, "backoff", &f.backoff)
	o.Workers = given(set, "workers", &f.workers)
	for _, r := range []string{f.out, f.html} {
		if r != "" {
			o.Reports = append(o.Reports, r)
		}
	}
	ttl, err := parseTTLs(f.ttl)
	if err != nil {
		return o, err
	}
	o.TargetTTL = ttl
	if o.Method, err = verify.ParseMethod(f.method); err != nil {
		return o, fmt.Errorf("--method: %w", err)
	}
	return o, nil
}

// given is the flag's value when the user set the flag, else nil.
func given[T any](set func(name string) bool, name string, value *T) *T {
	if set(name) {
		return value
	}
	return nil
}

// parseTTLs reads --target-ttl FAMILY=DURATION values.
func parseTTLs(flags []string) (map[string]time.Duration, error) {
	ttl := map[string]time.Duration{}
	for _, s := range flags {
		fam, ds, ok := strings.Cut(s, "=")
		d, err := job.ParseDuration(ds)
		if !ok || fam == "" || err != nil {
			return nil, fmt.Errorf("--target-ttl %q: expected FAMILY=DURATION such as d=30d", s)
		}
		ttl[fam] = d
	}
	return ttl, nil
}

// verifyError marks an error verify.Prepare returns: exit 2 whatever it is
// (verify could not decide), a usage error when no cluster is named or
// the method asked for needs an inverse the layouts do not have.
func verifyError(err error) error {
	if errors.Is(err, hbase.ErrNoCluster) || errors.Is(err, transform.ErrNoInverse) {
		return usageError{err}
	}
	return failed{err}
}

// writeReport writes the report files asked for (--out, --html), then the
// report to w: JSON with --json, else the text table.
func writeReport(w io.Writer, rep *verify.Report, f verifyFlags) error {
	if f.out != "" {
		if err := writeFileWith(f.out, rep.WriteJSON); err != nil {
			return err
		}
	}
	if f.html != "" {
		if err := writeFileWith(f.html, rep.WriteHTML); err != nil {
			return err
		}
	}
	if f.json {
		return rep.WriteJSON(w)
	}
	if f.verbose {
		return rep.WriteText(w)
	}
	return rep.WriteTextMismatches(w)
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
