package dev.rekey.testenv;

import java.io.IOException;
import java.io.PrintStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellComparator;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.client.TableSnapshotScanner;
import org.apache.hadoop.hbase.io.hfile.CacheConfig;
import org.apache.hadoop.hbase.io.hfile.HFileContext;
import org.apache.hadoop.hbase.io.hfile.HFileContextBuilder;
import org.apache.hadoop.hbase.regionserver.HStoreFile;
import org.apache.hadoop.hbase.regionserver.StoreFileWriter;
import org.apache.hadoop.hbase.regionserver.StoreUtils;
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * The end-to-end bench's Java side: the two hand-written Java contenders
 * (TableSnapshotScanner -> WideToBucketed -> BufferedMutator, and -> sorted
 * HFiles -> bulk load), and the order-independent digests the bench uses to
 * check every contender's target against the expected cells.
 */
final class E2E {
  private E2E() {}

  /** Receives cells one at a time. */
  interface CellSink {
    void accept(Cell c) throws IOException;
  }

  /** Receives re-keyed cells one at a time. */
  interface KeyValueSink {
    void accept(KeyValue kv) throws IOException;
  }

  /**
   * What every contender reads: the snapshot's cells (snapshotCells)
   * re-keyed by the wide -> bucketed rule, each read counted in st, a cell
   * whose key does not fit counted rejected and left out, the others
   * handed to sink.
   */
  static void rekeyedCells(Path root, String name, RunStats st, KeyValueSink sink) throws IOException {
    WideToBucketed w = new WideToBucketed();
    snapshotCells(root, name, c -> {
      st.read(c);
      KeyValue kv = w.apply(c);
      if (kv == null) {
        st.rejected++;
        return;
      }
      sink.accept(kv);
    });
  }

  /**
   * Streams every cell TableSnapshotScanner returns for the snapshot, all
   * versions, no block cache, mslab off (baselines.md). The restore dir
   * goes on the snapshot's file system and is removed afterwards.
   */
  static void snapshotCells(Path root, String name, CellSink sink) throws IOException {
    Configuration conf = new Configuration(Oracle.baseConf());
    conf.setBoolean("hbase.hregion.memstore.mslab.enabled", false);
    FileSystem fs = root.getFileSystem(conf);
    root = fs.makeQualified(root);
    conf.set(HConstants.HBASE_DIR, root.toString());
    conf.set("fs.defaultFS", fs.getUri().toString());
    Path restore;
    if ("file".equals(fs.getUri().getScheme())) {
      restore = new Path(java.nio.file.Files.createTempDirectory("rekey-e2e-restore").toUri());
    } else {
      restore = fs.makeQualified(new Path("/tmp/rekey-e2e-restore-" + UUID.randomUUID()));
    }
    Scan scan = new Scan();
    scan.readAllVersions();
    scan.setCacheBlocks(false);
    try (TableSnapshotScanner s = new TableSnapshotScanner(conf, root, restore, name, scan)) {
      for (Result r; (r = s.next()) != null;) {
        for (Cell c : r.rawCells()) {
          sink.accept(c);
        }
      }
    } finally {
      fs.delete(restore, true);
    }
  }

  /**
   * An order-independent digest of a set of cells: the count, and the sum
   * (mod 2^64) over cells of the first 8 bytes, big-endian, of the MD5 of
   * the cell's canonical dump line without its newline. Equal sets give
   * equal digests whatever the order; a lost, extra, duplicated or changed
   * cell changes it. Go computes the same from cell.AppendDump.
   */
  static final class Digest {
    private final Dump fmt = new Dump(null);
    private final MessageDigest md5;
    long cells;
    long sum;

    Digest() {
      try {
        md5 = MessageDigest.getInstance("MD5");
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
    }

    void add(Cell c) {
      int n = fmt.format(c);
      md5.update(fmt.line(), 0, n - 1);
      sum += Bytes.toLong(md5.digest(), 0);
      cells++;
    }

    String json(String what, String name, long rejected) {
      return String.format(Locale.ROOT, "{\"%s\":\"%s\",\"cells\":%d,\"digest\":\"%016x\",\"rejected\":%d}",
          what, name, cells, sum, rejected);
    }
  }

  /** `digest-table TABLE`: every version of every cell of a live table. */
  static void digestTable(TableName tn) throws IOException {
    Digest d = new Digest();
    Scan scan = new Scan().readAllVersions().setCaching(1000).setCacheBlocks(false);
    try (Connection conn = Oracle.connect(); Table t = conn.getTable(tn); ResultScanner rs = t.getScanner(scan)) {
      for (Result r; (r = rs.next()) != null;) {
        for (Cell c : r.rawCells()) {
          d.add(c);
        }
      }
    }
    System.out.println(d.json("table", tn.getNameAsString(), 0));
  }

