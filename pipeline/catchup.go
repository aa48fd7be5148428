package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/snapshot/diff"
	"github.com/rekeyhq/rekey/source"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// A catch-up (Options.Since) writes into a target that holds the job's
// result for an earlier snapshot A only the difference between A and the
// job's snapshot B (source.Catchup). Whether the target holds A's result
// is what the reached record says: every run that brings its target to
// its snapshot (a whole run, or a catch-up, whose last put or load
// succeeded) records that snapshot, the TTL time it was read at and the
// job's fingerprint without its source, beside the job's checkpoint. A
// catch-up refuses a target the record does not put at A, unless
// Options.AssumeAt says the target was brought there by other means.

// ErrNotAt is matched by the error of a catch-up whose target the reached
// record does not put at the snapshot it catches up from (or whose job
// differs from the record's).
var ErrNotAt = errors.New("pipeline: the target is not at the snapshot the catch-up starts from")

// ErrIncompatible is matched by the error of a catch-up between snapshots
// that cannot be compared by their files (diff.ErrIncompatible).
var ErrIncompatible = diff.ErrIncompatible

// sinceSuffix names a catch-up's own checkpoint and job record after the
// snapshot it starts from, beside the job's: they describe other work
// than the job's whole run, which must not be refused or replaced by them.
func sinceSuffix(p, since string) string {
	if since == "" {
		return p
	}
	return strings.TrimSuffix(p, ".json") + ".since-" + sinceName(since) + ".json"
}

// sinceName spells a snapshot's name for a file name: what a snapshot
// name may hold beyond letters, digits, '-', '_' and '.' is escaped.
func sinceName(since string) string {
	var b strings.Builder
	for _, r := range since {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "%%%02x", r)
		}
	}
	return b.String()
}

// CatchupStaging is the staging folder of a catch-up from the snapshot
// since through staged HFiles, beside the job's staging folder staging:
// the job's holds its whole run (refused to other output by its identity
// record), and the catch-up's holds only the difference, which `rekey
// load JOB --since A` loads and `rekey verify --staging` refuses.
func CatchupStaging(staging, since string) string {
	if since == "" {
		return staging
	}
	return strings.TrimSuffix(staging, "/") + ".since-" + sinceName(since)
}

// stageCatchup points a catch-up through staged HFiles (the job's sink,
// not one given) at a staging folder of its own (CatchupStaging), in a
// copy of the job, so the caller's job keeps its folder; and names the
// folder in the command that loads it later (no_load).
func (r *Run) stageCatchup(o *Options) {
	if o.Since == "" || o.Sink != nil || !Staged(r.j.Sink.Kind) {
		return
	}
	j := *r.j
	j.Sink.Staging = CatchupStaging(r.j.StagingPath(), o.Since)
	r.j = &j
	if o.LoadCommand != "" {
		o.LoadCommand += " --since " + shellWord(o.Since)
	}
}

// shellWord quotes s for a POSIX shell when it holds anything but safe
// characters (a snapshot's name seldom does).
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// SinceLast, as Options.Since (`--since last`), starts the catch-up from
// the snapshot the job's reached record names: the one the job's last
// whole run or catch-up brought its target to. It is what a scheduled
// catch-up passes every night, whatever yesterday's snapshot was called.
const SinceLast = "last"

// reachedBase is the checkpoint the reached record lies beside: the one
// given (Options.Checkpoint, --checkpoint) as given, before a catch-up's
// suffix, or else the job's own (not a shard's or a redo's), so that a
// whole run, its catch-ups and `--since last` given the same checkpoint
// (or none) find the same record.
func reachedBase(j *job.Job, given string) string {
	if given != "" {
		return given
	}
	return checkpointPath(j, Shard{}, nil)
}

// reachedPath is the URL of the job's reached record.
func (r *Run) reachedPath() string {
	return state.ReachedBeside(r.reachedBase)
}

// resolveSinceLast replaces Options.Since "last" by the snapshot the
// reached record names; a job with no record cannot catch up from "last".
// It runs in settle, before the catch-up's checkpoint is named after
// Since; checkAt reads the record again and checks it as for a name.
func (r *Run) resolveSinceLast(o *Options) error {
	if o.Since != SinceLast {
		return nil
	}
	if o.AssumeAt {
		return fmt.Errorf("%w: --assume-at names the snapshot the target was brought to by other means; \"last\" is the one the reached record names", ErrInvalid)
	}
	fsys, name, err := r.openReached(o.Kerberos)
	if err != nil {
		return err
	}
	rec, found, err := state.ReadReached(fsys, name)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: --since last: no run of this job recorded the snapshot its target reached (%s); run the job whole first, or name the snapshot with --since and --assume-at", ErrNotAt, r.reachedPath())
	}
	o.Since, r.sinceLast = rec.Snapshot, true
	return nil
}

