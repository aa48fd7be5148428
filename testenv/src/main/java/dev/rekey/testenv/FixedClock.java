package dev.rekey.testenv;

import org.apache.hadoop.hbase.util.EnvironmentEdge;
import org.apache.hadoop.hbase.util.EnvironmentEdgeManager;

/**
 * Sets HBase's clock (EnvironmentEdgeManager) in this JVM to a fixed
 * instant until closed, so the store scanners TableSnapshotScanner opens
 * measure TTLs (family TTL and per-cell TTL tags) from it: the oracle's
 * side of rekey's ScanOptions.Now. The clock does not move while it is
 * set; nothing a snapshot scan does waits on HBase's clock passing.
 */
final class FixedClock implements EnvironmentEdge, AutoCloseable {
  private final long now;

  private FixedClock(long now) {
    this.now = now;
  }

  /** Sets the clock to now (epoch ms); 0 leaves the real clock. */
  static FixedClock at(long now) {
    FixedClock c = new FixedClock(now);
    if (now != 0) {
      EnvironmentEdgeManager.injectEdge(c);
    }
    return c;
  }

  @Override
  public long currentTime() {
    return now;
  }

  @Override
  public void close() {
    if (now != 0) {
      EnvironmentEdgeManager.reset();
    }
  }
}
