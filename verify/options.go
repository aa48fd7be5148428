package verify

import (
	"errors"
	"fmt"
	"github.com/rekeyhq/rekey/internal/krb"
	"time"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/transform"
)

// Options adjust a job's verify: section for one check, as the flags of
// rekey verify do. A nil pointer, an empty string or a nil map leaves the
// job's value, and the job's zero value leaves the default.
type Options struct {
	// Kerberos is who to log in as when HDFS or HBase requires Kerberos;
	// nil logs in as the job's security section says. The rekey command
	// passes its own, its flags merged over the job's section.
	Kerberos *krb.Identity
	// Heaviest (K) and Sample (N) override verify.heaviest and
	// verify.sample: the K heaviest entities by cells and by bytes and a
	// sample of N [job.DefaultHeavyHitters, job.DefaultSampleEntities].
	Heaviest, Sample *int
	// Seed overrides verify.seed, the seed of the sample a FindWorst pass
	// draws.
	Seed *uint64
	// FindWorst and All override verify.find_worst and verify.all.
	FindWorst, All *bool
	// Entities are checked beside the job's verify.entities, each as
	// transform.Program.ParseEntity reads it (--entity).
	Entities []string
	// Only is the path of an earlier JSON report whose redo list is checked
	// (--only). With Only or Entities, what they name is all that is
	// checked unless Heaviest, Sample, FindWorst or All is set: the job
	// file's choice is for a routine run.
	Only string
	// Sketch is a run's entity sketch file to choose from, instead of the
	// sketches in the job's state folder.
	Sketch string
	// Rejects is the run's reject file, or a folder of them, that the old
	// cells whose keys do not fit must be in [the per-split files in the
	// job's state folder (STATE/rejects), else bad_keys.file].
	Rejects string
	// Table, Snapshot and Staging name the new side instead of
	// verify.against, at most one of them: a live table; a snapshot of the
	// new table under SnapshotRoot (default: the source's root); or the
	// folder a run staged HFiles in (STAGING/hfiles/REGION/FAMILY/*).
	// Snapshot AutoSnapshot takes a snapshot of the live table (the job's
	// target, or Table) for this check, reads its HFiles under
	// SnapshotRoot (default: hbase.rootdir of $HBASE_CONF_DIR/hbase-site.xml,
	// the target cluster's root) and deletes it afterwards unless
	// KeepSnapshot.
	Table, Snapshot, SnapshotRoot, Staging string
	// KeepSnapshot keeps the snapshot AutoSnapshot takes.
	KeepSnapshot bool
	// TargetTTL adds to verify.target_ttl, and overrides it family by
	// family.
	TargetTTL map[string]time.Duration
	// Retries overrides verify.retries: re-reads of a live table before a
	// mismatch is declared; 0 none, negative the default [3].
	Retries *int
	// Backoff overrides verify.backoff, the first wait before a re-read
	// [1s].
	Backoff *time.Duration
	// Workers overrides verify.workers, the entities (or pieces of a heavy
	// one) checked at once [the run's: run.workers, else
	// job.DefaultWorkers].
	Workers *int
	// ZKQuorum and ZNodeParent find the cluster of a live new side, before
	// the job's target.zookeeper and target.znode_parent (hbase.Locate
	// says what comes after them).
	ZKQuorum, ZNodeParent string
	// Timeout bounds each HBase operation on a live new side, retries
	// included [2 min].
	Timeout time.Duration
	// Logf hears of the live side's client retries (hbase.Config.Logf;
	// nil: nobody).
	Logf func(format string, args ...any)
	// Method overrides verify.method: Inverse, Forward or Both [the zero
	// Method: inverse when the job's new key keeps every old field, else
	// forward]. Inverse or Both for a job whose new key drops a field is
	// an error wrapping transform.ErrNoInverse.
	Method Method
	// NewMapper is the forward mapping (Config.NewMapper), for a Go
	// program that ran the job with its own transform.Mapper
	// [the job's layouts].
	NewMapper func() transform.Mapper
	// Reports are the files the caller writes the report to once the
	// check has run (--out, --html): Prepare fails at once, before any
	// cell is read, when one of them cannot be written.
	Reports []string
}

