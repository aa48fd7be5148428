package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/vfs"
)

// Check is one verification of a job, assembled by Prepare: the entities
// chosen, the old snapshot and the new side open. Run compares them; Close
// releases both sides.
type Check struct {
	job *job.Job
	// vo opens the job's locations: with the Kerberos login of
	// Options.Kerberos, else of the job's security section.
	vo      vfs.Options
	started time.Time
	old     *SnapshotReader
	newSide Reader
	// closeNew releases the new side (a reader, or the client of a live
	// table).
	closeNew func() error
	// newKind is how the new side is read (NewSideTable, ...), for the
	// report.
	newKind    string
	cfg        Config
	targets    []Target
	countBytes int64
	// rejected accounts for the old cells whose keys do not fit.
	rejected *Rejected
	// method and why are the comparison's method and the reason, for the
	// report.
	method Method
	why    string
	// stateDir is the state folder of the run checked, where its entity
	// sketches and reject files are: the one a staging folder's identity
	// record names, else the job's.
	stateDir string
	// run is the summary the run kept there, nil when none.
	run *RunSummary
	// all says the targets are every entity of the old snapshot: the new
	// side is then checked beyond them (CompareAll).
	all bool
}

// Prepare assembles the check rekey verify runs for job j: the job's
// verify section with o applied, the entities chosen (named ones, an
// earlier report's redo list, the heaviest and a sample from the run's
// sketch or from one pass over the old snapshot, or all), the old snapshot
// opened and the new side opened (a staging folder, a snapshot of the new
// table, or the live table, whose cluster is found as hbase.Locate does
// from o.ZKQuorum, else the job's target.zookeeper), and the method
// chosen (Options.Method, else the job's verify.method, else inverse when
// the new key keeps every old field). Errors name the option or job field
// at fault; one that wraps hbase.ErrNoCluster means nothing names the live
// table's cluster, one that wraps transform.ErrNoInverse that the method
// asked for needs an inverse the layouts do not have. The caller closes
// the Check.
func Prepare(ctx context.Context, j *job.Job, o Options) (*Check, error) {
	c := &Check{job: j, started: time.Now(), vo: vfs.Options{Kerberos: identity(j, o.Kerberos)}}
	s, err := o.settings(j.Verify)
	if err != nil {
		return nil, err
	}
	// A method the layouts cannot do is refused before anything is read.
	if c.method, c.why, err = ChooseMethod(j.Program, s.method); err != nil {
		return nil, fmt.Errorf("%s: %w", j.Path, err)
	}
	for _, f := range o.Reports {
		if err := vfs.ProbeCreate(f); err != nil {
			return nil, fmt.Errorf("report file: %w", err)
		}
	}
	var choice Choice
	if err := o.addNamed(&choice, j); err != nil {
		return nil, err
	}
	if a := o.against(j); a.Staging != "" {
		if err := checkNotCatchup(a.Staging, c.vo); err != nil {
			return nil, err
		}
	}
	if c.old, err = openSnapshot(ctx, j.Source.Root, j.Source.Name, time.Time{}, c.vo); err != nil {
		return nil, fmt.Errorf("%s: source snapshot: %w", j.Path, err)
	}
	c.stateDir = j.StateDir()
	if a := o.against(j); a.Staging != "" {
		if d := stagedStateDir(a.Staging, j, c.vo); d != "" {
			c.stateDir = d
		}
	}
	if c.run, err = readRunSummary(c.stateDir, c.vo); err != nil {
		c.Close()
		return nil, err
	}
	rr, err := loadRunRejects(j, c.stateDir, o.Rejects, c.vo)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.rejected = &Rejected{RunFileCells: rr.n, RunFiles: rr.where}
	if err := c.choose(ctx, &choice, s, o.Sketch, rr); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.openNew(ctx, o); err != nil {
		c.Close()
		return nil, err
	}
	c.cfg = s.config(j, c.old, c.newSide, o)
	c.all = s.all
	c.targets = choice.Targets()
	return c, nil
}

