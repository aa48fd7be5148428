package dev.rekey.testenv.bigtable;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.function.ObjLongConsumer;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.Put;

import com.google.cloud.bigtable.hbase.BigtableConfiguration;
import com.google.cloud.bigtable.hbase.BigtableOptionsFactory;

/**
 * One Put per cell into bigtable-hbase-2.x's BufferedMutator, as the
 * oracle's HBase put contender writes into HBase. The oracle reaches it
 * through java.* types only (ObjLongConsumer, AutoCloseable): it lives in
 * another class loader, with another HBase.
 *
 * <p>A cell arrives as {row, family, qualifier, value} and its timestamp
 * in milliseconds; the client turns it into microseconds, as rekey does.
 */
public final class Writer implements ObjLongConsumer<byte[][]>, AutoCloseable {
  private final Connection conn;
  private final BufferedMutator m;

  /**
   * Connects to PROJECT/INSTANCE (BIGTABLE_EMULATOR_HOST, when set, sends
   * every call to that emulator) and opens a BufferedMutator on TABLE
   * whose requests carry at most BATCH entries (one cell each here) and
   * of which at most INFLIGHT are outstanding at once.
   */
  public Writer(String project, String instance, String table, int batch, int inflight) throws IOException {
    Configuration conf = BigtableConfiguration.configure(project, instance);
    conf.set(BigtableOptionsFactory.BIGTABLE_BULK_MAX_ROW_KEY_COUNT, Integer.toString(batch));
    conf.set(BigtableOptionsFactory.MAX_INFLIGHT_RPCS_KEY, Integer.toString(inflight));
    // No metrics exporter: there is no Cloud Monitoring to send them to,
    // and rekey's side exports none either.
    conf.setBoolean(BigtableOptionsFactory.BIGTABLE_ENABLE_CLIENT_SIDE_METRICS, false);
    conn = BigtableConfiguration.connect(conf);
    m = conn.getBufferedMutator(TableName.valueOf(table));
  }

  @Override
  public void accept(byte[][] c, long ts) {
    Put p = new Put(c[0]);
    p.addColumn(c[1], c[2], ts, c[3]);
    try {
      m.mutate(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Flushes what is buffered, waits for every request, then disconnects. */
  @Override
  public void close() throws IOException {
    try {
      m.flush();
      m.close();
    } finally {
      conn.close();
    }
  }
}
