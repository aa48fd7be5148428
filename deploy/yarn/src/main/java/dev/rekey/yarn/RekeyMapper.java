package dev.rekey.yarn;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * One map task: runs the rekey binary for its shard or part, streams the
 * child's progress into the task's status and counters, and turns its
 * exit code into the task's result.
 *
 * <p>Exit 0 is success. Exit 2 (a usage error) and 1 (damaged input or
 * failed checks) would fail the same way on every attempt: the task writes
 * a failure marker on shared storage, every later attempt of the task
 * fails at once on seeing it, and the driver kills the job when it sees
 * it, so no retries are burnt on them. Any other exit (3: interrupted, a
 * signal such as SIGKILL, a lost lease, a cluster error) fails the attempt
 * for MapReduce to retry; the retry resumes from the task's checkpoint.
 */
public final class RekeyMapper extends Mapper<IntWritable, NullWritable, NullWritable, NullWritable> {
  /** How often the task tells MapReduce it is alive while the child runs. */
  private static final long HEARTBEAT_SECONDS = 10;

  /** The child's last stderr line that was not progress: the failure message's reason. */
  private volatile String lastError = "";

  @Override
  public void run(Context ctx) throws IOException, InterruptedException {
    if (!ctx.nextKeyValue()) {
      throw new IOException("no task index in the split");
    }
    Configuration conf = ctx.getConfiguration();
    Phase phase = Phase.of(conf);
    int index = ctx.getCurrentKey().get();
    int count = conf.getInt(TaskInputFormat.TASKS, 0);
    int attempt = ctx.getTaskAttemptID().getId();
    Failures failures = new Failures(conf);
    String earlier = failures.read(phase, index);
    if (earlier != null) {
      throw new IOException("not retried: an earlier attempt of this task failed for good (" + earlier + ")");
    }
    List<String> cmd = phase.command(conf, index, count, attempt);
    System.err.println("rekey-yarn: attempt " + attempt + ": " + String.join(" ", cmd));
    new File(Phase.BINARY).setExecutable(true);
    int code = runChild(ctx, cmd);
    if (code == 0) {
      return;
    }
    String why = "rekey exited " + code + describe(code) + ": " + lastError;
    if (code == 1 || code == 2) {
      failures.record(phase, index, code, why);
      throw new IOException("failed for good, not retried: " + why);
    }
    throw new IOException("failed; MapReduce retries the attempt: " + why);
  }

  /** Starts the child, streams its output, and returns its exit code. */
  private int runChild(Context ctx, List<String> cmd) throws IOException, InterruptedException {
    ProcessBuilder pb = new ProcessBuilder(cmd);
    Map<String, String> env = pb.environment();
    // rekey's HDFS client takes the user from here; with simple
    // authentication the job's user is who the files belong to.
    env.putIfAbsent("HADOOP_USER_NAME", UserGroupInformation.getCurrentUser().getShortUserName());
    // The driver's hbase-site.xml, linked into the working folder, unless
    // the node gives its own: rekey finds a kerberized HBase's settings
    // there. (The token file comes with the container's environment,
    // HADOOP_TOKEN_FILE_LOCATION, which the child inherits.)
    File site = new File(Phase.HBASE_SITE);
    if (site.isFile() && !env.containsKey("HBASE_CONF_DIR")) {
      env.put("HBASE_CONF_DIR", site.getAbsoluteFile().getParent());
    }
    Process p = pb.start();
    // If the container is stopped, SIGTERM the child: rekey then lets its
    // in-flight writes land and writes its checkpoint.
    Thread hook = new Thread(p::destroy);
    Runtime.getRuntime().addShutdownHook(hook);
    Progress progress = new Progress();
    String[] summary = {""};
    Thread err = pump(p.getErrorStream(), line -> {
      System.err.println(line);
      if (Progress.isProgress(line)) {
        ctx.setStatus(line);
        add(ctx, progress.fromProgress(line));
      } else if (!line.isBlank()) {
        lastError = line;
      }
    });
    Thread out = pump(p.getInputStream(), line -> {
      System.out.println(line);
      if (line.startsWith("{")) {
        summary[0] = line;
      }
    });
    while (!p.waitFor(HEARTBEAT_SECONDS, TimeUnit.SECONDS)) {
      ctx.progress();
    }
    err.join();
    out.join();
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException shuttingDown) {
      // The JVM is stopping; the hook runs anyway and finds the child gone.
    }
    if (!summary[0].isEmpty()) {
      add(ctx, progress.fromSummary(Phase.of(ctx.getConfiguration()), summary[0]));
      ctx.setStatus("rekey exited " + p.exitValue() + "; summary: " + summary[0]);
    }
    return p.exitValue();
  }

  /** Adds growth to the job's counters in the rekey group. */
  private static void add(Context ctx, Map<String, Long> growth) {
    for (Map.Entry<String, Long> e : growth.entrySet()) {
      ctx.getCounter(Progress.GROUP, e.getKey()).increment(e.getValue());
    }
  }

  /** Copies each line of in to sink on a daemon thread. */
  private static Thread pump(InputStream in, Consumer<String> sink) {
    Thread t = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          sink.accept(line);
        }
      } catch (IOException e) {
        // The child's pipe closed; waitFor tells how it ended.
      }
    });
    t.setDaemon(true);
    t.start();
    return t;
  }

  /** Names a Unix signal in an exit code above 128. */
  private static String describe(int code) {
    return code > 128 ? " (killed by signal " + (code - 128) + ")" : "";
  }
}
