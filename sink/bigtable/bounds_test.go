package bigtable_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/sink"
	bt "github.com/rekeyhq/rekey/sink/bigtable"
)

// TestRequestBytes: every MutateRows request, measured on the wire (its
// protobuf size less its header, the table name), stays within the
// sink's BatchBytes when it holds several entries and within EntryBytes
// when it holds one, and within BatchMutations; this with row keys of
// 4 KiB (which a request carries once per entry), values of 200 KB,
// a row of 3 MB written in pieces and many small rows. Every mutation
// on the wire is a SetCell: the sink cannot produce a delete (Write
// refuses a marker, build refuses raw mode), so no put and delete of
// one column can share a request. The table then holds every cell once.
func TestRequestBytes(t *testing.T) {
	w := &wire{}
	conn := emulator(t, w)
	newTable(t, conn, "t")
	const batchBytes, entryBytes, batchMuts = 512 << 10, 1 << 20, 2000
	// Timeout: without the bound a request the emulator refuses (past
	// its 4 MiB) is retried as RESOURCE_EXHAUSTED until then.
	s := bt.New(conn.Data.Open("t"), "t", nil, bt.Options{BatchBytes: batchBytes, EntryBytes: entryBytes, BatchMutations: batchMuts, Timeout: 5 * time.Second})
	var cells []cell.Cell
	for i := range 1500 {
		// 4 KiB keys, Bigtable's largest, of one small cell each.
		row := fmt.Sprintf("a%04d", i) + strings.Repeat("\xff", bt.MaxRowKey-5)
		cells = append(cells, put(row, "d", "q", 1, "v"))
	}
	big := strings.Repeat("b", 200_000)
	for i := range 30 {
		for q := range 3 {
			cells = append(cells, put(fmt.Sprintf("b%02d", i), "d", fmt.Sprint(q), 5, big))
		}
	}
	kib := strings.Repeat("w", 1<<10)
	for q := range 3000 {
		cells = append(cells, put("c-wide", "e", fmt.Sprintf("q%04d", q), 9, kib))
	}
	for i := range 5000 {
		for q := range 3 {
			cells = append(cells, put(fmt.Sprintf("d%05d", i), "d", fmt.Sprint(q), int64(q), "x"))
		}
	}
	ack, bad, err := writeSplit(t, s, cells)
	if err != nil || len(bad) > 0 || ack.Cells != int64(len(cells)) || ack.Failed != 0 {
		// (The examples name 4 KiB rows: only their number is printed.)
		t.Fatalf("commit: %v, %d refused, ack %d cells (%d failed, %d examples), want %d", err, len(bad), ack.Cells, ack.Failed, len(ack.FailedExamples), len(cells))
	}
	largest := 0
	for i, r := range w.requests {
		body := r.bytes - r.header
		largest = max(largest, body)
		limit := batchBytes
		if len(r.entries) == 1 {
			limit = entryBytes
		}
		if body > limit {
			t.Errorf("request %d: %d entries, %d bytes of entries, past %d", i, len(r.entries), body, limit)
		}
		if r.mutations > batchMuts || r.mutations > bt.MaxMutations {
			t.Errorf("request %d: %d mutations", i, r.mutations)
		}
		for k, n := range r.kinds {
			if k != "set_cell" {
				t.Errorf("request %d: %d mutations of kind %s", i, n, k)
			}
		}
	}
	t.Logf("%d requests, the largest %d bytes of entries", len(w.requests), largest)
	sameAsWritten(t, readBack(t, conn, "t"), cells)
}

// TestCreateSplits: a table Ready creates is created with exactly the
// job's split keys (binary ones too), in order, as the CreateTable
// request carries them; without split keys with the planned ones
// (target.create.regions), and the given keys win over a plan. The
// emulator keeps no splits (its SampleRowKeys samples rows at random),
// so the request is where they can be seen.
func TestCreateSplits(t *testing.T) {
	w := &wire{}
	conn := emulator(t, w)
	ctx := context.Background()
	fams := []sink.Family{{Target: "d", Source: "d", MaxVersions: 1}}
	given := [][]byte{{0}, []byte("m"), {0xff, 0xfe, 0}}
	planned := [][]byte{[]byte("p1"), []byte("p2"), []byte("p3")}
	plan := func(context.Context) ([][]byte, error) { return planned, nil }
	for _, tc := range []struct {
		table string
		keys  [][]byte
		plan  func(context.Context) ([][]byte, error)
		want  [][]byte
	}{
		{"given", given, nil, given},
		{"planned", nil, plan, planned},
		{"both", given, plan, given},
		{"neither", nil, nil, nil},
	} {
		w.creates = nil
		if _, err := bt.Ready(ctx, conn.Admin, bt.Target{Table: tc.table, Families: fams, Create: true, SplitKeys: tc.keys, PlanSplitKeys: tc.plan}); err != nil {
			t.Fatalf("%s: %v", tc.table, err)
		}
		if len(w.creates) != 1 {
			t.Fatalf("%s: %d CreateTable requests", tc.table, len(w.creates))
		}
		var got [][]byte
		for _, sp := range w.creates[0].InitialSplits {
			got = append(got, sp.Key)
		}
		if !equalKeys(got, tc.want) {
			t.Errorf("%s: created with splits %q, want %q", tc.table, got, tc.want)
		}
	}
}

func equalKeys(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
