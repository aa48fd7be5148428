package dev.rekey.testenv;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.FileUtil;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.io.HFileLink;
import org.apache.hadoop.hbase.regionserver.StoreFileInfo;
import org.apache.hadoop.hbase.shaded.protobuf.generated.SnapshotProtos;
import org.apache.hadoop.hbase.snapshot.SnapshotDescriptionUtils;
import org.apache.hadoop.hbase.snapshot.SnapshotReferenceUtil;

/**
 * Copies a snapshot and every store file it references into a local
 * directory laid out like an HBase root dir (.hbase-snapshot/NAME, data/,
 * archive/data/), so HBase and rekey can read it with no cluster. Files are
 * copied from wherever they live now, under data/ or archive/, to the same
 * relative path; a Reference file brings its parent's HFile along.
 */
final class Exporter {
  private Exporter() {}

  static void export(Configuration base, Path root, String name, File destDir) throws IOException {
    Configuration conf = new Configuration(base);
    FileSystem fs = root.getFileSystem(conf);
    root = fs.makeQualified(root);
    conf.set(HConstants.HBASE_DIR, root.toString());
    FileSystem local = FileSystem.getLocal(conf).getRaw();
    Path dest = new Path(destDir.getAbsoluteFile().toURI());
    Path snapDir = SnapshotDescriptionUtils.getCompletedSnapshotDir(name, root);
    if (!fs.exists(snapDir)) {
      throw new IOException("snapshot " + name + " not found at " + snapDir);
    }
    SnapshotProtos.SnapshotDescription desc = SnapshotDescriptionUtils.readSnapshotInfo(fs, snapDir);
    TableName table = TableName.valueOf(desc.getTable());
    Path snapDest = new Path(dest, HConstants.SNAPSHOT_DIR_NAME + "/" + name);
    if (local.exists(snapDest)) {
      throw new IOException(snapDest + " already exists; remove it first");
    }
    FileUtil.copy(fs, snapDir, local, snapDest, false, conf);
    final Path rootF = root;
    final long[] copied = new long[2];
    List<String> missing = new ArrayList<>();
    SnapshotReferenceUtil.visitReferencedFiles(conf, fs, snapDir,
        (RegionInfo region, String family, SnapshotProtos.SnapshotRegionManifest.StoreFile sf) -> {
          String file = sf.getName();
          TableName t = table;
          String reg = region.getEncodedName();
          if (HFileLink.isHFileLink(file)) {
            t = HFileLink.getReferencedTableName(file);
            reg = HFileLink.getReferencedRegionName(file);
            file = HFileLink.getReferencedHFileName(file);
          }
          if (StoreFileInfo.isReference(file)) {
            // The reference itself (HBase rebuilds it from the manifest, but
            // a faithful copy keeps it) and the parent's HFile it points to.
            copyOne(fs, local, rootF, dest, t, reg, family, file, copied, null);
            Path parent = StoreFileInfo.getReferredToFile(new Path("/" + reg + "/" + family + "/" + file));
            String preg = parent.getParent().getParent().getName();
            copyOne(fs, local, rootF, dest, t, preg, family, parent.getName(), copied, missing);
          } else {
            copyOne(fs, local, rootF, dest, t, reg, family, file, copied, missing);
          }
        });
    if (!missing.isEmpty()) {
      throw new IOException("snapshot " + name + ": store files found neither under data/ nor archive/: " + missing);
    }
    System.out.printf("exported snapshot %s of %s: %d store files, %d bytes, to %s%n", name, table, copied[0],
        copied[1], destDir);
  }

  private static void copyOne(FileSystem fs, FileSystem local, Path root, Path dest, TableName t, String region,
      String family, String file, long[] copied, List<String> missing) throws IOException {
    String rel = "data/" + t.getNamespaceAsString() + "/" + t.getQualifierAsString() + "/" + region + "/" + family
        + "/" + file;
    boolean found = false;
    for (String prefix : new String[] {"", HConstants.HFILE_ARCHIVE_DIRECTORY + "/"}) {
      Path src = new Path(root, prefix + rel);
      if (fs.exists(src)) {
        Path dst = new Path(dest, prefix + rel);
        if (!local.exists(dst)) {
          FileUtil.copy(fs, src, local, dst, false, fs.getConf());
          copied[0]++;
          copied[1] += fs.getFileStatus(src).getLen();
        }
        found = true;
        break;
      }
    }
    if (!found && missing != null) {
      missing.add(rel);
    }
  }
}
