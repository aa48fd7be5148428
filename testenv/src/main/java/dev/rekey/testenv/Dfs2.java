package dev.rekey.testenv;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.HdfsConstants.DatanodeReportType;
import org.apache.hadoop.hdfs.server.blockmanagement.DatanodeDescriptor;
import org.apache.hadoop.hdfs.server.blockmanagement.DatanodeManager;
import org.apache.hadoop.hdfs.server.datanode.DataNode;

/**
 * A second, HDFS-only mini cluster (one NameNode, two DataNodes) that the
 * control channel starts on demand, for tests that need a block's replica
 * on another DataNode (a read that fails over when a DataNode stops
 * mid-file) or a NameNode to restart. It is kept apart from the HBase
 * cluster's HDFS (one DataNode, replication 1), which other test packages
 * use at the same time, so stopping a DataNode or the NameNode here
 * disturbs nobody else. Each instance has a name that prefixes its
 * commands (dfs2-start, dfs3-start): one test at a time uses each.
 *
 * <p>DataNodes keep the index they had at start: MiniDFSCluster's own list
 * renumbers when one stops. A stopped DataNode keeps its properties and its
 * port, so it restarts as the same node with the same replicas.
 *
 * <p>Heartbeat and dead-node intervals are HDFS's defaults: the NameNode
 * goes on listing a stopped DataNode as a block location for about ten
 * minutes, which is what a reader meets when a DataNode has just died, and
 * what the failover test needs; nothing waits for the NameNode to notice.
 */
final class Dfs2 {
  /** Two DataNodes: every block can have a second replica. */
  static final int DATANODES = 2;

  private final Path base;
  /** The instance's name, the prefix of its commands: "dfs2". */
  private final String name;
  private MiniDFSCluster dfs;
  /** Whether the NameNode is stopped (NAME-stop-namenode). */
  private boolean nameNodeStopped;
  /** The transfer address (127.0.0.1:port) of DataNode i since start. */
  private final String[] addrs = new String[DATANODES];
  /** What restarts DataNode i, while it is stopped. */
  private final MiniDFSCluster.DataNodeProperties[] stopped = new MiniDFSCluster.DataNodeProperties[DATANODES];

