// Package state keeps what a job leaves on disk to go on from, and the
// protocols that keep it true when runs crash, are retried, or race each
// other on many machines:
//
//   - the checkpoint (checkpoint.go, journal.go): which splits a run has
//     done, as a base rewritten now and then and a journal that gains one
//     checksummed record per split, so each split's commit costs one
//     append however many came before it;
//   - the leases (lease.go): a run's hold on each piece of state it writes,
//     a flock on a local path and a folder of generations, each created
//     exclusively, on HDFS and the object stores; every durable write is
//     fenced by them (Leases.Check);
//   - the job record (record.go, shards.go): what a job is and the splits
//     its tasks deal among them, published once, and the proof that the
//     splits they committed cover it exactly once.
//
// It says how each is written, read, compacted, taken, renewed and
// fenced; what is recorded when is the run's (package pipeline) and the
// sinks'. It sits below both, imports only the file system core (vfs) of
// the project, and no storage backend: the program picks those.
package state
