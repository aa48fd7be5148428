package dev.rekey.yarn;

import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.conf.Configured;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.mapreduce.Counter;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.lib.output.NullOutputFormat;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.util.Tool;
import org.apache.hadoop.util.ToolRunner;

/**
 * Runs a rekey job as MapReduce jobs on YARN, from an edge node:
 *
 * <pre>
 * hadoop jar rekey-yarn.jar [generic options] JOB.yaml --shards N [--parts R]
 *     [--binary PATH] [--state URL] [--memory MIB] [--resume]
 *     [--principal NAME@REALM --keytab FILE] [-- REKEY RUN FLAGS]
 * </pre>
 *
 * <p>Without --parts (the puts sink) one map-only job of N tasks runs, task
 * i running {@code rekey run JOB --shard i/N}: each shard writes its own
 * splits. With --parts R (the hfiles sink) three jobs run in turn: N spill
 * tasks, R merge tasks, one load task. The static rekey binary and the job
 * file travel through the distributed cache; the checkpoints, staging
 * folder and failure markers live under the state folder, which must be on
 * storage every node sees (HDFS; default: rekey/JOBNAME in the user's home
 * on the default file system).
 *
 * <p>On a kerberized cluster the driver acts as the user of the ticket
 * cache (kinit), or logs in from --keytab as --principal: a keytab, unlike
 * a ticket, lasts as long as a run. The tasks get no keytab: MapReduce
 * obtains HDFS delegation tokens at submission, the driver adds an HBase
 * token, and the containers hand both to rekey in their token file.
 *
 * <p>Exit status: 0 done; 2 a usage error (the driver's or rekey's); 1 a
 * task failed for good (rekey's exit 1: damaged input, failed checks); 4
 * MapReduce gave up after its retries (transient failures: rerun with
 * --resume).
 */
public final class Driver extends Configured implements Tool {
  /** The driver's exit status when MapReduce ran out of attempts. */
  static final int EXIT_RETRIES_EXHAUSTED = 4;
  /** How often the driver polls a running job. */
  private static final long POLL_MILLIS = 2000;

  private final PrintStream log = System.err;
  /** The flags after "--", for every rekey run. */
  private final List<String> runFlags;

  private Driver(List<String> runFlags) {
    this.runFlags = runFlags;
  }

  /**
   * Splits the arguments at "--" before Hadoop's generic option parser
   * sees them: it would take the "--" as its own end of options and drop
   * it, and rekey's flags would then read as the driver's.
   */
  public static void main(String[] args) throws Exception {
    List<String> all = List.of(args);
    int cut = all.indexOf("--");
    List<String> mine = cut < 0 ? all : all.subList(0, cut);
    List<String> rest = cut < 0 ? List.of() : all.subList(cut + 1, all.size());
    System.exit(ToolRunner.run(new Driver(rest), mine.toArray(new String[0])));
  }

  @Override
  public int run(String[] argv) throws Exception {
    Args a;
    try {
      a = Args.parse(argv);
      a.extra.addAll(runFlags);
    } catch (IllegalArgumentException e) {
      log.println("rekey-yarn: " + e.getMessage());
      log.println(Args.USAGE);
      return 2;
    }
    Configuration conf = getConf();
    if (a.keytab != null) {
      UserGroupInformation.setConfiguration(conf);
      UserGroupInformation.loginUserFromKeytab(a.principal, a.keytab);
      log.println("rekey-yarn: logged in as " + a.principal + " from " + a.keytab);
    }
    Path state = stateDir(conf, a);
    log.println("rekey-yarn: state folder " + state);
    Path bin = upload(conf, a.binary, new Path(state, ".yarn/" + Phase.BINARY));
    Path job = upload(conf, a.job, new Path(state, ".yarn/" + Phase.JOB_FILE));
    Path hbaseSite = uploadHBaseSite(conf, new Path(state, ".yarn/" + Phase.HBASE_SITE));
    Configuration base = new Configuration(conf);
    base.set(Phase.STATE, state.toString());
    base.setBoolean(Phase.RESUME, a.resume);
    base.setInt(Phase.MEMORY_MIB, a.memoryMiB);
    base.set(Phase.EXTRA, String.join("\n", a.extra));
    new Failures(base).clear();
    List<Phase> phases = a.parts == 0 ? List.of(Phase.RUN) : List.of(Phase.SPILL, Phase.MERGE, Phase.LOAD);
    for (Phase p : phases) {
      int n = p == Phase.MERGE ? a.parts : p == Phase.LOAD ? 1 : a.shards;
      int rc = runPhase(base, p, n, a, bin, job, hbaseSite);
      if (rc != 0) {
        return rc;
      }
    }
    log.println("rekey-yarn: done");
    return 0;
  }

