package dev.rekey.testenv;

import java.io.DataInput;
import java.io.IOException;
import java.util.Map;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellComparator;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.KeyValueUtil;
import org.apache.hadoop.hbase.PrivateCellUtil;
import org.apache.hadoop.hbase.io.hfile.CacheConfig;
import org.apache.hadoop.hbase.io.hfile.FixedFileTrailer;
import org.apache.hadoop.hbase.io.hfile.HFile;
import org.apache.hadoop.hbase.io.hfile.HFileScanner;
import org.apache.hadoop.hbase.regionserver.BloomType;
import org.apache.hadoop.hbase.regionserver.TimeRangeTracker;
import org.apache.hadoop.hbase.util.BloomFilter;
import org.apache.hadoop.hbase.util.BloomFilterFactory;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * check-hfile: reads an HFile with HBase's own reader and checks what a
 * bulk load and later reads rely on; any failure is an IOException naming
 * the file and the cell. Output, per file: '#' lines of facts (trailer,
 * file context, bounds, every file info entry in hex), then every cell in
 * the canonical dump format.
 */
final class CheckHFile {
  private CheckHFile() {}

  /** Every SEEK_EVERY-th cell is also found again by a seek through the block index. */
  private static final int SEEK_EVERY = 97;

  /** The first BLOOM_CHECK_ALL cells are all looked up in the bloom filter, later ones sampled. */
  private static final int BLOOM_CHECK_ALL = 20000;

