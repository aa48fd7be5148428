package dev.rekey.testenv;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.KeepDeletedCells;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.codec.KeyValueCodecWithTags;
import org.apache.hadoop.hbase.io.compress.Compression;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.regionserver.BloomType;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hbase.thirdparty.com.google.gson.Gson;

/**
 * `seed SPEC.json`: creates a table and writes deterministic, generated
 * cells into it, then runs the spec's steps (flush, split, compact,
 * snapshot) in order. The spec format is documented in testenv/README.md.
 */
final class Seed {
  /** 2026-01-01T00:00:00Z, the default base of generated timestamps. */
  static final long TS_BASE = 1767225600000L;

  /** The whole spec file. */
  static final class Spec {
    String table;
    boolean drop_existing = true;
    long seed = 1;
    List<Family> families = new ArrayList<>();
    List<String> split_keys;
    List<String> split_keys_hex;
    boolean compaction_enabled = true;
    List<Step> steps = new ArrayList<>();
  }

  /** One column family and its attributes. */
  static final class Family {
    String name;
    String encoding = "NONE";
    String compression = "NONE";
    int versions = 1;
    int ttl = 0;
    int min_versions = 0;
    String keep_deleted_cells = "FALSE";
    String bloom = "ROW";
    int blocksize = 65536;
    /** Per-family HBase settings, e.g. hfile.index.block.max.size. */
    java.util.Map<String, String> configuration;
    /** COMPRESS_TAGS: dictionary-compressed tags under an encoding; null = HBase's default (true). */
    Boolean compress_tags;
  }

  /** One step; which fields matter depends on op. */
  static final class Step {
    String op;
    // rows
    List<String> families;
    int rows = 100;
    int row_start = 0;
    String row_format = "r%05d";
    int qualifiers = 4;
    int versions = 1;
    Long ts_base;
    long ts_step = 1000;
    int value_min = 0;
    int value_max = 32;
    int deletes = 0;
    boolean flush_before_deletes = false;
    // wide_row, big_values
    String row;
    List<String> row_list;
    String family;
    int cells = 100000;
    int value_size = 4;
    long ts = 0;
    int size = 1 << 20;
    // events
    int users = 300;
    String user_format = "u%05d";
    int max_events = 5000;
    double zipf_s = 1.0;
    int days = 30;
    // cells, bulk_cells: a file of canonical dump lines to write as they are
    String file;
    // cells: a per-cell TTL (Put.setTTL) on every Put, and sending the
    // dump's tags column through the client codec that carries tags
    long ttl_ms = 0;
    boolean client_tags = false;
    // readings
    int sensors = 100;
    String sensor_format = "s%06d";
    int readings = 100;
    List<Heavy> heavy;
    // split, snapshot
    String key;
    String key_hex;
    String name;
  }

  /** A sensor of the readings step with more readings than the others. */
  static final class Heavy {
    int index;
    int readings;
  }

  private final Connection conn;
  private final Spec spec;
  private final TableName tn;
  private final Random rnd;
  long puts;
  long deletes;

  Seed(Connection conn, Spec spec) {
    this.conn = conn;
    this.spec = spec;
    this.tn = TableName.valueOf(spec.table);
    this.rnd = new Random(spec.seed);
  }

  /**
   * Writes a dump file's puts and delete markers into the existing table,
   * as the cells step would (timestamps kept, deletes of their type), and
   * prints how many of each: a test changes a table a run wrote this way.
   */
  static void writeCells(Connection conn, String table, String file) throws IOException {
    Spec spec = new Spec();
    spec.table = table;
    Step st = new Step();
    st.op = "cells";
    st.file = file;
    Seed s = new Seed(conn, spec);
    try (Admin admin = conn.getAdmin()) {
      if (!admin.tableExists(s.tn)) {
        throw new IOException("table " + table + " does not exist");
      }
    }
    s.cells(st);
    System.out.printf("wrote %s: %d puts, %d deletes%n", table, s.puts, s.deletes);
  }