// addNamed chooses the entities the job's verify.entities, o.Entities and
// the redo list of the report o.Only name.
func (o Options) addNamed(choice *Choice, j *job.Job) error {
	v := j.Verify
	for i, s := range v.Entities {
		k, err := j.Program.ParseEntity(s)
		if err != nil {
			return fmt.Errorf("%s:%d:%d: verify.entities[%d]: %w", j.Path, v.EntityPos[i].Line, v.EntityPos[i].Col, i, err)
		}
		choice.Add(k, ByName)
	}
	for _, s := range o.Entities {
		k, err := j.Program.ParseEntity(s)
		if err != nil {
			return fmt.Errorf("--entity: %w", err)
		}
		choice.Add(k, ByName)
	}
	if o.Only == "" {
		return nil
	}
	fh, err := os.Open(o.Only)
	if err != nil {
		return fmt.Errorf("--only: %w", err)
	}
	rep, err := ReadReport(fh)
	fh.Close()
	if err != nil {
		return fmt.Errorf("--only %s: %w", o.Only, err)
	}
	for _, r := range rep.Redo {
		k, err := j.Program.ParseEntity("hex:" + r.Key)
		if err != nil {
			return fmt.Errorf("--only %s: entity %s does not fit this job's entity fields: %w", o.Only, r.Entity, err)
		}
		choice.Add(k, ByOnly)
	}
	return nil
}

// choose adds the heaviest and the sample the settings ask for (every
// entity with all): from one pass over the old snapshot with findWorst or
// all, else from the sketch file given or the run's sketches in the job's
// state folder. A choice still empty then is an error.
func (c *Check) choose(ctx context.Context, choice *Choice, s settings, sketch string, rr *runRejects) error {
	if s.findWorst || s.all {
		cs, err := Count(ctx, c.old, c.job.Program, CountOptions{K: max(s.heaviest, 1), N: s.sample, Seed: s.seed, Workers: max(s.workersFor(c.job), 2), rejects: rr})
		if err != nil {
			return err
		}
		r := c.rejected
		r.Counted, r.Cells, r.ByRun, r.Unaccounted, r.Examples = true, cs.Rejected, cs.ByRun, cs.Unaccounted, cs.Examples
		if err := choice.AddCensus(cs, s.heaviest, s.sample, s.all); err != nil {
			return err
		}
		c.countBytes = cs.BytesRead
	} else if s.heaviest > 0 || s.sample > 0 {
		sks, err := c.sketches(sketch)
		if err != nil {
			return err
		}
		choice.AddSketches(sks, s.heaviest, s.sample)
	}
	// Every entity of an empty snapshot is none, and the new side must
	// then hold nothing: still a check.
	if choice.Len() == 0 && !s.all {
		return errors.New("no entities to verify (give --entity, --find-worst, --all or --only, or run the job first)")
	}
	return nil
}

// sketches reads the sketch file given, else the run's sketches.
func (c *Check) sketches(file string) ([]*entity.Sketch, error) {
	if file == "" {
		sks, _, err := loadStateSketch(c.stateDir, c.vo)
		return sks, err
	}
	sk, err := loadSketch(file, c.vo)
	if err != nil {
		return nil, err
	}
	return []*entity.Sketch{sk}, nil
}

// against is the new side the options name, else the job's
// verify.against (zero: the job's target table).
func (o Options) against(j *job.Job) job.Against {
	switch {
	case o.Staging != "":
		return job.Against{Staging: o.Staging}
	case o.Snapshot != "":
		root := o.SnapshotRoot
		if root == "" {
			root = j.Source.Root
		}
		return job.Against{Root: root, Name: o.Snapshot}
	case o.Table != "":
		return job.Against{Table: o.Table}
	}
	return j.Verify.Against
}

