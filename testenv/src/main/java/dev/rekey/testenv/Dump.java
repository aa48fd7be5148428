package dev.rekey.testenv;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.KeyValue;

/**
 * Writes cells in rekey's canonical dump format, one line per cell:
 * rowhex, family, qualifierhex, timestamp, type, valuehex, tab-separated,
 * lowercase hex. Go's cell.AppendDump writes the same bytes, so outputs
 * compare with diff.
 */
final class Dump implements AutoCloseable {
  private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
  private final OutputStream out;
  private byte[] buf = new byte[1 << 16];
  private int n;
  long cells;

  Dump(OutputStream out) {
    this.out = out == null ? null : new BufferedOutputStream(out, 1 << 16);
  }

  private void ensure(int more) {
    if (n + more > buf.length) {
      byte[] b = new byte[Math.max(buf.length * 2, n + more)];
      System.arraycopy(buf, 0, b, 0, n);
      buf = b;
    }
  }

  private void hex(byte[] a, int off, int len) {
    ensure(2 * len);
    for (int i = off; i < off + len; i++) {
      buf[n++] = HEX[(a[i] >> 4) & 15];
      buf[n++] = HEX[a[i] & 15];
    }
  }

  private void raw(byte[] a, int off, int len) {
    ensure(len);
    System.arraycopy(a, off, buf, n, len);
    n += len;
  }

  private void tab() {
    ensure(1);
    buf[n++] = '\t';
  }

  /** The dump name of a KeyValue type code, as Go's cell.Type.String(). */
  static String typeName(byte code) {
    return KeyValue.Type.codeToType(code).name();
  }

  void cell(Cell c) throws IOException {
    cell(c, false);
  }

  /** Writes one line of text as is (with its newline). */
  void line(String s) throws IOException {
    byte[] b = (s + "\n").getBytes(StandardCharsets.UTF_8);
    out.write(b, 0, b.length);
  }

  /**
   * Writes c; with tags, a seventh column holds the cell's raw tags
   * section in hex (empty when it has none).
   */
  void cell(Cell c, boolean tags) throws IOException {
    // format may grow buf: take the length first, then the (new) buffer.
    int len = format(c, tags);
    out.write(buf, 0, len);
    n = 0;
    cells++;
  }

  /**
   * Formats c's dump line, newline included, into the internal buffer
   * (see line()) and returns its length; writes nothing.
   */
  int format(Cell c) {
    return format(c, false);
  }

  private int format(Cell c, boolean tags) {
    n = 0;
    hex(c.getRowArray(), c.getRowOffset(), c.getRowLength());
    tab();
    raw(c.getFamilyArray(), c.getFamilyOffset(), c.getFamilyLength());
    tab();
    hex(c.getQualifierArray(), c.getQualifierOffset(), c.getQualifierLength());
    tab();
    byte[] ts = Long.toString(c.getTimestamp()).getBytes(StandardCharsets.US_ASCII);
    raw(ts, 0, ts.length);
    tab();
    byte[] t = typeName(c.getTypeByte()).getBytes(StandardCharsets.US_ASCII);
    raw(t, 0, t.length);
    tab();
    hex(c.getValueArray(), c.getValueOffset(), c.getValueLength());
    if (tags) {
      tab();
      hex(c.getTagsArray(), c.getTagsOffset(), c.getTagsLength());
    }
    ensure(1);
    buf[n++] = '\n';
    return n;
  }

  /** The buffer format() filled; valid until the next call. */
  byte[] line() {
    return buf;
  }

  @Override
  public void close() throws IOException {
    if (out != null) {
      out.flush();
    }
  }
}