  static Spec read(String path) throws IOException {
    try (Reader r = Files.newBufferedReader(Paths.get(path), StandardCharsets.UTF_8)) {
      Spec s = new Gson().fromJson(r, Spec.class);
      if (s == null || s.table == null || s.families.isEmpty()) {
        throw new IOException(path + ": a spec needs \"table\" and at least one entry in \"families\"");
      }
      return s;
    }
  }

  void run() throws Exception {
    create();
    for (int i = 0; i < spec.steps.size(); i++) {
      Step st = spec.steps.get(i);
      try {
        step(st);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("step " + i + " (" + st.op + "): " + e.getMessage(), e);
      }
    }
    System.out.printf("seeded %s: %d puts, %d deletes%n", tn, puts, deletes);
  }

  private void create() throws IOException {
    try (Admin admin = conn.getAdmin()) {
      if (admin.tableExists(tn)) {
        if (!spec.drop_existing) {
          throw new IOException("table " + tn + " exists and drop_existing is false");
        }
        if (admin.isTableEnabled(tn)) {
          admin.disableTable(tn);
        }
        admin.deleteTable(tn);
      }
      TableDescriptorBuilder tb = TableDescriptorBuilder.newBuilder(tn);
      tb.setCompactionEnabled(spec.compaction_enabled);
      for (Family f : spec.families) {
        ColumnFamilyDescriptorBuilder fb = ColumnFamilyDescriptorBuilder.newBuilder(Bytes.toBytes(f.name));
        fb.setDataBlockEncoding(DataBlockEncoding.valueOf(f.encoding));
        fb.setCompressionType(Compression.getCompressionAlgorithmByName(f.compression.toLowerCase()));
        fb.setMaxVersions(f.versions);
        fb.setMinVersions(f.min_versions);
        if (f.ttl > 0) {
          fb.setTimeToLive(f.ttl);
        }
        fb.setKeepDeletedCells(KeepDeletedCells.valueOf(f.keep_deleted_cells));
        fb.setBloomFilterType(BloomType.valueOf(f.bloom));
        fb.setBlocksize(f.blocksize);
        if (f.configuration != null) {
          f.configuration.forEach(fb::setConfiguration);
        }
        if (f.compress_tags != null) {
          fb.setCompressTags(f.compress_tags);
        }
        tb.setColumnFamily(fb.build());
      }
      byte[][] splits = splitKeys();
      if (splits.length > 0) {
        admin.createTable(tb.build(), splits);
      } else {
        admin.createTable(tb.build());
      }
    }
  }

  private byte[][] splitKeys() {
    List<byte[]> l = new ArrayList<>();
    if (spec.split_keys != null) {
      for (String k : spec.split_keys) {
        l.add(Bytes.toBytes(k));
      }
    }
    if (spec.split_keys_hex != null) {
      for (String k : spec.split_keys_hex) {
        l.add(Bytes.fromHex(k));
      }
    }
    l.sort(Bytes.BYTES_COMPARATOR);
    return l.toArray(new byte[0][]);
  }

  static byte[] key(String s, String hex) {
    if (hex != null) {
      return Bytes.fromHex(hex);
    }
    if (s != null) {
      return Bytes.toBytes(s);
    }
    throw new IllegalArgumentException("needs \"key\" or \"key_hex\"");
  }

