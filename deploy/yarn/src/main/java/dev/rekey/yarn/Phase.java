package dev.rekey.yarn;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.hadoop.conf.Configuration;

/**
 * One MapReduce job of a rekey run, and the command line each of its map
 * tasks gives the rekey binary. The flags are rekey's CLI contract: run
 * --shard I/N (the puts sink: a shard's whole work), run --phase spill
 * --shard I/N, run --phase merge --part J/R, and load. A merge part takes
 * the run's flags and uses those that concern it (--memory, --workers,
 * --force-takeover); the load takes only its own.
 */
enum Phase {
  /** Puts sink: each shard reads, re-keys and writes its splits; no merge. */
  RUN("run"),
  /** hfiles sink, step 1: each shard spills sorted runs into the staging folder. */
  SPILL("spill"),
  /** hfiles sink, step 2: each part merges every shard's runs into HFiles. */
  MERGE("merge"),
  /** hfiles sink, step 3: one task bulk-loads the finished HFiles. */
  LOAD("load");

  /** Configuration keys the driver sets and the tasks read. */
  static final String KEY = "rekey.phase";
  static final String STATE = "rekey.state";
  static final String RESUME = "rekey.resume";
  static final String MEMORY_MIB = "rekey.memory.mib";
  static final String EXTRA = "rekey.args";

  /** The names the binary and job file get in each task's working folder (distributed cache links). */
  static final String BINARY = "rekey";
  static final String JOB_FILE = "job.yaml";
  /** HBase's client configuration, when the driver ships one (its folder becomes the child's HBASE_CONF_DIR). */
  static final String HBASE_SITE = "hbase-site.xml";

  final String label;

  Phase(String label) {
    this.label = label;
  }

  /** The phase the configuration names. */
  static Phase of(Configuration conf) {
    return valueOf(conf.get(KEY));
  }

  /**
   * The rekey command line of task index of count, attempt (0 for the
   * first). A retry resumes from the task's checkpoint and takes over the
   * HDFS lease at once: the failed attempt's container is dead, and its
   * lease would refuse the retry for a minute.
   */
  List<String> command(Configuration conf, int index, int count, int attempt) {
    String state = conf.get(STATE);
    List<String> a = new ArrayList<>(List.of("./" + BINARY));
    if (this == LOAD) {
      a.addAll(List.of("load", JOB_FILE, "--staging", state + "/staging", "--json"));
      if (attempt > 0) {
        a.add("--force-takeover");
      }
      return a;
    }
    a.addAll(List.of("run", JOB_FILE, "--checkpoint", state + "/checkpoint.json"));
    switch (this) {
      case RUN:
        a.addAll(List.of("--shard", index + "/" + count));
        break;
      case SPILL:
        a.addAll(List.of("--phase", "spill", "--shard", index + "/" + count, "--staging", state + "/staging"));
        break;
      case MERGE:
        a.addAll(List.of("--phase", "merge", "--part", index + "/" + count, "--staging", state + "/staging"));
        break;
      default:
        throw new IllegalStateException("no command for " + this);
    }
    if (attempt > 0 || conf.getBoolean(RESUME, false)) {
      a.add("--resume");
    }
    if (attempt > 0) {
      a.add("--force-takeover");
    }
    int mib = conf.getInt(MEMORY_MIB, 0);
    if (mib > 0) {
      a.addAll(List.of("--memory", mib + "MiB"));
    }
    a.addAll(List.of("--progress", "log", "--json"));
    String extra = conf.get(EXTRA, "");
    if (!extra.isEmpty()) {
      a.addAll(Arrays.asList(extra.split("\n")));
    }
    return a;
  }
}
