// Package pipeline runs a rekey job: it cuts the source snapshot into
// splits, reads them with a bounded pool of workers, maps every cell
// through the job's transform and hands the result to a sink (batched puts,
// staged HFiles, or nothing for a dry run), recording each split in a
// checkpoint once its sink has made it durable.
//
//	j, _ := job.Load("daily.yaml")
//	sink, _ := pipeline.NewPuts(client, j.Target.Table, pipeline.PutsOptions{})
//	sum, err := pipeline.Run(ctx, pipeline.Config{Job: j, Sink: sink, Resume: true})
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
// server; when region servers push back (busy, queue full, throttled) the
// write rate is halved and then recovers step by step. A Control changes
// the caps, pauses and resumes a running job.
package pipeline