  /** The state folder, qualified: --state, or rekey/JOBNAME in the home folder. */
  private Path stateDir(Configuration conf, Args a) throws IOException {
    Path p;
    if (a.state != null) {
      p = new Path(a.state);
    } else {
      String name = new File(a.job).getName().replaceFirst("\\.ya?ml$", "");
      p = new Path(FileSystem.get(conf).getHomeDirectory(), "rekey/" + name);
    }
    FileSystem fs = p.getFileSystem(conf);
    p = fs.makeQualified(p);
    if ("file".equals(p.toUri().getScheme())) {
      log.println("rekey-yarn: warning: the state folder " + p + " is on a local disk; a task retried on another node will not find its checkpoint");
    }
    return p;
  }

  /**
   * On a cluster with HBase security, adds an HBase authentication token
   * to the job's credentials, as HBase's own MapReduce jobs do
   * (TableMapReduceUtil.initCredentials): the tasks then reach HBase with
   * no keytab (rekey reads the token from the container's token file, as
   * it reads the HDFS tokens MapReduce obtains by itself). HBase's classes
   * are not bundled; they are there when the driver runs with HBase on its
   * class path (HADOOP_CLASSPATH=$(hbase mapredcp)). Without them, or on a
   * cluster without HBase security, no token is added.
   */
  private void addHBaseToken(Job job) throws IOException {
    Class<?> util;
    try {
      util = Class.forName("org.apache.hadoop.hbase.mapreduce.TableMapReduceUtil");
    } catch (ClassNotFoundException e) {
      if (UserGroupInformation.isSecurityEnabled()) {
        log.println("rekey-yarn: warning: HBase's classes are not on the class path (HADOOP_CLASSPATH=$(hbase mapredcp)), so the tasks get no HBase token: "
            + "the load phase and the puts sink then need a keytab in the job's security section");
      }
      return;
    }
    try {
      util.getMethod("initCredentials", Job.class).invoke(null, job);
    } catch (java.lang.reflect.InvocationTargetException e) {
      throw new IOException("obtaining an HBase token for the tasks: " + e.getCause(), e.getCause());
    } catch (ReflectiveOperationException e) {
      throw new IOException("obtaining an HBase token for the tasks: " + e, e);
    }
  }

  /**
   * Copies HBase's client configuration, hbase-site.xml, to dst for the
   * tasks and returns dst, or null when the driver has none. It is the
   * file HBase's own tools read: $HBASE_CONF_DIR/hbase-site.xml, else the
   * first on the class path (HADOOP_CLASSPATH=$(hbase mapredcp):/etc/hbase/conf,
   * where TableMapReduceUtil finds it too). A task's rekey needs it on a
   * kerberized HBase (hbase.security.authentication, the servers'
   * principals, hbase.rpc.protection), and a NodeManager rarely hands its
   * containers an HBASE_CONF_DIR.
   */
  private Path uploadHBaseSite(Configuration conf, Path dst) throws IOException {
    java.net.URL src = null;
    String dir = System.getenv("HBASE_CONF_DIR");
    if (dir != null && !dir.isEmpty() && new File(dir, Phase.HBASE_SITE).isFile()) {
      src = new File(dir, Phase.HBASE_SITE).toURI().toURL();
    } else {
      src = conf.getClassLoader().getResource(Phase.HBASE_SITE);
    }
    if (src == null) {
      return null;
    }
    FileSystem fs = dst.getFileSystem(conf);
    try (java.io.InputStream in = src.openStream(); java.io.OutputStream out = fs.create(dst, true)) {
      in.transferTo(out);
    }
    log.println("rekey-yarn: the tasks get HBase's client configuration " + src);
    return fs.makeQualified(dst);
  }

