package sink

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// Kind is how a sink of one kind (the job's sink.type) is built. A sink
// package registers its Kind from init, so that adding a sink touches the
// job's list of sections and the sink's own package, not the run.
type Kind struct {
	// Build builds the sink from the job's sink section and readies its
	// target. It runs after the run's state is leased and its splits are
	// chosen, and before any cell is read.
	Build func(ctx context.Context, e Env) (Sink, error)
	// State names what the sink writes durable state in (a staging
	// folder), for the run to lease before it reads or writes anything;
	// nil when it writes none of its own.
	State func(e Env) ([]Lease, error)
	// Phases says the sink can run as a job in phases (a spill run, then
	// tasks of their own); a sink without writes its target directly from
	// each shard.
	Phases bool

	// What the run asks of the kind instead of naming it. The zero value
	// of each is what a sink that writes its target directly, and only
	// puts cells, needs.

	// SplitFloor, when set, is the smallest piece the run's default cut
	// makes for this sink in a source of total bytes, given the floor
	// the cut takes for every other sink: a sink whose split has a small
	// fixed cost cuts a small table finer. Nil keeps floor.
	SplitFloor func(total, floor int64) int64
	// Spread says a free worker should take a split of a region no other
	// worker is reading, when there is one: the sink writes each split's
	// cells straight to the target's servers, and pieces of one source
	// region mostly land in the same target regions.
	Spread bool
	// Deletes says the sink writes the version delete markers a catch-up
	// between two snapshots reads for removed cells; a catch-up refuses
	// a sink without.
	Deletes bool
	// Reaches says whether a run through this sink that finished every
	// split leaves the job's target at the run's snapshot, for the
	// reached record a later catch-up starts from. Nil means it does; a
	// sink that writes nothing, or whose output a later step applies
	// (a load), returns false.
	Reaches func(j *job.Job) bool
	// Coverage reads a job's record and its shards' commits where the
	// sink keeps them itself (the staging folder at staging), for
	// `rekey status`; found is false when it holds none, and the run
	// looks beside the checkpoint. Nil: the sink keeps none of its own.
	Coverage func(staging string, o vfs.Options) (c JobCoverage, found bool, err error)
	// PlanFamilies checks the names of the target's families (the job's
	// renames applied) before `rekey plan` samples, for a target whose
	// names are stricter than HBase's; nil takes any.
	PlanFamilies func(j *job.Job, families []string) error
	// PlanWarnings says, from what `rekey plan` learned of the new rows
	// in its sample, what the target will make of them; nil says nothing.
	PlanWarnings func(j *job.Job, f PlanFacts) []PlanWarning
}

// JobCoverage is what a sink's own record of a job says (Kind.Coverage):
// the record, where it is, how many shards committed under it and, once
// every shard did, whether their splits cover it exactly once (nil) or
// not.
type JobCoverage struct {
	Record    *state.Job
	URL       string
	Committed int
	Covered   error
}

// PlanFacts is what `rekey plan` learned of the new rows from its sample,
// for a kind's plan-time checks. Sizes are lower bounds unless Complete.
type PlanFacts struct {
	// Complete says the sample was the whole source.
	Complete bool
	// RowsPast lists the sample's new rows holding more than bytes or
	// more than cells (math.MaxInt64 leaves a bound unchecked), largest
	// first, every one of them; nil when the plan has no row sizes.
	RowsPast func(bytes, cells int64) []RowFact
}

// RowFact is one new row of a plan's sample: its key, printable, and
// its size.
type RowFact struct {
	Row          string
	Cells, Bytes int64
}

// PlanWarning is one warning of a kind's plan-time checks: a short
// stable code and the message for the user.
type PlanWarning struct {
	Code, Message string
}

