// Package snapshot reads an HBase table snapshot straight from its files,
// region by region, with HBase's read semantics.
//
// # Layout
//
// A snapshot lives under the HBase root directory:
//
//	<root>/.hbase-snapshot/<name>/.snapshotinfo     SnapshotDescription (protobuf)
//	<root>/.hbase-snapshot/<name>/data.manifest     v2: table schema + every region's store files
//	<root>/.hbase-snapshot/<name>/region-manifest.* v2, not yet consolidated: one region each
//	<root>/.hbase-snapshot/<name>/<region>/...      v1: a directory per region
//	<root>/data/<ns>/<table>/<region>/<family>/<hfile>          live store files
//	<root>/archive/data/<ns>/<table>/<region>/<family>/<hfile>  files moved away by compaction
//
// The manifest names store files; it does not copy them. A name is one of:
//
//   - a plain HFile name (hex, maybe with _SeqId_<n>_): the file of the
//     snapshot's own table and region;
//   - an HFileLink, [<ns>=]<table>=<region>-<hfile>: a file of another table
//     (snapshots of cloned tables);
//   - a Reference, <hfile-or-link>.<parentRegion>, written after a split: the
//     top (rows >= split key) or bottom (rows < split key) half of the parent
//     region's file.
//
// Each target is looked for where HBase's HFileLink looks: data/, archive/,
// .tmp/, then mobdir/. The manifest alone decides which files are read; other files in
// the same directories (left over from older snapshots) are ignored.
//
// # Reading
//
// A Snapshot is cut into Splits (one per region, or smaller pieces cut at
// data-index keys: at rows, or with SplitOptions.InRow also at columns
// inside a huge row). A Scanner merges the store files of one split with a
// heap in HBase's cell order, breaking ties the way HBase's store scanner
// does (higher sequence id first, then the newer file), and applies what
// HBase's user scan applies: version limits, time range, TTL (family and
// per-cell), MIN_VERSIONS, delete markers of every type, KEEP_DELETED_CELLS,
// or raw mode. The result is, cell for cell, what HBase's
// TableSnapshotScanner returns for the same snapshot and scan.
//
//	s, err := snapshot.Open(ctx, "hdfs://nn:8020/hbase", "events-snap", snapshot.OpenOptions{})
//	splits, err := s.Splits(snapshot.SplitOptions{})
//	sc, err := s.NewScanner(ctx, splits[0], snapshot.ScanOptions{})
//	for sc.Next() {
//		c := sc.Cell() // valid until the next call
//	}
//	err = sc.Close() // the scan's error, if any (cell.Iterator's contract)
//
// or, the same in one call: s.ReadSplit(ctx, splits[0], opts, fn). ExampleOpen
// and ExampleSnapshot_ReadSplit run both on the bundled demo snapshot.
//
// Scanners stream: memory holds one block per store file, the read-ahead
// chunks of each store file being read (OpenOptions.ReadAhead: two chunks
// of 4 MiB by default, or none; a vfs.Budget bounds them all together), and
// the delete markers of the current row and family, never a whole row.
// Each store file is read front to back as one stream (one DataNode
// connection per HDFS block, not one per HFile block); the trailer, the
// load-on-open section, index blocks and the block a seek lands on are
// positional reads.
//
// Nothing under the root directory is ever written.
package snapshot
