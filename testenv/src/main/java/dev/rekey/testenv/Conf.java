package dev.rekey.testenv;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hbase.thirdparty.com.google.gson.Gson;
import org.apache.hbase.thirdparty.com.google.gson.reflect.TypeToken;

/**
 * Configuration shared by the cluster process and the oracle CLI, so both
 * agree on loopback binding and on which compression codecs are used.
 */
final class Conf {
  private Conf() {}

  /**
   * Compression codecs come from hbase-site.xml on the classpath (HBase
   * reads them from its own Configuration); this only checks that the
   * codecs named there are present, so a broken build fails with a clear
   * message rather than at the first family that uses one.
   */
  static void compression(Configuration conf) {
    for (String key : new String[] {
        "hbase.io.compress.zstd.codec", "hbase.io.compress.snappy.codec", "hbase.io.compress.lz4.codec"}) {
      String cls = conf.get(key);
      try {
        Class.forName(cls);
      } catch (ClassNotFoundException | LinkageError e) {
        throw new IllegalStateException(key + " codec " + cls + " (hbase-site.xml) cannot be loaded: " + e, e);
      }
    }
  }

  /** Settings for the mini cluster: loopback only, small, deterministic. */
  static Configuration cluster() {
    Configuration conf = HBaseConfiguration.create();
    // Every server binds to and advertises 127.0.0.1, never the host's name
    // or another interface, so clients (rekey's own) connect over loopback.
    conf.set("hbase.master.hostname", "127.0.0.1");
    conf.set("hbase.unsafe.regionserver.hostname", "127.0.0.1");
    conf.set("hbase.master.ipc.address", "127.0.0.1");
    conf.set("hbase.regionserver.ipc.address", "127.0.0.1");
    conf.set("hbase.zookeeper.quorum", "127.0.0.1");
    conf.setInt("hbase.master.info.port", -1);
    conf.setInt("hbase.regionserver.info.port", -1);
    hdfsLoopback(conf);
    // Store files change only when a test asks: no automatic minor or
    // periodic major compactions and no size-based splits, so a seeded
    // table always has the same files per region and flush.
    conf.setInt("hbase.hstore.compactionThreshold", 1000);
    conf.setInt("hbase.hstore.compaction.max", 1000);
    conf.setInt("hbase.hstore.blockingStoreFiles", 10000);
    conf.setLong("hbase.hregion.majorcompaction", 0);
    conf.setLong("hbase.hregion.max.filesize", 100L << 30);
    // No balancer moving regions behind a test's back.
    conf.setInt("hbase.balancer.period", Integer.MAX_VALUE);
    // Small machine: fewer threads.
    conf.setInt("hbase.regionserver.handler.count", 10);
    conf.setInt("hbase.master.handler.count", 10);
    // Several engineers' tests take snapshots at once; the master's
    // default of one snapshot at a time rejects the others outright.
    conf.setInt("hbase.snapshot.master.threads", 4);
    // A shared, loaded machine can take minutes to bring a master up; the
    // mini cluster's own limits (30 s to become active, 200 s to
    // initialize) would abort the start long before bin/up gives up.
    conf.set("hbase.master.start.timeout.localHBaseCluster", "600000");
    conf.set("hbase.master.init.timeout.localHBaseCluster", "600000");
    // Big cells (1 MB values, 100k-cell rows) are part of the fixtures.
    conf.setLong("hbase.client.keyvalue.maxsize", 64L << 20);
    conf.setLong("hbase.server.keyvalue.maxsize", 64L << 20);
    compression(conf);
    return conf;
  }

  /**
   * Whether this JVM's region servers can open s3a:// paths on the testenv
   * S3 server: S3A is on the classpath and a core-site.xml there (bin/up
   * puts the S3 server's, from bin/s3-up, ahead of the jars) names an
   * endpoint. The keys must come from core-site.xml, a default resource,
   * and not from the cluster's Configuration: a region server opens a bulk
   * load's source with its store's CompoundConfiguration, and the copy S3A
   * makes of that (new Configuration(conf)) keeps the default resources but
   * none of the compound's settings; set on the cluster's Configuration, the
   * keys never reached S3A (it found no credentials).
   */
  static boolean s3aClient() {
    return hasS3A() && new Configuration().get("fs.s3a.endpoint") != null;
  }

  /** Whether Hadoop's S3A file system is on the classpath. */
  static boolean hasS3A() {
    try {
      Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem");
      return true;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }

  /**
   * HDFS settings shared by the main cluster's HDFS and the separate
   * two-DataNode one (Dfs2): every NameNode and DataNode listener on
   * 127.0.0.1 with an ephemeral port, and few server threads.
   */
  static void hdfsLoopback(Configuration conf) {
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.setInt("dfs.namenode.handler.count", 5);
    conf.setInt("dfs.datanode.handler.count", 5);
  }

  /** Reads testenv/state.json as written by testenv/bin/up. */
  static Map<String, Object> state(Path path) throws IOException {
    try (Reader r = Files.newBufferedReader(path, StandardCharsets.UTF_8)) {
      return new Gson().fromJson(r, new TypeToken<Map<String, Object>>() {}.getType());
    }
  }

  /** Client configuration for the running cluster described by state.json. */
  static Configuration client(String statePath) throws IOException {
    Path p = Paths.get(statePath);
    if (!Files.exists(p)) {
      throw new IOException("no running mini cluster: " + p + " is missing (run testenv/bin/up)");
    }
    Map<String, Object> st = state(p);
    Configuration conf = HBaseConfiguration.create();
    String zk = (String) st.get("zookeeper_quorum");
    int colon = zk.lastIndexOf(':');
    conf.set("hbase.zookeeper.quorum", zk.substring(0, colon));
    conf.set("hbase.zookeeper.property.clientPort", zk.substring(colon + 1));
    conf.set("zookeeper.znode.parent", (String) st.get("zookeeper_znode_parent"));
    conf.set("fs.defaultFS", "hdfs://" + st.get("hdfs_namenode"));
    conf.set("hbase.rootdir", (String) st.get("hbase_rootdir"));
    conf.setLong("hbase.client.keyvalue.maxsize", 64L << 20);
    // The client finds the cluster through ZooKeeper, as state.json gives
    // it. HBase 3.0's default registry asks the masters instead (and finds
    // none configured); 2.5 and 2.6 use this registry by default.
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.ZKConnectionRegistry");
    if (st.containsKey("secure")) {
      SecureCluster.client(conf, st);
    }
    compression(conf);
    return conf;
  }
}