  private void step(Step st) throws Exception {
    if (st.op == null) {
      throw new IllegalArgumentException("missing \"op\"");
    }
    switch (st.op) {
      case "rows":
        rows(st);
        break;
      case "wide_row":
        wideRow(st);
        break;
      case "big_values":
        bigValues(st);
        break;
      case "events":
        events(st);
        break;
      case "cells":
        cells(st);
        break;
      case "bulk_cells":
        new BulkCells(conn, tn).load(st.file);
        break;
      case "readings":
        readings(st);
        break;
      case "flush":
        try (Admin admin = conn.getAdmin()) {
          flushRegions(admin, tn);
        }
        break;
      case "split":
        Oracle.split(conn, tn, key(st.key, st.key_hex));
        break;
      case "major_compact":
        Oracle.majorCompact(conn, tn);
        break;
      case "snapshot":
        if (st.name == null) {
          throw new IllegalArgumentException("needs \"name\"");
        }
        Oracle.snapshot(conn, tn, st.name, true);
        break;
      default:
        throw new IllegalArgumentException("unknown op " + st.op
            + " (rows, wide_row, big_values, events, cells, bulk_cells, readings, flush, split, major_compact, snapshot)");
    }
  }

  /**
   * Writes the cells of a dump file (rowhex, family, qualifierhex,
   * timestamp, type, valuehex per line, and an optional tags column) with
   * their own timestamps: puts as Puts, delete markers as Deletes of their
   * type. Tests generate exactly the source cells they need this way,
   * binary keys included. ttl_ms sets a per-cell TTL on every Put (the
   * region server turns it into a TTL tag); a tags column is sent only
   * with client_tags, through KeyValueCodecWithTags, so a test sees what
   * the server keeps of a client's tags.
   */
  private void cells(Step st) throws IOException {
    if (st.file == null) {
      throw new IllegalArgumentException("cells needs \"file\"");
    }
    Connection c = conn;
    if (st.client_tags) {
      Configuration conf = new Configuration(conn.getConfiguration());
      conf.set("hbase.client.rpc.codec", KeyValueCodecWithTags.class.getName());
      c = ConnectionFactory.createConnection(conf);
    }
    try (BufferedMutator m = c.getBufferedMutator(new BufferedMutatorParams(tn).writeBufferSize(4L << 20))) {
      int n = 0;
      for (String line : Files.readAllLines(Paths.get(st.file), StandardCharsets.UTF_8)) {
        n++;
        if (line.isEmpty()) {
          continue;
        }
        KeyValue kv = dumpLine(line, st.file + ":" + n);
        if (kv.getTagsLength() > 0 && !st.client_tags) {
          throw new IOException(st.file + ":" + n + ": a tags column needs \"client_tags\": true"
              + " (KeyValueCodec would drop the tags silently) or the bulk_cells step");
        }
        m.mutate(mutation(kv, st.ttl_ms));
      }
    } finally {
      if (c != conn) {
        c.close();
      }
    }
  }

  /** The Put or Delete that writes kv, counting it. */
  private Mutation mutation(KeyValue kv, long ttlMs) throws IOException {
    byte[] row = CellUtil.cloneRow(kv);
    byte[] fam = CellUtil.cloneFamily(kv);
    byte[] q = CellUtil.cloneQualifier(kv);
    long ts = kv.getTimestamp();
    switch (KeyValue.Type.codeToType(kv.getTypeByte())) {
      case Put: {
        puts++;
        Put p = new Put(row).add(kv);
        if (ttlMs > 0) {
          p.setTTL(ttlMs);
        }
        return p;
      }
      case Delete:
        deletes++;
        return new Delete(row).addColumn(fam, q, ts);
      case DeleteColumn:
        deletes++;
        return new Delete(row).addColumns(fam, q, ts);
      case DeleteFamily:
        deletes++;
        return new Delete(row).addFamily(fam, ts);
      case DeleteFamilyVersion:
        deletes++;
        return new Delete(row).addFamilyVersion(fam, ts);
      default:
        throw new IOException("cell " + kv + ": type cannot be written");
    }
  }

