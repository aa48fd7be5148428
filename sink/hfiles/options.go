package hfiles

import (
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// Options configure the hfiles sink.
type Options struct {
	// Kerberos is who to log in as when the staging folder is on an HDFS
	// that requires Kerberos; nil gives no login (such a folder fails to
	// open, saying so).
	Kerberos *krb.Identity
	// Staging is the staging folder: a local path, file:// or hdfs:// URL.
	// To bulk load, it must be on the cluster's HDFS (the region servers
	// move the files in), for example under hdfs://NAMENODE/tmp/rekey.
	Staging string
	// Table is the target table, "namespace:qualifier" or "qualifier".
	Table string
	// Client is the target cluster (an *hbase.Client). Nil means offline:
	// the region map comes from SplitKeys and nothing is loaded (as with
	// NoLoad).
	Client Cluster
	// SplitKeys give the target regions offline (n keys, n+1 regions).
	// With a Client and no SplitKeys the region map is the live table's regions.
	SplitKeys [][]byte
	// NoLoad stops after writing the HFiles and prints the command that
	// loads them later.
	NoLoad bool
	// LoadCommand is how the caller's user loads the HFiles later (for
	// example "rekey load JOB"), printed with NoLoad or offline beside
	// HBase's own tool; empty prints HBase's tool alone.
	LoadCommand string

	// Task makes the sink one task of a job in phases over a staging
	// folder shared by every task (phases.go); the zero Task is the whole
	// job in one process.
	Task Task
	// Splits is how many splits the run (or a spill task) reads: recorded
	// for `rekey status`, and in one process the measure of how many
	// files splits writing directly would leave a region (direct.go).
	Splits int
	// SplitIDs are the IDs of the splits a spill task reads: its commit
	// names exactly these splits' records (each must be there), so a
	// record left in the shard's folder by an earlier run of other
	// options is never merged. Nil commits every record in the folder.
	// In one process they are the run's splits, each of which the merge
	// wants recorded (ErrSplitsMissing); nil checks nothing.
	SplitIDs []string
	// JobRecord is the Digest of the job record (package state) a spill
	// task runs under, kept in its commit: the merge takes only commits
	// made under the folder's record.
	JobRecord string

	// Memory bounds the bytes of cells the sink holds in sort buffers,
	// over all splits at once (default: a run's share for its sink of the
	// default budget, job.NewBudget(job.DefaultMemory, Workers).Sink). Each
	// of Workers splits
	// gets an equal share; a split spills a sorted run when its share is
	// full. The merge keeps at most MergeMemory/BatchBytes/2 run batches
	// open over all the partitions it merges at once, and merges in passes when
	// a partition has more runs than its share of MergeMemory.
	Memory int64
	// MergeMemory bounds what the merge holds over all the partitions it
	// merges at once: the kept splits' buffers, the run cursors and the
	// pipes' batches (default and at least Memory). The runner gives it
	// the readers' shares of the budget as well (job.Budget.Merge), which
	// are idle once every split is read: from Memory alone, the kept
	// buffers left the merge too few runs at once for the heavy
	// partition, which then merged in an extra pass.
	MergeMemory int64
	// Workers is how many splits the runner writes at once, and how many
	// partitions the merge writes at once (default job.DefaultWorkers); it
	// divides Memory.
	Workers int
	// RunCompression compresses run files' blocks: "s2" (default: the
	// cheapest per byte of the four), "lz4", "zstd" (smallest, for
	// staging whose bytes cost more than CPU) or "none".
	RunCompression string
	// BatchBytes is the size of a run file's blocks (default 1 MiB of
	// cells, at most Memory/8): the unit the merge reads.
	BatchBytes int64
	// LocalRuns is a local folder for the run files of the whole job in
	// one process (the zero Task), instead of the staging folder: only
	// the HFiles go to the staging folder then, as a bulk load needs
	// them on the cluster's HDFS, while the runs, read back by this
	// process alone, cost no DataNode writes and reads (localruns.go).
	// The split records stay in the staging folder and say where their
	// runs are; a record whose runs are not in this folder (another
	// machine's, or removed) is dropped when the sink opens (Sink.Lost).
	// Empty keeps the runs in the staging folder, as every phase task
	// must.
	LocalRuns string

	// MaxStagingBytes bounds the bytes in the staging folder (runs, merge
	// passes and HFiles; not those of LocalRuns); 0 means no bound. Going over it fails the split
	// or the merge with ErrStagingFull.
	MaxStagingBytes int64
	// SourceBytes is the store file bytes the whole run reads: when the
	// staging file system fills up, the FullError's estimate of what the
	// folder needs scales the runs staged so far to it. 0 leaves the
	// estimate to what is staged.
	SourceBytes int64

	// HFile configures every HFile written (block size, encoding,
	// compression, bloom); Name is set per file. Families overrides it per
	// column family; with a Client and no Families, each family of the
	// live table is written as its descriptor says (FamilyOptions).
	HFile    hfile.WriterOptions
	Families map[string]hfile.WriterOptions
	// HFileSize is the size (cell bytes) at which an HFile is rolled;
	// default 1 GiB. It grows as needed to keep MaxFiles.
	HFileSize int64
	// MaxFiles is the most HFiles written per region and family (default
	// 32, HBase's hbase.mapreduce.bulkload.max.hfiles.perRegion.perFamily).
	MaxFiles int

	// NoDirect keeps every split in the sort buffer and runs, even one
	// whose cells come in order (direct.go): for comparisons.
	NoDirect bool
	// OneToOne says the job maps distinct old cells to distinct new cells
	// (its layouts drop no field of the old key and merge no families, and
	// it sets no timestamp): the snapshot reader yields each cell once, so
	// two equal cells in the merge mean a cell was staged twice (splits
	// that overlap), and the merge fails (ErrRepeatedCells) instead of
	// collapsing them.
	OneToOne bool

	// Examples is how many collision examples Stats keeps (default 10).
	Examples int

	// Fence, when set, is checked before every durable record the sink
	// writes (a split's record, a spill shard's commit, the region map, the
	// task record, the merge's and the load's state) and before it
	// removes what a record no longer names: an error stops the write
	// and is returned wrapped. The runner passes its leases' check, so a
	// task whose lease another attempt took writes no record once it
	// can know (state.ErrLeaseLost), however late its own renewal.
	Fence func() error
	// Lease is the task's lease as a spill shard's commit is stamped with
	// it: the holder's token and the generation held as the commit is
	// written. Nil stamps nothing (a local folder, where the kernel's lock
	// fences a run for its whole life).
	Lease func() (token string, generation int64)
	// Holder reads who holds, or last held, the lease folder lease (a
	// task folder's _rekey.lease): the token of its current generation,
	// or false when there is no lease folder there (a local lock file, or
	// no lease). A spill shard's commit stamped with another token is of
	// an attempt that lost the shard to another, which redoes it: the
	// merge and the load ignore that commit (committedSpills). Nil trusts
	// every commit.
	Holder func(fsys vfs.FS, lease string) (token string, ok bool, err error)
	// Superseded reads which attempts lost the task's lease to a takeover
	// (state.Leases.Superseded; nil: none, as on a local folder). Split
	// records are stamped with Lease; a record of a superseded attempt
	// counts only when this task took the lease over from that attempt
	// and found the record on opening the folder (it stamps it anew, as
	// its own); one that lands later is left out, and its split redone.
	Superseded func() (state.Superseded, error)
}

func (o *Options) fill() {
	if o.Workers <= 0 {
		o.Workers = job.DefaultWorkers()
	}
	if o.Memory <= 0 {
		o.Memory = job.NewBudget(job.DefaultMemory, o.Workers).Sink
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 1 << 20
	}
	if o.BatchBytes > o.Memory/8 {
		o.BatchBytes = max(o.Memory/8, 4<<10)
	}
	if o.HFileSize <= 0 {
		o.HFileSize = 1 << 30
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = 32
	}
	if o.Examples <= 0 {
		o.Examples = 10
	}
	if o.RunCompression == "" {
		o.RunCompression = "s2"
	}
}

// mergeMemory is MergeMemory, at least Memory.
func (o *Options) mergeMemory() int64 { return max(o.MergeMemory, o.Memory) }

// splitBudget is the sort buffer bytes of one split.
func (o *Options) splitBudget() int64 {
	return max(o.Memory/int64(o.Workers), 64<<10)
}

// Stats is what the sink did, for the run's summary.
type Stats struct {
	// Spill phase.
	Runs        int64 `json:"runs"`         // run files spilled (committed splits)
	RunBytes    int64 `json:"run_bytes"`    // bytes of those run files
	CellsStaged int64 `json:"cells_staged"` // cells written to runs
	PeakMemory  int64 `json:"peak_memory"`  // most bytes held in sort buffers at once
	// SplitsInMemory and CellsInMemory count the splits (and their cells)
	// written to HFiles straight from their sort buffers, never spilled.
	SplitsInMemory int64 `json:"splits_in_memory"`
	CellsInMemory  int64 `json:"cells_in_memory"`
	// Direct counts the HFiles splits wrote straight from their cells,
	// which came in order (direct.go); Adopted those of them the merge
	// kept as they were, the rest it merged again.
	Direct  int64 `json:"direct_hfiles"`
	Adopted int64 `json:"direct_hfiles_adopted"`
	// LocalRuns is the local run folder the runs went to (Options.
	// LocalRuns); empty when they went to the staging folder.
	LocalRuns string `json:"local_runs,omitempty"`
	// Merge phase.
	MergePasses int64 `json:"merge_passes"` // extra passes for partitions with too many runs
	// MergePiped counts the heavy partitions merged on two goroutines,
	// one reading the runs and one writing the HFiles.
	MergePiped  int64    `json:"merge_piped_partitions"`
	HFiles      int64    `json:"hfiles"`
	HFileBytes  int64    `json:"hfile_bytes"`
	Cells       int64    `json:"cells"`      // cells written to HFiles
	Duplicates  int64    `json:"duplicates"` // identical cells collapsed
	Collisions  int64    `json:"collisions"` // same key, different value: one kept
	Examples    []string `json:"collision_examples,omitempty"`
	PeakStaging int64    `json:"peak_staging_bytes"`
	// MergeSeconds is the wall time of the merge phase in this process
	// (runs merged into HFiles); LoadSeconds that of the bulk load.
	MergeSeconds float64 `json:"merge_seconds"`
	LoadSeconds  float64 `json:"load_seconds"`
	// Load phase.
	RegionsLoaded int64 `json:"regions_loaded"`
	FilesResplit  int64 `json:"files_resplit"` // HFiles split again because their region split
	// LoadCommand is how to load the HFiles later (NoLoad or offline).
	LoadCommand string `json:"load_command,omitempty"`
}
