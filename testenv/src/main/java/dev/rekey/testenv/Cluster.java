package dev.rekey.testenv;

import java.io.BufferedReader;
import java.lang.reflect.Method;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.Writer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.regionserver.HRegion;
import org.apache.hadoop.hbase.regionserver.OnlineRegions;
import org.apache.hadoop.hbase.regionserver.RegionServerServices;
import org.apache.hadoop.hbase.regionserver.SecureBulkLoadManager;
import org.apache.hadoop.hbase.testing.TestingHBaseCluster;
import org.apache.hadoop.hbase.testing.TestingHBaseClusterOption;
import org.apache.hadoop.hbase.util.CommonFSUtils;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hbase.thirdparty.com.google.gson.GsonBuilder;

/**
 * The mini cluster process: HDFS (one NameNode, one DataNode), ZooKeeper,
 * one HMaster and two RegionServers in this JVM, all on 127.0.0.1, plus a
 * one-line text control channel on a loopback port. On demand, separate
 * HDFS clusters with two DataNodes each (Dfs2: dfs2 and dfs3) run beside it.
 *
 * <p>Usage: Cluster INFO_JSON CONTROL_PORT LOG_PATH. Once the cluster
 * serves, the process writes INFO_JSON (atomically) with the addresses
 * testenv/bin/up copies into state.json.
 */
public final class Cluster {
  private final TestingHBaseCluster cluster;
  /**
   * The separate two-DataNode HDFS clusters, started by dfs2-start and
   * dfs3-start: the replica failover test uses dfs2, the NameNode restart
   * tests dfs3, so neither stops the other's.
   */
  private final List<Dfs2> extraDfs;
  /**
   * The HA HDFS clusters (two NameNodes in one nameservice each), started
   * by ha1-start and ha2-start: the snapshot tests fail ha1 over, the
   * pipeline tests ha2.
   */
  private final List<HaDfs> ha;
  /** Kerberos for a secure cluster (SECURE=1), or null. */
  private SecureCluster secure;
  /** The HDFS of the WALs when the root dir is on S3 (-Drekey.rootfs), or null. */
  private MiniDFSCluster walDfs;
  /** MapReduce on YARN over this cluster's HDFS, started by yarn-start. */
  private Yarn yarn;
  private Connection conn;
  private volatile boolean stopping;

  private Cluster(TestingHBaseCluster cluster, List<Dfs2> extraDfs, List<HaDfs> ha) {
    this.cluster = cluster;
    this.extraDfs = extraDfs;
    this.ha = ha;
  }

  public static void main(String[] args) {
    try {
      run(args);
    } catch (Throwable e) {
      // Non-daemon threads of a half-started cluster would keep the JVM
      // alive; exit so testenv/bin/up sees the failure at once.
      e.printStackTrace();
      System.exit(1);
    }
  }

