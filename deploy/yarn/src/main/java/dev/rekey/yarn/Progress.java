package dev.rekey.yarn;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a rekey child has reported so far, from its --progress log lines
 * (stderr, every few seconds) and its --json summary (the last line of
 * stdout). Values are cumulative within one attempt; the mapper adds the
 * growth since the last line to its counters, so the job's counters sum
 * the tasks' work.
 */
final class Progress {
  /** The counter group in the job's counters. */
  static final String GROUP = "rekey";

  // rekey: progress: splits 3/10 (2 running), 1234 cells read, 1200 written, ...
  private static final Pattern LINE = Pattern.compile(
      "progress: splits (\\d+)/(\\d+) \\((\\d+) running\\), (\\d+) cells read, (\\d+) written");
  // The totals of a run's or spill shard's summary (top-level fields,
  // which the encoder writes before its nested objects, save the memory
  // budget, whose names differ), and of a merge or load task's stats (the
  // collisions of the merge parts add up to the job's: each target
  // partition is merged by one part).
  private static final Map<String, Pattern> RUN = patterns("splits_done", "cells_read", "cells_written", "cells_rejected",
      "cells_collided", "cells_failed", "bytes_written");
  private static final Map<String, Pattern> TASK = patterns("hfiles", "hfile_bytes", "duplicates", "collisions", "merge_passes",
      "regions_loaded", "files_resplit");

  private static Map<String, Pattern> patterns(String... fields) {
    Map<String, Pattern> m = new LinkedHashMap<>();
    for (String f : fields) {
      m.put(f, Pattern.compile("\"" + f + "\":(\\d+)"));
    }
    return m;
  }

  private final Map<String, Long> seen = new LinkedHashMap<>();

  /** Whether line is a progress line. */
  static boolean isProgress(String line) {
    return LINE.matcher(line).find();
  }

  /**
   * Reads one progress line and returns each counter's growth since the
   * last line, by name; empty when line is no progress line.
   */
  Map<String, Long> fromProgress(String line) {
    Map<String, Long> out = new LinkedHashMap<>();
    Matcher m = LINE.matcher(line);
    if (m.find()) {
      grow(out, "splits_done", Long.parseLong(m.group(1)));
      grow(out, "cells_read", Long.parseLong(m.group(4)));
      grow(out, "cells_written", Long.parseLong(m.group(5)));
    }
    return out;
  }

  /**
   * Reads the JSON summary line of a task of phase and returns each
   * counter's growth to its final value.
   */
  Map<String, Long> fromSummary(Phase phase, String json) {
    Map<String, Long> out = new LinkedHashMap<>();
    Map<String, Pattern> fields = phase == Phase.MERGE || phase == Phase.LOAD ? TASK : RUN;
    for (Map.Entry<String, Pattern> e : fields.entrySet()) {
      Matcher m = e.getValue().matcher(json);
      if (m.find()) {
        grow(out, e.getKey(), Long.parseLong(m.group(1)));
      }
    }
    return out;
  }

  private void grow(Map<String, Long> out, String name, long now) {
    long before = seen.getOrDefault(name, 0L);
    if (now > before) {
      out.put(name, now - before);
      seen.put(name, now);
    }
  }
}