  /**
   * Parses one canonical dump line, with or without its seventh (tags)
   * column, into a KeyValue; where names the line in errors.
   */
  static KeyValue dumpLine(String line, String where) throws IOException {
    String[] f = line.split("\t", -1);
    if (f.length != 6 && f.length != 7) {
      throw new IOException(where + ": " + f.length + " fields, want 6 or 7");
    }
    KeyValue.Type type;
    try {
      type = KeyValue.Type.valueOf(f[4]);
    } catch (IllegalArgumentException e) {
      throw new IOException(where + ": type " + f[4]);
    }
    byte[] row = Bytes.fromHex(f[0]);
    byte[] fam = Bytes.toBytes(f[1]);
    byte[] q = Bytes.fromHex(f[2]);
    byte[] v = Bytes.fromHex(f[5]);
    byte[] tags = f.length == 7 ? Bytes.fromHex(f[6]) : new byte[0];
    return new KeyValue(row, 0, row.length, fam, 0, fam.length, q, 0, q.length, Long.parseLong(f[3]), type,
        v, 0, v.length, tags, 0, tags.length);
  }

  private BufferedMutator mutator() throws IOException {
    return conn.getBufferedMutator(new BufferedMutatorParams(tn).writeBufferSize(4L << 20));
  }

  private List<byte[]> families(Step st) {
    List<byte[]> l = new ArrayList<>();
    if (st.families == null) {
      for (Family f : spec.families) {
        l.add(Bytes.toBytes(f.name));
      }
    } else {
      for (String f : st.families) {
        l.add(Bytes.toBytes(f));
      }
    }
    return l;
  }

  private byte[] value(int min, int max) {
    int len = min + (max > min ? rnd.nextInt(max - min + 1) : 0);
    byte[] v = new byte[len];
    rnd.nextBytes(v);
    return v;
  }

  /**
   * Rows of cells: every family, qualifiers q0..qN-1, versions at
   * ts_base + v*ts_step. Every 7th row's q0 (i % 7 == 3) has an empty
   * value. With deletes = D > 0, every Dth row then gets one delete marker,
   * cycling through Delete (newest version of q0), DeleteColumn (q1, up to
   * the second version), DeleteFamily (up to the second version),
   * DeleteFamilyVersion (exactly the first version) and a whole-row delete
   * at the newest version.
   */
  private void rows(Step st) throws IOException {
    List<byte[]> fams = families(st);
    long base = st.ts_base != null ? st.ts_base : TS_BASE;
    try (BufferedMutator m = mutator()) {
      for (int i = st.row_start; i < st.row_start + st.rows; i++) {
        Put p = new Put(Bytes.toBytes(String.format(st.row_format, i)));
        for (byte[] f : fams) {
          for (int q = 0; q < st.qualifiers; q++) {
            for (int v = 0; v < st.versions; v++) {
              byte[] val = (q == 0 && i % 7 == 3) ? new byte[0] : value(st.value_min, st.value_max);
              p.addColumn(f, Bytes.toBytes("q" + q), base + v * st.ts_step, val);
              puts++;
            }
          }
        }
        m.mutate(p);
      }
    }
    if (st.deletes <= 0) {
      return;
    }
    if (st.flush_before_deletes) {
      // Markers in a newer HFile than the cells they mask; a flush of both
      // together would drop the masked cells.
      try (Admin admin = conn.getAdmin()) {
        flushRegions(admin, tn);
      }
    }
    long newest = base + (st.versions - 1) * st.ts_step;
    long second = base + Math.min(1, st.versions - 1) * st.ts_step;
    List<Delete> ds = new ArrayList<>();
    int k = 0;
    for (int i = st.row_start; i < st.row_start + st.rows; i += st.deletes, k++) {
      Delete d = new Delete(Bytes.toBytes(String.format(st.row_format, i)));
      for (byte[] f : fams) {
        switch (k % 5) {
          case 0:
            d.addColumn(f, Bytes.toBytes("q0"), newest);
            break;
          case 1:
            d.addColumns(f, Bytes.toBytes("q1"), second);
            break;
          case 2:
            d.addFamily(f, second);
            break;
          case 3:
            d.addFamilyVersion(f, base);
            break;
          default:
            break;
        }
      }
      if (k % 5 == 4) {
        d = new Delete(d.getRow(), newest);
      }
      ds.add(d);
      deletes++;
    }
    try (Table t = conn.getTable(tn)) {
      t.delete(ds);
    }
  }

