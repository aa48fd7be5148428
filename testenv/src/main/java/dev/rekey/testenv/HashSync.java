package dev.rekey.testenv;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.mapreduce.HashTable;
import org.apache.hadoop.hbase.mapreduce.SyncTable;
import org.apache.hadoop.mapreduce.Counter;
import org.apache.hadoop.mapreduce.CounterGroup;
import org.apache.hadoop.mapreduce.Counters;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.util.Tool;
import org.apache.hadoop.util.ToolRunner;

/**
 * HBase's own table comparison, HashTable then SyncTable, run as a user
 * runs them (`hbase org.apache.hadoop.hbase.mapreduce.HashTable ...`): the
 * tools' own main logic (ToolRunner, their own option parsing) submitting
 * MapReduce jobs to the mini cluster's MapReduce on YARN (the control
 * command yarn-start). The only thing added is a handle on the submitted
 * job, so its counters can be printed: HashTable keeps none, and SyncTable
 * keeps them in a field it does not publish.
 *
 * <p>What is measured: the wall time from the tool's start to its return,
 * this JVM's CPU (the client: job set-up, HashTable's partition file, the
 * poll loop, and the JVM's own start), and the tasks' CPU as MapReduce
 * counts it (TaskCounter.CPU_MILLISECONDS, every map and reduce attempt).
 * The ApplicationMaster's CPU is in no counter; a caller that wants it
 * reads the cluster process's reaped children (every container is one).
 */
final class HashSync {
  private HashSync() {}

  /** The task JVMs' heap: a container of TASK_MB leaves room for the rest. */
  private static final String TASK_HEAP = "-Xmx512m";
  private static final int TASK_MB = 768;

  /** A tool with the job its run() submitted. */
  interface Captured {
    Job job();
  }

  /** HashTable that keeps the job it submits. */
  static final class CapturedHashTable extends HashTable implements Captured {
    private Job job;

    CapturedHashTable(Configuration conf) {
      super(conf);
    }

    @Override
    public Job createSubmittableJob(String[] args) throws java.io.IOException {
      job = super.createSubmittableJob(args);
      return job;
    }

    @Override
    public Job job() {
      return job;
    }
  }

  /** SyncTable that keeps the job it submits. */
  static final class CapturedSyncTable extends SyncTable implements Captured {
    private Job job;

    CapturedSyncTable(Configuration conf) {
      super(conf);
    }

    @Override
    public Job createSubmittableJob(String[] args) throws java.io.IOException {
      job = super.createSubmittableJob(args);
      return job;
    }

    @Override
    public Job job() {
      return job;
    }
  }

  /**
   * Runs HashTable (tool "hash-table") or SyncTable ("sync-table") with
   * args, the tool's own command line, and prints one JSON line: the
   * tool, its exit status, the job's id, wall and CPU figures, and the
   * job's counters by group (SyncTable's own group as "counters").
   */
  static void run(String tool, String statePath, String[] args) throws Exception {
    long t0 = System.nanoTime();
    Configuration conf = jobConf(statePath);
    Tool t;
    if (tool.equals("hash-table")) {
      t = new CapturedHashTable(conf);
    } else {
      t = new CapturedSyncTable(conf);
    }
    int rc = ToolRunner.run(conf, t, args);
    long wallMs = (System.nanoTime() - t0) / 1_000_000;
    Job job = ((Captured) t).job();
    if (rc != 0 || job == null) {
      throw new IllegalStateException(tool + " exited " + rc + (job == null ? " before submitting a job" : ", job " + job.getJobID()));
    }
    // Fetched while the ApplicationMaster still answers: with no history
    // server (testenv runs none) a finished job's counters come from it.
    Counters counters = job.getCounters();
    if (counters == null || counters.countCounters() == 0) {
      throw new IllegalStateException(tool + ": job " + job.getJobID() + " finished but its counters could not be read");
    }
    long tasksCpu = counters.findCounter(org.apache.hadoop.mapreduce.TaskCounter.CPU_MILLISECONDS).getValue();
    long clientCpu = processCpuMs();
    StringBuilder b = new StringBuilder();
    b.append(String.format(Locale.ROOT,
        "{\"tool\":\"%s\",\"job_id\":\"%s\",\"wall_ms\":%d,\"client_cpu_ms\":%d,\"tasks_cpu_ms\":%d,\"cpu_ms\":%d",
        tool.equals("hash-table") ? "HashTable" : "SyncTable", job.getJobID(), wallMs, clientCpu, tasksCpu, clientCpu + tasksCpu));
    String own = SyncTable.SyncMapper.Counter.class.getName();
    Map<String, Map<String, Long>> groups = new TreeMap<>();
    for (CounterGroup g : counters) {
      Map<String, Long> m = new TreeMap<>();
      for (Counter c : g) {
        m.put(c.getName(), c.getValue());
      }
      groups.put(g.getName().equals(own) ? "counters" : g.getName(), m);
    }
    if (!groups.containsKey("counters")) {
      groups.put("counters", new TreeMap<>());
    }
    for (Map.Entry<String, Map<String, Long>> g : groups.entrySet()) {
      b.append(",\"").append(g.getKey()).append("\":{");
      List<String> kv = new ArrayList<>();
      for (Map.Entry<String, Long> c : g.getValue().entrySet()) {
        kv.add("\"" + c.getKey() + "\":" + c.getValue());
      }
      b.append(String.join(",", kv)).append('}');
    }
    b.append('}');
    System.out.println(b);
  }