// Env is what a sink's builder gets from the run that builds it.
type Env struct {
	// Job is the job; its sink section says how to build the sink.
	Job *job.Job
	// Workers is how many splits the run writes at once; Budget is the
	// run's memory, divided (job.NewBudget).
	Workers int
	Budget  job.Budget
	// Phase and Shard say which task of a job in phases the run is:
	// Phase "" (the whole job, or a shard of it) or "spill", with its
	// shard Index of Count.
	Phase        string
	Index, Count int
	// Splits are the splits this run reads, largest first.
	Splits []SplitInfo
	// JobRecord is the digest of the job record the run runs under
	// (state.Job.Digest), "" with none.
	JobRecord string
	// Checkpoint is where the run keeps its checkpoint; state a sink keeps
	// per run may live beside it.
	Checkpoint string
	// Since is the snapshot a catch-up starts from, "" for a whole run: a
	// sink that records whose output its state holds records it too, so
	// that a catch-up's difference is never taken for a whole run's copy.
	Since string
	// LoadCommand is how the caller's user loads staged output later.
	LoadCommand string
	// Logf receives notable events.
	Logf func(format string, args ...any)
	// Warn receives what the run's summary lists as warnings (and logs):
	// what the sink could not do as the job asked.
	Warn func(format string, args ...any)
	// Families are the source families the run reads, each with the
	// name of the target family it is written into and what HBase kept
	// of it, for a sink that makes or checks the target's families
	// itself (Bigtable's GC rules).
	Families []Family
	// Kerberos is who the run logs in to Kerberos as (its state folders
	// may be on a kerberized HDFS).
	Kerberos *krb.Identity
	// OneToOne says the run maps distinct old cells to distinct new cells
	// (the job's layouts drop no field and merge no families, no timestamp
	// is set, no mapper of the caller's own): two equal new cells can only
	// be one cell written twice.
	OneToOne bool

	// Connect opens a client to the target cluster (ConnectTarget); the
	// run closes it. hint ends the message when no cluster is named.
	Connect func(ctx context.Context, hint string) (*hbase.Client, error)
	// ReadyTarget checks the target table, or creates it as the job says.
	ReadyTarget func(ctx context.Context, c *hbase.Client) error
	// PlanSplitKeys plans the target's split keys from a sample of the
	// source, for a sink that writes for regions not yet made.
	PlanSplitKeys func(ctx context.Context) ([][]byte, error)
	// WarnStaging checks a staging folder against the cluster the run
	// writes to, and warns of a mismatch.
	WarnStaging func(staging string)

	// Fence is the check every durable write of the sink's state is made
	// after (the run's leases all still held); Stamp returns what records
	// made under the lease taken at where are stamped with, or nil;
	// Holder reads who holds the lease folder p.
	Fence  func() error
	Stamp  func(where string) func() (string, int64)
	Holder func(fsys vfs.FS, p string) (string, bool, error)
	// Superseded returns a reader of the attempts that lost the lease
	// taken at where to a takeover (state.Leases.Superseded), or nil.
	Superseded func(where string) func() (state.Superseded, error)
}

// Family is one source family a run reads, as a sink that makes or
// checks the target's families sees it.
type Family struct {
	// Target is the family's name in the target (the job's families:
	// renames it); Source its name in the snapshot.
	Target, Source string
	// MaxVersions is the versions of a column the run reads at most:
	// the family's VERSIONS, or fewer when the scan asks for fewer.
	MaxVersions int
	// TTL is the family's time to live; 0 for none (FOREVER).
	TTL time.Duration
	// MinVersions and KeepDeletedCells are the family's MIN_VERSIONS and
	// whether KEEP_DELETED_CELLS is on (TRUE or TTL).
	MinVersions      int
	KeepDeletedCells bool
	// Attributes holds the family's attributes as HBase stored them
	// (COMPRESSION, DATA_BLOCK_ENCODING, BLOOMFILTER, ...), with the
	// job's target.create.families overrides of the target family
	// applied.
	Attributes map[string]string
}

// ErrTarget marks a target that cannot take the run's cells as the job
// describes it (a family missing, a GC rule that would drop cells the
// job writes, an option the target cannot honour): the job's mistake,
// found before anything is written.
var ErrTarget = errors.New("sink: the target cannot take the job's cells")

// ErrBadKey marks a cell a sink refuses for its key (a row key longer
// than the target allows, a row it cannot write atomically when the job
// asks for that): the run deals with it as with a key that does not fit
// the layout, by the job's bad_keys action.
var ErrBadKey = errors.New("sink: bad key")