  /** One row with `cells` cells: 4-byte big-endian qualifiers 0..cells-1. */
  private void wideRow(Step st) throws IOException {
    byte[] f = Bytes.toBytes(st.family != null ? st.family : spec.families.get(0).name);
    byte[] row = Bytes.toBytes(st.row != null ? st.row : "wide");
    long ts = st.ts != 0 ? st.ts : TS_BASE;
    try (BufferedMutator m = mutator()) {
      final int chunk = 10000;
      for (int start = 0; start < st.cells; start += chunk) {
        Put p = new Put(row);
        for (int q = start; q < Math.min(st.cells, start + chunk); q++) {
          p.addColumn(f, Bytes.toBytes(q), ts, value(st.value_size, st.value_size));
          puts++;
        }
        m.mutate(p);
      }
    }
  }

  /** One cell of `size` random bytes in each listed row. */
  private void bigValues(Step st) throws IOException {
    byte[] f = Bytes.toBytes(st.family != null ? st.family : spec.families.get(0).name);
    long ts = st.ts != 0 ? st.ts : TS_BASE;
    try (Table t = conn.getTable(tn)) {
      for (String r : st.row_list) {
        Put p = new Put(Bytes.toBytes(r));
        p.addColumn(f, Bytes.toBytes("big"), ts, value(st.size, st.size));
        t.put(p);
        puts++;
      }
    }
  }

  /**
   * The end-to-end bench's source, the wide layout of
   * configs/wide_to_bucketed.yaml: row = sensor id (`sensor_format`),
   * qualifier = 8-byte big-endian reading time. Sensor i gets `readings`
   * readings (or its `heavy` entry's count) at distinct times spread over
   * `days` days from ts_base (slot j of span/n ms holds reading j, at a
   * random ms inside the slot); each reading has `versions` versions with
   * cell timestamps time + v*ts_step and random values of
   * value_min..value_max bytes. With deletes = D, every Dth sensor (i % D
   * == 0) then gets one delete, cycling: DeleteColumn of its first reading
   * (every version), Delete of the newest version of its second reading,
   * DeleteFamily up to the time of its tenth reading. flush_before_deletes
   * puts the markers in a newer HFile than the cells they mask.
   */
  private void readings(Step st) throws IOException {
    byte[] f = Bytes.toBytes(st.family != null ? st.family : spec.families.get(0).name);
    long base = st.ts_base != null ? st.ts_base : TS_BASE;
    long span = st.days * 86400000L;
    java.util.Map<Integer, Integer> heavy = new java.util.HashMap<>();
    if (st.heavy != null) {
      for (Heavy h : st.heavy) {
        heavy.put(h.index, h.readings);
      }
    }
    java.util.Map<Integer, long[]> firstTimes = new java.util.TreeMap<>();
    try (BufferedMutator m = mutator()) {
      for (int i = 0; i < st.sensors; i++) {
        byte[] row = Bytes.toBytes(String.format(st.sensor_format, i));
        int n = heavy.getOrDefault(i, st.readings);
        long slot = Math.max(1, span / Math.max(1, n));
        long[] first = st.deletes > 0 && i % st.deletes == 0 ? new long[Math.min(n, 10)] : null;
        Put p = new Put(row);
        for (int j = 0; j < n; j++) {
          long t = base + j * slot + (long) (rnd.nextDouble() * slot);
          if (first != null && j < first.length) {
            first[j] = t;
          }
          for (int v = 0; v < st.versions; v++) {
            p.addColumn(f, Bytes.toBytes(t), t + v * st.ts_step, value(st.value_min, st.value_max));
            puts++;
          }
          if (p.size() >= 10000) {
            m.mutate(p);
            p = new Put(row);
          }
        }
        if (!p.isEmpty()) {
          m.mutate(p);
        }
        if (first != null && first.length > 0) {
          firstTimes.put(i, first);
        }
      }
    }
    if (firstTimes.isEmpty()) {
      return;
    }
    if (st.flush_before_deletes) {
      try (Admin admin = conn.getAdmin()) {
        flushRegions(admin, tn);
      }
    }
    List<Delete> ds = new ArrayList<>();
    int k = 0;
    for (java.util.Map.Entry<Integer, long[]> e : firstTimes.entrySet()) {
      long[] t = e.getValue();
      Delete d = new Delete(Bytes.toBytes(String.format(st.sensor_format, e.getKey())));
      switch (k++ % 3) {
        case 0:
          d.addColumns(f, Bytes.toBytes(t[0]));
          break;
        case 1:
          d.addColumn(f, Bytes.toBytes(t[Math.min(1, t.length - 1)]),
              t[Math.min(1, t.length - 1)] + (st.versions - 1) * st.ts_step);
          break;
        default:
          d.addFamily(f, t[t.length - 1]);
          break;
      }
      ds.add(d);
      deletes++;
    }
    try (Table tb = conn.getTable(tn)) {
      tb.delete(ds);
    }
  }