  /** Copies a local file to dst (replacing it) and returns dst. */
  private static Path upload(Configuration conf, String local, Path dst) throws IOException {
    FileSystem fs = dst.getFileSystem(conf);
    fs.copyFromLocalFile(false, true, new Path(new File(local).getAbsoluteFile().toURI()), dst);
    return fs.makeQualified(dst);
  }

  /** Submits one phase's job of n tasks, watches it, and returns the driver's exit status for it. */
  private int runPhase(Configuration base, Phase p, int n, Args a, Path bin, Path jobFile, Path hbaseSite) throws Exception {
    Configuration conf = new Configuration(base);
    conf.set(Phase.KEY, p.name());
    conf.setInt(TaskInputFormat.TASKS, n);
    // Two attempts of one task at once would be two writers of one
    // checkpoint: rekey's lease refuses the second, which MapReduce would
    // count as a failure. Retries, not speculation, handle slow tasks.
    conf.setBoolean("mapreduce.map.speculative", false);
    conf.setBoolean("mapreduce.reduce.speculative", false);
    sizeContainers(conf, a.memoryMiB);
    String name = new File(a.job).getName();
    Job job = Job.getInstance(conf, "rekey " + p.label + " " + name + " (" + n + " tasks)");
    job.setJarByClass(Driver.class);
    job.setInputFormatClass(TaskInputFormat.class);
    job.setMapperClass(RekeyMapper.class);
    job.setNumReduceTasks(0);
    job.setOutputFormatClass(NullOutputFormat.class);
    job.setOutputKeyClass(NullWritable.class);
    job.setOutputValueClass(NullWritable.class);
    job.addCacheFile(new URI(bin.toUri() + "#" + Phase.BINARY));
    job.addCacheFile(new URI(jobFile.toUri() + "#" + Phase.JOB_FILE));
    if (hbaseSite != null) {
      job.addCacheFile(new URI(hbaseSite.toUri() + "#" + Phase.HBASE_SITE));
    }
    addHBaseToken(job);
    job.submit();
    log.println("rekey-yarn: " + p.label + ": submitted " + job.getJobID() + " with " + n + " tasks; " + job.getTrackingURL());
    return watch(job, p, new Failures(conf));
  }

  /**
   * Sizes the map containers unless the user did: rekey's memory budget
   * (its default, 1 GiB, without --memory) plus 512 MiB for the task JVM,
   * which only relays output, and the Go runtime beyond the budget. The
   * JVM's heap is capped small so the budget is rekey's.
   */
  private static void sizeContainers(Configuration conf, int memoryMiB) {
    int budget = memoryMiB > 0 ? memoryMiB : 1024;
    if (!userSet(conf, "mapreduce.map.memory.mb")) {
      conf.setInt("mapreduce.map.memory.mb", budget + 512);
    }
    if (!userSet(conf, "mapreduce.map.java.opts")) {
      conf.set("mapreduce.map.java.opts", "-Xmx192m");
    }
  }

  /** Whether key was set by the user (a -D, a site file), not by Hadoop's defaults. */
  private static boolean userSet(Configuration conf, String key) {
    String[] src = conf.getPropertySources(key);
    return src != null && src.length > 0 && !src[src.length - 1].endsWith("-default.xml");
  }

