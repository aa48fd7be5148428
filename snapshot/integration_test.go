package snapshot_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"
)

// oracle runs testenv/bin/oracle and returns its standard output.
func oracle(t *testing.T, args ...string) []byte {
	t.Helper()
	return testenv.Oracle(t, args...)
}

// readAheads are the ways of reading store files the oracle tests run
// over HDFS: positional reads only; streams with chunks smaller than an
// HFile block (64 KB before compression), about a block, and larger than
// any test file; and without prefetch.
var readAheads = []struct {
	label string
	opts  vfs.ReadAheadOptions
}{
	{"read-ahead off", vfs.ReadAheadOptions{Off: true}},
	{"4 KB chunks", vfs.ReadAheadOptions{Chunk: 4 << 10}},
	{"64 KB chunks", vfs.ReadAheadOptions{Chunk: 64 << 10}},
	{"default chunks", vfs.ReadAheadOptions{}},
	{"64 KB chunks, no prefetch", vfs.ReadAheadOptions{Chunk: 64 << 10, NoPrefetch: true}},
}

// TestIntegrationAgainstOracle has the mini cluster write tables through
// the real client, flush, split, compact and snapshot them, then checks
// that our cells equal HBase's TableSnapshotScanner's (the oracle), in
// normal and raw mode, read straight from HDFS (with each read-ahead
// setting) and from a local export. REKEY_TEST_PREFIX prefixes the table
// and snapshot names, so that several people can run it on one cluster.
func TestIntegrationAgainstOracle(t *testing.T) {
	st := testenv.Require(t)
	prefix := os.Getenv("REKEY_TEST_PREFIX")
	day := int64(24 * time.Hour / time.Millisecond)
	now := time.Now().UnixMilli()
	type m = map[string]any
	rows := func(extra m) m {
		s := m{"op": "rows", "rows": 120, "qualifiers": 3, "versions": 3}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	specs := []m{
		{ // a split without compaction: daughters read Reference halves
			"table": "it_split", "compaction_enabled": false,
			"families": []m{{"name": "f", "versions": 3}},
			"steps":    []m{rows(m{"deletes": 5}), {"op": "flush"}, {"op": "split", "key": "r00060"}, {"op": "snapshot", "name": "it_split"}},
		},
		{ // after a major compaction
			"table":    "it_major",
			"families": []m{{"name": "f", "versions": 2, "encoding": "FAST_DIFF", "compression": "GZ"}},
			"steps":    []m{rows(m{"deletes": 4}), {"op": "flush"}, rows(m{"row_start": 60, "ts_base": 1767225600000 + 5000}), {"op": "flush"}, {"op": "major_compact"}, {"op": "snapshot", "name": "it_major"}},
		},
		{ // rows deleted, then written again: at newer timestamps (visible) and at the deleted ones (still masked)
			"table":    "it_rewrite",
			"families": []m{{"name": "f", "versions": 5, "keep_deleted_cells": "TRUE"}, {"name": "g", "versions": 5}},
			"steps":    []m{rows(m{"deletes": 2}), {"op": "flush"}, rows(m{"rows": 60}), rows(m{"rows": 60, "ts_base": 1767225600000 + 100000}), {"op": "flush"}, {"op": "snapshot", "name": "it_rewrite"}},
		},
		{ // TTL: one batch long expired, one live; MIN_VERSIONS keeps some expired versions
			"table":    "it_ttl",
			"families": []m{{"name": "f", "versions": 3, "ttl": 30 * 86400}, {"name": "k", "versions": 3, "ttl": 30 * 86400, "min_versions": 1}},
			"steps":    []m{rows(m{"ts_base": now - 90*day}), rows(m{"rows": 40, "ts_base": now - day}), {"op": "flush"}, {"op": "snapshot", "name": "it_ttl"}},
		},
		{ // three families of very unequal size
			"table":    "it_families",
			"families": []m{{"name": "big"}, {"name": "mid", "encoding": "PREFIX"}, {"name": "tiny", "compression": "SNAPPY"}},
			"steps": []m{
				{"op": "rows", "families": []string{"big"}, "rows": 3000, "qualifiers": 6, "value_max": 200},
				{"op": "rows", "families": []string{"mid"}, "rows": 300, "qualifiers": 2},
				{"op": "rows", "families": []string{"tiny"}, "rows": 3, "qualifiers": 1},
				{"op": "flush"}, {"op": "snapshot", "name": "it_families"},
			},
		},
		{ // three flushes of the same rows, never compacted: in the merge each
			// cell's neighbours come from other files, while the files'
			// DIFF encodings say which of their own cells repeat a row or
			// column (the scanner carries that across files)
			"table": "it_interleave", "compaction_enabled": false,
			"families": []m{{"name": "f", "versions": 2, "encoding": "FAST_DIFF"}, {"name": "g", "versions": 4, "encoding": "DIFF", "compression": "SNAPPY"}},
			"steps": []m{
				rows(m{"deletes": 3}), {"op": "flush"},
				rows(m{"ts_base": 1767225600000 + 1000, "versions": 1}), {"op": "flush"},
				rows(m{"ts_base": 1767225600000 + 2000, "deletes": 2, "versions": 2}), {"op": "flush"},
				{"op": "snapshot", "name": "it_interleave"},
			},
		},
		{ // empty regions around the data
			"table": "it_empty", "split_keys": []string{"a", "m", "s", "z"},
			"families": []m{{"name": "f"}},
			"steps":    []m{rows(m{"rows": 50}), {"op": "flush"}, {"op": "snapshot", "name": "it_empty"}},
		},
	}
	for _, spec := range specs {
		steps := spec["steps"].([]m)
		spec["table"] = prefix + spec["table"].(string)
		steps[len(steps)-1]["name"] = prefix + steps[len(steps)-1]["name"].(string)
		name := steps[len(steps)-1]["name"].(string)
		t.Run(name, func(t *testing.T) {
			b, _ := json.Marshal(spec)
			path := filepath.Join(t.TempDir(), "spec.json")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			oracle(t, "seed", path)
			export := filepath.Join(t.TempDir(), "export")
			oracle(t, "export-snapshot", name, export)
			for _, mode := range []struct {
				label string
				args  []string
				opts  snapshot.ScanOptions
			}{
				{"normal", nil, snapshot.ScanOptions{}},
				{"raw", []string{"--raw"}, snapshot.ScanOptions{Raw: true}},
				{"max-versions 1", []string{"--max-versions", "1"}, snapshot.ScanOptions{MaxVersions: 1}},
			} {
				want := oracle(t, append([]string{"dump-snapshot", st.RootDir, name}, mode.args...)...)
				if len(want) == 0 && name != prefix+"it_empty" {
					t.Fatalf("%s: the oracle returned no cells", mode.label)
				}
				for _, ra := range readAheads {
					got := dumpWith(t, st.RootDir, name, snapshot.OpenOptions{ReadAhead: ra.opts}, mode.opts, snapshot.SplitOptions{})
					if d := diffDumps(got, want); d != "" {
						t.Errorf("%s, from HDFS, %s: %s", mode.label, ra.label, d)
					}
				}
				if d := diffDumps(dumpSnapshot(t, export, name, mode.opts), want); d != "" {
					t.Errorf("%s, from the local export: %s", mode.label, d)
				}
			}
		})
	}
}