// openNew opens the new side: staged HFiles, a snapshot, the job's
// Bigtable table, or a live HBase table.
func (c *Check) openNew(ctx context.Context, o Options) error {
	if o.Snapshot == AutoSnapshot {
		return c.openAutoSnapshot(ctx, o)
	}
	a := o.against(c.job)
	switch {
	case a.Staging != "":
		sr, err := openStagingRun(a.Staging, c.job, c.vo)
		if err != nil {
			return fmt.Errorf("new side: %w", err)
		}
		c.newSide, c.closeNew, c.newKind = sr, sr.Close, NewSideStaging
	case a.Name != "":
		ns, err := openSnapshot(ctx, a.Root, a.Name, time.Time{}, c.vo)
		if err != nil {
			return fmt.Errorf("new side: %w", err)
		}
		c.newSide, c.closeNew, c.newKind = ns, ns.Close, NewSideSnapshot
	case a.Table == "" && o.ZKQuorum == "" && c.job.Target.Bigtable != nil:
		// The job's target is a Bigtable table: read it there.
		br, err := OpenBigtable(ctx, c.job.Target.Bigtable, c.job.Target.Table)
		if err != nil {
			return fmt.Errorf("new side: %w", err)
		}
		c.newSide, c.closeNew, c.newKind = br, br.Close, NewSideBigtable
	default:
		table := a.Table
		if table == "" {
			table = c.job.Target.Table
		}
		return c.openTable(o, table)
	}
	return nil
}

// openTable connects to the live table's cluster.
func (c *Check) openTable(o Options, table string) error {
	client, err := c.client(o, table)
	if err != nil {
		return err
	}
	c.newSide, c.closeNew, c.newKind = NewTableReader(client, table), client.Close, NewSideTable
	return nil
}

// client connects to the cluster of the live table.
func (c *Check) client(o Options, table string) (*hbase.Client, error) {
	cfg, from, err := o.cluster(c.job)
	if err != nil {
		return nil, fmt.Errorf("no cluster for the live table %s (--snapshot NAME or --staging compare without one): %w", table, err)
	}
	if cfg.Kerberos != nil && cfg.Kerberos.Login == nil && cfg.Kerberos.Identity == nil {
		cfg.Kerberos.Identity = c.vo.Kerberos
	}
	client, err := hbase.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("new side: table %s, cluster from %s: %w", table, from, err)
	}
	return client, nil
}

// AutoSnapshot, given as Options.Snapshot (--snapshot auto), has the check
// snapshot the live table itself and read the snapshot's HFiles: the store
// files are read straight from the file system, at the speed of the old
// side, instead of through the region servers' scans, and the table
// serves its clients meanwhile. The live table stays the way for clusters
// that allow no snapshot, and to re-read a table that is still being
// written.
const AutoSnapshot = "auto"

// How a check reads its new side, as Report.NewSide names it.
const (
	NewSideTable    = "table"    // scans of the live table
	NewSideSnapshot = "snapshot" // the HFiles of a snapshot of it
	NewSideStaging  = "staging"  // the HFiles a run staged
	NewSideBigtable = "bigtable" // reads of a Bigtable table
)

// openAutoSnapshot snapshots the live table (Options.Table, else the job's
// target), named after the job and the check's start, and opens it under
// o.SnapshotRoot, else hbase.rootdir of hbase-site.xml. Close deletes the
// snapshot unless o.KeepSnapshot, and so does a failure to open it.
func (c *Check) openAutoSnapshot(ctx context.Context, o Options) error {
	table := o.Table
	if table == "" {
		table = c.job.Target.Table
	}
	if table == "" {
		return errors.New("--snapshot auto: no table to snapshot (the job's target.table, or --table)")
	}
	root := o.SnapshotRoot
	if root == "" {
		var why string
		if root, why = hbase.SiteRootDir(); root == "" {
			return fmt.Errorf("--snapshot auto: where the cluster of %s keeps its files is not known (%s): give --snapshot-root", table, why)
		}
	}
	client, err := c.client(o, table)
	if err != nil {
		return err
	}
	name := autoSnapshotName(c.job.Path, c.started)
	if err := client.Snapshot(ctx, name, table); err != nil {
		client.Close()
		return fmt.Errorf("new side: --snapshot auto: %w", err)
	}
	drop := func() error {
		if o.KeepSnapshot {
			return nil
		}
		// The check's context may be done (interrupted): the snapshot
		// still goes.
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := client.DeleteSnapshot(dctx, name); err != nil {
			return fmt.Errorf("deleting the snapshot %s this check took: %w", name, err)
		}
		return nil
	}
	ns, err := openSnapshot(ctx, root, name, time.Time{}, c.vo)
	if err != nil {
		err = fmt.Errorf("new side: snapshot %s of %s under %s: %w", name, table, root, err)
		return errors.Join(err, drop(), client.Close())
	}
	kept := ", deleted after the check"
	if o.KeepSnapshot {
		kept = ", kept"
	}
	ns.name = fmt.Sprintf("snapshot %s of table %s (taken for this check%s)", name, table, kept)
	c.newSide, c.newKind = ns, NewSideSnapshot
	c.closeNew = func() error { return errors.Join(ns.Close(), drop(), client.Close()) }
	return nil
}