  /**
   * `digest-snapshot ROOTDIR NAME [--rekey]`: the snapshot's cells, or with
   * --rekey the cells the wide -> bucketed re-key makes of them (the
   * expected content of every contender's target table).
   */
  static void digestSnapshot(Path root, String name, boolean rekey) throws IOException {
    Digest d = new Digest();
    WideToBucketed w = new WideToBucketed();
    long[] rejected = {0};
    snapshotCells(root, name, c -> {
      if (!rekey) {
        d.add(c);
        return;
      }
      KeyValue kv = w.apply(c);
      if (kv == null) {
        rejected[0]++;
      } else {
        d.add(kv);
      }
    });
    System.out.println(d.json("snapshot", name, rejected[0]));
  }

  /**
   * `rekey-dump ROOTDIR NAME`: the re-keyed cells of a snapshot in dump
   * format on stdout (in the snapshot's order, not the target's); each
   * refused cell on stderr as "rejected<TAB>dump line<TAB>reason". Exits 0
   * either way; the caller compares both.
   */
  static void rekeyDump(Path root, String name) throws IOException {
    WideToBucketed w = new WideToBucketed();
    Dump errLine = new Dump(null);
    PrintStream err = System.err;
    try (Dump out = new Dump(System.out)) {
      snapshotCells(root, name, c -> {
        KeyValue kv = w.apply(c);
        if (kv != null) {
          out.cell(kv);
          return;
        }
        int n = errLine.format(c);
        err.println("rejected\t" + new String(errLine.line(), 0, n - 1, java.nio.charset.StandardCharsets.US_ASCII)
            + "\t" + w.reason());
      });
    }
  }

  /**
   * `bench-e2e-put ROOTDIR NAME TABLE BATCH`: TableSnapshotScanner ->
   * re-key -> one Put per cell into a BufferedMutator whose write buffer
   * holds BATCH such puts (as bench-put sizes it), so each flush sends
   * about BATCH cells.
   */
  static void putContender(Path root, String name, TableName tn, int batch) throws IOException {
    RunStats st = new RunStats("e2e-java-put");
    try (Connection conn = Oracle.connect()) {
      BufferedMutator[] m = {null};
      try {
        rekeyedCells(root, name, st, kv -> {
          Put p = new Put(kv.getRowArray(), kv.getRowOffset(), kv.getRowLength());
          p.add(kv);
          if (m[0] == null) {
            // Sized from the first put: the dataset's cells are alike.
            m[0] = conn.getBufferedMutator(new BufferedMutatorParams(tn).writeBufferSize(p.heapSize() * batch));
          }
          m[0].mutate(p);
          st.written++;
        });
        if (m[0] != null) {
          m[0].flush();
        }
      } finally {
        if (m[0] != null) {
          m[0].close();
        }
      }
    }
    st.print();
  }

  /**
   * `bench-e2e-bigtable ROOTDIR NAME PROJECT INSTANCE TABLE BATCH INFLIGHT`:
   * the put contender with its HBase connection replaced by Google's
   * HBase-compatible Bigtable client (bigtable-hbase-2.x, testenv/bigtable):
   * TableSnapshotScanner -> re-key -> one Put per cell into its
   * BufferedMutator, BATCH entries per MutateRows request, at most INFLIGHT
   * requests outstanding. BIGTABLE_EMULATOR_HOST points it at an emulator.
   *
   * <p>That client needs HBase 2.5.7's shaded client, which cannot share a
   * class path with the oracle's HBase, so it is loaded from the class path
   * in REKEY_BIGTABLE_CP in a class loader whose parent is the platform
   * loader (java.* only), and reached through java.* types. Each cell
   * crosses as fresh arrays: the row, family, qualifier and value copied
   * out of the re-keyed KeyValue, a cost the HBase put contender does not
   * pay (four small copies per cell).
   */
  @SuppressWarnings("unchecked")
  static void bigtableContender(Path root, String name, String project, String instance, String table, int batch,
      int inflight) throws Exception {
    try (java.net.URLClassLoader loader = bigtableLoader()) {
      RunStats st = new RunStats("e2e-java-bigtable");
      Object o = loader.loadClass("dev.rekey.testenv.bigtable.Writer")
          .getConstructor(String.class, String.class, String.class, int.class, int.class)
          .newInstance(project, instance, table, batch, inflight);
      java.util.function.ObjLongConsumer<byte[][]> put = (java.util.function.ObjLongConsumer<byte[][]>) o;
      try (AutoCloseable m = (AutoCloseable) o) {
        rekeyedCells(root, name, st, kv -> {
          put.accept(new byte[][] {org.apache.hadoop.hbase.CellUtil.cloneRow(kv),
              org.apache.hadoop.hbase.CellUtil.cloneFamily(kv), org.apache.hadoop.hbase.CellUtil.cloneQualifier(kv),
              org.apache.hadoop.hbase.CellUtil.cloneValue(kv)}, kv.getTimestamp());
          st.written++;
        });
      }
      st.print();
    }
  }

