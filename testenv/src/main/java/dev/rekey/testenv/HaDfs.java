package dev.rekey.testenv;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.MiniDFSNNTopology;

/**
 * An HDFS with two NameNodes in one HA nameservice and two DataNodes,
 * started on demand by the control channel (NAME-start), for tests that
 * read through a nameservice and fail the active NameNode over mid-read.
 * It is apart from the HBase cluster's HDFS and from dfs2/dfs3, so a
 * failover here disturbs nobody else. Each instance has a name, which is
 * both its nameservice and the prefix of its commands (ha1-start): the
 * snapshot and pipeline packages' tests, which run at the same time, each
 * fail their own over.
 *
 * <p>The NameNodes share their edit log through a directory (MiniDFSCluster
 * lays it out), and there is no ZooKeeper failover controller: a failover
 * is the transition the tests ask for, as an operator's haadmin would do
 * it. On start, NAME-start writes a Hadoop client configuration directory
 * (core-site.xml, hdfs-site.xml) that names the nameservice, both
 * NameNodes' RPC addresses and the failover proxy provider, and answers
 * with its path: what a user's HADOOP_CONF_DIR holds.
 *
 * <p>NameNodes are named nn1 and nn2 (their index 0 and 1 in
 * MiniDFSCluster); nn1 starts active.
 */
final class HaDfs {
  private static final String[] NN = {"nn1", "nn2"};

  private final Path base;
  /** The nameservice (the authority of hdfs://NAME/ URLs) and command prefix. */
  private final String name;
  private MiniDFSCluster dfs;
  /** Index of the active NameNode, or -1 while none is. */
  private int active = -1;
  /** Whether NameNode i is shut down (NAME-kill-active). */
  private final boolean[] down = new boolean[NN.length];

  /**
   * base is the directory the cluster keeps its data and client
   * configuration in; name is its nameservice and command prefix.
   */
  HaDfs(Path base, String name) {
    this.base = base;
    this.name = name;
  }

  /** Whether line is one of this instance's commands. */
  boolean owns(String line) {
    return line.startsWith(name + "-");
  }

  /** Runs one NAME-* control command and returns its answer line. */
  synchronized String command(String[] f) throws Exception {
    switch (f[0].substring(name.length() + 1)) {
      case "start":
        return "ok " + start();
      case "active":
        requireRunning();
        return "ok " + (active < 0 ? "none" : NN[active]);
      case "failover":
        // A graceful failover: the active NameNode turns standby (and then
        // answers StandbyException), the other takes over.
        requireRunning();
        return "ok " + failover(false);
      case "kill-active":
        // A crash: the active NameNode stops, the other takes over.
        requireRunning();
        return "ok " + failover(true);
      case "restart-down":
        requireRunning();
        return "ok " + restartDown();
      case "shutdown":
        shutdown();
        return "ok shut down";
      default:
        return "error unknown command " + f[0] + " (" + name + "-start, -active, -failover, -kill-active,"
            + " -restart-down, -shutdown)";
    }
  }

  /**
   * Starts the cluster unless it runs, writes the client configuration
   * directory, and returns "NAMESERVICE CONF_DIR nn1=ADDR nn2=ADDR".
   */
  private String start() throws IOException {
    if (dfs == null) {
      Dfs2.deleteTree(base);
      Configuration conf = new HdfsConfiguration();
      Conf.hdfsLoopback(conf);
      // Small blocks let a test file span several blocks, so a failover
      // lands between a file's block fetches.
      conf.setLong("dfs.namenode.fs-limits.min-block-size", 4096);
      conf.setInt("dfs.replication", 2);
      conf.setInt("dfs.namenode.file.close.num-committed-allowed", 1);
      // The standby reads the shared edit log every second (default 60 s),
      // so it is nearly current when it takes over.
      conf.setInt("dfs.ha.tail-edits.period", 1);
      MiniDFSNNTopology topo = new MiniDFSNNTopology().addNameservice(
          new MiniDFSNNTopology.NSConf(name)
              .addNN(new MiniDFSNNTopology.NNConf(NN[0]))
              .addNN(new MiniDFSNNTopology.NNConf(NN[1])));
      dfs = new MiniDFSCluster.Builder(conf, base.resolve("data").toFile())
          .nnTopology(topo)
          .numDataNodes(2)
          .hosts(new String[] {"127.0.0.1", "127.0.0.1"})
          .build();
      down[0] = false;
      down[1] = false;
      dfs.waitActive();
      dfs.transitionToActive(0);
      active = 0;
      writeClientConf();
    }
    return name + " " + confDir() + " " + NN[0] + "=" + rpc(0) + " " + NN[1] + "=" + rpc(1);
  }

