package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

// runShard runs shard i of n of the demo job through the dry-run sink
// and returns its summary and the IDs of the splits it read.
func runShard(t *testing.T, ckpt string, i, n int, splitBytes int64, logs *[]string) (*pipeline.Summary, error) {
	t.Helper()
	j := demoJob(t)
	j.Run.Checkpoint = ckpt
	j.Run.SplitBytes = splitBytes
	o := pipeline.Options{Sink: sink.DryRun{}, Shard: pipeline.Shard{Index: i, Count: n}}
	if logs != nil {
		o.Logf = func(f string, a ...any) { *logs = append(*logs, f) }
	}
	return pipeline.Execute(context.Background(), j, o)
}

// TestJobCoverageProvenByTheLastShard: three dry-run shards of one job;
// each commits its splits beside the job's checkpoint, the first two
// report the job waiting for the others, the last proves that the
// shards' splits are the record's, each once, and that they read every
// cell of the snapshot (31413, the oracle's dump of the bundled
// snapshot, testdata/snapshots/demo_events.cells).
func TestJobCoverageProvenByTheLastShard(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "c.json")
	var read int64
	for i := range 3 {
		sum, err := runShard(t, ckpt, i, 3, 16<<10, nil)
		if err != nil {
			t.Fatalf("shard %d/3: %v", i, err)
		}
		read += sum.Read
		cov := sum.Coverage
		if cov == nil || cov.Shards != 3 || cov.Committed != i+1 || cov.Proven != (i == 2) {
			t.Fatalf("shard %d/3: coverage %+v, want %d of 3 committed, proven only by the last", i, cov, i+1)
		}
	}
	if read != 31413 {
		t.Errorf("the shards read %d cells, want the snapshot's 31413", read)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ckpt), "c.job.json")); err != nil {
		t.Errorf("the job record is not beside the checkpoint: %v", err)
	}
}

// TestJobRecordRefusesAnotherCut: a shard retried with another explicit
// split size, or as a shard of another count, is refused before it reads
// a cell (ErrJobMismatch, naming what differs), where before it read a
// cut of its own: some keys twice, others never.
func TestJobRecordRefusesAnotherCut(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "c.json")
	if _, err := runShard(t, ckpt, 0, 3, 16<<10, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		i, n       int
		splitBytes int64
		want       string
	}{
		{"another split size", 1, 3, 40000, "split size: the job record"},
		{"another shard count", 1, 2, 16 << 10, "deals the splits to 3 shards"},
		{"split per region", 1, 3, -1, "split size"},
	} {
		sum, err := runShard(t, ckpt, tc.i, tc.n, tc.splitBytes, nil)
		if !errors.Is(err, pipeline.ErrJobMismatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrJobMismatch naming %q", tc.name, err, tc.want)
		}
		if sum != nil && sum.Read != 0 {
			t.Errorf("%s: read %d cells before it was refused", tc.name, sum.Read)
		}
	}
}

// TestJobRecordCutAdopted: a shard whose split size is the build's
// default (none given) takes the record's size and says so, instead of
// cutting its own (what a build with another default would do), and the
// job's coverage is proven with every cell read once.
func TestJobRecordCutAdopted(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "c.json")
	first, err := runShard(t, ckpt, 0, 2, 40000, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	second, err := runShard(t, ckpt, 1, 2, 0, &logs)
	if err != nil {
		t.Fatal(err)
	}
	if second.SplitBytes != 40000 {
		t.Errorf("the second shard cut at %d bytes, want the record's 40000", second.SplitBytes)
	}
	if !strings.Contains(strings.Join(logs, "\n"), "this task takes its cut") {
		t.Errorf("the second shard did not say it took the record's cut:\n%s", strings.Join(logs, "\n"))
	}
	if second.Coverage == nil || !second.Coverage.Proven {
		t.Errorf("coverage %+v, want proven", second.Coverage)
	}
	if n := first.Read + second.Read; n != 31413 {
		t.Errorf("the shards read %d cells, want 31413", n)
	}
}

