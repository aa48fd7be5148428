package pipeline

import (
	"fmt"
	"io"
	"time"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
)

// Options are what a caller sets for one run of a job beside the job file.
// Zero fields take the job file's values, then the defaults of package job.
type Options struct {
	// Sink, when set, receives the mapped cells instead of the sink the
	// job's sink section describes (a custom sink, or one a test builds);
	// the run closes it. Nil builds the job's own: batched puts, staged
	// HFiles or the dry run.
	Sink sink.Sink
	// NewMapper returns the transform one worker uses; nil maps through the
	// job's layouts (Job.Program.New()). Custom Go transforms plug in here.
	NewMapper func() transform.Mapper
	// Workers is the number of splits read at once [the job's run.workers,
	// else job.DefaultWorkers: GOMAXPROCS]. The sink's buffers are sized
	// for the same number.
	Workers int
	// SplitBytes cuts regions larger than this into pieces [run.split_bytes;
	// 0 there too = the snapshot's DefaultSplitBytes]; job.SplitBytesOff
	// (or any negative value) = one split per region.
	SplitBytes int64
	// Checkpoint is the checkpoint file, local or hdfs:// [run.checkpoint,
	// else Job.CheckpointPath()].
	Checkpoint string
	// Resume skips the splits an existing checkpoint records done; with no
	// checkpoint the run starts from the beginning. Without Resume an
	// existing checkpoint is an error unless Fresh is set.
	Resume bool
	// Fresh discards an existing checkpoint and starts over.
	Fresh bool
	// ForceTakeover takes over an HDFS lease on the run's state that has
	// not expired yet: for a run whose owner is known to be dead (a local
	// lock needs none: it ends with its process).
	ForceTakeover bool
	// LeaseTTL is how long an HDFS lease on the run's state lasts unless
	// renewed; the run renews it every third of that [DefaultLeaseTTL].
	LeaseTTL time.Duration
	// Only restricts the run to these old-key row ranges (a verify report's
	// ranges to redo): splits are clipped to them and splits outside are
	// skipped. Runs with Only keep their own checkpoint.
	Only []KeyRange
	// Shard, when Count > 1, makes this process do only its share of the
	// splits: a size-balanced, deterministic partition, so N copies of
	// rekey (a Kubernetes Indexed Job, say) split one job between them,
	// each with its own checkpoint.
	Shard Shard
	// Kerberos is who to log in as when HDFS or HBase requires Kerberos;
	// it logs in at the first connection that needs it. Nil logs in as the
	// job's security section says (Identity): a program that sets that
	// section needs nothing here. The rekey command passes its own, its
	// flags merged over the job's section.
	Kerberos *krb.Identity
	// build, when set, plays another build's choices (the schedule test).
	build *buildChoices
	// ownMapper says the caller gave NewMapper: what it maps, the job's
	// layouts do not tell, so nothing is assumed one to one.
	ownMapper bool
	// afterDone, when set, is called once a split's done record is
	// written (the schedule test kills a run there).
	afterDone func()
	// Phase, when hfiles.PhaseSpill, makes the run the spill task of Shard
	// (0/1 without one) in a job in phases: its sorted runs go to its own
	// folder inside the shared staging folder, and its Finish commits them
	// for the merge (RunTask runs the merge and the load). It needs the
	// hfiles sink. The zero Phase is the whole job in one process.
	Phase hfiles.Phase
	// LoadCommand is how the caller's user loads staged HFiles later
	// ("rekey load JOB"), said with NoLoad or offline beside HBase's own
	// bulk load tool.
	LoadCommand string
	// Limits are the starting throttle caps [the job's run section].
	Limits Limits
	// Control, when set, lets the caller change limits, pause and resume
	// while the run goes on; Prepare creates one when nil.
	Control *Control
	// ControlToken is the bearer token the control endpoint asks for
	// [run.control_token, else a random one written to a 0600 file beside
	// a local checkpoint].
	ControlToken string
	// SetTimestamp, when non-zero, replaces every cell's timestamp.
	SetTimestamp int64
	// Memory is the budget in bytes the run sizes its buffers from
	// [run.memory, else job.DefaultMemory]; job.NewBudget divides it.
	Memory int64
	// HeavyHitters and SampleEntities size the entity sketch
	// [run.heavy_hitters and run.sample_entities, else
	// job.DefaultHeavyHitters and job.DefaultSampleEntities].
	HeavyHitters, SampleEntities int
	// Open is passed to snapshot.Open (tests read an in-memory FS).
	Open snapshot.OpenOptions
	// Progress receives progress: a live bar when Interactive, else a line
	// every ProgressEvery. Nil = none.
	Progress      io.Writer
	Interactive   bool
	ProgressEvery time.Duration
	// Logf receives warnings and notable events (nil = discard).
	Logf func(format string, args ...any)
	// Now is the clock (tests); nil = time.Now.
	Now func() time.Time
	// Since, when set, makes the run a catch-up: it writes only the
	// difference between this earlier snapshot (in the job's source root)
	// and the job's, into a target the job's reached record puts at Since
	// (see ErrNotAt). It keeps its own checkpoint and job record, named
	// after Since. Puts (or the dry run) only, in one process. SinceLast
	// takes the snapshot the reached record names. The reached record
	// lies beside Checkpoint when it is given, else beside the job's.
	Since string
	// AssumeAt, with Since, takes the target to be at Since without the
	// reached record (a target brought there by other means); Since is
	// then read as of its creation time.
	AssumeAt bool
}

// KeyRange is a row range of the old table: [Start, Stop), empty Stop = to
// the end.
type KeyRange struct {
	Start []byte `json:"start"`
	Stop  []byte `json:"stop"`
}

// Shard is one share of a job run by several processes: Index in
// [0, Count).
type Shard struct {
	Index, Count int
}

// String is "I/N".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Limits are a run's throttle caps; zero means no cap.
type Limits struct {
	// CellsPerSec caps the cells handed to the sink per second, whole run.
	CellsPerSec float64 `json:"cells_per_sec"`
	// ReadBytesPerSec caps the bytes read from the snapshot's file system
	// per second, whole run.
	ReadBytesPerSec float64 `json:"read_bytes_per_sec"`
	// CallsPerServer caps the write calls in flight to one region server
	// (puts sink; set when the sink is built).
	CallsPerServer int `json:"calls_per_server,omitempty"`
}

// Identity returns who a run of j logs in to Kerberos as when a cluster
// requires it: given, else the job's security section (a keytab and its
// principal, else the ticket cache; its krb5.conf, else the default).
func Identity(j *job.Job, given *krb.Identity) *krb.Identity {
	if given != nil {
		return given
	}
	s := j.Security
	return krb.NewIdentity(krb.Options{Keytab: s.Keytab, Principal: s.Principal, Krb5Conf: s.Krb5Conf})
}
