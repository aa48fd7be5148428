package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/puts"
	rkstate "github.com/rekeyhq/rekey/state"
)

// TestTTLTimeIsTheJobs: a job that measures TTLs from "now" (no
// scan.ttl_at) runs as two shards some seconds apart over a source whose
// family has a TTL of an hour and whose cells expire one after another
// over the minute after they are seeded. Both shards must read as of one
// time, the first task's start, which the job record keeps: the target
// equals the salt rule over HBase's own read of the snapshot as of that
// time (the oracle's dump with --now), though cells of the second shard's
// splits expired between the two starts. Without the record's time the
// second shard read as of its own start and left those cells out.
func TestTTLTimeIsTheJobs(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	p := presets["salt"]
	src, dst := uniq(t, "ttl_src"), uniq(t, "ttl_dst")
	snap := src + "_snap"
	t.Cleanup(func() { testenv.Drop([]string{snap}, []string{src, dst}) })

	// Each cell expires at seed time + 5 s + (i mod 60) s: every region
	// holds cells expiring all over that minute.
	const ttl = 3600
	cells := p.gen(rand.New(rand.NewSource(5)))
	base := time.Now().UnixMilli() - ttl*1000 + 5000
	for i := range cells {
		cells[i].Timestamp = base + int64(i%60)*1000 + int64(i%1000)
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "source.cells")
	if err := os.WriteFile(dump, testenv.DumpCells(cells), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(map[string]any{
		"table": src, "split_keys": p.split,
		"families": []map[string]any{{"name": "t", "versions": 3, "ttl": ttl, "encoding": "FAST_DIFF", "compression": "SNAPPY"}},
		"steps":    []map[string]any{{"op": "cells", "file": dump}, {"op": "flush"}, {"op": "snapshot", "name": snap}},
	})
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", filepath.Join(dir, "spec.json"))

	j := loadJob(t, p, st, snap, dst)
	client := targetClient(t, ctx, j, p.newSplits)
	var second time.Time
	for i := 0; i < 2; i++ {
		if i == 1 {
			// Cells of the second shard's splits expire meanwhile.
			time.Sleep(6 * time.Second)
			second = time.Now()
		}
		sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2, Shard: pipeline.Shard{Index: i, Count: 2},
			Sink: puts.New(client, dst, puts.Options{BatchCells: 500, Workers: 2})})
		if err != nil || !sum.Finished || sum.Problems() {
			t.Fatalf("shard %d/2: %v %+v", i, err, sum)
		}
	}

	b, err := os.ReadFile(rkstate.RecordBeside(j.Run.Checkpoint))
	if err != nil {
		t.Fatal(err)
	}
	var rec rkstate.Job
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.TTLTime == 0 {
		t.Fatalf("the job record keeps no TTL time:\n%s", b)
	}
	at := func(ms int64) []cell.Cell {
		got, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap, "--now", strconv.FormatInt(ms, 10)))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, later := at(rec.TTLTime), at(second.UnixMilli())
	// The test proves something only if cells expired between the two
	// starts and some were left at the first.
	if len(want) == 0 || len(later) >= len(want) {
		t.Fatalf("HBase reads %d cells as of the job's TTL time %d and %d as of the second shard's start %d: the seeding took too long for the expiry window (5 s to 65 s after it)",
			len(want), rec.TTLTime, len(later), second.UnixMilli())
	}
	t.Logf("HBase reads %d cells as of the job's TTL time, %d as of the second shard's start", len(want), len(later))
	testenv.SameCells(t, "target (raw dump) vs the salt rule over HBase's read as of the job's TTL time", testenv.DumpTable(t, dst, true), expect(p, want))

	// A record whose TTL time no task of the job can have started at (two
	// hours ahead) is damaged: reading by it would expire live cells. A
	// task of the job refuses it before reading a cell.
	future := fmt.Sprintf(`"ttl_time_ms": %d`, time.Now().Add(2*time.Hour).UnixMilli())
	damaged := regexp.MustCompile(`"ttl_time_ms": \d+`).ReplaceAll(b, []byte(future))
	if bytes.Equal(damaged, b) {
		t.Fatalf("no ttl_time_ms to damage in the record:\n%s", b)
	}
	if err := os.WriteFile(rkstate.RecordBeside(j.Run.Checkpoint), damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := pipeline.Prepare(ctx, j, pipeline.Options{Workers: 2, Resume: true, Shard: pipeline.Shard{Index: 1, Count: 2}, Sink: puts.New(client, dst, puts.Options{})})
	if err == nil {
		r.Close()
	}
	if !errors.Is(err, pipeline.ErrJobMismatch) || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a shard under a record whose TTL time is two hours ahead: %v, want it refused as damaged", err)
	}
}
