package snapshot

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// futureBase is a timestamp base an hour ahead, on a whole second: cells
// written there are not expired when the cluster flushes them (a flush
// applies family TTLs by the real clock), while a scan's TTL reference
// (ScanOptions.Now, the oracle's --now) can still be put past them.
func futureBase() int64 {
	return time.Now().Add(time.Hour).UnixMilli() / 1000 * 1000
}

// compareScans asks the oracle for each scan of snapshot name in one JVM
// and checks that rekey's reader returns HBase's dump for every one.
// tags compares the tags column too. It returns HBase's dumps.
func compareScans(t *testing.T, st *testenv.State, name string, scans map[string]ScanOptions, tags bool) map[string][]byte {
	t.Helper()
	var labels []string
	var dumps [][]string
	for label, o := range scans {
		args := append([]string{"dump-snapshot", st.RootDir, name}, oracleScanArgs(o)...)
		if tags {
			args = append(args, "--tags")
		}
		labels = append(labels, label)
		dumps = append(dumps, args)
	}
	outs := testenv.OracleDumps(t, dumps)
	byLabel := map[string][]byte{}
	for i, label := range labels {
		byLabel[label] = outs[i]
		got := readDump(t, st.RootDir, name, scans[label], tags)
		if d := testenv.DiffDumps(got, outs[i]); d != "" {
			t.Errorf("%s (oracle %s): rekey vs HBase: %s", label, strings.Join(dumps[i][3:], " "), d)
		}
	}
	return byLabel
}