// jobFingerprint hashes what decides the cells a job writes where, apart
// from its source snapshot: layouts, families, entity, target, the scan
// without its TTL time, set_timestamp. A catch-up must be of the same job
// as the run that brought the target to A.
func (r *Run) jobFingerprint() string {
	j := r.j
	oldKey, newKey := j.Program.Describe()
	fams := make([]string, 0, len(j.Spec.Families))
	for o, n := range j.Spec.Families {
		fams = append(fams, o+"->"+n)
	}
	sort.Strings(fams)
	scan := r.scan
	scan.Now = time.Time{}
	doc := struct {
		OldKey, NewKey string
		Families       []string
		Entity         []string
		Target         string
		Scan           source.ScanOptions
		SetTimestamp   int64
	}{oldKey, newKey, fams, j.Spec.Entity, j.Target.Table, scan, r.o.SetTimestamp}
	b, _ := json.Marshal(doc)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// openReachedFS opens the folder of the reached record for writing.
func (r *Run) openReachedFS() (vfs.WriteFS, string, error) {
	return r.openReached(r.o.Kerberos)
}

// openReached is openReachedFS as whom (settle calls it before the run's
// options are set).
func (r *Run) openReached(who *krb.Identity) (vfs.WriteFS, string, error) {
	where := r.reachedPath()
	loc, err := vfs.OpenWith(where, vfs.Options{Kerberos: who})
	if err != nil {
		return nil, "", fmt.Errorf("reached record: %w", err)
	}
	r.closers = append(r.closers, loc.Close)
	wfs, ok := loc.FS.(vfs.WriteFS)
	if !ok {
		return nil, "", fmt.Errorf("reached record %s: file system is read-only", where)
	}
	return wfs, loc.Path, nil
}

// openCatchup opens snapshots A (Options.Since) and B (the job's) from the
// source root, checks the reached record puts the target at A, and makes
// the run's source their difference.
func (r *Run) openCatchup(ctx context.Context, root string, oo snapshot.OpenOptions) error {
	j, o := r.j, r.o
	if j.Source.Scan.Raw {
		return fmt.Errorf("%w: --since: a raw copy cannot be caught up (a delete marker that vanished cannot be undone by a write)", ErrInvalid)
	}
	if o.SetTimestamp != 0 {
		// Every cell written at one timestamp: a removed cell's version
		// delete would mask the cells written beside it.
		return fmt.Errorf("%w: --since cannot catch up a job that sets every cell's timestamp (set_timestamp)", ErrInvalid)
	}
	if o.Phase != "" || o.Shard.Count > 1 || len(o.Only) > 0 {
		return fmt.Errorf("%w: --since runs in one process, whole (not with --phase, --shard or --only)", ErrInvalid)
	}
	if o.Since == j.Source.Name && r.sinceLast {
		return fmt.Errorf("%w: --since last: the reached record %s says the target is at the job's snapshot %s already; set the job's source snapshot to a newer one", ErrInvalid, r.reachedPath(), o.Since)
	}
	if o.Since == j.Source.Name {
		return fmt.Errorf("%w: --since %s names the job's own snapshot", ErrInvalid, o.Since)
	}
	b, err := snapshot.Open(ctx, root, j.Source.Name, oo)
	if err != nil {
		return fmt.Errorf("source snapshot: %w", err)
	}
	r.scan = scanOptions(j, b.Info().CreationTime)
	// Before the plan, which reads B's TTLs as of this time too.
	if err := r.settleTTLTime(b.Info().CreationTime); err != nil {
		b.Close()
		return err
	}
	a, err := snapshot.Open(ctx, root, o.Since, oo)
	if err != nil {
		b.Close()
		return fmt.Errorf("--since snapshot: %w", err)
	}
	if err := forward(a, b); err != nil {
		a.Close()
		b.Close()
		return err
	}
	nowA, err := r.checkAt(a)
	if err != nil {
		a.Close()
		b.Close()
		return err
	}
	r.sinceCreated = a.Info().CreationTime.UnixMilli()
	src, err := source.NewCatchup(ctx, a, b, r.scan, nowA)
	if err != nil {
		return err
	}
	r.src, r.catchup = src, src
	if r.sinceLast {
		r.logf("--since last: the reached record %s puts the target at %s", r.reachedPath(), o.Since)
	}
	st := src.Stats().Plan
	r.logf("catch-up from %s to %s: %d store files (%s) to read, %d (%s) skipped", o.Since, j.Source.Name,
		st.FilesRead, human.Bytes(st.BytesRead), st.FilesSkipped, human.Bytes(st.BytesSkipped))
	return nil
}

// forward refuses a catch-up from a to an older b. Going back would put
// into the target again cells that the catch-up to a removed with version
// deletes, which mask a put at the same timestamp until the target's next
// major compaction: the target would miss them, silently.
func forward(a, b *snapshot.Snapshot) error {
	ca, cb := a.Info().CreationTime, b.Info().CreationTime
	if cb.Before(ca) {
		return fmt.Errorf("%w: --since %s: that snapshot (created %s) is newer than the job's %s (created %s); a catch-up only goes forward (going back, the target's version deletes would hide cells it puts back): run the job whole from %s",
			ErrInvalid, a.Info().Name, ca.UTC().Format(time.RFC3339), b.Info().Name, cb.UTC().Format(time.RFC3339), b.Info().Name)
	}
	return nil
}

// checkCatchupSink refuses a sink a catch-up cannot write through yet:
// removed cells are version delete markers, which only a sink whose kind
// says it writes them (sink.Kind.Deletes: puts sends them as Deletes)
// carries; the message names the kinds that do.
func (r *Run) checkCatchupSink() error {
	name, err := r.sinkName()
	if err != nil {
		return err
	}
	if kind, ok := r.kindOf(name, nil); ok && kind.Deletes {
		if r.o.Sink == nil && kind.Phases && r.j.Sink.Offline {
			// The staged difference is only right for a target at A,
			// which an offline run cannot check (nor a load by another
			// tool record).
			return fmt.Errorf("%w: --since through staged HFiles checks the target is at the snapshot it starts from, and its load records the target reached the job's: not with sink.offline (sink.no_load stages the files for `rekey load JOB --since A` instead)", ErrInvalid)
		}
		return nil
	}
	var can []string
	for _, k := range sink.Kinds() {
		if kind, _ := sink.Lookup(k); kind.Deletes {
			can = append(can, string(k))
		}
	}
	return fmt.Errorf("%w: --since writes through a sink that writes delete markers, the %s sink, not %s", ErrInvalid, strings.Join(can, " or "), name)
}

// checkAt returns the TTL time the target's copy of a was read at, from
// the reached record, or refuses a target the record does not put at a.
// With AssumeAt the record is not read and a's creation time is taken.
func (r *Run) checkAt(a *snapshot.Snapshot) (time.Time, error) {
	in := a.Info()
	if r.o.AssumeAt {
		r.logf("--assume-at %s: the target is taken to hold this job's result for %s, read as of its creation time %s", in.Name, in.Name, in.CreationTime.UTC().Format(time.RFC3339))
		return in.CreationTime, nil
	}
	fsys, name, err := r.openReachedFS()
	if err != nil {
		return time.Time{}, err
	}
	rec, found, err := state.ReadReached(fsys, name)
	if err != nil {
		return time.Time{}, err
	}
	how := "run the job whole, or pass --assume-at " + in.Name + " if the target was brought to it by other means"
	switch {
	case !found:
		return time.Time{}, fmt.Errorf("%w: no run of this job recorded the snapshot its target reached (%s); %s", ErrNotAt, r.reachedPath(), how)
	case rec.Snapshot != in.Name || rec.Created != in.CreationTime.UnixMilli():
		return time.Time{}, fmt.Errorf("%w: the target reached snapshot %s (created %d), not %s (created %d), by %s; catch up from %s, or %s",
			ErrNotAt, rec.Snapshot, rec.Created, in.Name, in.CreationTime.UnixMilli(), r.reachedPath(), rec.Snapshot, how)
	case rec.Job != r.jobFingerprint():
		return time.Time{}, fmt.Errorf("%w: the target reached %s by another job (its layouts, families, scan, target or set_timestamp differ: fingerprint %s, this job's %s); %s",
			ErrNotAt, in.Name, rec.Job, r.jobFingerprint(), how)
	}
	return time.UnixMilli(rec.TTLTime), nil
}

// recordReached writes the reached record after a run that brought its
// target to its snapshot: a whole run or a catch-up, every split done and
// the sink finished (puts acknowledged, staged files loaded), and for a
// job in shards once the last shard proved the job's coverage.
//
// A run in one process that staged HFiles without loading them (no_load)
// leaves the record in its staging folder instead (stageReached), for
// the load to write once every region is loaded.
func (r *Run) recordReached(sum *Summary) error {
	o := r.o
	if len(o.Only) > 0 || o.Phase == hfiles.PhaseSpill || !sum.Finished {
		return nil
	}
	if o.Shard.Count > 1 && (sum.Coverage == nil || !sum.Coverage.Proven) {
		return nil
	}
	if kind, ok := r.kindOf(r.sinkName()); ok && kind.Reaches != nil && !kind.Reaches(r.j) {
		if o.Sink == nil && kind.Phases && !r.j.Sink.Offline && o.Shard.Count <= 1 {
			return r.stageReached(r.reached())
		}
		return nil // nothing written (the dry run), or a load by other means
	}
	rec := r.reached()
	fsys, name, err := r.openReachedFS()
	if err != nil {
		return err
	}
	if err := fsys.MkdirAll(path.Dir(name)); err != nil {
		return fmt.Errorf("reached record %s: %w", name, err)
	}
	if err := state.WriteReached(fsys, name, rec); err != nil {
		return err
	}
	r.logf("the target reached snapshot %s (recorded in %s)", rec.Snapshot, r.reachedPath())
	return nil
}

// reached is the record of the target reaching the run's snapshot.
func (r *Run) reached() state.Reached {
	id := r.src.Describe()
	ttl := r.scan.Now
	switch {
	case r.catchup != nil:
		ttl = r.catchup.NowB()
	case ttl.IsZero():
		// The scanners read the clock as they opened, from the start of
		// the run on.
		ttl = r.prepared
	}
	return state.Reached{Snapshot: id.Name, Table: id.Table, Created: id.Created.UnixMilli(), TTLTime: ttl.UnixMilli(), Job: r.jobFingerprint(), Written: time.Now().UTC()}
}

// stageReached leaves rec in the staging folder of a run that staged its
// HFiles without loading them (state.StagedReachedFile), with where the
// record goes and, for a catch-up, the snapshot the target must be at
// for the staged difference to be right: `rekey load` checks that before
// it loads and writes rec after (RunTask).
func (r *Run) stageReached(rec state.Reached) error {
	st := r.j.StagingPath()
	loc, err := vfs.OpenWith(st, vfs.Options{Kerberos: r.o.Kerberos})
	if err != nil {
		return fmt.Errorf("staging folder: %w", err)
	}
	defer loc.Close()
	wfs, ok := loc.FS.(vfs.WriteFS)
	if !ok {
		return fmt.Errorf("staging folder %s: file system is read-only", loc.URL)
	}
	sr := state.StagedReached{Record: rec, Path: absURL(r.reachedPath())}
	if r.catchup != nil {
		sr.Since, sr.SinceCreated, sr.AssumeAt = r.o.Since, r.sinceCreated, r.o.AssumeAt
	}
	if err := state.WriteStagedReached(wfs, path.Join(loc.Path, state.StagedReachedFile), sr); err != nil {
		return err
	}
	r.logf("the target reaches snapshot %s once the staged HFiles are loaded: the load records it in %s", rec.Snapshot, sr.Path)
	return nil
}

// absURL is p made absolute when it is a local path, so that a load run
// from another working folder finds it; a URL stays as it is.
func absURL(p string) string {
	if !job.IsLocalPath(p) || strings.HasPrefix(p, "file://") {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// fillCatchup puts a catch-up's work into the summary.
func (r *Run) fillCatchup(sum *Summary) {
	if r.catchup == nil {
		return
	}
	st := r.catchup.Stats()
	sum.Catchup = &CatchupSummary{
		Since:        r.o.Since,
		FilesRead:    st.Plan.FilesRead,
		FilesSkipped: st.Plan.FilesSkipped,
		BytesRead:    st.Plan.BytesRead,
		BytesSkipped: st.Plan.BytesSkipped,
		RowsTouched:  st.Rows,
		CellsAdded:   st.Added,
		CellsRemoved: st.Removed,
		CellsReplace: st.Replaced,
	}
}

// CatchupSummary is what a catch-up read, skipped and changed.
type CatchupSummary struct {
	// Since is the snapshot the catch-up started from.
	Since string `json:"since"`
	// FilesRead and BytesRead are the store files (of both snapshots)
	// whose rows were compared; FilesSkipped and BytesSkipped those whose
	// data blocks were never read.
	FilesRead    int   `json:"store_files_read"`
	FilesSkipped int   `json:"store_files_skipped"`
	BytesRead    int64 `json:"store_bytes_read"`
	BytesSkipped int64 `json:"store_bytes_skipped"`
	// RowsTouched counts the rows compared (read on either side).
	RowsTouched int64 `json:"rows_touched"`
	// CellsAdded are written as puts (CellsReplace of them replace a value
	// at the same key); CellsRemoved as version deletes.
	CellsAdded   int64 `json:"cells_added"`
	CellsRemoved int64 `json:"cells_removed"`
	CellsReplace int64 `json:"cells_replaced"`
}
