package dev.rekey.testenv;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.FileUtil;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HBaseTestingUtility;
import org.apache.hadoop.hbase.HColumnDescriptor;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.HTableDescriptor;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableSnapshotScanner;
import org.apache.hadoop.hbase.io.compress.Compression;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.hbase.util.FSUtils;

/**
 * Has HBase 1.7.2 write snapshots and judge them. A mini cluster
 * (HDFS, ZooKeeper, one master and one RegionServer, on 127.0.0.1) writes
 * the tables below through the client (several versions, every delete
 * type, two flushes so each store holds two files, one table split into
 * daughters that read Reference files) and snapshots each. Every snapshot
 * is copied to a local root-dir layout; after the cluster stops, 1.7.2's
 * TableSnapshotScanner dumps each local copy in the canonical format,
 * normal and raw, as the oracle does for 2.x.
 *
 * <p>Usage: Hbase1Snapshots OUT. Writes OUT/NAME/ (a root dir holding
 * .hbase-snapshot/NAME and the table's store files), OUT/NAME.cells and
 * OUT/NAME.raw.cells per snapshot.
 */
public final class Hbase1Snapshots {
  private static final byte[][] QUALIFIERS = {Bytes.toBytes("a"), Bytes.toBytes("b"), Bytes.toBytes("qual_c")};
  /** Fixed timestamps (2020-09-13), far from now, so nothing depends on the clock. */
  private static final long TS = 1_600_000_000_000L;
  private static final int ROWS = 300;

  /** One table: its families' encodings and codecs, and whether it is split after writing. */
  private record Spec(String name, String[] families, DataBlockEncoding[] encodings,
      Compression.Algorithm[] codecs, boolean split) {}

  /**
   * Only NONE and GZ: the other codecs need native Hadoop libraries in
   * 1.x (SNAPPY, LZ4, BZIP2) or do not exist in its Hadoop 2.8.5 (ZSTD).
   * PREFIX_TREE, which 1.x also has, is refused by rekey and left out.
   */
  private static final Spec[] SPECS = {
    new Spec("h1_none", new String[] {"f"}, new DataBlockEncoding[] {DataBlockEncoding.NONE},
        new Compression.Algorithm[] {Compression.Algorithm.NONE}, false),
    new Spec("h1_prefix_gz", new String[] {"f"}, new DataBlockEncoding[] {DataBlockEncoding.PREFIX},
        new Compression.Algorithm[] {Compression.Algorithm.GZ}, false),
    new Spec("h1_diff", new String[] {"f"}, new DataBlockEncoding[] {DataBlockEncoding.DIFF},
        new Compression.Algorithm[] {Compression.Algorithm.NONE}, false),
    new Spec("h1_fast_diff_gz_2fam", new String[] {"f", "g"},
        new DataBlockEncoding[] {DataBlockEncoding.FAST_DIFF, DataBlockEncoding.NONE},
        new Compression.Algorithm[] {Compression.Algorithm.GZ, Compression.Algorithm.NONE}, false),
    new Spec("h1_split_refs", new String[] {"f"}, new DataBlockEncoding[] {DataBlockEncoding.FAST_DIFF},
        new Compression.Algorithm[] {Compression.Algorithm.NONE}, true),
  };