  /**
   * base is the directory the cluster keeps its NameNode and DataNode data
   * in; name prefixes its commands.
   */
  Dfs2(Path base, String name) {
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
      case "stop-datanode": {
        int i = index(f);
        requireRunning();
        if (stopped[i] != null) {
          return "ok already stopped " + addrs[i];
        }
        stopped[i] = dfs.stopDataNode(position(i));
        return "ok stopped " + addrs[i];
      }
      case "start-datanode": {
        int i = index(f);
        requireRunning();
        if (stopped[i] == null) {
          return "ok already running " + addrs[i];
        }
        return "ok started " + restart(i);
      }
      case "datanodes":
        requireRunning();
        return "ok" + list();
      case "replicated":
        if (f.length != 2) {
          return "error usage: " + name + "-replicated PATH";
        }
        requireRunning();
        return "ok " + waitReplicated(new org.apache.hadoop.fs.Path(f[1]));
      case "stop-namenode":
        requireRunning();
        // The NameNode's port stays in its configuration, so the restart
        // listens where clients look for it.
        dfs.shutdownNameNode(0);
        nameNodeStopped = true;
        return "ok stopped " + name + " NameNode";
      case "start-namenode":
        requireRunning();
        if (!nameNodeStopped) {
          return "ok already running " + nameNode();
        }
        // Waits until the DataNodes have registered again and the NameNode
        // has left safe mode, as a restarted NameNode does before it serves
        // writes.
        dfs.restartNameNode(0, true);
        nameNodeStopped = false;
        return "ok started " + nameNode();
      case "shutdown":
        shutdown();
        return "ok shut down";
      default:
        return "error unknown command " + f[0] + " (" + name + "-start, -datanodes, -stop-datanode I,"
            + " -start-datanode I, -replicated PATH, -stop-namenode, -start-namenode, -shutdown)";
    }
  }

  /** Starts the cluster unless it runs; returns the NameNode's host:port. */
  private String start() throws IOException {
    if (dfs != null) {
      return nameNode();
    }
    // A previous process's leftovers would be formatted over anyway; start
    // from nothing so the DataNodes' storage matches the new NameNode.
    deleteTree(base);
    nameNodeStopped = false;
    Configuration conf = new HdfsConfiguration();
    Conf.hdfsLoopback(conf);
    // Tests write files of a few hundred KB with small blocks, so a file
    // spans several blocks; the NameNode refuses blocks under 1 MB by default.
    conf.setLong("dfs.namenode.fs-limits.min-block-size", 4096);
    conf.setInt("dfs.replication", DATANODES);
    // A client's close completes once the last block is committed, without
    // waiting for a DataNode to report it: a CI run once saw complete()
    // refused for a whole minute on an upload. Tests wait for the replicas
    // themselves (dfs2-replicated) before they read.
    conf.setInt("dfs.namenode.file.close.num-committed-allowed", 1);
    dfs = new MiniDFSCluster.Builder(conf, base.toFile())
        .numDataNodes(DATANODES)
        .hosts(new String[] {"127.0.0.1", "127.0.0.1"})
        .build();
    dfs.waitActive();
    List<DataNode> dns = dfs.getDataNodes();
    for (int i = 0; i < DATANODES; i++) {
      addrs[i] = "127.0.0.1:" + dns.get(i).getXferAddress().getPort();
      stopped[i] = null;
    }
    return nameNode();
  }

  private String nameNode() {
    return "127.0.0.1:" + dfs.getNameNodePort();
  }

  private void requireRunning() {
    if (dfs == null) {
      throw new IllegalStateException(name + " is not running (" + name + "-start)");
    }
  }

  private static int index(String[] f) {
    if (f.length != 2 || !f[1].matches("\\d+") || Integer.parseInt(f[1]) >= DATANODES) {
      throw new IllegalArgumentException("usage: " + f[0] + " I, I in 0.." + (DATANODES - 1));
    }
    return Integer.parseInt(f[1]);
  }

  /** Where DataNode i is in MiniDFSCluster's list of running DataNodes now. */
  private int position(int i) {
    List<DataNode> dns = dfs.getDataNodes();
    for (int p = 0; p < dns.size(); p++) {
      if (addrs[i].equals("127.0.0.1:" + dns.get(p).getXferAddress().getPort())) {
        return p;
      }
    }
    throw new IllegalStateException("DataNode " + i + " (" + addrs[i] + ") is not running");
  }

  /**
   * Restarts stopped DataNode i on its old port and waits until it serves
   * and the NameNode has had a heartbeat from it since.
   */
  private String restart(int i) throws Exception {
    long since = System.currentTimeMillis();
    if (!dfs.restartDataNode(stopped[i], true)) {
      throw new IOException("DataNode " + i + " (" + addrs[i] + ") did not restart");
    }
    stopped[i] = null;
    DataNode dn = dfs.getDataNodes().get(position(i));
    dfs.waitDatanodeFullyStarted(dn, 60_000);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (System.nanoTime() < deadline) {
      DatanodeDescriptor d = find(DatanodeReportType.LIVE, addrs[i]);
      if (d != null && d.getLastUpdate() >= since) {
        return addrs[i];
      }
      Thread.sleep(100);
    }
    throw new IOException("the NameNode did not see DataNode " + i + " (" + addrs[i] + ") live within 60 s");
  }

  /**
   * Waits until every block of every file under path has a replica on
   * each DataNode: a write with replication 2 returns once one replica is
   * reported, and the other is reported a little later. Returns "FILES
   * files BLOCKS blocks".
   */
  private String waitReplicated(org.apache.hadoop.fs.Path path) throws Exception {
    DistributedFileSystem fs = dfs.getFileSystem();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      int files = 0;
      int blocks = 0;
      String shortOne = null;
      RemoteIterator<LocatedFileStatus> it = fs.listFiles(path, true);
      while (it.hasNext()) {
        LocatedFileStatus st = it.next();
        files++;
        for (BlockLocation b : st.getBlockLocations()) {
          blocks++;
          if (shortOne == null && b.getNames().length < DATANODES) {
            shortOne = st.getPath().toUri().getPath() + " block at offset " + b.getOffset()
                + " on " + String.join(",", b.getNames());
          }
        }
      }
      if (shortOne == null) {
        return files + " files " + blocks + " blocks";
      }
      if (System.nanoTime() > deadline) {
        throw new IOException("not replicated " + DATANODES + " times within 60 s: " + shortOne);
      }
      Thread.sleep(100);
    }
  }

  private DatanodeDescriptor find(DatanodeReportType type, String addr) {
    DatanodeManager dm = dfs.getNamesystem().getBlockManager().getDatanodeManager();
    for (DatanodeDescriptor d : dm.getDatanodeListForReport(type)) {
      if (d.getXferAddr().equals(addr)) {
        return d;
      }
    }
    return null;
  }

  /**
   * " I,ADDR,up|stopped,live|dead" per DataNode: whether it runs, and
   * whether the NameNode counts it live (it does for minutes after a stop).
   */
  private String list() {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < DATANODES; i++) {
      b.append(' ').append(i).append(',').append(addrs[i])
          .append(stopped[i] == null ? ",up" : ",stopped")
          .append(find(DatanodeReportType.LIVE, addrs[i]) != null ? ",live" : ",dead");
    }
    return b.toString();
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
    }
  }

  /** Deletes the tree at p, if there is one. */
  static void deleteTree(Path p) throws IOException {
    if (!Files.exists(p)) {
      return;
    }
    try (Stream<Path> s = Files.walk(p)) {
      for (Path q : (Iterable<Path>) s.sorted(Comparator.reverseOrder())::iterator) {
        Files.delete(q);
      }
    }
  }
}