  /**
   * The job configuration: the mini cluster's YARN client configuration
   * (resource manager, fs.defaultFS) under HBase's client settings for the
   * cluster in state.json, with task JVMs that can run HBase's client on
   * this Java, and settings a fair measurement needs.
   */
  static Configuration jobConf(String statePath) throws Exception {
    Configuration conf = Conf.client(statePath);
    String yarnConf = yarnStart(statePath);
    // Values set on conf (the HBase client's) stay over the resource's.
    conf.addResource(new Path(Paths.get(yarnConf).toUri()));
    String opts = TASK_HEAP + " " + String.join(" ", jdkOpens());
    conf.set("mapreduce.map.java.opts", opts);
    conf.set("mapreduce.reduce.java.opts", opts);
    conf.setInt("mapreduce.map.memory.mb", TASK_MB);
    conf.setInt("mapreduce.reduce.memory.mb", TASK_MB);
    // The client polls for the job's end every 5 s by default, which
    // rounds each job's wall time up to 5 s (docs/baselines.md).
    conf.setInt("mapreduce.client.completion.pollinterval", 100);
    conf.setInt("mapreduce.client.progressmonitor.pollinterval", 100);
    // A speculative attempt would redo a task's scan on the same two
    // cores: work a measurement should not charge the tools with.
    conf.setBoolean("mapreduce.map.speculative", false);
    conf.setBoolean("mapreduce.reduce.speculative", false);
    return conf;
  }

  /**
   * The --add-opens (and netty) options this JVM was started with
   * (testenv/bin/lib.sh's JVM_OPENS, as HBase's launcher passes them):
   * the task JVMs run the same HBase client on the same Java.
   */
  private static List<String> jdkOpens() {
    List<String> out = new ArrayList<>();
    for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
      if (a.startsWith("--add-opens") || a.startsWith("--add-exports") || a.startsWith("-XX:+IgnoreUnrecognizedVMOptions")
          || a.startsWith("-Dorg.apache.hbase.thirdparty.io.netty") || a.startsWith("-Djava.net.preferIPv4Stack")) {
        out.add(a);
      }
    }
    return out;
  }

  /**
   * Asks the cluster process to start MapReduce on YARN (a no-op when it
   * runs) and returns its client configuration file.
   */
  private static String yarnStart(String statePath) throws Exception {
    Object port = Conf.state(Paths.get(statePath)).get("control_port");
    if (port == null) {
      throw new IllegalStateException(statePath + " names no control_port");
    }
    try (Socket s = new Socket(InetAddress.getLoopbackAddress(), ((Number) port).intValue());
        Writer w = new OutputStreamWriter(s.getOutputStream(), StandardCharsets.UTF_8);
        BufferedReader r = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8))) {
      w.write("yarn-start\n");
      w.flush();
      String line = r.readLine();
      if (line == null || !line.startsWith("ok ")) {
        throw new IllegalStateException("control channel yarn-start: " + line);
      }
      return line.substring(3).trim();
    }
  }

  /** This JVM's CPU time so far, user and system. */
  private static long processCpuMs() {
    java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
    if (os instanceof com.sun.management.OperatingSystemMXBean) {
      return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1_000_000;
    }
    return -1;
  }
}
