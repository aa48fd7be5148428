// Package pipeline runs a rekey job: it cuts the source snapshot into
// splits, reads them with a bounded pool of workers, maps every cell
// through the job's transform and hands the result to a sink (batched puts,
// staged HFiles, or nothing for a dry run), recording each split in a
// checkpoint once its sink has made it durable. It is what `rekey run`
// runs; the CLI only turns flags into a job and Options and prints.
//
//	j, err := job.Load("daily.yaml")
//	r, err := pipeline.Prepare(ctx, j, pipeline.Options{Resume: true})
//	err = r.Start(ctx)
//	sum, err := r.Wait()
//
// # The run's path
//
// Prepare assembles the run and writes nothing to the target:
//
//  1. settle: Options over the job's run section over the defaults of
//     package job (workers: GOMAXPROCS; memory: 1 GiB), and the one
//     division of the memory budget, job.NewBudget: of the Go soft limit
//     (three quarters of the budget less 32 MiB) 7/16 to the sink's
//     buffers, 3/16 to the snapshot's read-ahead, 2/16 to the collision
//     sets, each shared by the workers. Then the run's state
//     (checkpoint, staging folder) is leased, or refused (ErrLeased)
//     while another run holds it; the leases are package state's.
//  2. the source: the snapshot opened once, through a metered file system
//     (bytes read feed the progress and the read cap), cut into splits,
//     clipped to Options.Only, largest first, dealt to Options.Shard.
//  3. the checkpoint: an earlier run's is resumed, discarded (Fresh) or
//     refused (ErrCheckpointExists, ErrCheckpointMismatch,
//     ErrCheckpointDamaged). It is a base file rewritten now and then
//     plus a journal that gains one checksummed record per split, so a
//     split's record costs the same however many came before it; package
//     state writes and reads both, the run says what goes in and when.
//  4. the sink, from the job's sink section unless Options.Sink gives one,
//     built by the builder its package registered (sink.Register; the
//     sinks this build offers are imported in sinks.go): sink.DryRun;
//     package puts, through a client to the cluster hbase.Locate finds;
//     or the staged HFiles of package hfiles, against the live table or
//     offline from split keys. For both of the last the target table is
//     checked, or created when the job says target.create, pre-split at
//     keys planned from a sample of the snapshot (PlanSplitKeys, the same
//     Sample `rekey plan` reads).
//  5. the control endpoint, when the job asks for one, behind a bearer
//     token.
//
// Start sets the workers going (errgroup, Workers at once). A worker reads
// its split's merged store files (snapshot.Scanner), maps each cell with
// the job's transform.Mapper and writes the result to the split's
// sink.SplitSink; a key that does not fit (transform.ErrBadKey) goes to
// the split's reject file or stops the run, as the job says. When the scan
// ends the worker commits the split's sink and only then records the split
// in the checkpoint. After the last split the sink's Finish runs (the
// merge and bulk load of staged files) and is recorded too. Wait returns
// the Summary.
//
// # A job in phases
//
// With staged HFiles one job can also run as many tasks over one shared
// staging folder, for a scheduler to run (tasks.go): N runs with
// Options.Phase PhaseSpill and a Shard each stage their splits' sorted
// runs and commit them; then RunTask with PhaseMerge for each of R parts
// merges the partitions dealt to it into HFiles, and RunTask with
// PhaseLoad bulk loads them. Every task leases and records its own share
// of the folder; a task started before the phase it needs is done fails
// with ErrNotReady. ReadStagingStatus reads every task's state from the
// folder alone.
//
// # Guarantees
//
// A split is recorded done only after Commit of its SplitSink returned nil,
// so a crash or an interrupt loses no acknowledged work and redoes only
// splits that were not finished. Redoing is safe because cell timestamps
// are copied: writing a cell again stores the same version again (unless
// the run overrides timestamps, which it warns about).
//
// Problems that do not stop the run are counted and reported with
// examples, never dropped: keys that do not fit the layout (rejected to a
// file when the job says so), two old cells that become the same new cell
// (collisions), and mutations HBase refused after every retry. A split with
// failed mutations is not recorded done, so --resume writes it again.
//
// # Throttling
//
// A run can share a production cluster: caps on cells written per second
// and on bytes read per second from the snapshot's file system hold for
// the whole run; the puts sink caps write calls in flight per region
// server; when region servers push back (a sink.Retrier's retries grow)
// the write rate is halved and then recovers step by step. A Control
// changes the caps, pauses and resumes a running job.
package pipeline
