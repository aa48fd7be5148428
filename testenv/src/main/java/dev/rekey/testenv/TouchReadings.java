package dev.rekey.testenv;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * `touch-readings`: the day's changes of the catch-up bench, made by
 * HBase's client on a table the `readings` seed step wrote. A seeded
 * random share of the sensors (rows) each get, on their first columns as
 * a Get with a per-family limit finds them: two newer versions of one
 * reading (pushing its oldest version past a family's VERSIONS of 3), a
 * new reading, every version of another reading deleted, and the newest
 * version of a third deleted (bringing its older one back). It prints
 * the sensors changed and the mutations sent; the caller flushes and
 * snapshots.
 */
final class TouchReadings {
  private TouchReadings() {}

  static void run(Connection conn, TableName tn, String family, int sensors, String format,
      double share, long seed) throws IOException {
    byte[] f = Bytes.toBytes(family);
    Random rnd = new Random(seed);
    long rows = 0, mutations = 0;
    List<Mutation> batch = new ArrayList<>();
    try (Table table = conn.getTable(tn); BufferedMutator m = conn.getBufferedMutator(tn)) {
      for (int i = 0; i < sensors; i++) {
        if (rnd.nextDouble() >= share) {
          continue;
        }
        byte[] row = Bytes.toBytes(String.format(format, i));
        Get g = new Get(row).addFamily(f).readVersions(3).setMaxResultsPerColumnFamily(9);
        Result r = table.get(g);
        List<byte[]> quals = new ArrayList<>();
        List<Long> newest = new ArrayList<>();
        for (Cell c : r.rawCells()) {
          byte[] q = CellUtil.cloneQualifier(c);
          if (quals.isEmpty() || !Bytes.equals(quals.get(quals.size() - 1), q)) {
            quals.add(q);
            newest.add(c.getTimestamp());
          }
        }
        if (quals.size() < 3) {
          continue; // a sensor whose readings were deleted by the seed
        }
        rows++;
        long t0 = newest.get(0);
        Put p = new Put(row);
        p.addColumn(f, quals.get(0), t0 + 7, Bytes.toBytes("newer-a-" + i));
        p.addColumn(f, quals.get(0), t0 + 8, Bytes.toBytes("newer-b-" + i));
        // A new reading a millisecond after the first one found (the seed
        // draws reading times far apart), written at that time.
        byte[] q0 = quals.get(0);
        long fresh = (q0.length == Bytes.SIZEOF_LONG ? Bytes.toLong(q0) : t0) + 1;
        p.addColumn(f, Bytes.toBytes(fresh), fresh, Bytes.toBytes("new-" + i));
        batch.add(p);
        batch.add(new Delete(row).addColumns(f, quals.get(1)));
        batch.add(new Delete(row).addColumn(f, quals.get(2), newest.get(2)));
        mutations += 3;
        if (batch.size() >= 3000) {
          m.mutate(batch);
          batch.clear();
        }
      }
      m.mutate(batch);
    }
    System.out.printf("{\"sensors_changed\": %d, \"mutations\": %d}%n", rows, mutations);
  }
}