// settings are the job's verify section with the options applied: what
// one check chooses and how it compares.
type settings struct {
	heaviest, sample int
	seed             uint64
	findWorst, all   bool
	// retries is -1 when neither the job nor the options give it.
	retries int
	backoff time.Duration
	workers int
	ttl     map[string]time.Duration
	method  Method
}

// settings merges the options over the job's verify section v.
func (o Options) settings(v job.Verify) (settings, error) {
	if err := o.checkNewSide(); err != nil {
		return settings{}, err
	}
	var err error
	s := settings{
		heaviest: v.Heaviest, sample: v.Sample, seed: v.Seed,
		findWorst: v.FindWorst, all: v.All,
		retries: -1, backoff: v.Backoff, workers: v.Workers,
	}
	if s.heaviest == 0 {
		s.heaviest = job.DefaultHeavyHitters
	}
	if s.sample == 0 {
		s.sample = job.DefaultSampleEntities
	}
	if v.Retries != nil {
		s.retries = *v.Retries
	}
	override(&s.heaviest, o.Heaviest)
	override(&s.sample, o.Sample)
	override(&s.seed, o.Seed)
	override(&s.findWorst, o.FindWorst)
	override(&s.all, o.All)
	override(&s.retries, o.Retries)
	override(&s.backoff, o.Backoff)
	override(&s.workers, o.Workers)
	if s.method, err = ParseMethod(v.Method); err != nil {
		return settings{}, fmt.Errorf("verify.method: %w", err)
	}
	if o.Method != "" {
		s.method = o.Method
	}
	if s.heaviest < 0 || s.sample < 0 || s.workers < 0 {
		return settings{}, errors.New("--heaviest, --sample and --workers must be >= 0")
	}
	if o.Only != "" || len(o.Entities) > 0 {
		if o.FindWorst == nil && o.All == nil {
			s.findWorst, s.all = false, false
		}
		if o.Heaviest == nil && o.Sample == nil {
			s.heaviest, s.sample = 0, 0
		}
	}
	s.ttl = map[string]time.Duration{}
	for fam, d := range v.TargetTTL {
		s.ttl[fam] = d
	}
	for fam, d := range o.TargetTTL {
		s.ttl[fam] = d
	}
	return s, nil
}

// checkNewSide refuses two new sides at once, before anything is read.
func (o Options) checkNewSide() error {
	given := 0
	for _, s := range []string{o.Snapshot, o.Table, o.Staging} {
		if s != "" {
			given++
		}
	}
	// --snapshot auto snapshots a table: --table names which.
	if o.Snapshot == AutoSnapshot && o.Table != "" {
		given--
	}
	if given > 1 {
		return errors.New("give one of --table, --snapshot and --staging (or --snapshot auto with --table)")
	}
	if o.KeepSnapshot && o.Snapshot != AutoSnapshot {
		return errors.New("--keep-snapshot goes with --snapshot auto")
	}
	return nil
}

// override sets *dst to *p when p is given.
func override[T any](dst *T, p *T) {
	if p != nil {
		*dst = *p
	}
}

// config is the comparison's Config for these settings, between old and
// newSide.
func (s settings) config(j *job.Job, old *SnapshotReader, newSide Reader, o Options) Config {
	return Config{
		Program: j.Program, Old: old, New: newSide, Method: s.method, NewMapper: o.NewMapper,
		SnapshotTime: old.Snapshot().Info().CreationTime,
		TargetTTL:    s.ttl, Workers: s.workersFor(j), Retries: s.configRetries(), Backoff: s.backoff,
	}
}

// workersFor is the workers a check of j uses: verify.workers or
// --workers, else the run's own default (run.workers, else
// job.DefaultWorkers), so a check uses the cores its run did.
func (s settings) workersFor(j *job.Job) int {
	if s.workers > 0 {
		return s.workers
	}
	return j.Run.WorkersOrDefault()
}

// configRetries is retries as Config reads them: 0 there is the default
// and a negative count none, where here 0 is none and -1 not given.
func (s settings) configRetries() int {
	switch {
	case s.retries == 0:
		return -1
	case s.retries < 0:
		return 0
	}
	return s.retries
}
