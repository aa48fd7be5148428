package main

import (
	"encoding/binary"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// demoCell is what the demo job must keep of a cell: the user, family,
// event time (epoch millis), timestamp and value.
type demoCell struct {
	user, family string
	evt, ts      int64
	valueHex     string
}

// requireDemoRule checks the secure oracle's dump of table against the
// demo job's rule applied to the oracle's dump of the bundled snapshot:
// an old cell (row user, qualifier 8-byte event time) becomes a new cell
// whose row is the 6-byte user and the day's start (8 bytes of millis)
// and whose qualifier is the 4-byte offset into the day, with family,
// timestamp and value unchanged; each old cell exactly once.
func requireDemoRule(t *testing.T, table string) {
	t.Helper()
	abs, err := filepath.Abs("../../testdata/snapshots/demo_events")
	if err != nil {
		t.Fatal(err)
	}
	want := map[demoCell]int{}
	for _, f := range dumpLines(t, testenv.SecureOracle(t, nil, "dump-snapshot", "file://"+abs, "demo_events")) {
		row, q, ts := hexField(t, f[0]), hexField(t, f[2]), intField(t, f[3])
		if len(q) != 8 {
			t.Fatalf("old qualifier %s is not 8 bytes", f[2])
		}
		want[demoCell{string(row), f[1], int64(binary.BigEndian.Uint64(q)), ts, f[5]}]++
	}
	got := map[demoCell]int{}
	for _, f := range dumpLines(t, testenv.SecureOracle(t, nil, "dump-table", table)) {
		row, q, ts := hexField(t, f[0]), hexField(t, f[2]), intField(t, f[3])
		if len(row) != 14 || len(q) != 4 {
			t.Fatalf("new cell %v: row %d bytes, qualifier %d; want 14 and 4", f, len(row), len(q))
		}
		evt := int64(binary.BigEndian.Uint64(row[6:])) + int64(binary.BigEndian.Uint32(q))
		got[demoCell{string(row[:6]), f[1], evt, ts, f[5]}]++
	}
	missing, extra := 0, 0
	for c, n := range want {
		if got[c] < n {
			missing += n - got[c]
		}
	}
	for c, n := range got {
		if want[c] < n {
			extra += n - want[c]
		}
	}
	if len(want) == 0 || missing != 0 || extra != 0 {
		t.Fatalf("%s against the rule on the oracle's dump (%d cells): %d missing, %d not from any old cell", table, len(want), missing, extra)
	}
	t.Logf("%s: the oracle's dump equals the rule on the snapshot's dump (%d cells)", table, len(want))
}

func hexField(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("dump field %q: %v", s, err)
	}
	return b
}

func intField(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("dump field %q: %v", s, err)
	}
	return v
}
