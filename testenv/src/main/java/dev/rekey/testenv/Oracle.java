package dev.rekey.testenv;

import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellComparator;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.KeyValueUtil;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.CompactionState;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.SnapshotDescription;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.client.TableSnapshotScanner;
import org.apache.hadoop.hbase.io.compress.Compression;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.io.hfile.CacheConfig;
import org.apache.hadoop.hbase.io.hfile.HFile;
import org.apache.hadoop.hbase.io.hfile.HFileContextBuilder;
import org.apache.hadoop.hbase.io.hfile.HFileScanner;
import org.apache.hadoop.hbase.snapshot.SnapshotDescriptionUtils;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.hbase.util.CommonFSUtils;

/**
 * The oracle CLI: HBase's own client and readers, used as the judge of what
 * rekey reads and writes. `help` lists the subcommands; testenv/README.md
 * documents them.
 */
public final class Oracle {
  private static final String USAGE = String.join("\n",
      "usage: testenv/bin/oracle COMMAND ARGS",
      "  seed SPEC.json...                    per spec: create a table, write generated cells, run the steps",
      "  kdc DIR                      a KDC of its own (realm EXAMPLE.COM) with principal skew: keytab and krb5.conf in DIR; serves until stdin closes",
      "  kinit KRB5CONF PRINCIPAL KEYTAB CCACHE  log in from a keytab, write the ticket to a cache file",
      "  dump-snapshot ROOTDIR NAME [SCAN] [--now MS]  cells of a snapshot (TableSnapshotScanner)",
      "  dump-table TABLE [SCAN]              cells of a live table (scan)",
      "  dump-batch LISTFILE                  lines of OUTFILE<TAB>dump-snapshot|dump-table|dump-hfile<TAB>ARGS...: each dump to its file",
      "  dump-hfile [--tags] PATH             every cell of one HFile (HBase's HFile reader)",
      "  check-hfile [--tags] PATH...         check each HFile as a bulk load would (order, file info,",
      "                                       bloom) and dump it: '#' lines of facts, then its cells",
      "  count TABLE|SNAPSHOT --prefix HEX... rows and cells under each row-key prefix",
      "  regions TABLE                        encodedname, startkeyhex, endkeyhex, server per region",
      "  files TABLE                          every store file of the live table: hdfs URL, size",
      "  split TABLE [ROWHEX]                 split the region holding ROWHEX there (or the table at its midkeys)",
      "  move TABLE ROWHEX                    move that row's region to another region server",
      "  merge TABLE ROWHEX                   merge that row's region with the next one",
      "  flush TABLE | major-compact TABLE    and wait for it",
      "  touch-readings TABLE FAMILY SENSORS FORMAT SHARE SEED   the catch-up bench's changes",
      "  bulk-cells TABLE DUMPFILE            bulk load a dump's cells into a live table (HFiles written by HBase's writer)",
      "  snapshot TABLE NAME | delete-snapshot NAME... | drop-table TABLE...",
      "  write-cells TABLE DUMPFILE           a dump's puts and delete markers into an existing table (client writes)",
      "  hash-table [OPTIONS] TABLE OUTPUT_DIR                 HBase's HashTable on the mini cluster's MapReduce on YARN",
      "  sync-table [OPTIONS] SOURCE_HASH_DIR SOURCE TARGET    HBase's SyncTable (--dryrun=true for a report) likewise;",
      "                                       both print one JSON line: wall, client and task CPU, the job's counters",
      "  export-snapshot NAME DEST [ROOTDIR]  copy a snapshot and every file it references to local DEST",
      "  bench-read-snapshot ROOTDIR NAME [PASSES] | bench-read-hfile PATH",
      "  bench-scan TABLE | bench-put TABLE N BATCH | bench-write-hfile PATH N [ENCODING [COMPRESSION]]",
      "  digest-table TABLE | digest-snapshot ROOTDIR NAME [--rekey]   cells and an order-independent digest",
      "  write-credentials FILE proto|legacy RENEWER [--hbase]  the file system's HDFS delegation tokens (and the HBase token) in a Hadoop token storage file",
      "  cancel-token FILE                    cancel the tokens of a token storage file",
      "  hang SECONDS                         sleep, then exit 0: a call that does not answer, for testenv's own deadline test",
      "  rekey-dump ROOTDIR NAME              the wide -> bucketed re-key of a snapshot's cells (refusals on stderr)",
      "  bench-e2e-put ROOTDIR NAME TABLE BATCH          snapshot -> re-key -> BufferedMutator",
      "  bench-e2e-hfile ROOTDIR NAME TABLE STAGING [MB] snapshot -> re-key -> sorted HFiles -> bulk load",
      "  bench-e2e-bigtable ROOTDIR NAME PROJECT INSTANCE TABLE BATCH INFLIGHT",
      "                                                  snapshot -> re-key -> Bigtable's HBase BufferedMutator",
      "  bigtable-table create|drop|digest PROJECT INSTANCE TABLE [FAMILY]   with Google's client",
      "ROOTDIR is hdfs://... or file:///... (a local export). Dumps print every version the",
      "families keep unless --max-versions is given. SCAN: " + ScanOpts.FORM,
      "(time range [from, to) in ms, to 0 = none; hex rows and qualifiers; --tags adds a tags column).");

  private Oracle() {}

