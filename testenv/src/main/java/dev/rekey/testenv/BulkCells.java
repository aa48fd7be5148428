package dev.rekey.testenv;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;

/**
 * The seed step `bulk_cells`: the cells of a dump file (tags column
 * optional, delete markers allowed) written with HBase's StoreFileWriter
 * into one HFile per region and family, with the family's encoding,
 * compression and COMPRESS_TAGS, then loaded with BulkLoadHFiles, which
 * gives each file a new sequence id (its `_SeqId_N_` name). This is how
 * a test gets cells with tags into a table (a client's tags are the
 * server's to keep or drop) and store files whose cells take their
 * file's sequence id.
 */
final class BulkCells {
  private final Connection conn;
  private final TableName tn;

  BulkCells(Connection conn, TableName tn) {
    this.conn = conn;
    this.tn = tn;
  }

  void load(String file) throws IOException {
    if (file == null) {
      throw new IllegalArgumentException("bulk_cells needs \"file\"");
    }
    Configuration conf = conn.getConfiguration();
    FileSystem fs = FileSystem.get(conf);
    Path staging = fs.makeQualified(new Path("/tmp/rekey-seed-bulk-" + UUID.randomUUID()));
    try (Admin admin = conn.getAdmin(); RegionLocator rl = conn.getRegionLocator(tn)) {
      RunStats st = new RunStats("seed-bulk");
      E2E.Runs runs = new E2E.Runs(conf, fs, staging, admin.getDescriptor(tn), rl.getStartKeys(), st);
      runs.compressTags = true;
      int n = 0;
      for (String line : Files.readAllLines(Paths.get(file), StandardCharsets.UTF_8)) {
        n++;
        if (!line.isEmpty()) {
          runs.add(Seed.dumpLine(line, file + ":" + n));
        }
      }
      runs.flush();
      if (st.files == 0) {
        throw new IOException(file + ": no cells to bulk load");
      }
      if (BulkLoadHFiles.create(conf).bulkLoad(tn, staging).isEmpty()) {
        throw new IOException("bulk load of " + file + " into " + tn + " loaded nothing");
      }
    } finally {
      fs.delete(staging, true);
    }
  }
}