  private Hbase1Snapshots() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: Hbase1Snapshots OUT");
      System.exit(2);
    }
    java.nio.file.Path out = java.nio.file.Paths.get(args[0]).toAbsolutePath();
    Files.createDirectories(out);
    HBaseTestingUtility util = new HBaseTestingUtility(clusterConf());
    util.startMiniCluster(1);
    try {
      for (Spec s : SPECS) {
        write(util, s);
        export(util, s.name(), new Path(out.resolve(s.name()).toUri()));
        System.err.println("hbase1: wrote and exported " + s.name());
      }
    } finally {
      util.shutdownMiniCluster();
    }
    for (Spec s : SPECS) {
      long n = dump(out, s.name(), false);
      long raw = dump(out, s.name(), true);
      System.err.println("hbase1: " + s.name() + ": " + n + " cells, " + raw + " raw");
    }
    // HDFS and ZooKeeper leave non-daemon threads behind.
    System.exit(0);
  }

  /** Loopback only, small, and no compaction that would change the store files. */
  private static Configuration clusterConf() {
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.zookeeper.quorum", "127.0.0.1");
    conf.set("hbase.master.ipc.address", "127.0.0.1");
    conf.set("hbase.regionserver.ipc.address", "127.0.0.1");
    conf.setInt("hbase.master.info.port", -1);
    conf.setInt("hbase.regionserver.info.port", -1);
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.setInt("hbase.hstore.compactionThreshold", 1000);
    conf.setInt("hbase.hstore.blockingStoreFiles", 10000);
    conf.setLong("hbase.hregion.majorcompaction", 0);
    conf.setInt("hbase.regionserver.handler.count", 5);
    conf.setInt("hbase.master.handler.count", 5);
    return conf;
  }

  private static void write(HBaseTestingUtility util, Spec s) throws Exception {
    TableName tn = TableName.valueOf(s.name());
    HTableDescriptor td = new HTableDescriptor(tn);
    // A split table keeps its Reference files: no compaction rewrites them.
    td.setCompactionEnabled(!s.split());
    for (int i = 0; i < s.families().length; i++) {
      HColumnDescriptor cd = new HColumnDescriptor(s.families()[i]);
      cd.setMaxVersions(3);
      cd.setDataBlockEncoding(s.encodings()[i]);
      cd.setCompressionType(s.codecs()[i]);
      // Small blocks: many data blocks per file, so index and block
      // boundaries are exercised, not one block per file.
      cd.setBlocksize(4096);
      td.addFamily(cd);
    }
    Admin admin = util.getHBaseAdmin();
    admin.createTable(td, s.split() ? null : new byte[][] {row(ROWS / 2)});
    util.waitTableAvailable(tn);
    Random rnd = new Random(s.name().hashCode());
    try (Table t = util.getConnection().getTable(tn)) {
      t.put(puts(s, rnd, 0));
      admin.flush(tn);
      t.delete(deletes(s));
      // Writes after the deletes: newer versions (visible) and some at the
      // deleted timestamps (still masked by the markers).
      t.put(puts(s, rnd, 4));
      admin.flush(tn);
    }
    if (s.split()) {
      split(util, tn);
    }
    admin.snapshot(s.name(), tn);
  }

  private static byte[] row(int i) {
    return Bytes.toBytes(String.format("r%05d", i));
  }

  /**
   * Three versions (timestamps TS+shift, +2, +4) of every qualifier in
   * every family; with a shift, only every fifth row, so the second write
   * overlaps the first at TS+shift (the later write wins the tie).
   */
  private static List<Put> puts(Spec s, Random rnd, int shift) {
    List<Put> out = new ArrayList<>();
    for (int r = 0; r < ROWS; r++) {
      Put p = new Put(row(r));
      for (String f : s.families()) {
        for (byte[] q : QUALIFIERS) {
          for (int v = 0; v < 3; v++) {
            if (shift > 0 && r % 5 != 0) {
              continue;
            }
            byte[] val = new byte[rnd.nextInt(40)];
            rnd.nextBytes(val);
            p.addColumn(Bytes.toBytes(f), q, TS + shift + v * 2, val);
          }
        }
      }
      if (!p.isEmpty()) {
        out.add(p);
      }
    }
    return out;
  }

  /** Every delete type: row, family, family version, column (all versions) and one version. */
  private static List<Delete> deletes(Spec s) {
    byte[] f = Bytes.toBytes(s.families()[0]);
    List<Delete> out = new ArrayList<>();
    for (int r = 3; r < ROWS; r += 17) {
      Delete d = new Delete(row(r));
      switch ((r / 17) % 5) {
        case 0 -> { } // the whole row
        case 1 -> d.addFamily(f);
        case 2 -> d.addFamilyVersion(f, TS + 2);
        case 3 -> d.addColumns(f, QUALIFIERS[1]);
        default -> d.addColumn(f, QUALIFIERS[2], TS + 4);
      }
      out.add(d);
    }
    return out;
  }

  /** Splits tn's one region at its middle row and waits for both daughters. */
  private static void split(HBaseTestingUtility util, TableName tn) throws Exception {
    Admin admin = util.getHBaseAdmin();
    admin.split(tn, row(ROWS / 2));
    long deadline = System.currentTimeMillis() + 120_000;
    while (admin.getTableRegions(tn).size() < 2) {
      if (System.currentTimeMillis() > deadline) {
        throw new IOException(tn + " did not split within 120 s");
      }
      Thread.sleep(200);
    }
    util.waitTableAvailable(tn);
    util.waitUntilNoRegionsInTransition(120_000);
  }

  /**
   * Copies the snapshot and the table's store files from HDFS to DEST,
   * keeping the root-dir layout (.hbase-snapshot/, data/, archive/). The
   * whole table directory is copied, a superset of what the snapshot
   * references: HFiles, Reference files and the parents' files they name.
   */
  private static void export(HBaseTestingUtility util, String name, Path dest) throws IOException {
    Configuration conf = util.getConfiguration();
    FileSystem fs = util.getTestFileSystem();
    Path root = FSUtils.getRootDir(conf);
    FileSystem local = FileSystem.getLocal(conf);
    local.delete(dest, true);
    String[] parts = {
      HConstants.SNAPSHOT_DIR_NAME + "/" + name,
      HConstants.BASE_NAMESPACE_DIR + "/default/" + name,
      HConstants.HFILE_ARCHIVE_DIRECTORY + "/" + HConstants.BASE_NAMESPACE_DIR + "/default/" + name,
    };
    for (String rel : parts) {
      Path src = new Path(root, rel);
      if (fs.exists(src)) {
        FileUtil.copy(fs, src, local, new Path(dest, rel), false, conf);
      }
    }
  }

  /** Dumps OUT/NAME's snapshot with 1.7.2's TableSnapshotScanner; returns the cell count. */
  private static long dump(java.nio.file.Path out, String name, boolean raw) throws IOException {
    Configuration conf = HBaseConfiguration.create();
    Path root = new Path(out.resolve(name).toUri());
    conf.set(HConstants.HBASE_DIR, root.toString());
    conf.set("fs.defaultFS", "file:///");
    Scan scan = new Scan();
    scan.setRaw(raw);
    scan.setMaxVersions();
    scan.setCacheBlocks(false);
    java.nio.file.Path restore = Files.createTempDirectory("rekey-hbase1-restore");
    String file = name + (raw ? ".raw.cells" : ".cells");
    try (FileOutputStream fo = new FileOutputStream(out.resolve(file).toFile());
        Dump d = new Dump(fo);
        TableSnapshotScanner s = new TableSnapshotScanner(conf, root, new Path(restore.toUri()), name, scan)) {
      Result r;
      while ((r = s.next()) != null) {
        for (Cell c : r.rawCells()) {
          d.cell(c);
        }
      }
      return d.cells;
    } finally {
      FileUtil.fullyDelete(restore.toFile());
    }
  }
}
