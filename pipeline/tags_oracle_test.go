package pipeline_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	bt "github.com/rekeyhq/rekey/sink/bigtable"
	"github.com/rekeyhq/rekey/sink/hfiles"
)

// sourceTags gives cell i of the tags test its tags (u16 length, type,
// value each): none; a per-cell TTL of ten years (type 8); an ACL-style
// (1) and a visibility-style (2) tag; a custom type; a TTL long run out,
// so the source read skips the cell as HBase does.
func sourceTags(i int) []byte {
	tag := func(typ byte, v ...byte) []byte {
		return append(binary.BigEndian.AppendUint16(nil, uint16(1+len(v))), append([]byte{typ}, v...)...)
	}
	ttl := func(ms uint64) []byte { return tag(8, binary.BigEndian.AppendUint64(nil, ms)...) }
	switch i % 5 {
	case 1:
		return ttl(10 * 365 * 86400 * 1000)
	case 2:
		return append(tag(1, []byte("user-a")...), tag(2, 0, 1, 0, 2)...)
	case 3:
		return tag(0x81, []byte("custom")...)
	case 4:
		return ttl(1000)
	}
	return nil
}

// runHFiles prepares j's target (pre-split at newSplits, hex) and runs j
// through staged HFiles and bulk load: staging on the cluster's HDFS,
// where bulk load needs the files, 4 MiB of memory, 2 workers.
func runHFiles(t *testing.T, ctx context.Context, st *testenv.State, j *job.Job, newSplits []string) (*pipeline.Summary, error) {
	t.Helper()
	client := targetClient(t, ctx, j, newSplits)
	sink, err := hfiles.New(ctx, hfiles.Options{Staging: "hdfs://" + st.NameNode + "/tmp/" + j.Target.Table, Table: j.Target.Table, Client: client, Memory: 4 << 20, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	return pipeline.Execute(ctx, j, pipeline.Options{Sink: sink, Workers: 2})
}

// snapshotTags snapshots a live table and returns its cells with their
// tags as HBase's TableSnapshotScanner reads them (a client scan does not
// return tags).
func snapshotTags(t *testing.T, st *testenv.State, table string) []cell.Cell {
	t.Helper()
	name := table + "_tags_snap"
	testenv.Oracle(t, "snapshot", table, name)
	t.Cleanup(func() { testenv.Drop([]string{name}, nil) })
	cells, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, name, "--tags"))
	if err != nil {
		t.Fatal(err)
	}
	return cells
}

// TestTagsThroughRuns: a source whose cells carry tags, written by HBase's
// StoreFileWriter (FAST_DIFF, tags dictionary-compressed) and bulk loaded,
// goes through the salt preset twice. HBase reads both targets back
// through snapshots. Through staged HFiles and bulk load every cell keeps
// its tags byte for byte; through puts too, since the puts sink sends
// KeyValueCodecWithTags cell blocks (with the tagless KeyValueCodec it
// dropped them, and copied cells with a per-cell TTL never expired).
func TestTagsThroughRuns(t *testing.T) {
	st := testenv.Require(t)
	ctx := context.Background()
	p := presets["salt"]
	src := uniq(t, "tags_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	cells := p.gen(rand.New(rand.NewSource(11)))
	for i := range cells {
		cells[i].Tags = sourceTags(i)
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "source.cells")
	if err := os.WriteFile(dump, testenv.DumpCellsTags(cells), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(map[string]any{
		"table": src, "split_keys": p.split,
		"families": []map[string]any{{"name": "t", "versions": 3, "encoding": "FAST_DIFF", "compress_tags": true}},
		"steps":    []map[string]any{{"op": "bulk_cells", "file": dump}, {"op": "snapshot", "name": snap}},
	})
	specPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Oracle(t, "seed", specPath)
	source, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap, "--tags"))
	if err != nil {
		t.Fatal(err)
	}
	tagged := 0
	for i := range source {
		if len(source[i].Tags) > 0 {
			tagged++
		}
	}
	if tagged == 0 || len(source) == len(cells) {
		t.Fatalf("HBase's source: %d cells of %d written, %d with tags; want tags and the run-out TTLs skipped", len(source), len(cells), tagged)
	}
	want := expect(p, source) // the rule keeps each cell's tags

	t.Run("hfiles", func(t *testing.T) {
		dst := uniq(t, "tags_hf_dst")
		testenv.DropAfter(t, dst, "")
		j := loadJob(t, p, st, snap, dst)
		sum, err := runHFiles(t, ctx, st, j, p.newSplits)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if !sum.Finished || sum.Written != int64(len(want)) {
			t.Errorf("finished %v, written %d, want %d", sum.Finished, sum.Written, len(want))
		}
		testenv.SameCellsTags(t, "bulk-loaded target, tags included", snapshotTags(t, st, dst), want)
	})

	t.Run("puts", func(t *testing.T) {
		dst := uniq(t, "tags_put_dst")
		testenv.DropAfter(t, dst, "")
		j := loadJob(t, p, st, snap, dst)
		sum, err := runPuts(t, ctx, j, p.newSplits, pipeline.Options{})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if !sum.Finished || sum.Written != int64(len(want)) {
			t.Errorf("finished %v, written %d, want %d", sum.Finished, sum.Written, len(want))
		}
		testenv.SameCellsTags(t, "target written by puts, tags included", snapshotTags(t, st, dst), want)
	})

	// Bigtable has no place for tags: each tagged cell is written
	// without them and counted, with a warning; with tags: fail the run
	// stops at the first.
	t.Run("bigtable", func(t *testing.T) {
		table := uniq(t, "tags_bt")
		j := bigtableJob(t, p, st, snap, table)
		sum, err := pipeline.Execute(ctx, j, pipeline.Options{Workers: 2})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		var untagged []cell.Cell
		withTags := int64(0)
		for _, c := range want {
			if len(c.Tags) > 0 {
				withTags++
			}
			c.Tags = nil
			untagged = append(untagged, c)
		}
		stats, _ := sum.SinkStats.(bt.Stats)
		if !sum.Finished || sum.Written != int64(len(want)) || stats.TagsDropped != withTags || len(sum.Warnings) == 0 {
			t.Errorf("finished %v, written %d (want %d), tags dropped %d (want %d), warnings %q", sum.Finished, sum.Written, len(want), stats.TagsDropped, withTags, sum.Warnings)
		}
		sameCells(t, "bigtable target", readBigtable(t, table), inBigtable(untagged))

		jf := bigtableJob(t, p, st, snap, uniq(t, "tags_bt_fail"))
		jf.Target.Bigtable.FailOnTags = true
		if _, err := pipeline.Execute(ctx, jf, pipeline.Options{Workers: 2}); err == nil || !strings.Contains(err.Error(), "tags: fail") {
			t.Errorf("tags: fail: %v", err)
		}
	})
}
