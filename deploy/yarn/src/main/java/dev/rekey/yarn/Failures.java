package dev.rekey.yarn;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Failure markers on shared storage: a task whose rekey child failed in a
 * way a retry would repeat (exit 1 or 2) writes one, named after its phase
 * and index, holding the exit code and the reason. Later attempts of the
 * task fail at once on finding it, and the driver kills the job when one
 * appears. MapReduce has no public way for a task to fail its job without
 * its retries; this is that way.
 */
final class Failures {
  private final Configuration conf;
  private final Path dir;

  Failures(Configuration conf) {
    this.conf = conf;
    this.dir = dir(conf);
  }

  /** The markers' folder under the run's state folder. */
  static Path dir(Configuration conf) {
    return new Path(conf.get(Phase.STATE), ".yarn/failed");
  }

  private Path marker(Phase phase, int index) {
    return new Path(dir, phase.label + "-" + index);
  }

  /** Records task index of phase as failed for good with code. */
  void record(Phase phase, int index, int code, String why) throws IOException {
    FileSystem fs = dir.getFileSystem(conf);
    try (OutputStream out = fs.create(marker(phase, index), true)) {
      out.write((code + " " + why.replace('\n', ' ') + "\n").getBytes(StandardCharsets.UTF_8));
    }
  }

  /** The marker of task index of phase, or null when there is none. */
  String read(Phase phase, int index) throws IOException {
    Path p = marker(phase, index);
    FileSystem fs = p.getFileSystem(conf);
    if (!fs.exists(p)) {
      return null;
    }
    return read(fs, p);
  }

  /** Any marker of phase ("CODE reason"), or null when there is none. */
  String any(Phase phase) throws IOException {
    FileSystem fs = dir.getFileSystem(conf);
    if (!fs.exists(dir)) {
      return null;
    }
    for (FileStatus st : fs.listStatus(dir)) {
      if (st.getPath().getName().startsWith(phase.label + "-")) {
        return read(fs, st.getPath());
      }
    }
    return null;
  }

  /** Removes every marker: a new driver run starts with none. */
  void clear() throws IOException {
    FileSystem fs = dir.getFileSystem(conf);
    fs.delete(dir, true);
  }

  private static String read(FileSystem fs, Path p) throws IOException {
    try (InputStream in = fs.open(p)) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
    }
  }
}