  private static final String[] ACTIONS = {
    "click:/home", "click:/search", "view:/item/", "view:/cart", "add:/cart/", "buy:/checkout",
    "click:/help", "view:/profile", "search:q=", "logout"};

  /**
   * The demo's events: users ranked by a seeded shuffle, user of rank k
   * getting round(max_events / k^zipf_s) events (at least 1) at distinct
   * millisecond times within `days` days from ts_base; qualifier is the
   * 8-byte big-endian event time, value a short action text, cell
   * timestamp the event time.
   */
  private void events(Step st) throws IOException {
    byte[] f = Bytes.toBytes(st.family != null ? st.family : spec.families.get(0).name);
    long base = st.ts_base != null ? st.ts_base : TS_BASE;
    long span = st.days * 86400000L;
    List<Integer> order = new ArrayList<>();
    for (int u = 0; u < st.users; u++) {
      order.add(u);
    }
    Collections.shuffle(order, rnd);
    try (BufferedMutator m = mutator()) {
      for (int rank = 1; rank <= st.users; rank++) {
        int user = order.get(rank - 1);
        int n = (int) Math.max(1, Math.round(st.max_events / Math.pow(rank, st.zipf_s)));
        Put p = new Put(Bytes.toBytes(String.format(st.user_format, user)));
        Set<Long> seen = new HashSet<>();
        while (seen.size() < n) {
          long t = base + (long) (rnd.nextDouble() * span);
          if (!seen.add(t)) {
            continue;
          }
          String a = ACTIONS[rnd.nextInt(ACTIONS.length)];
          if (a.endsWith("/") || a.endsWith("=")) {
            a = a + rnd.nextInt(1000);
          }
          p.addColumn(f, Bytes.toBytes(t), t, Bytes.toBytes(a));
          puts++;
        }
        m.mutate(p);
      }
    }
  }

  /**
   * Flushes every region of tn through its region server. Not
   * Admin.flush(table): that runs as a master procedure, and a test that
   * restarts the HMaster meanwhile (they share the cluster) leaves the
   * flush waiting its full five minutes for a procedure the new master
   * never heard of. A region flush is one call to the region server,
   * which returns once the memstore is in a store file.
   */
  static void flushRegions(Admin admin, TableName tn) throws IOException {
    for (org.apache.hadoop.hbase.client.RegionInfo ri : admin.getRegions(tn)) {
      admin.flushRegion(ri.getRegionName());
    }
  }
}
