package dev.rekey.testenv;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellComparator;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.io.ImmutableBytesWritable;
import org.apache.hadoop.hbase.mapreduce.HFileOutputFormat2;
import org.apache.hadoop.hbase.mapreduce.TableInputFormat;
import org.apache.hadoop.hbase.mapreduce.TableMapReduceUtil;
import org.apache.hadoop.hbase.mapreduce.TableSnapshotInputFormat;
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.mapreduce.Job;
import org.apache.spark.Partitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.util.LongAccumulator;

import scala.Tuple2;

/**
 * The Spark contender of the end-to-end bench, written the way users write
 * this job today: TableSnapshotInputFormat through newAPIHadoopRDD, the
 * wide -> bucketed re-key (WideToBucketed, the oracle's rule) per cell,
 * then either
 *
 * <ul>
 *   <li>hfile: partition by target region, sort within partitions in cell
 *       order, HFileOutputFormat2 (configured from the target's families),
 *       then BulkLoadHFiles; or
 *   <li>put: one Put per cell through a BufferedMutator per partition
 *       (foreachPartition), its buffer holding BATCH puts.
 * </ul>
 *
 * Usage: SparkJob hfile|put ROOTDIR SNAPSHOT TABLE --zk HOST:PORT
 * [--znode /hbase] [--master local[2]] [--batch N] [--staging DIR]. Prints
 * the RunStats JSON line (driver JVM: in local mode the whole job).
 */
public final class SparkJob {
  private SparkJob() {}

  /** The HBase client settings the executors need, as plain strings. */
  static final class ClientConf implements Serializable {
    private static final long serialVersionUID = 1L;
    final String quorum;
    final String port;
    final String znode;
    final String defaultFS;

    ClientConf(String zk, String znode, String defaultFS) {
      int colon = zk.lastIndexOf(':');
      this.quorum = zk.substring(0, colon);
      this.port = zk.substring(colon + 1);
      this.znode = znode;
      this.defaultFS = defaultFS;
    }

    Configuration get() {
      Configuration c = HBaseConfiguration.create();
      c.set(HConstants.ZOOKEEPER_QUORUM, quorum);
      c.set(HConstants.ZOOKEEPER_CLIENT_PORT, port);
      c.set(HConstants.ZOOKEEPER_ZNODE_PARENT, znode);
      c.set("fs.defaultFS", defaultFS);
      // The settings without which the job is wrong or unfairly slow
      // (docs/baselines.md): no scan metrics per row, no mslab in the
      // snapshot-reading regions.
      c.setBoolean("hbase.TableSnapshotInputFormat.scan_metrics.enabled", false);
      c.setBoolean("hbase.hregion.memstore.mslab.enabled", false);
      return c;
    }
  }

