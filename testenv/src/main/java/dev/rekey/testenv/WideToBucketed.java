package dev.rekey.testenv;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.List;

import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.PrivateCellUtil;
import org.apache.hadoop.hbase.Tag;

/**
 * The wide -> bucketed re-key of configs/wide_to_bucketed.yaml, written in
 * Java from the layout spec (configs/README.md, transform/doc.go) for the
 * Java and Spark contenders of the end-to-end bench:
 *
 * <pre>
 *   old row       = sensor (string, the whole row)
 *   old qualifier = ts (int, 8 bytes, two's complement; exactly 8 bytes)
 *   new row       = sensor, 0x00, hour of ts as ISO text "yyyy-MM-ddTHH" (UTC)
 *   new qualifier = ts - start of its hour, 4 bytes big-endian
 * </pre>
 *
 * Family, timestamp, type, value and tags are copied. A cell whose key does
 * not fit is refused: a qualifier that is not 8 bytes, a sensor containing
 * 0x00 (the separator, no escaping), ts below 0 or in year 10000 or later.
 * Not safe for concurrent use (it caches the last hour's text).
 */
public final class WideToBucketed implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final long HOUR_MS = 3_600_000L;
  /** 10000-01-01T00:00:00Z in ms: the first hour whose text needs five year digits. */
  private static final long ISO_MAX = 253_402_300_800_000L;
  private static final DateTimeFormatter HOUR =
      DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH").withZone(ZoneOffset.UTC);

  private transient long lastStart = -1;
  private transient byte[] lastText;
  private String reason;

  /** Why the last call to apply returned null. */
  public String reason() {
    return reason;
  }

  /**
   * Returns the re-keyed cell, or null when src's key does not fit the old
   * layout or its fields cannot be written in the new one (see reason()).
   */
  public KeyValue apply(Cell src) {
    int ql = src.getQualifierLength();
    if (ql != 8) {
      reason = "qualifier is " + ql + " bytes, the layout reads an 8-byte ts";
      return null;
    }
    byte[] qa = src.getQualifierArray();
    int qo = src.getQualifierOffset();
    long ts = 0;
    for (int i = 0; i < 8; i++) {
      ts = ts << 8 | (qa[qo + i] & 0xFF);
    }
    if (ts < 0 || ts >= ISO_MAX) {
      reason = "ts " + ts + " is outside 0 to year 9999";
      return null;
    }
    byte[] ra = src.getRowArray();
    int ro = src.getRowOffset();
    int rl = src.getRowLength();
    for (int i = 0; i < rl; i++) {
      if (ra[ro + i] == 0) {
        reason = "sensor contains the separator 0x00 at byte " + i;
        return null;
      }
    }
    long start = Math.floorDiv(ts, HOUR_MS) * HOUR_MS;
    if (start != lastStart || lastText == null) {
      lastText = HOUR.format(Instant.ofEpochMilli(start)).getBytes(StandardCharsets.US_ASCII);
      lastStart = start;
    }
    byte[] row = new byte[rl + 1 + lastText.length];
    System.arraycopy(ra, ro, row, 0, rl);
    row[rl] = 0;
    System.arraycopy(lastText, 0, row, rl + 1, lastText.length);
    int off = (int) (ts - start);
    byte[] q = {(byte) (off >>> 24), (byte) (off >>> 16), (byte) (off >>> 8), (byte) off};
    List<Tag> tags = src.getTagsLength() > 0 ? PrivateCellUtil.getTags(src) : null;
    reason = null;
    return new KeyValue(row, 0, row.length,
        src.getFamilyArray(), src.getFamilyOffset(), src.getFamilyLength(),
        q, 0, q.length,
        src.getTimestamp(), KeyValue.Type.codeToType(src.getTypeByte()),
        src.getValueArray(), src.getValueOffset(), src.getValueLength(), tags);
  }
}
