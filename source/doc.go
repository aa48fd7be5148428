// Package source is what a run reads: a set of splits, each a key range
// with a size, that yield cells. The run plans and cuts with the splits
// (their IDs name them in checkpoints and the job record, their bytes
// balance the workers and the shards), opens a Scanner per split and
// records the source's Identity, without knowing where the cells come
// from.
//
// Snapshot, over one snapshot.Snapshot, is the first Source. The next is
// meant to be the difference between two snapshots of one table (a
// catch-up): its splits are the later snapshot's key ranges, and its
// scanner merges what both snapshots show in that range into the puts and
// delete markers that turn the earlier into the later. Nothing in the
// interface assumes one snapshot: a split's Region only groups
// neighbouring splits, its Bytes only estimate its work, and a Scanner
// only promises cells in HBase's order with the cell.Iterator contract.
//
// The open-iterate loop the run makes, in short:
//
//	src, err := source.OpenSnapshot(ctx, root, name, snapshot.OpenOptions{})
//	splits, err := src.Splits(source.CutOptions{})
//	sc, err := src.Open(ctx, splits[0], source.ScanOptions{})
//	for sc.Next() {
//		c := sc.Cell() // valid until the next call
//	}
//	err = sc.Close() // the scan's error, if any
package source