  /**
   * A class loader over REKEY_BIGTABLE_CP (testenv/bigtable's jar and its
   * dependencies, as testenv/bigtable/bin/build prints them) whose parent
   * is the platform loader, so none of the oracle's HBase classes are seen
   * from it.
   */
  static java.net.URLClassLoader bigtableLoader() throws IOException {
    String cp = System.getenv("REKEY_BIGTABLE_CP");
    if (cp == null || cp.isEmpty()) {
      throw new IOException("REKEY_BIGTABLE_CP is not set: the class path testenv/bigtable/bin/build prints");
    }
    List<java.net.URL> urls = new ArrayList<>();
    for (String e : cp.split(":")) {
      if (!e.isEmpty()) {
        urls.add(new java.io.File(e).toURI().toURL());
      }
    }
    return new java.net.URLClassLoader(urls.toArray(new java.net.URL[0]), ClassLoader.getPlatformClassLoader());
  }

  /**
   * `bigtable-table create|drop|digest PROJECT INSTANCE TABLE [FAMILY]`:
   * the Bigtable row's set-up and judge, through Google's HBase-compatible
   * client (testenv/bigtable's Tables): create TABLE with FAMILY, drop it,
   * or print the digest of every cell in it, in the same form as
   * digest-table, to compare with digest-snapshot --rekey.
   */
  static void bigtableTable(String op, String project, String instance, String table, String family)
      throws Exception {
    try (java.net.URLClassLoader loader = bigtableLoader()) {
      Class<?> t = loader.loadClass("dev.rekey.testenv.bigtable.Tables");
      switch (op) {
        case "create":
          t.getMethod("create", String.class, String.class, String.class, String.class)
              .invoke(null, project, instance, table, family);
          return;
        case "drop":
          t.getMethod("drop", String.class, String.class, String.class).invoke(null, project, instance, table);
          return;
        case "digest":
          Digest d = new Digest();
          java.util.function.ObjLongConsumer<byte[][]> sink = (c, ts) -> d.add(
              new KeyValue(c[0], c[1], c[2], ts, KeyValue.Type.Put, c[3]));
          t.getMethod("scan", String.class, String.class, String.class, java.util.function.ObjLongConsumer.class)
              .invoke(null, project, instance, table, sink);
          System.out.println(d.json("table", table, 0));
          return;
        default:
          throw new IllegalArgumentException("bigtable-table: create, drop or digest, not " + op);
      }
    }
  }

  /**
   * `bench-e2e-hfile ROOTDIR NAME TABLE STAGING [BUFFER_MB]`:
   * TableSnapshotScanner -> re-key -> HFiles written with HBase's own
   * StoreFileWriter the way HFileOutputFormat2 writes them (one file per
   * target region and family, cells in comparator order, the family's
   * compression, encoding, bloom and block size, bulk-load file info) ->
   * BulkLoadHFiles. The input is not assumed sorted: cells are buffered up
   * to BUFFER_MB (default 256, fractions allowed) of KeyValue bytes, sorted, and each full
   * buffer becomes one file per region and family, so a region may get
   * several files (bulk load takes them all). STAGING is a directory on
   * the cluster's file system that must not exist; it is removed after.
   */
  static void hfileContender(Path root, String name, TableName tn, Path staging, double bufferMb) throws IOException {
    RunStats st = new RunStats("e2e-java-hfile");
    Configuration conf = Oracle.baseConf();
    FileSystem fs = staging.getFileSystem(conf);
    staging = fs.makeQualified(staging);
    if (fs.exists(staging)) {
      throw new IOException("staging dir " + staging + " exists; give a new one");
    }
    try (Connection conn = ConnectionFactory.createConnection(conf); Admin admin = conn.getAdmin();
        RegionLocator rl = conn.getRegionLocator(tn)) {
      Runs runs = new Runs(conf, fs, staging, admin.getDescriptor(tn), rl.getStartKeys(), st);
      long budget = (long) (bufferMb * (1 << 20));
      rekeyedCells(root, name, st, kv -> {
        runs.add(kv);
        if (runs.bytes >= budget) {
          runs.flush();
        }
      });
      runs.flush();
      if (st.files > 0) {
        BulkLoadHFiles.create(conf).bulkLoad(tn, staging);
      }
    } finally {
      fs.delete(staging, true);
    }
    st.print();
  }

