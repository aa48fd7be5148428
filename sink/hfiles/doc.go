// Package hfiles is the hfiles sink of a rekey run: the write path for large
// backfills, where no region server writes cells and HBase adopts finished
// HFiles instead (a bulk load).
//
// Three phases, each resumable:
//
//  1. Spill (per split, in the runner's workers). Every cell is assigned its
//     target region from a RegionMap (the live table's regions, or split keys
//     given offline) and copied into the split's sort buffer (the bytes
//     into an arena, the key fields and offsets into a 40-byte entry with no
//     pointers, so a buffer of millions of cells costs the garbage
//     collector nothing to scan). When the
//     split's share of Options.Memory is full, the buffer is sorted by
//     (region, family, cell.Compare) and written as one run file in
//     rekey's own format (runfile.go): blocks of one partition's cells,
//     each compressed and checked by a CRC-32C. Commit syncs and renames
//     the split's runs and records them in splits/SPLIT.json (atomically);
//     until then they do not count, and reopening the folder removes them.
//     In one process the runs may go to a local folder instead
//     (Options.LocalRuns, localruns.go): the records stay in the staging
//     folder and name the folder they are in, and a record whose runs are
//     not in this process's folder stages nothing (Sink.Lost). A split that spilled nothing is
//     kept in memory instead, sorted (held.go): its Ack says Held, and it
//     is recorded (and reported durable through OnDurable) only once its
//     cells are on disk, spilled when other buffers need the memory or in
//     HFiles that Finish recorded written. In one process only: a spill
//     task always spills.
//
//  2. Merge (Finish). For each region and family (Options.Workers of them
//     at once, the largest first), a k-way merge over the kept buffers and
//     its batches in every committed run (in passes, if there are more runs than
//     the memory budget lets one pass open) writes HFiles with hfile.Writer
//     under hfiles/REGION/FAMILY/. Cells with equal keys collapse: a
//     duplicate if value and tags agree (a split staged twice), a collision
//     if not (counted with examples; the first run's cell is kept, as the
//     target could hold only one anyway). Files roll at Options.HFileSize,
//     only between rows, and never more than Options.MaxFiles per region and
//     family. Each finished HFile is recorded in finish.json, so a crash
//     resumes after the last recorded row.
//
//  3. Load (Finish, unless offline or NoLoad). Region by region in the
//     region map's order, the recorded files are validated (size, rows,
//     cell count) and bulk loaded through hbase.Client.BulkLoad; each
//     loaded region is recorded. A region that split or merged since the
//     region map was made has its spanning files read back and split at the current boundaries, then loaded. A
//     file HBase already adopted is gone from the folder (the load moves it),
//     so a resumed load sends nothing twice. Offline or with NoLoad, Finish
//     says how to load the folder later: Options.LoadCommand (rekey load
//     JOB, a load task over the same folder), and HBase's own tool:
//
//     hbase org.apache.hadoop.hbase.tool.BulkLoadHFilesTool -Dcreate.table=no STAGING/hfiles TABLE -loadTable
//
//     (-loadTable: the folder has region/family/file depth; the tool
//     re-splits files whose region split meanwhile.)
//
// Memory: the sort buffers of all splits together stay within
// Options.Memory (Stats.PeakMemory is the accounted high mark: cell bytes
// plus per-cell bookkeeping); the merge holds about two batches per open
// run, over all the partitions it merges at once. Disk: Stats.PeakStaging is the most the folder held (runs and
// HFiles; the runs are removed once every HFile is written), bounded by
// Options.MaxStagingBytes.
//
// One job, one folder. In one process (the zero Options.Task) the sink
// owns the folder, and opening it removes runs no split record names.
// A job in phases (phases.go) shares the folder between its tasks, each in
// a folder of its own: spill shard I of N stages under
// spill/shard-I-of-N/ (opening it cleans only that folder) and its Finish
// commits the shard's split records as one file; merge part J of R
// merges the partitions dealt to it by bytes from every committed shard;
// the load task loads every part's HFiles. The region map is published once
// (created exclusively by the first shard) and every shard records its
// digest, which the merge checks. A task run before the phase it needs
// fails with ErrNotReady. ReadStatus reports every task from the folder.
//
// Use:
//
//	s, err := hfiles.New(ctx, hfiles.Options{Staging: "hdfs://nn/tmp/job", Table: "t", Client: c})
//	w, err := s.Begin(ctx, sink.SplitInfo{ID: "region-a"})
//	w.Write(ctx, &cell) ...; w.Commit(ctx)
//	err = s.Finish(ctx, reporter)
package hfiles