  private static void run(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: Cluster INFO_JSON CONTROL_PORT LOG_PATH");
      System.exit(2);
    }
    java.nio.file.Path info = Paths.get(args[0]);
    int wantPort = Integer.parseInt(args[1]);
    long t0 = System.nanoTime();
    // Bind the control port first: if it is taken we fail before spending
    // a minute starting HDFS.
    ServerSocket control = new ServerSocket();
    control.setReuseAddress(true);
    control.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), wantPort));

    Configuration conf = Conf.cluster();
    java.nio.file.Path run = info.toAbsolutePath().getParent();
    SecureCluster secure = SecureCluster.fromEnvironment(run);
    if (secure != null) {
      secure.configure(conf);
    }
    // -Drekey.rootfs=s3a://BUCKET (bin/up with TESTENV_ROOTDIR=s3): the root
    // dir on the testenv S3 server, as on EMR, with the WALs on an HDFS (an
    // object store has no hflush). The mini cluster's utility always puts
    // the root dir on its test file system, so the bucket is handed to it as
    // that ("external DFS"); the WAL dir, which it leaves alone when asked
    // not to create one, names an HDFS started here.
    String s3Root = System.getProperty("rekey.rootfs", "");
    MiniDFSCluster walDfs = null;
    TestingHBaseClusterOption.Builder opt = TestingHBaseClusterOption.builder()
        .conf(conf).numMasters(1).numRegionServers(2).numDataNodes(1).numZkServers(1)
        .dataNodeHosts(new String[] {"127.0.0.1"}).createRootDir(true);
    if (!s3Root.isEmpty()) {
      if (!Conf.s3aClient()) {
        throw new IllegalStateException("-Drekey.rootfs=" + s3Root + " needs S3A and the S3 server's core-site.xml on the classpath");
      }
      Configuration dconf = new org.apache.hadoop.hdfs.HdfsConfiguration(conf);
      walDfs = new MiniDFSCluster.Builder(dconf, run.resolve("waldfs").toFile())
          .numDataNodes(1).hosts(new String[] {"127.0.0.1"}).build();
      walDfs.waitActive();
      conf.set("hbase.wal.dir", "hdfs://127.0.0.1:" + walDfs.getNameNodePort() + "/hbase-wal");
      opt.useExternalDfs(s3Root).createWALDir(false);
    }
    TestingHBaseCluster c = TestingHBaseCluster.create(opt.build());
    Cluster self = new Cluster(c, List.of(new Dfs2(run.resolve("dfs2"), "dfs2"), new Dfs2(run.resolve("dfs3"), "dfs3")),
        List.of(new HaDfs(run.resolve("ha1"), "ha1"), new HaDfs(run.resolve("ha2"), "ha2")));
    self.secure = secure;
    self.walDfs = walDfs;
    self.yarn = new Yarn(run.resolve("yarn"), secure);
    c.start();
    self.conn = ConnectionFactory.createConnection(c.getConf());
    try (Admin admin = self.conn.getAdmin()) {
      admin.balancerSwitch(false, true);
    }
    double startSeconds = (System.nanoTime() - t0) / 1e9;

    Configuration cc = c.getConf();
    Map<String, Object> st = new LinkedHashMap<>();
    st.put("zookeeper_quorum", "127.0.0.1:" + cc.get("hbase.zookeeper.property.clientPort"));
    st.put("zookeeper_znode_parent", cc.get("zookeeper.znode.parent", "/hbase"));
    URI fs = URI.create(walDfs != null ? walDfs.getURI().toString() : cc.get("fs.defaultFS"));
    String nn = "127.0.0.1:" + fs.getPort();
    st.put("hdfs_namenode", nn);
    Path root = CommonFSUtils.getRootDir(cc);
    if (s3Root.isEmpty()) {
      st.put("hbase_rootdir", "hdfs://" + nn + root.toUri().getPath());
    } else {
      st.put("hbase_rootdir", root.toString());
      st.put("hbase_wal_dir", cc.get("hbase.wal.dir"));
    }
    ServerName master = c.getActiveMasterAddress().orElseThrow();
    st.put("master", master.getHostname() + ":" + master.getPort());
    st.put("control_port", control.getLocalPort());
    st.put("pid", ProcessHandle.current().pid());
    st.put("log", args[2]);
    st.put("start_seconds", Math.round(startSeconds * 10) / 10.0);
    // HBase's own idea of its version (from its jars), so state.json
    // names the version that really runs, not only the one asked for.
    st.put("hbase_version", org.apache.hadoop.hbase.util.VersionInfo.getVersion());
    // Whether the region servers can open s3a:// paths on the testenv S3
    // server (S3A on the classpath and its keys given): a bulk load from S3
    // needs it, and tests that need it skip, saying why, when it is false.
    st.put("s3a_client", Conf.s3aClient());
    if (secure != null) {
      st.put("secure", secure.clientState(cc, nn));
    }
    java.nio.file.Path tmp = info.resolveSibling(info.getFileName() + ".tmp");
    try (Writer w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
      new GsonBuilder().setPrettyPrinting().create().toJson(st, w);
      w.write("\n");
    }
    Files.move(tmp, info, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    System.out.println("rekey-testenv: cluster serving after " + startSeconds + " s: " + st);

    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      if (!self.stopping) {
        self.stop();
      }
    }));
    self.serve(control);
  }

  private void serve(ServerSocket control) throws IOException {
    while (!stopping) {
      Socket s = control.accept();
      Thread t = new Thread(() -> handle(s), "control-" + s.getPort());
      t.setDaemon(true);
      t.start();
    }
  }

  private void handle(Socket s) {
    try (s;
        BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(new OutputStreamWriter(s.getOutputStream(), StandardCharsets.UTF_8), true)) {
      String line;
      while ((line = in.readLine()) != null) {
        line = line.trim();
        if (line.isEmpty()) {
          continue;
        }
        String reply;
        try {
          reply = route(line);
        } catch (Exception e) {
          reply = "error " + oneLine(e);
        }
        out.println(reply);
        if (line.equals("shutdown")) {
          stop();
          System.exit(0);
        }
      }
    } catch (IOException e) {
      // The client went away; nothing to tell it.
    }
  }

  /**
   * Runs one command. The extra HDFS clusters' commands and zk-expire-session
   * take their own locks: starting an HDFS takes seconds, and must not hold
   * up other tests' region server commands.
   */
  private String route(String line) throws Exception {
    String[] f = line.split("\\s+");
    for (Dfs2 d : extraDfs) {
      if (d.owns(line)) {
        return d.command(f);
      }
    }
    for (HaDfs h : ha) {
      if (h.owns(line)) {
        return h.command(f);
      }
    }
    if (f[0].equals("drop-tables")) {
      return dropTables(f);
    }
    if (f[0].equals("cluster-state")) {
      return clusterState();
    }
    if (f[0].equals("zk-expire-session")) {
      if (f.length != 2) {
        return "error usage: zk-expire-session HOST:PORT (the client's address as ZooKeeper sees it)";
      }
      return ZkSessions.expire(f[1]);
    }
    return command(line);
  }

  /**
   * drop-tables [--snapshot NAME]... TABLE...: a test's cleanup. Deletes the
   * snapshots, then disables and deletes the tables; names that do not
   * exist are fine. It runs here, on the connection this process holds,
   * rather than in an oracle JVM of its own, whose start-up cost more than
   * the drop; and outside the lock of the region server commands, as it
   * waits for the master's procedures.
   */
  private String dropTables(String[] f) {
    try (Admin admin = conn.getAdmin()) {
      List<String> tables = new ArrayList<>();
      java.util.Set<String> snapshots = new java.util.HashSet<>();
      for (int i = 1; i < f.length; i++) {
        if (f[i].equals("--snapshot") && i + 1 < f.length) {
          snapshots.add(f[++i]);
        } else {
          tables.add(f[i]);
        }
      }
      if (!snapshots.isEmpty()) {
        for (var d : admin.listSnapshots()) {
          if (snapshots.contains(d.getName())) {
            admin.deleteSnapshot(d.getName());
          }
        }
      }
      // A few tables at a time (each waits for the master's disable and
      // delete procedures), an Admin each.
      Oracle.inParallel(new ArrayList<>(new java.util.LinkedHashSet<>(tables)), name -> {
        try (Admin own = conn.getAdmin()) {
          Oracle.dropTable(own, TableName.valueOf(name));
        }
      });
      return "ok";
    } catch (Exception e) {
      return "error " + oneLine(e);
    }
  }

  /**
   * cluster-state: what a test that timed out waiting on the cluster
   * reports beside its failure, in one line: the active master, live and
   * dead region servers, regions in transition, and the master's
   * procedures that have not finished (class, state, id). It runs outside
   * the region server commands' lock, which a stop-regionserver may hold
   * for minutes, and gives up on the master after 20 s, saying so.
   */
  private String clusterState() {
    java.util.concurrent.ExecutorService ex = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "cluster-state");
      t.setDaemon(true);
      return t;
    });
    try {
      return "ok " + ex.submit(this::describeCluster).get(20, TimeUnit.SECONDS);
    } catch (java.util.concurrent.TimeoutException e) {
      return "ok the master did not answer within 20 s (live region servers unknown)";
    } catch (Exception e) {
      return "error " + oneLine(e);
    } finally {
      ex.shutdownNow();
    }
  }

  private String describeCluster() throws IOException {
    StringBuilder b = new StringBuilder();
    try (Admin admin = conn.getAdmin()) {
      org.apache.hadoop.hbase.ClusterMetrics m = admin.getClusterMetrics(java.util.EnumSet.of(
          org.apache.hadoop.hbase.ClusterMetrics.Option.MASTER,
          org.apache.hadoop.hbase.ClusterMetrics.Option.LIVE_SERVERS,
          org.apache.hadoop.hbase.ClusterMetrics.Option.DEAD_SERVERS,
          org.apache.hadoop.hbase.ClusterMetrics.Option.REGIONS_IN_TRANSITION));
      b.append("master ").append(m.getMasterName() == null ? "none" : m.getMasterName().getServerName());
      b.append("; live region servers ").append(m.getLiveServerMetrics().size());
      b.append("; dead ").append(m.getDeadServerNames().size());
      var rit = m.getRegionStatesInTransition();
      b.append("; regions in transition ").append(rit.size());
      for (int i = 0; i < rit.size() && i < 10; i++) {
        var r = rit.get(i);
        b.append(i == 0 ? ": " : ", ").append(r.getRegion().getRegionNameAsString())
            .append(' ').append(r.getState()).append(" on ").append(r.getServerName());
      }
      // The master's procedures as JSON (one object per procedure, with
      // className, procId and state); the finished ones are history.
      int open = 0;
      StringBuilder procs = new StringBuilder();
      for (var e : org.apache.hbase.thirdparty.com.google.gson.JsonParser.parseString(admin.getProcedures()).getAsJsonArray()) {
        var o = e.getAsJsonObject();
        String state = o.has("state") ? o.get("state").getAsString() : "?";
        if (state.equals("SUCCESS") || state.equals("ROLLEDBACK") || state.equals("FAILED")) {
          continue;
        }
        if (++open <= 10) {
          String cls = o.has("className") ? o.get("className").getAsString() : "?";
          procs.append(open == 1 ? ": " : ", ").append(cls.substring(cls.lastIndexOf('.') + 1))
              .append(' ').append(state).append(" pid=").append(o.has("procId") ? o.get("procId").getAsString() : "?");
        }
      }
      b.append("; procedures not finished ").append(open).append(procs);
    }
    return b.toString().replace('\n', ' ');
  }

  private static String oneLine(Throwable e) {
    String m = e.getClass().getSimpleName() + ": " + e.getMessage();
    return m.replace('\n', ' ').replace('\r', ' ');
  }

  /** The live region servers as the master sees them, ordered by port. */
  private List<ServerName> live() throws IOException {
    try (Admin admin = conn.getAdmin()) {
      List<ServerName> l = new ArrayList<>(admin.getRegionServers());
      l.sort(Comparator.comparingInt(ServerName::getPort).thenComparing(ServerName::getStartcode));
      return l;
    }
  }

  private static String names(List<ServerName> l) {
    StringBuilder b = new StringBuilder();
    for (ServerName sn : l) {
      b.append(' ').append(sn.getServerName());
    }
    return b.toString();
  }

  private synchronized String command(String line) throws Exception {
    String[] f = line.split("\\s+");
    switch (f[0]) {
      case "ping":
        return "ok pong";
      case "list-regionservers":
        return "ok" + names(live());
      case "stop-regionserver": {
        if (f.length != 2) {
          return "error usage: stop-regionserver N (index into list-regionservers) or HOST,PORT,STARTCODE";
        }
        List<ServerName> l = live();
        ServerName victim;
        if (f[1].matches("\\d+")) {
          int i = Integer.parseInt(f[1]);
          if (i >= l.size()) {
            return "error no region server " + i + "; live:" + names(l);
          }
          victim = l.get(i);
        } else {
          victim = ServerName.valueOf(f[1]);
          if (!l.contains(victim)) {
            return "error " + victim + " is not live; live:" + names(l);
          }
        }
        cluster.stopRegionServer(victim).get(120, TimeUnit.SECONDS);
        // Wait until the master has noticed, so a following
        // list-regionservers or client lookup sees the new state.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (live().contains(victim) && System.nanoTime() < deadline) {
          Thread.sleep(200);
        }
        return "ok stopped " + victim.getServerName();
      }
      case "start-regionserver": {
        List<ServerName> before = live();
        cluster.startRegionServer();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (System.nanoTime() < deadline) {
          List<ServerName> now = live();
          now.removeAll(before);
          if (!now.isEmpty()) {
            return "ok started " + now.get(0).getServerName();
          }
          Thread.sleep(200);
        }
        return "error the new region server did not register within 120 s";
      }
      case "stop-master": {
        ServerName m = cluster.getActiveMasterAddress().orElse(null);
        if (m == null) {
          return "ok no active master";
        }
        // Regions stay where they are and keep serving; only the master's
        // work (admin calls, assignments, procedures) waits for the next one.
        cluster.stopMaster(m).get(120, TimeUnit.SECONDS);
        return "ok stopped " + m.getServerName();
      }
      case "start-master":
        return startMaster();
      case "bulkload-refuse": {
        if (f.length != 3 || !f[1].matches("\\d+")) {
          return "error usage: bulkload-refuse N TABLE (the next N bulk loads into TABLE's regions)";
        }
        return refuseBulkLoads(Integer.parseInt(f[1]), f[2]);
      }
      case "yarn-start":
        return "ok " + yarn.start(cluster.getConf());
      case "shutdown":
        return "ok shutting down";
      default:
        return "error unknown command " + f[0]
            + " (ping, cluster-state, list-regionservers, stop-regionserver N, start-regionserver, stop-master,"
            + " start-master, bulkload-refuse N TABLE, zk-expire-session HOST:PORT, drop-tables [--snapshot NAME]... TABLE..., yarn-start, shutdown;"
            + " dfs2-start, dfs2-datanodes, dfs2-stop-datanode I, dfs2-start-datanode I,"
            + " dfs2-replicated PATH, dfs2-stop-namenode, dfs2-start-namenode, dfs2-shutdown;"
            + " the same with dfs3-; ha1-start, ha1-active, ha1-failover, ha1-kill-active,"
            + " ha1-restart-down, ha1-shutdown; the same with ha2-)";
    }
  }

  /** Bulk loads still to refuse (bulkload-refuse), by table, shared by every region server. */
  private final Map<String, AtomicInteger> bulkLoadsToRefuse = new java.util.concurrent.ConcurrentHashMap<>();

  /**
   * Makes the next n bulk loads into table's regions fail inside the region server's secure bulk
   * load, after it created the load's family directories and before it
   * moved any file: the server logs "Failed to complete bulk load" and
   * answers loaded=false, as it does when its file system was closed under
   * the load by another load's cleanup. The hook is the one HBase's own
   * tests use (SecureBulkLoadManager's file-system-created listener), set
   * on every live region server; it is package-private, so by reflection.
   */
  private String refuseBulkLoads(int n, String table) throws Exception {
    Method set = SecureBulkLoadManager.class.getDeclaredMethod("setFsCreatedListener", Consumer.class);
    set.setAccessible(true);
    Consumer<HRegion> refuse = region -> {
      AtomicInteger left = bulkLoadsToRefuse.get(region.getRegionInfo().getTable().getNameAsString());
      if (left != null && left.getAndUpdate(v -> Math.max(v - 1, 0)) > 0) {
        throw new IllegalStateException("testenv: bulk load into " + region.getRegionInfo().getEncodedName()
            + " refused on request (bulkload-refuse)");
      }
    };
    int servers = 0;
    for (ServerName sn : cluster.getRegionServerAddresses()) {
      OnlineRegions rs = cluster.getOnlineRegionsInterface(sn).orElse(null);
      if (rs instanceof RegionServerServices) {
        set.invoke(((RegionServerServices) rs).getSecureBulkLoadManager(), refuse);
        servers++;
      }
    }
    if (servers == 0) {
      return "error no region server to set the hook on";
    }
    bulkLoadsToRefuse.put(table, new AtomicInteger(n));
    return "ok refusing the next " + n + " bulk loads into " + table + " on " + servers + " region servers";
  }

  /**
   * Starts a master unless one is active, and waits until the active one
   * has finished initializing: before that it answers admin calls with
   * PleaseHoldException.
   */
  private String startMaster() throws Exception {
    if (cluster.getActiveMasterAddress().isEmpty()) {
      cluster.startMaster();
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
    Exception last = null;
    while (System.nanoTime() < deadline) {
      try (Admin admin = conn.getAdmin()) {
        admin.listTableNames();
        ServerName m = cluster.getActiveMasterAddress().orElseThrow();
        return "ok started " + m.getServerName();
      } catch (Exception e) {
        last = e;
        Thread.sleep(200);
      }
    }
    return "error the new master did not initialize within 180 s: " + (last == null ? "" : oneLine(last));
  }

  private synchronized void stop() {
    stopping = true;
    if (yarn != null) {
      yarn.stop();
    }
    for (Dfs2 d : extraDfs) {
      try {
        d.shutdown();
      } catch (Exception e) {
        System.err.println("rekey-testenv: stopping an extra HDFS: " + e);
      }
    }
    for (HaDfs h : ha) {
      try {
        h.shutdown();
      } catch (Exception e) {
        System.err.println("rekey-testenv: stopping an HA HDFS: " + e);
      }
    }
    try {
      if (conn != null) {
        conn.close();
      }
      cluster.stop();
    } catch (Exception e) {
      System.err.println("rekey-testenv: stopping the cluster: " + e);
    }
    if (walDfs != null) {
      walDfs.shutdown();
    }
    if (secure != null) {
      secure.stop();
    }
  }
}
