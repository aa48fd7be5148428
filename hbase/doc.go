// Package hbase is rekey's native client for HBase 2.x: ZooKeeper
// bootstrap, a region location cache fed by hbase:meta, Get, Scan, Put and
// Delete, a batched writer in the manner of Java's BufferedMutator, the
// admin calls rekey needs (create, disable, delete tables; flush; snapshots)
// and the secure bulk load of HFiles. The wire protocol lives in
// hbase/rpc, the protobuf messages in hbase/pb.
//
//	cfg, _, err := hbase.Locate("zk1:2181,zk2:2181", "") // or "": $REKEY_ZK, hbase-site.xml
//	c, err := hbase.NewClient(cfg)
//	defer c.Close()
//	w := c.NewWriter([]byte("events_v2"), hbase.WriterConfig{})
//	for ... { w.Write(ctx, cells...) }
//	if err := w.Close(ctx); err != nil {
//		var we *hbase.WriteError // each failed row with the server's error
//	}
//
// ExampleClient_NewWriter is the same, compiled by go test.
//
// # Bootstrap
//
// The client reads two znodes under zookeeper.znode.parent (/hbase):
// meta-region-server (where hbase:meta is served) and master (the active
// master). HBase writes znode data as an optional metadata prefix (0xFF, u32
// BE id length, id), then "PBUF" and a protobuf message.
//
// The client holds no ephemeral znode and no watch, so its ZooKeeper
// session carries nothing: when the session expires, the ZooKeeper library
// opens a new one by itself. While ZooKeeper is unreachable or the session
// is being replaced, a read waits and reads again (back-off class); so
// does a read of a znode missing under an existing parent (no active
// master between one master's end and the next one's start). A missing
// parent fails at once: a wrong zookeeper.znode.parent, or no HBase.
//
// # Locating regions
//
// hbase:meta has one row per region, keyed by the region name
// "table,startkey,regionid.encoded."; family info holds regioninfo ("PBUF" +
// RegionInfo) and server ("host:port"). To find the region of a row the
// client scans meta in reverse from "table,row,99999999999999" and takes one
// row. To list a table's regions it scans forward from "table,," to "table ,":
// meta compares rows field by field between commas, so a plain "table,"
// would sort after the first region's row. Locations are cached; an error
// that says the region is elsewhere (NotServingRegion, RegionMoved,
// connection refused) drops or moves the cache entry, and the operation
// retries. hbase:meta's own location follows a RegionMoved answer too, and
// is read again from ZooKeeper after any other relocating error.
//
// # Retries
//
// Every error has a retry class (rpc.Retry): retry now, back off, relocate
// the region, restart the scanner, or give up. Operations retry with
// back-off (Config.Pause times 1, 2, 3, 5, 10, 20, 40, 100...) until
// Config.OperationTimeout or Config.Retries; the Writer retries each
// mutation until WriterConfig.RetryTimeout and then reports it.
//
// # Scans
//
// A Scanner opens a server-side scanner per region, asks for Caching rows
// per call with next_call_seq, lets the server return partial rows and
// heartbeats, and moves on at each region's end key until the stop row.
// After an error it reopens at the row of the last cell it returned and
// skips that row's cells already returned, at the same MVCC read point when
// it is still the same region, so callers see each cell exactly once.
// Raw scans set the "_raw_" attribute, as HBase's own client does.
//
// # Writes
//
// Cells travel in the request's cell block (KeyValueCodecWithTags) and each
// MutationProto carries only its row and associated_cell_count. A Multi call
// holds one RegionAction per region; results come back per region action by
// position and per action by index, so a partial failure is reported for
// exactly the mutations that failed.
//
// The Writer copies each cell once, as WriteCell takes it, into its cell
// block encoding in an arena chunk that also holds the row and the
// mutation's struct; every attempt of a mutation sends those bytes as they
// are, straight into the call's frame, and the Multi request and response
// are encoded and walked by hand (multi.go), so writing a cell allocates
// nothing of its own (BenchmarkWriterCells reports allocs/cell).
//
// # Kerberos
//
// Config.Kerberos (from hbase-site.xml: hbase.security.authentication,
// hbase.master.kerberos.principal, hbase.regionserver.kerberos.principal,
// hbase.rpc.protection) makes every connection authenticate with SASL
// GSSAPI as the login Kerberos.Login or Kerberos.Identity gives (the
// caller passes it: there is no process-wide login); _HOST in a principal is the
// server's lowercased canonical host name.
//
// # Bulk load
//
// PrepareBulkLoad gives a staging token; BulkLoadHFile moves a region's
// files in (assign_seq_num=true) under that token; CleanupBulkLoad removes
// the staging directory. Files must lie inside one region: BulkLoad checks
// each file's first and last row (given by the caller, who wrote the file)
// against the current regions before loading anything.
//
// A secure region server moves the files with the HDFS delegation token of
// the request (fs_token, BulkLoadOptions.FSToken): with the caller's token
// for the same HDFS (same service) it moves them as the caller, so the
// caller's staging folder may stay private (mode 700), as with HBase's own
// BulkLoadHFilesTool. Without a token the server adds its own and moves
// them as the hbase user, who must then be able to rename the files out of
// their folder. A token that does not work (cancelled, expired) makes the
// server answer loaded=false, a *BulkLoadError.
package hbase