  /** Sorted runs: a buffer of cells written as one HFile per region and family. */
  static final class Runs {
    private final Configuration conf;
    private final FileSystem fs;
    private final Path dir;
    private final TableDescriptor td;
    private final byte[][] starts;
    private final RunStats st;
    private final List<KeyValue> buf = new ArrayList<>();
    long bytes;
    /** Compress tags where the family says COMPRESS_TAGS, as a region server's flush does. */
    boolean compressTags;

    Runs(Configuration conf, FileSystem fs, Path dir, TableDescriptor td, byte[][] starts, RunStats st) {
      this.conf = conf;
      this.fs = fs;
      this.dir = dir;
      this.td = td;
      this.starts = starts;
      this.st = st;
      Arrays.sort(starts, Bytes.BYTES_COMPARATOR);
    }

    void add(KeyValue kv) {
      buf.add(kv);
      bytes += kv.getLength();
    }

    /** The index of the region holding row: the last start key <= row. */
    private int region(byte[] a, int off, int len) {
      int lo = 0;
      int hi = starts.length - 1;
      while (lo < hi) {
        int mid = (lo + hi + 1) >>> 1;
        if (Bytes.compareTo(starts[mid], 0, starts[mid].length, a, off, len) <= 0) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      return lo;
    }

    void flush() throws IOException {
      if (buf.isEmpty()) {
        return;
      }
      buf.sort(CellComparator.getInstance());
      Map<String, StoreFileWriter> open = new TreeMap<>();
      int cur = -1;
      try {
        for (KeyValue kv : buf) {
          int r = region(kv.getRowArray(), kv.getRowOffset(), kv.getRowLength());
          if (r != cur) {
            closeAll(open);
            cur = r;
          }
          String fam = Bytes.toString(kv.getFamilyArray(), kv.getFamilyOffset(), kv.getFamilyLength());
          StoreFileWriter wr = open.get(fam);
          if (wr == null) {
            wr = writer(fam);
            open.put(fam, wr);
          }
          wr.append(kv);
          st.written++;
        }
      } finally {
        closeAll(open);
      }
      buf.clear();
      bytes = 0;
    }

    private void closeAll(Map<String, StoreFileWriter> open) throws IOException {
      for (StoreFileWriter wr : open.values()) {
        // The file info HFileOutputFormat2 adds to files made for bulk load.
        wr.appendFileInfo(HStoreFile.BULKLOAD_TIME_KEY, Bytes.toBytes(System.currentTimeMillis()));
        wr.appendFileInfo(HStoreFile.BULKLOAD_TASK_KEY, Bytes.toBytes("rekey-bench-java"));
        wr.appendFileInfo(HStoreFile.MAJOR_COMPACTION_KEY, Bytes.toBytes(true));
        wr.appendFileInfo(HStoreFile.EXCLUDE_FROM_MINOR_COMPACTION_KEY, Bytes.toBytes(false));
        wr.appendTrackedTimestampsToMetadata();
        wr.close();
        st.files++;
      }
      open.clear();
    }

    private StoreFileWriter writer(String fam) throws IOException {
      ColumnFamilyDescriptor cf = td.getColumnFamily(Bytes.toBytes(fam));
      if (cf == null) {
        throw new IOException("target table " + td.getTableName() + " has no family " + fam);
      }
      HFileContext ctx = new HFileContextBuilder()
          .withCompression(cf.getCompressionType())
          .withDataBlockEncoding(cf.getDataBlockEncoding())
          .withBlockSize(cf.getBlocksize())
          .withChecksumType(StoreUtils.getChecksumType(conf))
          .withBytesPerCheckSum(StoreUtils.getBytesPerChecksum(conf))
          .withIncludesTags(true)
          .withCompressTags(compressTags && cf.isCompressTags())
          .withColumnFamily(cf.getName())
          .withTableName(td.getTableName().getName())
          .withCellComparator(CellComparator.getInstance())
          .build();
      Path famDir = new Path(dir, fam);
      return new StoreFileWriter.Builder(conf, CacheConfig.DISABLED, fs)
          .withOutputDir(famDir)
          .withBloomType(cf.getBloomFilterType())
          .withFileContext(ctx)
          .build();
    }
  }
}