// autoSnapshotName names the snapshot --snapshot auto takes after the job
// file and the check's start: letters, digits, '_', '-' and '.' only, as
// HBase allows in a snapshot name.
func autoSnapshotName(jobPath string, started time.Time) string {
	base := strings.TrimSuffix(filepath.Base(jobPath), filepath.Ext(jobPath))
	b := []byte("rekey_verify_")
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b = append(b, byte(r))
		default:
			b = append(b, '_')
		}
	}
	return string(b) + "_" + started.UTC().Format("20060102T150405")
}

// cluster finds the cluster of a live new side: o.ZKQuorum, else the job's
// target.zookeeper, then $REKEY_ZK and $HBASE_CONF_DIR/hbase-site.xml as
// hbase.Locate goes on; the znode parent is o.ZNodeParent, else the job's
// target.znode_parent, else hbase-site.xml's, else /hbase. from names the
// source of the quorum, for messages.
func (o Options) cluster(j *job.Job) (cfg hbase.Config, from string, err error) {
	quorum, parent := o.ZKQuorum, o.ZNodeParent
	if quorum == "" {
		quorum = j.Target.ZKQuorum
	}
	if parent == "" {
		parent = j.Target.ZNodeParent
	}
	if cfg, from, err = hbase.Locate(quorum, parent); err != nil {
		return cfg, "", err
	}
	cfg.OperationTimeout = o.Timeout
	cfg.Logf = o.Logf
	return cfg, from, nil
}

// Run compares the chosen entities and reports: the job, both sides, when
// the check started (Prepare's start) and how long it took, and the bytes
// each side read, the pass that chose the entities apart.
func (c *Check) Run(ctx context.Context) (*Report, error) {
	var results []Result
	var outside *Outside
	var err error
	if c.all {
		results, outside, err = CompareAll(ctx, c.cfg, c.targets)
	} else {
		results, err = Compare(ctx, c.cfg, c.targets)
	}
	if err != nil {
		return nil, err
	}
	rep := NewReport(results)
	rep.AddOutside(outside)
	rep.Job, rep.Old, rep.New = c.job.Path, c.old.String(), c.newSide.String()
	rep.NewSide = c.newKind
	rep.Run = c.run
	rep.Method, rep.MethodWhy = c.method, c.why
	rep.Entity = c.job.Program.Entity()
	rep.Started = c.started.UTC().Truncate(time.Second)
	rep.Seconds = time.Since(c.started).Seconds()
	// Everything each side fetched since it was opened: opening a staged
	// HFile reads its trailer and index (and a small file whole) before
	// the comparison starts, and a pass over the old snapshot is counted
	// apart (CountBytesRead).
	rep.Summary.OldBytesRead = c.old.BytesRead() - c.countBytes
	rep.Summary.NewBytesRead = c.newSide.BytesRead()
	rep.Summary.CountBytesRead = c.countBytes
	if r := c.rejected; r != nil && (r.Cells > 0 || r.RunFileCells > 0) {
		rep.Rejected = r
	}
	for _, r := range c.old.Snapshot().Regions() {
		rep.Summary.OldBytesAll += r.Bytes()
	}
	return rep, nil
}

// Close releases the new side, then the old snapshot.
func (c *Check) Close() error {
	var errs []error
	if c.closeNew != nil {
		errs = append(errs, c.closeNew())
	}
	if c.old != nil {
		errs = append(errs, c.old.Close())
	}
	return errors.Join(errs...)
}

// identity returns who a check of j logs in to Kerberos as when a cluster
// requires it: given, else the job's security section (as pipeline.Identity).
func identity(j *job.Job, given *krb.Identity) *krb.Identity {
	if given != nil {
		return given
	}
	s := j.Security
	return krb.NewIdentity(krb.Options{Keytab: s.Keytab, Principal: s.Principal, Krb5Conf: s.Krb5Conf})
}