// TestScanOptionsOnHBase: a table HBase wrote (three families: one with
// KEEP_DELETED_CELLS=TRUE, one FAST_DIFF, one with a TTL and MIN_VERSIONS;
// two regions; delete markers of every kind in a newer file) read with
// each scan option rekey offers, alone and combined: time ranges (also
// before delete markers, where KEEP_DELETED_CELLS decides), families,
// columns, start and stop rows across the region boundary, raw, max
// versions, and the TTL reference. rekey's reader must return exactly
// what HBase's TableSnapshotScanner returns with the same Scan.
func TestScanOptionsOnHBase(t *testing.T) {
	st := testenv.Require(t)
	name := os.Getenv("REKEY_TEST_PREFIX") + "scanopts"
	base := futureBase()
	day := int64(24 * time.Hour / time.Millisecond)
	rows := func(extra map[string]any) map[string]any {
		s := map[string]any{"op": "rows", "rows": 60, "qualifiers": 3, "versions": 3, "ts_base": base}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	testenv.DropAfter(t, name, name)
	writeSpecs(t, []map[string]any{{
		"table": name, "split_keys": []string{"r00030"},
		"families": []map[string]any{
			{"name": "f", "versions": 3, "keep_deleted_cells": "TRUE"},
			{"name": "g", "versions": 2, "encoding": "FAST_DIFF"},
			{"name": "h", "versions": 3, "ttl": 2 * 86400, "min_versions": 1},
		},
		"steps": []map[string]any{
			rows(map[string]any{"deletes": 4, "flush_before_deletes": true}), {"op": "flush"},
			rows(map[string]any{"rows": 40, "row_start": 20, "versions": 2, "ts_base": base + 3*day}), {"op": "flush"},
			{"op": "snapshot", "name": name},
		},
	}})
	now := time.UnixMilli(base + 4*day) // the first batch is past h's TTL, the second is not
	col := func(f, q string) Column { return Column{Family: []byte(f), Qualifier: []byte(q)} }
	fams := func(fs ...string) [][]byte {
		var out [][]byte
		for _, f := range fs {
			out = append(out, []byte(f))
		}
		return out
	}
	scans := map[string]ScanOptions{
		"default, real clock":             {},
		"TTL reference":                   {Now: now},
		"time range":                      {TimeRange: TimeRange{Min: base + 1000, Max: base + 3*day + 1000}, Now: now},
		"time range before the deletes":   {TimeRange: TimeRange{Max: base + 1000}, Now: now},
		"time range from, no upper bound": {TimeRange: TimeRange{Min: base + 2000}, Now: now},
		"raw time range":                  {Raw: true, TimeRange: TimeRange{Min: base, Max: base + 2000}},
		"family":                          {Families: fams("g"), Now: now},
		"families":                        {Families: fams("f", "h"), Now: now},
		"columns":                         {Columns: []Column{col("f", "q1"), col("h", "q0")}, Now: now},
		"family and a column of another":  {Families: fams("g"), Columns: []Column{col("f", "q0")}, Now: now},
		"columns restrict a named family": {Families: fams("f"), Columns: []Column{col("f", "q2")}, Now: now},
		"start and stop across regions":   {StartRow: []byte("r00010"), StopRow: []byte("r00045"), Now: now},
		"start only":                      {StartRow: []byte("r00050x"), Now: now},
		"stop only":                       {StopRow: []byte("r00003"), Now: now},
		"raw":                             {Raw: true},
		"raw, one family, TTL reference":  {Raw: true, Families: fams("h"), Now: now},
		"max versions 1, columns":         {MaxVersions: 1, Columns: []Column{col("f", "q0"), col("g", "q1")}, Now: now},
		"everything at once": {
			TimeRange: TimeRange{Min: base, Max: base + 3*day + 1000}, Families: fams("h"), Columns: []Column{col("f", "q0")},
			StartRow: []byte("r00015"), StopRow: []byte("r00041"), MaxVersions: 2, Now: now,
		},
	}
	dumps := compareScans(t, st, name, scans, false)
	// The options must select something, and differently: an option the
	// oracle ignored would read as the full scan.
	full := string(dumps["TTL reference"])
	if full == "" {
		t.Fatal("HBase returned no cells")
	}
	for label, d := range dumps {
		if label != "TTL reference" && label != "default, real clock" && !strings.HasPrefix(label, "raw") && string(d) == full {
			t.Errorf("%s: HBase returned the unrestricted scan; the option did not reach the oracle's Scan", label)
		}
	}
	if string(dumps["default, real clock"]) == full {
		t.Error("the TTL reference changed nothing: h's first batch should be past its TTL at --now")
	}
}

// TestSequenceIDsOnHBase: equal keys in several store files, as HBase
// writes them: a bulk-loaded file (BulkLoadHFiles gives it a new sequence
// id, its _SeqId_N_ name) outranks an older flush and is outranked by a
// later one; of two puts of one key before a flush the later one stays;
// a delete marker bulk-loaded over a flushed put masks it. The rule is
// checked on HBase's dump, and rekey must return that dump, normal and
// raw.
func TestSequenceIDsOnHBase(t *testing.T) {
	st := testenv.Require(t)
	name := os.Getenv("REKEY_TEST_PREFIX") + "seqids"
	ts := futureBase()
	put := func(row, v string) cell.Cell {
		return cell.Cell{Row: []byte(row), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: ts, Type: cell.Put, Value: []byte(v)}
	}
	del := cell.Cell{Row: []byte("r4"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: ts, Type: cell.Delete}
	step := func(op string, cells ...cell.Cell) map[string]any {
		return map[string]any{"op": op, "file": writeCells(t, cells)}
	}
	testenv.DropAfter(t, name, name)
	writeSpecs(t, []map[string]any{{
		"table": name, "compaction_enabled": false,
		"families": []map[string]any{{"name": "f", "versions": 5, "encoding": "FAST_DIFF"}},
		"steps": []map[string]any{
			step("cells", put("r1", "flushed before"), put("r2", "flushed before"), put("r4", "masked")), {"op": "flush"},
			step("bulk_cells", put("r1", "bulk"), put("r2", "bulk"), del),
			step("cells", put("r2", "flushed after"), put("r3", "first")), step("cells", put("r3", "second")), {"op": "flush"},
			{"op": "snapshot", "name": name},
		},
	}})
	dumps := compareScans(t, st, name, map[string]ScanOptions{"normal": {}, "raw": {Raw: true}}, false)
	cells, err := testenv.ParseDump(dumps["normal"])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cells {
		got = append(got, string(c.Row)+"="+string(c.Value))
	}
	// The rule: the highest sequence id of a key wins; the bulk-loaded
	// file's id lies between the two flushes'.
	if g, w := strings.Join(got, " "), "r1=bulk r2=flushed after r3=second"; g != w {
		t.Errorf("HBase returned %s; the rule says %s", g, w)
	}
}

// tagBytes builds a raw tags section: each tag as u16 length (type byte
// plus value), type, value.
func tagBytes(tags ...[]byte) []byte {
	var out []byte
	for _, tg := range tags {
		out = binary.BigEndian.AppendUint16(out, uint16(len(tg)))
		out = append(out, tg...)
	}
	return out
}

// Tag types as HBase numbers them (TagType): ACL, visibility, TTL.
const (
	aclTag        = 1
	visibilityTag = 2
	ttlTag        = 8
)

func ttlTagValue(ms int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{ttlTag}, uint64(ms))
}

// expiredByTag reports whether c's first TTL tag says it is expired at
// now (HBase: expired when ts + ttl < now), written here from HBase's
// rule, apart from the reader's own.
func expiredByTag(c *cell.Cell, now int64) bool {
	for t := c.Tags; len(t) >= 3; {
		n := int(binary.BigEndian.Uint16(t))
		if n < 1 || 2+n > len(t) {
			return false
		}
		if t[2] == ttlTag && n == 9 {
			return c.Timestamp+int64(binary.BigEndian.Uint64(t[3:11])) < now
		}
		t = t[2+n:]
	}
	return false
}

// TestTagsOnHBase: cells with tags, written by HBase three ways: per-cell
// TTLs through the client (Put.setTTL; the region server adds the TTL
// tag), ACL- and visibility-style tags sent by a client through
// KeyValueCodecWithTags (this cluster keeps them: it runs no access or
// visibility controller), and tagged cells and delete markers in HFiles
// written by HBase's StoreFileWriter and bulk loaded. Families: FAST_DIFF
// with COMPRESS_TAGS (dictionary-compressed tags), PREFIX without, and no
// encoding. rekey's reader must return HBase's cells tags included, and
// per-cell TTLs must expire the cells HBase expires at the TTL reference.
func TestTagsOnHBase(t *testing.T) {
	st := testenv.Require(t)
	name := os.Getenv("REKEY_TEST_PREFIX") + "tags"
	base := futureBase()
	hour := int64(time.Hour / time.Millisecond)
	fams := []string{"t", "p", "n"}
	gen := func(prefix string, n int, tags func(i int) []byte) []cell.Cell {
		var out []cell.Cell
		for i := 0; i < n; i++ {
			for _, f := range fams {
				out = append(out, cell.Cell{Row: []byte(fmt.Sprintf("%s%03d", prefix, i)), Family: []byte(f), Qualifier: []byte(fmt.Sprintf("q%d", i%3)),
					Timestamp: base + int64(i)*1000, Type: cell.Put, Value: []byte(fmt.Sprintf("v%d", i)), Tags: tags(i)})
			}
		}
		return out
	}
	none := func(int) []byte { return nil }
	client := gen("c", 30, func(i int) []byte {
		acl := append([]byte{aclTag}, fmt.Sprintf("user%d", i%4)...)
		vis := append([]byte{visibilityTag}, byte(i%3), 0, 0, 1)
		return tagBytes(acl, vis)
	})
	bulk := gen("b", 40, func(i int) []byte {
		switch i % 4 {
		case 0:
			return nil
		case 1:
			return tagBytes(ttlTagValue(hour / 2))
		case 2:
			return tagBytes(append([]byte{aclTag}, "bulk-user"...), ttlTagValue(48*hour))
		}
		return tagBytes(append([]byte{visibilityTag}, 1, 2, 3), append([]byte{0x80}, "custom"...))
	})
	bulk = append(bulk, cell.Cell{Row: []byte("c005"), Family: []byte("t"), Qualifier: []byte("q2"), Timestamp: base + 5000, Type: cell.DeleteColumn,
		Tags: tagBytes(append([]byte{aclTag}, "deleter"...))})
	step := func(op string, cells []cell.Cell, extra ...any) map[string]any {
		s := map[string]any{"op": op, "file": writeCells(t, cells)}
		for i := 0; i+1 < len(extra); i += 2 {
			s[extra[i].(string)] = extra[i+1]
		}
		return s
	}
	testenv.DropAfter(t, name, name)
	writeSpecs(t, []map[string]any{{
		"table": name, "split_keys": []string{"c"},
		"families": []map[string]any{
			{"name": "t", "versions": 3, "encoding": "FAST_DIFF", "compress_tags": true},
			{"name": "p", "versions": 3, "encoding": "PREFIX", "compress_tags": false, "compression": "SNAPPY"},
			{"name": "n", "versions": 3},
		},
		"steps": []map[string]any{
			step("cells", gen("s", 20, none), "ttl_ms", hour),
			step("cells", gen("l", 20, none), "ttl_ms", 7*24*hour),
			step("cells", client, "client_tags", true),
			{"op": "flush"},
			step("bulk_cells", bulk),
			{"op": "snapshot", "name": name},
		},
	}})
	now := base + 2*hour // past the 1 h and 30 min TTLs, before 48 h and 7 days
	dumps := compareScans(t, st, name, map[string]ScanOptions{
		"real clock":    {},
		"TTL reference": {Now: time.UnixMilli(now)},
		"raw":           {Raw: true},
		"raw, family t": {Raw: true, Families: [][]byte{[]byte("t")}},
	}, true)

	all, err := testenv.ParseDump(dumps["real clock"])
	if err != nil {
		t.Fatal(err)
	}
	later, err := testenv.ParseDump(dumps["TTL reference"])
	if err != nil {
		t.Fatal(err)
	}
	// HBase must have kept each kind of tag: the server's TTL tag, the
	// client's ACL and visibility tags, the bulk-loaded ones.
	kinds := map[byte]int{}
	for i := range all {
		for tg := all[i].Tags; len(tg) >= 3; tg = tg[2+int(binary.BigEndian.Uint16(tg)):] {
			kinds[tg[2]]++
		}
	}
	for _, k := range []byte{aclTag, visibilityTag, ttlTag, 0x80} {
		if kinds[k] == 0 {
			t.Errorf("HBase's dump holds no tag of type %d (tags seen: %v)", k, kinds)
		}
	}
	// Per-cell TTL: the TTL-reference scan is the real-clock scan less the
	// cells whose TTL tag has run out by then.
	var want []cell.Cell
	for i := range all {
		if !expiredByTag(&all[i], now) {
			want = append(want, all[i])
		}
	}
	if len(want) == len(all) {
		t.Fatal("no cell's TTL tag runs out at the TTL reference: the test proves nothing")
	}
	if g, w := string(testenv.DumpCellsTags(later)), string(testenv.DumpCellsTags(want)); g != w {
		t.Errorf("HBase at the TTL reference: %s", testenv.DiffDumps([]byte(g), []byte(w)))
	}
	t.Logf("%d cells, %d after per-cell TTLs at the reference; tags by type %v", len(all), len(later), kinds)
}