  public static void main(String[] args) {
    if (args.length == 0 || args[0].equals("help") || args[0].equals("-h") || args[0].equals("--help")) {
      System.out.println(USAGE);
      System.exit(args.length == 0 ? 2 : 0);
    }
    try {
      run(args[0], Arrays.copyOfRange(args, 1, args.length));
      System.exit(0);
    } catch (UsageException e) {
      System.err.println("oracle " + args[0] + ": " + e.getMessage());
      System.err.println(USAGE);
      System.exit(2);
    } catch (Throwable e) {
      // The message chain says what failed; the Java stack trace only
      // helps when debugging the oracle itself.
      StringBuilder b = new StringBuilder("oracle " + args[0] + ": " + firstLine(e));
      for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
        b.append("\n  caused by: ").append(firstLine(c));
      }
      System.err.println(b);
      if (System.getenv("ORACLE_DEBUG") != null) {
        e.printStackTrace();
      }
      System.exit(1);
    }
  }

  private static String firstLine(Throwable e) {
    String m = String.valueOf(e.getMessage());
    int nl = m.indexOf('\n');
    return e.getClass().getSimpleName() + ": " + (nl >= 0 ? m.substring(0, nl) : m);
  }

  /** A command-line mistake: exit status 2 and the usage text. */
  static final class UsageException extends Exception {
    UsageException(String m) {
      super(m);
    }
  }

  private static void need(String[] a, int min, int max, String form) throws UsageException {
    if (a.length < min || a.length > max) {
      throw new UsageException("expected " + form);
    }
  }

  /**
   * Options shared by the dump commands: the scan options rekey offers
   * (snapshot.ScanOptions, the job's source.scan, `rekey inspect`), each
   * handed to HBase's own Scan so HBase does the selecting.
   */
  static final class ScanOpts {
    boolean raw;
    int maxVersions;
    boolean tags;
    long from;
    long to;
    /**
     * TTL reference in ms (0: the clock), dump-snapshot only: there the
     * store scanners run in this JVM and take "now" from HBase's
     * EnvironmentEdgeManager, which FixedClock sets.
     */
    long now;
    byte[] start;
    byte[] stop;
    List<byte[]> families = new ArrayList<>();
    /** family, qualifier pairs of --column. */
    List<byte[][]> columns = new ArrayList<>();
    List<String> positional = new ArrayList<>();

    static final String FORM = "[--raw] [--max-versions N] [--tags] [--from MS] [--to MS] [--family F]..."
        + " [--column F:QUALHEX]... [--start ROWHEX] [--stop ROWHEX]";

    static ScanOpts parse(String[] a) throws UsageException {
      ScanOpts o = new ScanOpts();
      for (int i = 0; i < a.length; i++) {
        String f = a[i];
        if (f.equals("--raw")) {
          o.raw = true;
        } else if (f.equals("--tags")) {
          o.tags = true;
        } else if (f.startsWith("--") && i + 1 < a.length && o.option(f, a[i + 1])) {
          i++;
        } else if (f.startsWith("--")) {
          throw new UsageException("unknown option " + f + " or missing value");
        } else {
          o.positional.add(f);
        }
      }
      if (o.to != 0 && o.from >= o.to) {
        throw new UsageException("--from " + o.from + " is not before --to " + o.to);
      }
      return o;
    }

    /** Takes an option with a value; false when f is not one. */
    private boolean option(String f, String v) throws UsageException {
      switch (f) {
        case "--max-versions":
          maxVersions = Integer.parseInt(v);
          return true;
        case "--from":
          from = Long.parseLong(v);
          return true;
        case "--to":
          to = Long.parseLong(v);
          return true;
        case "--now":
          now = Long.parseLong(v);
          if (now <= 0) {
            throw new UsageException("--now " + v + ": want epoch milliseconds > 0");
          }
          return true;
        case "--start":
          start = Bytes.fromHex(v);
          return true;
        case "--stop":
          stop = Bytes.fromHex(v);
          return true;
        case "--family":
          families.add(Bytes.toBytes(v));
          return true;
        case "--column": {
          int colon = v.indexOf(':');
          if (colon <= 0) {
            throw new UsageException("--column " + v + ": want FAMILY:QUALIFIERHEX");
          }
          columns.add(new byte[][] {Bytes.toBytes(v.substring(0, colon)), Bytes.fromHex(v.substring(colon + 1))});
          return true;
        }
        default:
          return false;
      }
    }

    /**
     * The Scan. Families are added before columns: as in rekey's
     * ScanOptions, naming columns of a family restricts it to them
     * (Scan.addColumn after addFamily replaces the whole-family entry).
     */
    Scan scan() throws IOException {
      Scan s = new Scan();
      s.setRaw(raw);
      if (maxVersions > 0) {
        s.readVersions(maxVersions);
      } else {
        s.readAllVersions();
      }
      s.setCacheBlocks(false);
      if (from != 0 || to != 0) {
        s.setTimeRange(from, to == 0 ? Long.MAX_VALUE : to);
      }
      if (start != null) {
        s.withStartRow(start);
      }
      if (stop != null) {
        s.withStopRow(stop);
      }
      for (byte[] f : families) {
        s.addFamily(f);
      }
      for (byte[][] c : columns) {
        s.addColumn(c[0], c[1]);
      }
      return s;
    }
  }

  private static String statePath() {
    return System.getProperty("rekey.state", "testenv/state.json");
  }

  /** The cached HBase authentication token of hbaseToken. */
  private static org.apache.hadoop.security.token.Token<?> hbaseToken;

  /**
   * An HBase authentication token for the logged-in user, from the
   * cluster's TokenProvider, as HBase's own client obtains it: HBase 2.x
   * offers ClientTokenUtil.obtainToken(Connection), 3.0 only the
   * AsyncConnection form, so the one this build has is looked up.
   */
  static org.apache.hadoop.security.token.Token<?> hbaseToken() throws Exception {
    if (hbaseToken != null) {
      return hbaseToken;
    }
    Class<?> util = Class.forName("org.apache.hadoop.hbase.security.token.ClientTokenUtil");
    try {
      java.lang.reflect.Method m = util.getMethod("obtainToken", Connection.class);
      try (Connection conn = connect()) {
        hbaseToken = (org.apache.hadoop.security.token.Token<?>) m.invoke(null, conn);
      }
    } catch (NoSuchMethodException e) {
      java.lang.reflect.Method m = util.getMethod("obtainToken", org.apache.hadoop.hbase.client.AsyncConnection.class);
      try (org.apache.hadoop.hbase.client.AsyncConnection conn =
          ConnectionFactory.createAsyncConnection(Conf.client(statePath())).get()) {
        hbaseToken = (org.apache.hadoop.security.token.Token<?>)
            ((java.util.concurrent.CompletableFuture<?>) m.invoke(null, conn)).get();
      }
    }
    return hbaseToken;
  }

  static Connection connect() throws IOException {
    return ConnectionFactory.createConnection(Conf.client(statePath()));
  }

  /** The client configuration if a cluster is up, else a plain one. */
  static Configuration baseConf() {
    try {
      return Conf.client(statePath());
    } catch (IOException e) {
      Configuration conf = HBaseConfiguration.create();
      Conf.compression(conf);
      return conf;
    }
  }

  /** A path argument: URLs as given, bare paths as local absolute files. */
  static Path path(String s) {
    if (s.contains("://") || s.startsWith("file:")) {
      return new Path(s);
    }
    return new Path(new java.io.File(s).getAbsoluteFile().toURI());
  }

  /** A task on one item that may throw. */
  interface Task<T> {
    void run(T item) throws Exception;
  }

  /**
   * Runs task on every item, up to four at a time, and throws the first
   * failure (in the items' order) once all have ended.
   */
  static <T> void inParallel(List<T> items, Task<T> task) throws Exception {
    java.util.concurrent.ExecutorService pool =
        java.util.concurrent.Executors.newFixedThreadPool(Math.max(1, Math.min(4, items.size())));
    try {
      List<java.util.concurrent.Future<?>> done = new ArrayList<>();
      for (T item : items) {
        done.add(pool.submit(() -> {
          task.run(item);
          return null;
        }));
      }
      Exception first = null;
      for (java.util.concurrent.Future<?> f : done) {
        try {
          f.get();
        } catch (java.util.concurrent.ExecutionException e) {
          if (first == null) {
            first = e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
          }
        }
      }
      if (first != null) {
        throw first;
      }
    } finally {
      pool.shutdownNow();
    }
  }

  private static void run(String cmd, String[] a) throws Exception {
    switch (cmd) {
      case "kdc":
        need(a, 1, 1, "kdc DIR");
        StandaloneKdc.run(a[0]);
        break;
      case "hang":
        // A stand-in for a call stuck behind the cluster, for the test
        // of OracleCall's deadline (internal/testenv): the main thread
        // waits where a thread dump shows it.
        need(a, 1, 1, "hang SECONDS");
        Thread.sleep(Long.parseLong(a[0]) * 1000L);
        break;
      case "kinit":
        need(a, 4, 4, "kinit KRB5CONF PRINCIPAL KEYTAB CCACHE");
        Kinit.run(a[0], a[1], a[2], a[3]);
        break;
      case "seed": {
        // Several specs share one JVM and connection: a test that seeds
        // many small tables pays the start-up once.
        need(a, 1, Integer.MAX_VALUE, "seed SPEC.json...");
        List<Seed.Spec> specs = new ArrayList<>();
        java.util.Set<String> tables = new java.util.HashSet<>();
        for (String spec : a) {
          Seed.Spec s = Seed.read(spec);
          specs.add(s);
          tables.add(s.table);
        }
        try (Connection conn = connect()) {
          if (specs.size() == 1 || tables.size() < specs.size()) {
            // One spec, or specs that name a table twice (a later one
            // builds on an earlier one): in the order given.
            for (Seed.Spec s : specs) {
              new Seed(conn, s).run();
            }
            return;
          }
          // Distinct tables: a few at a time. Most of a small table's seed
          // is the master's create, flush and snapshot procedures, waited
          // for; seeding them one by one left the cores idle meanwhile.
          inParallel(specs, s -> new Seed(conn, s).run());
        }
        return;
      }
      case "dump-snapshot":
      case "dump-table":
        dump(cmd, a, System.out);
        return;
      case "dump-batch":
        need(a, 1, 1, "dump-batch LISTFILE");
        dumpBatch(a[0]);
        return;
      case "dump-hfile": {
        boolean tags = a.length == 2 && a[0].equals("--tags");
        if (a.length != 1 && !tags) {
          throw new UsageException("expected dump-hfile [--tags] PATH");
        }
        try (Dump d = new Dump(System.out)) {
          readHFile(path(a[a.length - 1]), d, null, tags);
        }
        return;
      }
      case "hfile-trailer": {
        // The trailer as HBase's reader decodes it, without reading cells:
        // what check-hfile prints first, at a fraction of its cost.
        need(a, 1, 1, "hfile-trailer PATH");
        Path p = path(a[0]);
        try (HFile.Reader r = HFile.createReader(p.getFileSystem(baseConf()), p, CacheConfig.DISABLED, true, baseConf())) {
          System.out.println("entries " + r.getTrailer().getEntryCount());
          System.out.println("index_levels " + r.getTrailer().getNumDataIndexLevels());
          System.out.println("codec " + r.getFileContext().getCompression());
        }
        return;
      }
      case "check-hfile": {
        boolean tags = a.length > 0 && a[0].equals("--tags");
        String[] paths = tags ? Arrays.copyOfRange(a, 1, a.length) : a;
        if (paths.length == 0) {
          throw new UsageException("expected check-hfile [--tags] PATH...");
        }
        try (Dump d = new Dump(System.out)) {
          for (String p : paths) {
            CheckHFile.check(baseConf(), path(p), d, tags);
          }
        }
        return;
      }
      case "count":
        count(a);
        return;
      case "regions": {
        need(a, 1, 1, "regions TABLE");
        try (Connection conn = connect();
            RegionLocator rl = conn.getRegionLocator(TableName.valueOf(a[0]))) {
          for (HRegionLocation l : rl.getAllRegionLocations()) {
            RegionInfo ri = l.getRegion();
            System.out.printf("%s\t%s\t%s\t%s%n", ri.getEncodedName(), Bytes.toHex(ri.getStartKey()),
                Bytes.toHex(ri.getEndKey()), l.getServerName() == null ? "-" : l.getServerName().getAddress());
          }
        }
        return;
      }
      case "files": {
        need(a, 1, 1, "files TABLE");
        Configuration conf = baseConf();
        Path tdir = CommonFSUtils.getTableDir(CommonFSUtils.getRootDir(conf), TableName.valueOf(a[0]));
        FileSystem fs = tdir.getFileSystem(conf);
        if (!fs.exists(tdir)) {
          throw new IOException("table " + a[0] + " has no directory " + tdir);
        }
        for (FileStatus region : fs.listStatus(tdir)) {
          if (!region.isDirectory() || region.getPath().getName().startsWith(".")) {
            continue;
          }
          for (FileStatus fam : fs.listStatus(region.getPath())) {
            if (!fam.isDirectory() || fam.getPath().getName().startsWith(".")
                || fam.getPath().getName().equals("recovered.edits")) {
              continue;
            }
            for (FileStatus f : fs.listStatus(fam.getPath())) {
              if (f.isFile() && !f.getPath().getName().startsWith(".")) {
                System.out.printf("%s\t%d%n", fs.makeQualified(f.getPath()), f.getLen());
              }
            }
          }
        }
        return;
      }
      case "split": {
        need(a, 1, 2, "split TABLE [ROWHEX]");
        try (Connection conn = connect()) {
          split(conn, TableName.valueOf(a[0]), a.length == 2 ? Bytes.fromHex(a[1]) : null);
        }
        System.out.println("ok");
        return;
      }
      case "merge": {
        need(a, 2, 2, "merge TABLE ROWHEX");
        try (Connection conn = connect()) {
          merge(conn, TableName.valueOf(a[0]), Bytes.fromHex(a[1]));
        }
        System.out.println("ok");
        return;
      }
      case "move": {
        need(a, 2, 2, "move TABLE ROWHEX");
        try (Connection conn = connect()) {
          System.out.println(move(conn, TableName.valueOf(a[0]), Bytes.fromHex(a[1])));
        }
        return;
      }
      case "flush": {
        need(a, 1, 1, "flush TABLE");
        try (Connection conn = connect(); Admin admin = conn.getAdmin()) {
          Seed.flushRegions(admin, TableName.valueOf(a[0]));
        }
        System.out.println("ok");
        return;
      }
      case "bulk-cells": {
        need(a, 2, 2, "bulk-cells TABLE DUMPFILE");
        try (Connection conn = connect()) {
          new BulkCells(conn, TableName.valueOf(a[0])).load(a[1]);
        }
        System.out.println("ok");
        return;
      }
      case "write-cells": {
        need(a, 2, 2, "write-cells TABLE DUMPFILE");
        try (Connection conn = connect()) {
          Seed.writeCells(conn, a[0], a[1]);
        }
        return;
      }
      case "hash-table":
        // The tools' own usage checks apply: HashTable [--options] TABLE
        // OUTPUT_DIR, SyncTable [--options] HASH_DIR SOURCE TARGET.
        need(a, 2, Integer.MAX_VALUE, "hash-table [OPTIONS] TABLE OUTPUT_DIR");
        hashSync(cmd, a);
        return;
      case "sync-table":
        need(a, 3, Integer.MAX_VALUE, "sync-table [OPTIONS] SOURCE_HASH_DIR SOURCE_TABLE TARGET_TABLE");
        hashSync(cmd, a);
        return;
      case "touch-readings": {
        need(a, 6, 6, "touch-readings TABLE FAMILY SENSORS FORMAT SHARE SEED");
        try (Connection conn = connect()) {
          TouchReadings.run(conn, TableName.valueOf(a[0]), a[1], Integer.parseInt(a[2]), a[3],
              Double.parseDouble(a[4]), Long.parseLong(a[5]));
        }
        return;
      }
      case "major-compact": {
        need(a, 1, 1, "major-compact TABLE");
        try (Connection conn = connect()) {
          majorCompact(conn, TableName.valueOf(a[0]));
        }
        System.out.println("ok");
        return;
      }
      case "snapshot": {
        need(a, 2, 2, "snapshot TABLE NAME");
        try (Connection conn = connect()) {
          snapshot(conn, TableName.valueOf(a[0]), a[1], false);
        }
        System.out.println("ok");
        return;
      }
      case "write-credentials": {
        // What a YARN client hands a container: the HDFS delegation tokens
        // of the cluster's file system in Hadoop's own token storage file
        // (HADOOP_TOKEN_FILE_LOCATION), in the current format or the
        // legacy Writable one.
        // With --hbase, the HBase authentication token of the cluster too,
        // as TableMapReduceUtil.initCredentials adds it to a job.
        need(a, 3, 4, "write-credentials FILE proto|legacy RENEWER [--hbase]");
        Configuration conf = Conf.client(statePath());
        org.apache.hadoop.security.Credentials creds = new org.apache.hadoop.security.Credentials();
        FileSystem fs = FileSystem.get(conf);
        org.apache.hadoop.security.token.Token<?>[] got = fs.addDelegationTokens(a[2], creds);
        if (got == null || got.length == 0) {
          throw new IOException(fs.getUri() + " issued no delegation token (is it secure?)");
        }
        if (a.length == 4) {
          if (!a[3].equals("--hbase")) {
            throw new UsageException("expected --hbase, not " + a[3]);
          }
          creds.addToken(hbaseToken().getService(), hbaseToken());
        }
        switch (a[1]) {
          case "proto":
            creds.writeTokenStorageFile(path(a[0]), conf, org.apache.hadoop.security.Credentials.SerializedFormat.PROTOBUF);
            break;
          case "legacy":
            creds.writeTokenStorageFile(path(a[0]), conf, org.apache.hadoop.security.Credentials.SerializedFormat.WRITABLE);
            break;
          default:
            throw new UsageException("format " + a[1] + ": want proto or legacy");
        }
        // One line per token: alias, kind, service, owner.
        for (java.util.Map.Entry<org.apache.hadoop.io.Text, org.apache.hadoop.security.token.Token<? extends org.apache.hadoop.security.token.TokenIdentifier>> e
            : creds.getTokenMap().entrySet()) {
          org.apache.hadoop.security.token.Token<?> t = e.getValue();
          System.out.println(e.getKey() + "\t" + t.getKind() + "\t" + t.getService() + "\t" + t.decodeIdentifier().getUser().getUserName());
        }
        return;
      }
      case "cancel-token": {
        // Cancels the HDFS delegation tokens of a token storage file, as
        // the YARN ResourceManager does when the application ends.
        need(a, 1, 1, "cancel-token FILE");
        Configuration conf = Conf.client(statePath());
        org.apache.hadoop.security.Credentials creds =
            org.apache.hadoop.security.Credentials.readTokenStorageFile(new java.io.File(a[0]), conf);
        for (org.apache.hadoop.security.token.Token<?> t : creds.getAllTokens()) {
          t.cancel(conf);
        }
        System.out.println("ok");
        return;
      }
      case "delete-snapshot": {
        // Several names share one JVM (tests that made many clean up once).
        need(a, 1, Integer.MAX_VALUE, "delete-snapshot NAME...");
        try (Connection conn = connect(); Admin admin = conn.getAdmin()) {
          for (String name : a) {
            admin.deleteSnapshot(name);
          }
        }
        System.out.println("ok");
        return;
      }
      case "drop-table": {
        need(a, 1, Integer.MAX_VALUE, "drop-table TABLE...");
        try (Connection conn = connect()) {
          // Each drop waits for the master's disable and delete procedures;
          // an Admin each, as one is not for sharing between threads.
          inParallel(new ArrayList<>(new java.util.LinkedHashSet<>(List.of(a))), name -> {
            try (Admin admin = conn.getAdmin()) {
              dropTable(admin, TableName.valueOf(name));
            }
          });
        }
        System.out.println("ok");
        return;
      }
      case "export-snapshot": {
        need(a, 2, 3, "export-snapshot NAME DEST [ROOTDIR]");
        Configuration conf = baseConf();
        Path root = a.length == 3 ? path(a[2]) : CommonFSUtils.getRootDir(conf);
        Exporter.export(conf, root, a[0], new java.io.File(a[1]));
        return;
      }
      case "bench-read-snapshot": {
        need(a, 2, 3, "bench-read-snapshot ROOTDIR NAME [PASSES]");
        Scan s = new Scan();
        s.readAllVersions();
        s.setCacheBlocks(false);
        // One untimed pass loads classes and warms the JIT, so the timed
        // passes measure reading, not JVM start-up. Of PASSES timed passes
        // (default 1) the median one is reported, as benchtool does.
        scanSnapshot(path(a[0]), a[1], s, null, new Bench("warm-up"));
        int passes = a.length == 3 ? Integer.parseInt(a[2]) : 1;
        List<Bench> timed = new ArrayList<>();
        for (int i = 0; i < passes; i++) {
          Bench b = new Bench("read-snapshot");
          scanSnapshot(path(a[0]), a[1], s, null, b);
          b.stop();
          timed.add(b);
        }
        timed.sort(java.util.Comparator.comparingLong(b -> b.t1 - b.t0));
        timed.get(timed.size() / 2).print();
        return;
      }
      case "bench-read-hfile": {
        need(a, 1, 1, "bench-read-hfile PATH");
        readHFile(path(a[0]), null, new Bench("warm-up"));
        Bench b = new Bench("read-hfile");
        readHFile(path(a[0]), null, b);
        b.print();
        return;
      }
      case "bench-put": {
        need(a, 3, 3, "bench-put TABLE N BATCH");
        benchPut(TableName.valueOf(a[0]), Long.parseLong(a[1]), Integer.parseInt(a[2]));
        return;
      }
      case "bench-scan": {
        need(a, 1, 1, "bench-scan TABLE");
        TableName tn = TableName.valueOf(a[0]);
        benchScan(tn, new Bench("warm-up"));
        Bench b = new Bench("scan");
        benchScan(tn, b);
        b.print();
        return;
      }
      case "bench-write-hfile": {
        need(a, 2, 4, "bench-write-hfile PATH N [ENCODING [COMPRESSION]]");
        benchWriteHFile(path(a[0]), Long.parseLong(a[1]),
            DataBlockEncoding.valueOf(a.length > 2 ? a[2] : "NONE"),
            Compression.getCompressionAlgorithmByName(
                (a.length > 3 ? a[3] : "NONE").toLowerCase(Locale.ROOT)));
        return;
      }
      case "digest-table":
        need(a, 1, 1, "digest-table TABLE");
        E2E.digestTable(TableName.valueOf(a[0]));
        return;
      case "digest-snapshot": {
        boolean rekey = a.length == 3 && a[2].equals("--rekey");
        if (a.length != 2 && !rekey) {
          throw new UsageException("expected digest-snapshot ROOTDIR NAME [--rekey]");
        }
        E2E.digestSnapshot(path(a[0]), a[1], rekey);
        return;
      }
      case "rekey-dump":
        need(a, 2, 2, "rekey-dump ROOTDIR NAME");
        E2E.rekeyDump(path(a[0]), a[1]);
        return;
      case "bench-e2e-put":
        need(a, 4, 4, "bench-e2e-put ROOTDIR NAME TABLE BATCH");
        E2E.putContender(path(a[0]), a[1], TableName.valueOf(a[2]), Integer.parseInt(a[3]));
        return;
      case "bench-e2e-bigtable":
        need(a, 7, 7, "bench-e2e-bigtable ROOTDIR NAME PROJECT INSTANCE TABLE BATCH INFLIGHT");
        E2E.bigtableContender(path(a[0]), a[1], a[2], a[3], a[4], Integer.parseInt(a[5]), Integer.parseInt(a[6]));
        return;
      case "bigtable-table":
        need(a, 4, 5, "bigtable-table create|drop|digest PROJECT INSTANCE TABLE [FAMILY]");
        E2E.bigtableTable(a[0], a[1], a[2], a[3], a.length > 4 ? a[4] : "d");
        return;
      case "bench-e2e-hfile":
        need(a, 4, 5, "bench-e2e-hfile ROOTDIR NAME TABLE STAGING [BUFFER_MB]");
        E2E.hfileContender(path(a[0]), a[1], TableName.valueOf(a[2]), path(a[3]),
            a.length > 4 ? Double.parseDouble(a[4]) : 256);
        return;
      default:
        throw new UsageException("unknown command " + cmd);
    }
  }

  /** Counts cells and their KeyValue-serialized bytes against the clock. */
  static final class Bench {
    final String op;
    final long t0 = System.nanoTime();
    long t1;
    long cells;
    long bytes;

    Bench(String op) {
      this.op = op;
    }

    /** Ends the timed span; print without it times up to the print. */
    void stop() {
      t1 = System.nanoTime();
    }

    void add(Cell c) {
      cells++;
      bytes += KeyValueUtil.keyLength(c) + c.getValueLength();
    }

    void print() {
      double s = ((t1 != 0 ? t1 : System.nanoTime()) - t0) / 1e9;
      System.out.printf(Locale.ROOT,
          "{\"op\":\"%s\",\"cells\":%d,\"bytes\":%d,\"seconds\":%.3f,\"cells_per_sec\":%.0f,\"mb_per_sec\":%.2f}%n",
          op, cells, bytes, s, cells / s, bytes / s / 1e6);
    }
  }

  /** dump-snapshot or dump-table with args a, to out. */
  private static void dump(String cmd, String[] a, java.io.OutputStream out) throws Exception {
    ScanOpts o = ScanOpts.parse(a);
    if (cmd.equals("dump-snapshot")) {
      if (o.positional.size() != 2) {
        throw new UsageException("expected dump-snapshot ROOTDIR NAME " + ScanOpts.FORM + " [--now MS]");
      }
      try (Dump d = new Dump(out); FixedClock clock = FixedClock.at(o.now)) {
        scanSnapshot(path(o.positional.get(0)), o.positional.get(1), o.scan(), d, null, o.tags);
      }
      return;
    }
    if (o.positional.size() != 1) {
      throw new UsageException("expected dump-table TABLE " + ScanOpts.FORM);
    }
    if (o.now != 0) {
      // A table scan's store scanners run in the region servers and read
      // their clocks; a client cannot set the TTL reference.
      throw new UsageException("dump-table takes no --now: the region servers' clocks measure TTLs");
    }
    try (Connection conn = connect(); Table t = conn.getTable(TableName.valueOf(o.positional.get(0)));
        ResultScanner rs = t.getScanner(o.scan()); Dump d = new Dump(out)) {
      for (Result r : rs) {
        for (Cell c : r.rawCells()) {
          d.cell(c, o.tags);
        }
      }
    }
  }

  /**
   * dump-batch LISTFILE: several dumps in one JVM (each oracle start costs
   * seconds): every line of LISTFILE is OUTFILE, then a dump-snapshot,
   * dump-table or dump-hfile command line, tab-separated; each dump goes to
   * its OUTFILE.
   */
  private static void dumpBatch(String list) throws Exception {
    for (String line : Files.readAllLines(java.nio.file.Paths.get(list))) {
      if (line.isEmpty()) {
        continue;
      }
      String[] f = line.split("\t");
      if (f.length < 3 || !(f[1].equals("dump-snapshot") || f[1].equals("dump-table") || f[1].equals("dump-hfile"))) {
        throw new UsageException("dump-batch line " + line
            + ": want OUTFILE<TAB>dump-snapshot|dump-table|dump-hfile<TAB>ARGS");
      }
      String[] args = Arrays.copyOfRange(f, 2, f.length);
      try (java.io.OutputStream out = Files.newOutputStream(java.nio.file.Paths.get(f[0]))) {
        if (f[1].equals("dump-hfile")) {
          boolean tags = args[0].equals("--tags");
          try (Dump d = new Dump(out)) {
            readHFile(path(args[args.length - 1]), d, null, tags);
          }
        } else {
          dump(f[1], args, out);
        }
      } catch (Exception e) {
        throw new IOException("dump-batch " + String.join(" ", Arrays.copyOfRange(f, 1, f.length)) + ": " + e.getMessage(), e);
      }
    }
  }

  static void scanSnapshot(Path root, String name, Scan scan, Dump d) throws IOException {
    scanSnapshot(root, name, scan, d, null, false);
  }

  static void scanSnapshot(Path root, String name, Scan scan, Dump d, Bench b) throws IOException {
    scanSnapshot(root, name, scan, d, b, false);
  }

  /**
   * Reads a snapshot with TableSnapshotScanner. Its restore directory (a
   * few link files) goes on the snapshot's own file system, as HBase
   * requires, and is removed afterwards. With tags, d prints each cell's
   * tags column (TableSnapshotScanner reads the store files in this JVM,
   * so the cells keep the tags a client scan would not return).
   */
  static void scanSnapshot(Path root, String name, Scan scan, Dump d, Bench b, boolean tags) throws IOException {
    Configuration conf = new Configuration(baseConf());
    FileSystem fs = root.getFileSystem(conf);
    root = fs.makeQualified(root);
    conf.set(HConstants.HBASE_DIR, root.toString());
    conf.set("fs.defaultFS", fs.getUri().toString());
    Path snapDir = SnapshotDescriptionUtils.getCompletedSnapshotDir(name, root);
    if (!fs.exists(snapDir)) {
      List<String> have = new ArrayList<>();
      Path dir = new Path(root, HConstants.SNAPSHOT_DIR_NAME);
      if (fs.exists(dir)) {
        for (FileStatus st : fs.listStatus(dir)) {
          if (!st.getPath().getName().startsWith(".")) {
            have.add(st.getPath().getName());
          }
        }
      }
      throw new IOException("snapshot " + name + " not found under " + root + " (have: " + have + ")");
    }
    Path restore;
    if ("file".equals(fs.getUri().getScheme())) {
      restore = new Path(Files.createTempDirectory("rekey-oracle-restore").toUri());
    } else {
      restore = fs.makeQualified(new Path("/tmp/rekey-oracle-restore-" + UUID.randomUUID()));
    }
    try (TableSnapshotScanner s = new TableSnapshotScanner(conf, root, restore, name, scan)) {
      Result r;
      while ((r = s.next()) != null) {
        for (Cell c : r.rawCells()) {
          if (d != null) {
            d.cell(c, tags);
          }
          if (b != null) {
            b.add(c);
          }
        }
      }
    } finally {
      fs.delete(restore, true);
    }
  }

  static void readHFile(Path p, Dump d, Bench b) throws IOException {
    readHFile(p, d, b, false);
  }

  static void readHFile(Path p, Dump d, Bench b, boolean tags) throws IOException {
    Configuration conf = baseConf();
    FileSystem fs = p.getFileSystem(conf);
    try (HFile.Reader r = HFile.createReader(fs, p, CacheConfig.DISABLED, true, conf)) {
      HFileScanner sc = r.getScanner(conf, false, false);
      if (!sc.seekTo()) {
        return;
      }
      do {
        Cell c = sc.getCell();
        if (d != null) {
          d.cell(c, tags);
        }
        if (b != null) {
          b.add(c);
        }
      } while (sc.next());
    }
  }

  private static void count(String[] a) throws Exception {
    List<byte[]> prefixes = new ArrayList<>();
    String name = null;
    boolean inPrefixes = false;
    for (String s : a) {
      if (s.equals("--prefix")) {
        inPrefixes = true;
      } else if (inPrefixes) {
        prefixes.add(Bytes.fromHex(s));
      } else if (name == null) {
        name = s;
      } else {
        throw new UsageException("expected count TABLE|SNAPSHOT --prefix HEX...");
      }
    }
    if (name == null || prefixes.isEmpty()) {
      throw new UsageException("expected count TABLE|SNAPSHOT --prefix HEX...");
    }
    try (Connection conn = connect(); Admin admin = conn.getAdmin()) {
      boolean isSnapshot = false;
      for (SnapshotDescription sd : admin.listSnapshots()) {
        isSnapshot |= sd.getName().equals(name);
      }
      for (byte[] p : prefixes) {
        Scan scan = new Scan();
        scan.readAllVersions();
        scan.setRowPrefixFilter(p);
        Counter cnt = new Counter();
        if (isSnapshot) {
          scanSnapshotRows(CommonFSUtils.getRootDir(conn.getConfiguration()), name, scan, cnt);
        } else {
          try (Table t = conn.getTable(TableName.valueOf(name)); ResultScanner rs = t.getScanner(scan)) {
            for (Result r : rs) {
              cnt.add(r);
            }
          }
        }
        System.out.printf("%s\t%d\t%d%n", Bytes.toHex(p), cnt.rows, cnt.cells);
      }
    }
  }

  /** Rows and cells of a scan; a row split over Results counts once. */
  private static final class Counter {
    long rows;
    long cells;
    byte[] last;

    void add(Result r) {
      if (r.isEmpty()) {
        return;
      }
      if (last == null || !Bytes.equals(last, r.getRow())) {
        rows++;
        last = r.getRow();
      }
      cells += r.rawCells().length;
    }
  }

  private static void scanSnapshotRows(Path root, String name, Scan scan, Counter cnt) throws IOException {
    Configuration conf = new Configuration(baseConf());
    FileSystem fs = root.getFileSystem(conf);
    root = fs.makeQualified(root);
    conf.set(HConstants.HBASE_DIR, root.toString());
    Path restore = fs.makeQualified(new Path("/tmp/rekey-oracle-restore-" + UUID.randomUUID()));
    try (TableSnapshotScanner s = new TableSnapshotScanner(conf, root, restore, name, scan)) {
      Result r;
      while ((r = s.next()) != null) {
        cnt.add(r);
      }
    } finally {
      fs.delete(restore, true);
    }
  }

  private static RegionInfo regionOf(Connection conn, TableName tn, byte[] row) throws IOException {
    try (RegionLocator rl = conn.getRegionLocator(tn)) {
      return rl.getRegionLocation(row, true).getRegion();
    }
  }

  /**
   * Splits the region holding `at` at that key, or, with at == null, asks
   * HBase to split every region of the table at its midkey; waits until the
   * daughters are online.
   */
  static void split(Connection conn, TableName tn, byte[] at) throws Exception {
    try (Admin admin = conn.getAdmin()) {
      if (at != null) {
        RegionInfo ri = regionOf(conn, tn, at);
        admin.splitRegionAsync(ri.getRegionName(), at).get(120, TimeUnit.SECONDS);
        return;
      }
      int before = admin.getRegions(tn).size();
      admin.split(tn);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
      while (admin.getRegions(tn).size() <= before) {
        if (System.nanoTime() > deadline) {
          throw new IOException("split of " + tn + " did not finish within 120 s");
        }
        Thread.sleep(200);
      }
    }
  }

  /**
   * Runs HashSync (HashTable or SyncTable) by name: a build without HBase's
   * MapReduce module (3.0.0-alpha-4, whose hbase-mapreduce Maven Central
   * does not serve here) leaves HashSync out, and says so.
   */
  private static void hashSync(String cmd, String[] a) throws Exception {
    Class<?> c;
    try {
      c = Class.forName("dev.rekey.testenv.HashSync");
    } catch (ClassNotFoundException e) {
      throw new IllegalStateException(cmd + " needs HBase's MapReduce module (hbase-mapreduce), which this build of the oracle ("
          + org.apache.hadoop.hbase.util.VersionInfo.getVersion() + ") has not");
    }
    try {
      c.getDeclaredMethod("run", String.class, String.class, String[].class).invoke(null, cmd, statePath(), a);
    } catch (java.lang.reflect.InvocationTargetException e) {
      if (e.getCause() instanceof Exception) {
        throw (Exception) e.getCause();
      }
      throw e;
    }
  }

  /**
   * Merges the region holding `row` with the region after it and waits for
   * the merge procedure to finish (the merged region open, its store files
   * references to its parents' until a compaction rewrites them).
   */
  static void merge(Connection conn, TableName tn, byte[] row) throws Exception {
    try (Admin admin = conn.getAdmin()) {
      RegionInfo first = regionOf(conn, tn, row);
      if (first.getEndKey().length == 0) {
        throw new IOException("the region holding " + Bytes.toStringBinary(row) + " is the last of " + tn + ": none after it to merge with");
      }
      RegionInfo second = regionOf(conn, tn, first.getEndKey());
      admin.mergeRegionsAsync(new byte[][] {first.getRegionName(), second.getRegionName()}, false)
          .get(120, TimeUnit.SECONDS);
    }
  }

  /** Moves the region holding `row` to another live region server. */
  static String move(Connection conn, TableName tn, byte[] row) throws Exception {
    try (Admin admin = conn.getAdmin(); RegionLocator rl = conn.getRegionLocator(tn)) {
      HRegionLocation loc = rl.getRegionLocation(row, true);
      ServerName dest = null;
      for (ServerName sn : admin.getRegionServers()) {
        if (!sn.equals(loc.getServerName())) {
          dest = sn;
          break;
        }
      }
      if (dest == null) {
        throw new IOException("no other live region server to move " + loc.getRegion().getEncodedName() + " to");
      }
      // A move the region server fails to finish in time (a loaded CI
      // machine) ends with the master opening the region where it was
      // again: then it is asked once more, up to four times.
      String name = loc.getRegion().getEncodedName();
      ServerName now = loc.getServerName();
      for (int attempt = 1; attempt <= 4; attempt++) {
        try {
          admin.move(loc.getRegion().getEncodedNameAsBytes(), dest);
        } catch (IOException e) {
          if (attempt == 1) {
            throw e;
          }
          // Still in transition from the last attempt: wait for it.
          System.err.println("oracle move: move " + attempt + " of " + name + ": " + e.getMessage());
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
          now = rl.getRegionLocation(row, true).getServerName();
          if (dest.equals(now)) {
            return "ok moved " + name + " from " + loc.getServerName().getAddress() + " to " + dest.getAddress()
                + (attempt > 1 ? " (attempt " + attempt + ")" : "");
          }
          Thread.sleep(200);
        }
        System.err.println("oracle move: region " + name + " still on " + now + " 30 s after move " + attempt + " to " + dest);
      }
      throw new IOException("region " + name + " not on " + dest + " after 4 moves of 30 s each (it is on " + now + ")");
    }
  }

  /**
   * Major-compacts every region (compactions are enabled on the table first
   * if its descriptor disables them) and waits until no compaction runs.
   */
  static void majorCompact(Connection conn, TableName tn) throws Exception {
    try (Admin admin = conn.getAdmin()) {
      if (!admin.getDescriptor(tn).isCompactionEnabled()) {
        admin.modifyTable(TableDescriptorBuilder.newBuilder(admin.getDescriptor(tn))
            .setCompactionEnabled(true).build());
      }
      Seed.flushRegions(admin, tn);
      admin.majorCompact(tn);
      // The request is queued; give it a moment to show up as running,
      // then wait for it to end.
      long seen = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      while (admin.getCompactionState(tn) == CompactionState.NONE && System.nanoTime() < seen) {
        Thread.sleep(100);
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(300);
      while (admin.getCompactionState(tn) != CompactionState.NONE) {
        if (System.nanoTime() > deadline) {
          throw new IOException("major compaction of " + tn + " still running after 300 s");
        }
        Thread.sleep(200);
      }
    }
  }

  /** Disables and deletes tn if it exists (drop-table, and the cluster's drop-tables). */
  static void dropTable(Admin admin, TableName tn) throws IOException {
    if (admin.tableExists(tn)) {
      if (admin.isTableEnabled(tn)) {
        admin.disableTable(tn);
      }
      admin.deleteTable(tn);
    }
  }

  static void snapshot(Connection conn, TableName tn, String name, boolean replace) throws IOException {
    try (Admin admin = conn.getAdmin()) {
      for (SnapshotDescription sd : admin.listSnapshots()) {
        if (sd.getName().equals(name)) {
          if (!replace) {
            throw new IOException("snapshot " + name + " already exists");
          }
          admin.deleteSnapshot(name);
        }
      }
      // Snapshots of several tables at once (tests run in parallel) can
      // fail on the master's procedure coordinator ("... not found in
      // proclist"): that is the cluster being busy, not the table being
      // wrong, so try again a few times before giving up.
      for (int attempt = 1; ; attempt++) {
        try {
          admin.snapshot(name, tn);
          return;
        } catch (IOException e) {
          if (attempt >= 6) {
            throw e;
          }
          System.err.println("snapshot " + name + ": attempt " + attempt + " failed, retrying: " + e.getMessage());
          try {
            Thread.sleep(1000L * attempt);
          } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            throw e;
          }
          // Whatever the failed attempt left completed is taken again.
          for (SnapshotDescription sd : admin.listSnapshots()) {
            if (sd.getName().equals(name)) {
              admin.deleteSnapshot(name);
            }
          }
        }
      }
    }
  }

  private static void benchPut(TableName tn, long n, int batch) throws Exception {
    try (Connection conn = connect(); Admin admin = conn.getAdmin()) {
      byte[] f = Bytes.toBytes("f");
      if (!admin.tableExists(tn)) {
        byte[][] splits = new byte[3][];
        for (int i = 0; i < 3; i++) {
          splits[i] = new byte[] {(byte) (64 * (i + 1))};
        }
        admin.createTable(TableDescriptorBuilder.newBuilder(tn)
            .setColumnFamily(ColumnFamilyDescriptorBuilder.of(f)).build(), splits);
      }
      // BufferedMutator, as a Java bulk writer would use, with its write
      // buffer sized to hold BATCH of these puts, so both sides send Multi
      // calls of about BATCH mutations.
      byte[] q = Bytes.toBytes("q");
      byte[] v = new byte[32];
      long perPut = new Put(new byte[9]).addColumn(f, q, Seed.TS_BASE, v).heapSize();
      BufferedMutatorParams params = new BufferedMutatorParams(tn).writeBufferSize(perPut * batch);
      Bench b = new Bench("put");
      try (BufferedMutator m = conn.getBufferedMutator(params)) {
        for (long i = 0; i < n; i++) {
          // A hashed first byte spreads rows over the four regions.
          byte[] row = Bytes.add(new byte[] {(byte) (i * 0x9E3779B97F4A7C15L >>> 56)}, Bytes.toBytes(i));
          Put p = new Put(row);
          p.addColumn(f, q, Seed.TS_BASE, v);
          m.mutate(p);
          b.cells++;
          b.bytes += KeyValueUtil.keyLength(p.get(f, q).get(0)) + v.length;
        }
        m.flush();
      }
      b.print();
    }
  }

  /** Scans a whole live table with HBase's client: 1000 rows per RPC, no block caching. */
  private static void benchScan(TableName tn, Bench b) throws IOException {
    Scan scan = new Scan().setCaching(1000).setCacheBlocks(false);
    try (Connection conn = connect(); Table t = conn.getTable(tn); ResultScanner rs = t.getScanner(scan)) {
      for (Result r; (r = rs.next()) != null;) {
        for (Cell c : r.rawCells()) {
          b.add(c);
        }
      }
    }
  }

  /**
   * Writes N cells with HBase's own HFile writer: rows of five columns,
   * increasing timestamps and 32-byte values that are half random, half
   * repeated, so encodings and codecs have realistic work to do. The same
   * file is then read by both readers.
   */
  private static void benchWriteHFile(Path p, long n, DataBlockEncoding enc, Compression.Algorithm codec)
      throws IOException {
    Configuration conf = baseConf();
    FileSystem fs = p.getFileSystem(conf);
    byte[] f = Bytes.toBytes("f");
    java.util.Random rnd = new java.util.Random(42);
    Bench b = new Bench("write-hfile");
    try (HFile.Writer w = HFile.getWriterFactory(conf, CacheConfig.DISABLED).withPath(fs, p)
        .withFileContext(new HFileContextBuilder().withBlockSize(65536)
            .withCompression(codec).withDataBlockEncoding(enc)
            .withIncludesTags(true).withIncludesMvcc(false)
            .withCellComparator(CellComparator.getInstance()).build())
        .create()) {
      for (long i = 0; i < n; i++) {
        byte[] row = Bytes.toBytes(String.format(Locale.ROOT, "row%010d", i / 5));
        byte[] q = Bytes.toBytes("col" + (i % 5));
        byte[] v = new byte[32];
        rnd.nextBytes(v);
        Arrays.fill(v, 16, 32, (byte) 'x');
        KeyValue kv = new KeyValue(row, f, q, Seed.TS_BASE + i, v);
        w.append(kv);
        b.add(kv);
      }
    }
    b.print();
  }
}