  /**
   * Waits for job to end and returns the exit status: 0 on success; the
   * code of a failure marker (the job is killed as soon as one appears);
   * EXIT_RETRIES_EXHAUSTED when MapReduce failed it after its retries.
   */
  private int watch(Job job, Phase p, Failures failures) throws Exception {
    String last = "";
    while (!job.isComplete()) {
      String failed = failures.any(p);
      if (failed != null) {
        log.println("rekey-yarn: " + p.label + ": a task failed for good, killing the job: " + failed);
        job.killJob();
        return Integer.parseInt(failed.substring(0, failed.indexOf(' ')));
      }
      String now = String.format("%s: map %.0f%%", p.label, job.mapProgress() * 100);
      if (!now.equals(last)) {
        log.println("rekey-yarn: " + now);
        last = now;
      }
      Thread.sleep(POLL_MILLIS);
    }
    if (job.isSuccessful()) {
      for (Counter c : job.getCounters().getGroup(Progress.GROUP)) {
        log.println("rekey-yarn: " + p.label + ": " + c.getName() + " " + c.getValue());
      }
      return 0;
    }
    String failed = failures.any(p);
    if (failed != null) {
      log.println("rekey-yarn: " + p.label + ": a task failed for good: " + failed);
      return Integer.parseInt(failed.substring(0, failed.indexOf(' ')));
    }
    log.println("rekey-yarn: " + p.label + ": " + job.getJobID() + " " + job.getJobState() + ": " + job.getStatus().getFailureInfo());
    return EXIT_RETRIES_EXHAUSTED;
  }

  /** The driver's own arguments. */
  static final class Args {
    static final String USAGE = "usage: hadoop jar rekey-yarn.jar [generic options] JOB.yaml --shards N [--parts R]"
        + " [--binary PATH] [--state URL] [--memory MIB] [--resume] [--principal NAME@REALM --keytab FILE] [-- REKEY RUN FLAGS]";

    String job;
    int shards;
    int parts;
    String binary;
    String state;
    int memoryMiB;
    boolean resume;
    String principal;
    String keytab;
    final List<String> extra = new ArrayList<>();

    static Args parse(String[] argv) {
      Args a = new Args();
      for (int i = 0; i < argv.length; i++) {
        String s = argv[i];
        switch (s) {
          case "--shards":
            a.shards = positive(s, value(argv, ++i, s));
            break;
          case "--parts":
            a.parts = positive(s, value(argv, ++i, s));
            break;
          case "--binary":
            a.binary = value(argv, ++i, s);
            break;
          case "--state":
            a.state = value(argv, ++i, s);
            break;
          case "--memory":
            a.memoryMiB = positive(s, value(argv, ++i, s));
            break;
          case "--resume":
            a.resume = true;
            break;
          case "--principal":
            a.principal = value(argv, ++i, s);
            break;
          case "--keytab":
            a.keytab = value(argv, ++i, s);
            break;
          default:
            if (s.startsWith("-")) {
              throw new IllegalArgumentException("unknown flag " + s);
            }
            if (a.job != null) {
              throw new IllegalArgumentException("one job file, got " + a.job + " and " + s);
            }
            a.job = s;
        }
      }
      if (a.job == null || a.shards == 0) {
        throw new IllegalArgumentException("a job file and --shards N are required");
      }
      if (!new File(a.job).isFile()) {
        throw new IllegalArgumentException("job file " + a.job + " does not exist");
      }
      if ((a.principal == null) != (a.keytab == null)) {
        throw new IllegalArgumentException("--principal and --keytab go together");
      }
      if (a.keytab != null && !new File(a.keytab).canRead()) {
        throw new IllegalArgumentException("keytab " + a.keytab + " is not a readable file");
      }
      if (a.binary == null) {
        a.binary = onPath(Phase.BINARY);
      }
      if (!new File(a.binary).canExecute()) {
        throw new IllegalArgumentException("rekey binary " + a.binary + " is not an executable file (--binary PATH)");
      }
      return a;
    }

    private static String value(String[] argv, int i, String flag) {
      if (i >= argv.length) {
        throw new IllegalArgumentException(flag + " needs a value");
      }
      return argv[i];
    }

    private static int positive(String flag, String v) {
      try {
        int n = Integer.parseInt(v);
        if (n >= 1) {
          return n;
        }
      } catch (NumberFormatException e) {
        // reported below
      }
      throw new IllegalArgumentException(flag + " " + v + ": expected a whole number, 1 or more");
    }

    /** The first executable named name on $PATH, or name itself. */
    private static String onPath(String name) {
      String path = System.getenv("PATH");
      if (path != null) {
        for (String d : path.split(File.pathSeparator)) {
          File f = new File(d, name);
          if (f.canExecute()) {
            return f.getPath();
          }
        }
      }
      return name;
    }
  }
}
