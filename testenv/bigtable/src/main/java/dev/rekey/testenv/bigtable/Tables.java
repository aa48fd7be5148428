package dev.rekey.testenv.bigtable;

import java.io.IOException;
import java.util.function.ObjLongConsumer;

import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;

import com.google.cloud.bigtable.hbase.BigtableConfiguration;

/**
 * The bench's set-up and judge on the Bigtable side, with Google's client
 * and neither contender's code: the target table made before a contender
 * starts (outside its time), and every cell of it read back afterwards.
 */
public final class Tables {
  private Tables() {}

  /**
   * Creates TABLE with one family that keeps every version (the HBase
   * contenders' targets keep 3 versions; no cell here has more than 2).
   */
  public static void create(String project, String instance, String table, String family) throws IOException {
    try (Connection conn = BigtableConfiguration.connect(project, instance); Admin admin = conn.getAdmin()) {
      admin.createTable(TableDescriptorBuilder.newBuilder(TableName.valueOf(table))
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(family.getBytes(java.nio.charset.StandardCharsets.UTF_8))
              .setMaxVersions(Integer.MAX_VALUE).build())
          .build());
    }
  }

  /** Deletes TABLE, so the in-memory emulator gives its memory back. */
  public static void drop(String project, String instance, String table) throws IOException {
    try (Connection conn = BigtableConfiguration.connect(project, instance); Admin admin = conn.getAdmin()) {
      admin.deleteTable(TableName.valueOf(table));
    }
  }

  /**
   * Hands every version of every cell of TABLE to sink as {row, family,
   * qualifier, value} and its timestamp in milliseconds (the client
   * divides Bigtable's microseconds by 1000).
   */
  public static void scan(String project, String instance, String table, ObjLongConsumer<byte[][]> sink)
      throws IOException {
    try (Connection conn = BigtableConfiguration.connect(project, instance);
        Table t = conn.getTable(TableName.valueOf(table));
        ResultScanner rs = t.getScanner(new Scan().readAllVersions())) {
      for (Result r; (r = rs.next()) != null;) {
        for (Cell c : r.rawCells()) {
          sink.accept(new byte[][] {CellUtil.cloneRow(c), CellUtil.cloneFamily(c), CellUtil.cloneQualifier(c),
              CellUtil.cloneValue(c)}, c.getTimestamp());
        }
      }
    }
  }
}