  static void check(Configuration conf, Path p, Dump d, boolean tags) throws IOException {
    FileSystem fs = p.getFileSystem(conf);
    try (HFile.Reader r = HFile.createReader(fs, p, CacheConfig.DISABLED, true, conf)) {
      FixedFileTrailer t = r.getTrailer();
      Map<String, byte[]> info = new TreeMap<>();
      for (Map.Entry<byte[], byte[]> e : r.getHFileInfo().entrySet()) {
        info.put(Bytes.toString(e.getKey()), e.getValue());
      }
      d.line("# file " + p);
      d.line("# version " + t.getMajorVersion() + "." + t.getMinorVersion());
      d.line("# entries " + r.getEntries());
      d.line("# index_levels " + t.getNumDataIndexLevels());
      d.line("# comparator " + t.getComparatorClassName());
      d.line("# encoding " + r.getDataBlockEncoding());
      d.line("# codec " + r.getFileContext().getCompression());
      d.line("# includes_tags " + r.getFileContext().isIncludesTags());
      d.line("# includes_mvcc " + r.getFileContext().isIncludesMvcc());
      d.line("# first_row " + r.getFirstRowKey().map(Bytes::toHex).orElse("-"));
      d.line("# last_row " + r.getLastRowKey().map(Bytes::toHex).orElse("-"));
      for (Map.Entry<String, byte[]> e : info.entrySet()) {
        d.line("# info " + e.getKey() + " " + Bytes.toHex(e.getValue()));
      }

      // A bulk load reads these; HBase's reader needs the averages.
      for (String k : new String[] {"hfile.LASTKEY", "hfile.AVG_KEY_LEN", "hfile.AVG_VALUE_LEN"}) {
        if (r.getEntries() > 0 && !info.containsKey(k)) {
          throw new IOException(p + ": file info lacks " + k);
        }
      }
      TimeRangeTracker trt = info.containsKey("TIMERANGE")
          ? TimeRangeTracker.parseFrom(info.get("TIMERANGE")) : null;

      BloomType bloomType = info.containsKey("BLOOM_FILTER_TYPE")
          ? BloomType.valueOf(Bytes.toString(info.get("BLOOM_FILTER_TYPE"))) : BloomType.NONE;
      BloomFilter bloom = null;
      DataInput bloomMeta = r.getGeneralBloomFilterMetadata();
      if (bloomType != BloomType.NONE) {
        if (bloomMeta == null) {
          throw new IOException(p + ": BLOOM_FILTER_TYPE is " + bloomType + " but there is no bloom meta block");
        }
        if (bloomType == BloomType.ROWCOL && !info.containsKey("LAST_BLOOM_KEY")) {
          throw new IOException(p + ": ROWCOL bloom without LAST_BLOOM_KEY");
        }
        bloom = BloomFilterFactory.createFromMeta(bloomMeta, r);
      }
      d.line("# bloom " + bloomType);
      if (r.getEntries() > 0) {
        // The split point HBase would pick; it reads the mid-key metadata
        // of multi-level indexes.
        d.line("# midkey_row " + r.midKey().map(c -> Bytes.toHex(CellUtil.cloneRow(c))).orElse("-"));
      }

      CellComparator cmp = r.getComparator();
      HFileScanner s = r.getScanner(conf, false, false);
      HFileScanner seeker = r.getScanner(conf, false, true);
      Cell prev = null;
      Cell first = null;
      long n = 0;
      byte[] family = null;
      if (s.seekTo()) {
        do {
          Cell c = s.getCell();
          if (prev != null && PrivateCellUtil.compareKeyIgnoresMvcc(cmp, prev, c) > 0) {
            throw new IOException(p + ": cell " + n + " " + c + " sorts before the previous cell " + prev);
          }
          if (family == null) {
            family = CellUtil.cloneFamily(c);
          } else if (!CellUtil.matchingFamily(c, family)) {
            throw new IOException(p + ": cell " + n + " " + c + " has another family than the first cell's "
                + Bytes.toString(family));
          }
          if (trt != null && (c.getTimestamp() < trt.getMin() || c.getTimestamp() > trt.getMax())) {
            throw new IOException(p + ": cell " + n + " " + c + " lies outside TIMERANGE [" + trt.getMin() + ", "
                + trt.getMax() + "]");
          }
          // Without a block cache every lookup reads its bloom chunk from
          // the file: check every cell of small files, a sample of big ones.
          if (bloom != null && (n < BLOOM_CHECK_ALL || n % SEEK_EVERY == 0)) {
            boolean in = bloomType == BloomType.ROW
                ? bloom.contains(c.getRowArray(), c.getRowOffset(), c.getRowLength(), null)
                : bloom.contains(PrivateCellUtil.createFirstOnRowCol(c), null, BloomType.ROWCOL);
            if (!in) {
              throw new IOException(p + ": cell " + n + " " + c + " is not in the " + bloomType + " bloom filter");
            }
          }
          d.cell(c, tags);
          if (n % SEEK_EVERY == 0) {
            // Index keys carry no sequence id; the comparator orders by it.
            KeyValue key = KeyValueUtil.copyToNewKeyValue(c);
            key.setSequenceId(0);
            if (seeker.seekTo(key) != 0 || PrivateCellUtil.compareKeyIgnoresMvcc(cmp, seeker.getCell(), key) != 0) {
              throw new IOException(p + ": seeking cell " + n + " " + c + " through the block index found "
                  + seeker.getCell());
            }
          }
          prev = KeyValueUtil.copyToNewKeyValue(c);
          if (first == null) {
            first = prev;
          }
          n++;
        } while (s.next());
      }
      s.close();
      seeker.close();
      if (n != r.getEntries()) {
        throw new IOException(p + ": scanned " + n + " cells but the trailer says " + r.getEntries());
      }
      if (n > 0) {
        if (PrivateCellUtil.compareKeyIgnoresMvcc(cmp, r.getFirstKey().get(), first) != 0) {
          throw new IOException(p + ": first key " + r.getFirstKey().get() + " is not the first cell " + first);
        }
        if (PrivateCellUtil.compareKeyIgnoresMvcc(cmp, r.getLastKey().get(), prev) != 0) {
          throw new IOException(p + ": LASTKEY " + r.getLastKey().get() + " is not the last cell " + prev);
        }
      }
      d.line("# checked " + n + " cells ok");
    }
  }
}