// BadKeyError is the error a SplitSink's Write returns, wrapping
// ErrBadKey, for a cell it refused for its key. Dropped are cells of
// the same row it had taken in earlier calls and now refuses as well
// (it held them, unwritten): the run counts them rejected instead of
// written.
type BadKeyError struct {
	Why     string
	Dropped []cell.Cell
}

// Error says why the cell was refused.
func (e *BadKeyError) Error() string { return e.Why }

// Unwrap makes errors.Is(err, ErrBadKey) hold.
func (e *BadKeyError) Unwrap() error { return ErrBadKey }

// Lease is one piece of a sink's durable state the run must hold a lease
// on: What and Where name it in messages, File is the lease itself.
type Lease struct {
	What, Where, File string
	// Hint ends the message when another run holds it.
	Hint string
}

// Lost is a split whose output a sink dropped when it was built, because
// it could not keep it (the hfiles sink's runs in a local spill folder
// not on this machine): the run redoes it, or refuses to go on when its
// checkpoint counts it done.
type Lost struct {
	ID  string
	Why string
	// Where is where the sink looked for the split's output (the local
	// spill folder), for the message that sends the user there.
	Where string
	// Superseded says the split's record was written by an attempt that
	// lost the lease to another: what it staged does not count, and the
	// split is redone even where the checkpoint records it done.
	Superseded bool
}

// Forgetful is a Sink that may drop splits an earlier run committed.
type Forgetful interface {
	Sink
	// Lost names the splits dropped when the sink was built.
	Lost() []Lost
}

var (
	mu    sync.RWMutex
	kinds = map[job.SinkKind]Kind{}
)

// Register makes the sink kind k buildable. It panics when k is
// registered twice, which is a mistake of the build, not of a job.
func Register(k job.SinkKind, kind Kind) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := kinds[k]; dup {
		panic(fmt.Sprintf("sink: %q registered twice", k))
	}
	kinds[k] = kind
}

// Lookup returns how the sink kind k is built, and false when this build
// has no such sink. The empty kind is puts, the job's default.
func Lookup(k job.SinkKind) (Kind, bool) {
	if k == "" {
		k = job.SinkPuts
	}
	mu.RLock()
	defer mu.RUnlock()
	kind, ok := kinds[k]
	return kind, ok
}

// Kinds lists the registered sink kinds, sorted.
func Kinds() []job.SinkKind {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]job.SinkKind, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// KindList spells the registered kinds for a message: "bigtable,
// dry-run, hfiles, puts".
func KindList() string {
	ks := Kinds()
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return strings.Join(out, ", ")
}

func init() {
	// The dry run writes nothing, so it takes a catch-up's markers as
	// well as cells, and reaches no target.
	Register(job.SinkDryRun, Kind{
		Build:   func(context.Context, Env) (Sink, error) { return DryRun{}, nil },
		Deletes: true,
		Reaches: func(*job.Job) bool { return false },
	})
}

// ConnectTarget opens a client to the job's target cluster, found the one
// way every subcommand finds it (hbase.Locate), and says where it was
// found; the caller closes it. id is who to log in to Kerberos as when the
// cluster's configuration does not say. hint ends the message when no
// cluster is named. logf hears of the client's retries (hbase.Config.Logf).
func ConnectTarget(j *job.Job, id *krb.Identity, hint string, logf func(string, ...any)) (*hbase.Client, string, error) {
	cfg, from, err := hbase.Locate(j.Target.ZKQuorum, j.Target.ZNodeParent)
	if err != nil {
		return nil, "", fmt.Errorf("%s: target cluster: %w%s", j.Path, err, hint)
	}
	if j.Target.Timeout > 0 {
		cfg.OperationTimeout = j.Target.Timeout
	}
	if cfg.Kerberos != nil && cfg.Kerberos.Login == nil && cfg.Kerberos.Identity == nil {
		cfg.Kerberos.Identity = id
	}
	cfg.Logf = logf
	c, err := hbase.NewClient(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("target cluster %s (from %s): %w", cfg.ZKQuorum, from, err)
	}
	return c, fmt.Sprintf("%s (from %s)", cfg.ZKQuorum, from), nil
}
