package dev.rekey.testenv;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Locale;

import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.KeyValueUtil;

/**
 * The result line of one end-to-end contender: cells read and written,
 * cells refused by the re-key, wall and CPU time of the whole process's
 * work, and its peak resident memory. Printed as one JSON line, a superset
 * of the other bench-* lines (op, cells, bytes, seconds, cells_per_sec,
 * mb_per_sec), so scripts/bench.sh reads both alike.
 */
public final class RunStats {
  private final String op;
  private final long t0 = System.nanoTime();
  private final long cpu0 = cpuNanos();
  /** Cells the contender read from the snapshot. */
  public long read;
  /** KeyValue key length + value length of the cells read. */
  public long bytesRead;
  /** Cells written to the target (put or staged in an HFile and loaded). */
  public long written;
  /** Cells whose keys did not fit the layout (not written). */
  public long rejected;
  /** HFiles staged, for the bulk-load contenders. */
  public long files;

  /** Starts the clock for op. */
  public RunStats(String op) {
    this.op = op;
  }

  /** Counts one cell read. */
  public void read(Cell c) {
    read++;
    bytesRead += KeyValueUtil.keyLength(c) + c.getValueLength();
  }

  /** CPU time of the whole JVM (every thread, JIT and GC included). */
  static long cpuNanos() {
    java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
    if (os instanceof com.sun.management.OperatingSystemMXBean) {
      return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
    }
    return -1;
  }

  /** Peak resident set size of this process in kB (VmHWM), -1 if unknown. */
  static long peakRssKb() {
    try {
      for (String l : Files.readAllLines(Paths.get("/proc/self/status"), StandardCharsets.US_ASCII)) {
        if (l.startsWith("VmHWM:")) {
          return Long.parseLong(l.replaceAll("[^0-9]", ""));
        }
      }
    } catch (IOException | NumberFormatException e) {
      // Not Linux: report unknown rather than a made-up figure.
    }
    return -1;
  }

  /** The JSON line, measured now. */
  public String line() {
    long wallNs = System.nanoTime() - t0;
    long cpu = cpuNanos();
    double s = wallNs / 1e9;
    return String.format(Locale.ROOT,
        "{\"op\":\"%s\",\"cells\":%d,\"bytes\":%d,\"seconds\":%.3f,\"cells_per_sec\":%.0f,\"mb_per_sec\":%.2f,"
            + "\"cells_read\":%d,\"cells_written\":%d,\"rejected\":%d,\"files\":%d,"
            + "\"wall_ms\":%d,\"cpu_ms\":%d,\"peak_rss_kb\":%d}",
        op, read, bytesRead, s, read / s, bytesRead / s / 1e6, read, written, rejected, files,
        wallNs / 1_000_000, cpu < 0 ? -1 : (cpu - cpu0) / 1_000_000, peakRssKb());
  }

  /** Prints the JSON line on stdout. */
  public void print() {
    System.out.println(line());
    System.out.flush();
  }
}