  /**
   * Makes the standby active; the old active either turns standby or, if
   * kill, shuts down first. Returns "active NN (was NN, standby|down)".
   */
  private String failover(boolean kill) throws IOException {
    if (active < 0) {
      throw new IllegalStateException("no active NameNode");
    }
    int from = active;
    int to = 1 - from;
    if (down[to]) {
      throw new IllegalStateException(NN[to] + " is down (" + name + "-restart-down first)");
    }
    if (kill) {
      dfs.shutdownNameNode(from);
      down[from] = true;
    } else {
      dfs.transitionToStandby(from);
    }
    active = -1;
    // Before it serves as active, the standby reads the rest of the shared
    // edit log, so it knows every file the old active had.
    dfs.transitionToActive(to);
    active = to;
    return "active " + NN[to] + " (was " + NN[from] + ", " + (kill ? "down" : "standby") + ")";
  }

  /** Restarts a NameNode that ha-kill-active shut down, as standby. */
  private String restartDown() throws IOException {
    for (int i = 0; i < NN.length; i++) {
      if (down[i]) {
        dfs.restartNameNode(i, true);
        down[i] = false;
        if (active != i) {
          dfs.transitionToStandby(i);
        }
        return "restarted " + NN[i] + " at " + rpc(i) + " as standby";
      }
    }
    return "none down";
  }

  private String rpc(int i) {
    return "127.0.0.1:" + dfs.getNameNodePort(i);
  }

  private Path confDir() {
    return base.resolve("conf").toAbsolutePath();
  }

  /**
   * Writes core-site.xml and hdfs-site.xml for a client of the
   * nameservice, each by rename so a reader never sees half a file.
   */
  private void writeClientConf() throws IOException {
    Files.createDirectories(confDir());
    Configuration core = new Configuration(false);
    core.set("fs.defaultFS", "hdfs://" + name);
    Configuration hdfs = new Configuration(false);
    hdfs.set("dfs.nameservices", name);
    hdfs.set("dfs.ha.namenodes." + name, NN[0] + "," + NN[1]);
    for (int i = 0; i < NN.length; i++) {
      hdfs.set("dfs.namenode.rpc-address." + name + "." + NN[i], rpc(i));
    }
    hdfs.set("dfs.client.failover.proxy.provider." + name,
        "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider");
    writeXml(core, confDir().resolve("core-site.xml"));
    writeXml(hdfs, confDir().resolve("hdfs-site.xml"));
  }

  private static void writeXml(Configuration c, Path p) throws IOException {
    Path tmp = p.resolveSibling(p.getFileName() + ".tmp");
    try (OutputStream out = Files.newOutputStream(tmp)) {
      c.writeXml(out);
    }
    Files.move(tmp, p, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
  }

  private void requireRunning() {
    if (dfs == null) {
      throw new IllegalStateException(name + " is not running (" + name + "-start)");
    }
  }

  /** Stops the cluster, if it runs, and deletes its data. */
  synchronized void shutdown() {
    if (dfs == null) {
      return;
    }
    try {
      dfs.shutdown(true);
    } finally {
      dfs = null;
      active = -1;
    }
  }
}
