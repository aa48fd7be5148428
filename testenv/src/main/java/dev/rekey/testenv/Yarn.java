package dev.rekey.testenv;

import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.mapreduce.v2.MiniMRYarnCluster;

/**
 * MapReduce on YARN beside the mini cluster, started on demand by the
 * control command yarn-start: one ResourceManager and one NodeManager
 * (Hadoop's own MiniMRYarnCluster, which hbase-testing-util already brings)
 * whose default file system is the mini cluster's HDFS, so tasks on any
 * node would see the same checkpoint and staging folder.
 *
 * <p>The NodeManager is sized for a 2-core machine: 3 GB and 2 vcores in
 * all, containers from 512 MB, an MR ApplicationMaster of 512 MB (the
 * MapReduce default, 1.5 GB, would take half the node). The physical
 * memory check stays on, as on a real cluster; the virtual memory check is
 * off: a Go binary reserves far more address space than it uses, and
 * YARN's default ratio (2.1 times the container) kills it for nothing.
 *
 * <p>The answer to yarn-start names a client configuration file (the
 * cluster's whole resolved configuration, ResourceManager address
 * included) that a driver loads with -conf. Its yarn.is.minicluster=true
 * makes MapReduce put the submitting JVM's classpath on the task
 * containers, so the driver's JVM must run with this process's classpath.
 *
 * <p>Every server binds to 127.0.0.1 except MapReduce's shuffle handler,
 * a NodeManager auxiliary service MiniMRYarnCluster always installs: it
 * listens on all interfaces (Hadoop gives it no bind address) on a port
 * chosen at start. Map-only jobs never call it.
 *
 * <p>On the secure cluster YARN is kerberized too (SecureCluster.yarn), and
 * the file system is prepared as a cluster's administrator would for an
 * ordinary user's jobs: MapReduce's staging folder and its history folder
 * open to every user (sticky), and a home folder for rekey's principal.
 */
final class Yarn {
  /** NodeManager memory: room for the AM and three 768 MB tasks. */
  static final int NODE_MB = 3072;
  /** The smallest container YARN hands out. */
  static final int MIN_CONTAINER_MB = 512;

  private final Path base;
  /** Kerberos when the cluster is secure, or null. */
  private final SecureCluster secure;
  private MiniMRYarnCluster mr;
  private Path clientConf;

  /**
   * base is the folder for the NodeManager's local dirs and logs; secure
   * the cluster's Kerberos, or null.
   */
  Yarn(Path base, SecureCluster secure) {
    this.base = base;
    this.secure = secure;
  }

  /**
   * Starts the cluster unless it runs, on fs (the mini cluster's
   * configuration, for fs.defaultFS), and returns the client
   * configuration file's path.
   */
  synchronized String start(Configuration fs) throws Exception {
    if (mr != null) {
      return clientConf.toString();
    }
    Files.createDirectories(base);
    // MiniYARNCluster keeps its NodeManager dirs under test.build.data
    // (default: target/ below the working directory of this JVM).
    System.setProperty("test.build.data", base.toString());
    Configuration conf = new Configuration(fs);
    conf.setInt("yarn.nodemanager.resource.memory-mb", NODE_MB);
    conf.setInt("yarn.nodemanager.resource.cpu-vcores", 2);
    conf.setInt("yarn.scheduler.minimum-allocation-mb", MIN_CONTAINER_MB);
    conf.setInt("yarn.scheduler.maximum-allocation-mb", NODE_MB);
    // Without this, MiniMRYarnCluster turns both memory checks off.
    conf.setBoolean("mapreduce.minicluster.control-resource-monitoring", true);
    conf.setBoolean("yarn.nodemanager.pmem-check-enabled", true);
    conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
    conf.setInt("yarn.app.mapreduce.am.resource.mb", MIN_CONTAINER_MB);
    conf.set("yarn.app.mapreduce.am.command-opts", "-Xmx320m");
    // Loopback only: the servers bind to 127.0.0.1, not every interface.
    conf.set("yarn.resourcemanager.bind-host", "127.0.0.1");
    conf.set("yarn.nodemanager.bind-host", "127.0.0.1");
    conf.set("yarn.resourcemanager.hostname", "127.0.0.1");
    conf.set("yarn.nodemanager.hostname", "127.0.0.1");
    // No history server: nothing reads it, and it would take a JVM's
    // worth of memory and two web ports. (The key by name: Hadoop 3.2.4,
    // under HBase 3.0.0-alpha-4, has no constant for it.)
    conf.setBoolean("mapreduce.jobhistory.minicluster.enabled", false);
    conf.setBoolean("yarn.webapp.ui2.enable", false);
    if (secure != null) {
      secure.yarn(conf);
    }
    MiniMRYarnCluster c = new MiniMRYarnCluster("rekey-yarn", 1, false);
    try {
      c.init(conf);
      c.start();
    } catch (LinkageError e) {
      // A class missing from the classpath: answer with it, not silence.
      c.stop();
      throw new IllegalStateException("MiniMRYarnCluster: " + e, e);
    }
    mr = c;
    if (secure != null) {
      openToUsers(c.getConfig());
    }
    clientConf = writeConf(c.getConfig());
    return clientConf.toString();
  }

  /**
   * Lets an ordinary user submit jobs: the staging folder (each user's
   * .staging below it) and the history folder the ApplicationMaster writes
   * its job's events to are 1777, as Hadoop wants them; rekey's principal
   * gets a home folder of its own.
   */
  private static void openToUsers(Configuration conf) throws Exception {
    org.apache.hadoop.fs.Path staging = new org.apache.hadoop.fs.Path(conf.get("yarn.app.mapreduce.am.staging-dir"));
    FileSystem fs = staging.getFileSystem(conf);
    FsPermission open = new FsPermission((short) 01777);
    org.apache.hadoop.fs.Path history = new org.apache.hadoop.fs.Path(staging, "history");
    org.apache.hadoop.fs.Path intermediate = new org.apache.hadoop.fs.Path(history, "done_intermediate");
    fs.mkdirs(intermediate);
    for (org.apache.hadoop.fs.Path p : new org.apache.hadoop.fs.Path[] {staging, history, intermediate}) {
      fs.setPermission(p, open);
    }
    String user = SecureCluster.clientShortName();
    org.apache.hadoop.fs.Path home = new org.apache.hadoop.fs.Path("/user/" + user);
    fs.mkdirs(home);
    fs.setOwner(home, user, null);
  }

  /** Writes conf to base/client.xml atomically and returns its path. */
  private Path writeConf(Configuration conf) throws Exception {
    Path out = base.resolve("client.xml");
    Path tmp = base.resolve("client.xml.tmp");
    try (OutputStream os = Files.newOutputStream(tmp)) {
      conf.writeXml(os);
    }
    Files.move(tmp, out, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    return out;
  }

  /** Stops the cluster if it runs. */
  synchronized void stop() {
    if (mr != null) {
      mr.stop();
      mr = null;
    }
  }
}