// TestJobCoverageGapRefused: a shard commit that lost a split (what a
// shard that cut otherwise leaves) makes the last shard fail with
// ErrCoverage naming the split, not report the job done.
func TestJobCoverageGapRefused(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "c.json")
	if _, err := runShard(t, ckpt, 0, 2, 16<<10, nil); err != nil {
		t.Fatal(err)
	}
	commit := filepath.Join(dir, "c.shards", "shard-0000-of-0002.json")
	b, err := os.ReadFile(commit)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	splits := c["splits"].([]any)
	lost := splits[0].(string)
	c["splits"] = splits[1:]
	b, _ = json.Marshal(c)
	os.WriteFile(commit, b, 0o644)
	_, err = runShard(t, ckpt, 1, 2, 16<<10, nil)
	if !errors.Is(err, pipeline.ErrCoverage) || !strings.Contains(err.Error(), "split "+lost) || !strings.Contains(err.Error(), "committed by no task") {
		t.Fatalf("the last shard over a commit missing split %s: %v, want ErrCoverage naming it", lost, err)
	}
}

// TestJobRecordFreshStartsOver: --fresh on a task of another cut
// discards the record and the shards' commits, so the job starts over
// under the task's cut.
func TestJobRecordFreshStartsOver(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "c.json")
	if _, err := runShard(t, ckpt, 0, 1, 16<<10, nil); err != nil {
		t.Fatal(err)
	}
	j := demoJob(t)
	j.Run.Checkpoint, j.Run.SplitBytes = ckpt, 40000
	sum, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.SplitBytes != 40000 || sum.Coverage == nil || !sum.Coverage.Proven || sum.Read != 31413 {
		t.Errorf("fresh run: split size %d, coverage %+v, %d cells; want 40000, proven, 31413", sum.SplitBytes, sum.Coverage, sum.Read)
	}
}

// TestStaleDamagedCommitIgnored: a damaged shard commit left by an
// earlier record of the folder (the job record removed, or a job of
// another shard count) stopped every later shard, --fresh included; a
// record published anew clears such commits, and commits of another
// shard count are not read. Found by TestSchedules (seed
// 1796612970887613640).
func TestStaleDamagedCommitIgnored(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "c.json")
	if _, err := runShard(t, ckpt, 2, 4, -1, nil); err != nil {
		t.Fatal(err)
	}
	commit := filepath.Join(dir, "c.shards", "shard-0002-of-0004.json")
	b, err := os.ReadFile(commit)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(commit, b[:len(b)/2], 0o644)
	os.Remove(filepath.Join(dir, "c.job.json"))
	for i := range 2 {
		sum, err := runShard(t, ckpt, i, 2, -1, nil)
		if err != nil {
			t.Fatalf("shard %d/2 of the job begun again: %v", i, err)
		}
		if i == 1 && (sum.Coverage == nil || !sum.Coverage.Proven) {
			t.Errorf("coverage %+v, want proven", sum.Coverage)
		}
	}
}

// TestCheckpointTempsSwept: the temporaries a killed run left beside its
// checkpoint (NAME.tmp-PID-..., of the base and of its journals) are
// removed by the next run under the lease; another shard's are not.
func TestCheckpointTempsSwept(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "c.json")
	mine := []string{"c.shard-0-of-2.json.tmp-123-456-1", "c.shard-0-of-2.json.journal-3.tmp-123-457-2"}
	theirs := "c.shard-1-of-2.json.tmp-99-1-1"
	for _, n := range append(mine, theirs) {
		os.WriteFile(filepath.Join(dir, n), []byte("{"), 0o644)
	}
	if _, err := runShard(t, ckpt, 0, 2, 16<<10, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range mine {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Errorf("%s is still there", n)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, theirs)); err != nil {
		t.Errorf("another shard's temporary was removed: %v", err)
	}
}