  /** Orders full KeyValue byte arrays as HBase's cell comparator does. */
  static final class CellOrder implements Comparator<byte[]>, Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public int compare(byte[] a, byte[] b) {
      return CellComparator.getInstance().compare(new KeyValue(a), new KeyValue(b));
    }
  }

  /** Sends a KeyValue (as its bytes) to the partition of its target region. */
  static final class RegionPartitioner extends Partitioner {
    private static final long serialVersionUID = 1L;
    private final byte[][] starts;

    RegionPartitioner(byte[][] starts) {
      this.starts = starts.clone();
      Arrays.sort(this.starts, Bytes.BYTES_COMPARATOR);
    }

    @Override
    public int numPartitions() {
      return starts.length;
    }

    @Override
    public int getPartition(Object key) {
      KeyValue kv = new KeyValue((byte[]) key);
      int lo = 0;
      int hi = starts.length - 1;
      while (lo < hi) {
        int mid = (lo + hi + 1) >>> 1;
        if (Bytes.compareTo(starts[mid], 0, starts[mid].length,
            kv.getRowArray(), kv.getRowOffset(), kv.getRowLength()) <= 0) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      return lo;
    }
  }

  /**
   * The re-keyed cells of a partition's rows, produced as they are pulled
   * (a region's cells never sit in memory at once), as full KeyValue bytes.
   * One rule object per partition: it caches the hour text.
   */
  static final class Rekeyed implements Iterator<Tuple2<byte[], Boolean>> {
    private final Iterator<Tuple2<ImmutableBytesWritable, Result>> rows;
    private final LongAccumulator read;
    private final LongAccumulator bytesRead;
    private final LongAccumulator rejected;
    private final WideToBucketed rule = new WideToBucketed();
    private Cell[] cells = new Cell[0];
    private int i;
    private byte[] next;

    Rekeyed(Iterator<Tuple2<ImmutableBytesWritable, Result>> rows, LongAccumulator read,
        LongAccumulator bytesRead, LongAccumulator rejected) {
      this.rows = rows;
      this.read = read;
      this.bytesRead = bytesRead;
      this.rejected = rejected;
    }

    @Override
    public boolean hasNext() {
      while (next == null) {
        if (i == cells.length) {
          if (!rows.hasNext()) {
            return false;
          }
          cells = rows.next()._2().rawCells();
          i = 0;
          continue;
        }
        Cell c = cells[i++];
        read.add(1);
        bytesRead.add(org.apache.hadoop.hbase.KeyValueUtil.keyLength(c) + c.getValueLength());
        KeyValue kv = rule.apply(c);
        if (kv == null) {
          rejected.add(1);
        } else {
          next = kv.getBuffer();
        }
      }
      return true;
    }

    @Override
    public Tuple2<byte[], Boolean> next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException();
      }
      byte[] b = next;
      next = null;
      return new Tuple2<>(b, Boolean.TRUE);
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 4) {
      System.err.println("usage: SparkJob hfile|put ROOTDIR SNAPSHOT TABLE --zk HOST:PORT [--znode /hbase]"
          + " [--master local[2]] [--batch N] [--staging DIR]");
      System.exit(2);
    }
    String mode = args[0];
    String root = args[1];
    String snapshot = args[2];
    TableName table = TableName.valueOf(args[3]);
    String zk = null;
    String znode = "/hbase";
    String master = "local[2]";
    int batch = 1000;
    String staging = null;
    for (int i = 4; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--zk": zk = args[i + 1]; break;
        case "--znode": znode = args[i + 1]; break;
        case "--master": master = args[i + 1]; break;
        case "--batch": batch = Integer.parseInt(args[i + 1]); break;
        case "--staging": staging = args[i + 1]; break;
        default:
          System.err.println("SparkJob: unknown option " + args[i]);
          System.exit(2);
      }
    }
    if (zk == null || !(mode.equals("hfile") || mode.equals("put"))) {
      System.err.println("SparkJob: need hfile|put and --zk");
      System.exit(2);
    }
    RunStats st = new RunStats("e2e-spark-" + mode);
    Path rootPath = new Path(root);
    ClientConf cc = new ClientConf(zk, znode, rootPath.toUri().getScheme() + "://" + rootPath.toUri().getAuthority());

    SparkConf sc = new SparkConf().setMaster(master).setAppName("rekey-bench-" + mode)
        // HBase 2.5's snapshot splits report length 0; since Spark 3.2
        // empty-looking splits are skipped and the job would read nothing
        // (SPARK-34809, HBASE-29272).
        .set("spark.hadoopRDD.ignoreEmptySplits", "false")
        .set("spark.ui.enabled", "false");
    try (JavaSparkContext jsc = new JavaSparkContext(sc)) {
      jsc.setLogLevel("WARN");
      Configuration conf = cc.get();
      conf.set(HConstants.HBASE_DIR, root);
      Scan scan = new Scan();
      scan.readAllVersions();
      scan.setCacheBlocks(false);
      conf.set(TableInputFormat.SCAN, TableMapReduceUtil.convertScanToString(scan));
      Job job = Job.getInstance(conf);
      Path restore = new Path("/tmp/rekey-spark-restore-" + UUID.randomUUID());
      TableSnapshotInputFormat.setInput(job, snapshot, restore);
      FileSystem fs = restore.getFileSystem(job.getConfiguration());

      LongAccumulator read = jsc.sc().longAccumulator("read");
      LongAccumulator bytesRead = jsc.sc().longAccumulator("bytesRead");
      LongAccumulator written = jsc.sc().longAccumulator("written");
      LongAccumulator rejected = jsc.sc().longAccumulator("rejected");
      try {
        JavaPairRDD<ImmutableBytesWritable, Result> rows = jsc.newAPIHadoopRDD(job.getConfiguration(),
            TableSnapshotInputFormat.class, ImmutableBytesWritable.class, Result.class);
        // Re-key per partition: one rule object (it caches the hour text)
        // per partition, as a user would write it.
        JavaPairRDD<byte[], Boolean> rekeyed = rows.mapPartitionsToPair(
            it -> new Rekeyed(it, read, bytesRead, rejected));
        if (mode.equals("hfile")) {
          hfiles(cc, table, staging, rekeyed, written, conf);
        } else {
          puts(cc, table, batch, rekeyed, written);
        }
      } finally {
        fs.delete(restore, true);
      }
      st.read = read.value();
      st.bytesRead = bytesRead.value();
      st.written = written.value();
      st.rejected = rejected.value();
    }
    st.print();
  }

  private static void hfiles(ClientConf cc, TableName table, String staging,
      JavaPairRDD<byte[], Boolean> rekeyed, LongAccumulator written, Configuration conf) throws IOException {
    if (staging == null) {
      throw new IllegalArgumentException("hfile needs --staging DIR (on the cluster's file system)");
    }
    try (Connection conn = ConnectionFactory.createConnection(conf); Admin admin = conn.getAdmin();
        RegionLocator rl = conn.getRegionLocator(table)) {
      TableDescriptor td = admin.getDescriptor(table);
      Job out = Job.getInstance(conf);
      // Per-family compression, encoding, bloom and block size, as
      // configureIncrementalLoad sets them for a MapReduce job.
      HFileOutputFormat2.configureIncrementalLoadMap(out, td);
      Path dir = new Path(staging);
      FileSystem fs = dir.getFileSystem(conf);
      try {
        rekeyed.repartitionAndSortWithinPartitions(new RegionPartitioner(rl.getStartKeys()), new CellOrder())
            .mapToPair(t -> {
              KeyValue kv = new KeyValue(t._1());
              written.add(1);
              return new Tuple2<>(new ImmutableBytesWritable(kv.getRowArray(), kv.getRowOffset(),
                  kv.getRowLength()), (Cell) kv);
            })
            .saveAsNewAPIHadoopFile(dir.toString(), ImmutableBytesWritable.class, Cell.class,
                HFileOutputFormat2.class, out.getConfiguration());
        BulkLoadHFiles.create(conf).bulkLoad(table, dir);
      } finally {
        fs.delete(dir, true);
      }
    }
  }

  private static void puts(ClientConf cc, TableName table, int batch, JavaPairRDD<byte[], Boolean> rekeyed,
      LongAccumulator written) {
    String name = table.getNameAsString(); // TableName is not Serializable
    rekeyed.foreachPartition((Iterator<Tuple2<byte[], Boolean>> it) -> {
      try (Connection conn = ConnectionFactory.createConnection(cc.get())) {
        BufferedMutator m = null;
        try {
          while (it.hasNext()) {
            KeyValue kv = new KeyValue(it.next()._1());
            Put p = new Put(kv.getRowArray(), kv.getRowOffset(), kv.getRowLength());
            p.add(kv);
            if (m == null) {
              m = conn.getBufferedMutator(new BufferedMutatorParams(TableName.valueOf(name))
                  .writeBufferSize(p.heapSize() * batch));
            }
            m.mutate(p);
            written.add(1);
          }
          if (m != null) {
            m.flush();
          }
        } finally {
          if (m != null) {
            m.close();
          }
        }
      }
    });
  }
}
