package state

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/vfstest"
	"github.com/rekeyhq/rekey/vfs"
)

func testJob() *Job {
	return &Job{
		JobFile: "j.yaml", Task: "puts shard 0/2", Published: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC),
		Identity:   []Field{{"source snapshot", "s1"}, {"sink", "puts"}},
		SplitBytes: 1 << 20, CutRule: "at rows", Shards: 2,
		Splits: []Split{
			{ID: "a", Region: "r1", StartRow: nil, StopRow: []byte("m"), Shard: 0},
			{ID: "b", Region: "r1", StartRow: []byte("m"), StopRow: []byte("t"), Shard: 1},
			{ID: "c", Region: "r2", StartRow: []byte("t"), StopRow: nil, Shard: 0},
		},
	}
}

// TestCover: the commits must hold every split of the record once and
// nothing else; each refusal names the split's key range and the tasks.
func TestCover(t *testing.T) {
	j := testJob()
	for _, tc := range []struct {
		name    string
		commits []Commit
		want    []string // "" entries: no error
	}{
		{"exact", []Commit{{"shard 0/2", []string{"a", "c"}}, {"shard 1/2", []string{"b"}}}, nil},
		{"gap", []Commit{{"shard 0/2", []string{"a", "c"}}, {"shard 1/2", nil}}, []string{`split b (region r1, rows ["m", "t")) of shard 1/2 is committed by no task`}},
		{"double", []Commit{{"shard 0/2", []string{"a", "b", "c"}}, {"shard 1/2", []string{"b"}}}, []string{"split b", "committed twice, by shard 0/2 and by shard 1/2"}},
		{"other cut", []Commit{{"shard 0/2", []string{"a", "c"}}, {"shard 1/2", []string{"b1", "b2"}}}, []string{"shard 1/2 committed split b1, which is not in the job's cut", "split b ("}},
		{"nothing", nil, []string{"split a", "split b", "split c"}},
	} {
		err := j.Cover(tc.commits)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrCoverage) {
			t.Errorf("%s: %v, want ErrCoverage", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to name %q", tc.name, err, w)
			}
		}
	}
}

// TestCheckIdentity names the first field that differs, and refuses a
// field one side does not know.
func TestCheckIdentity(t *testing.T) {
	j := testJob()
	if err := j.CheckIdentity([]Field{{"source snapshot", "s1"}, {"sink", "puts"}}); err != nil {
		t.Errorf("same identity: %v", err)
	}
	for _, tc := range []struct {
		task []Field
		want string
	}{
		{[]Field{{"source snapshot", "s2"}, {"sink", "puts"}}, "source snapshot is s1 in the job record"},
		{[]Field{{"source snapshot", "s1"}, {"sink", "dry-run"}}, "sink is puts in the job record"},
		{[]Field{{"source snapshot", "s1"}, {"sink", "puts"}, {"time range", "x"}}, "holds no time range"},
		{[]Field{{"source snapshot", "s1"}}, "the job record's sink (puts) is not known to this build"},
	} {
		err := j.CheckIdentity(tc.task)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want ErrMismatch naming %q", tc.task, err, tc.want)
		}
	}
}

// TestSameCut finds a split the task cuts otherwise, lacks, or adds.
func TestSameCut(t *testing.T) {
	j := testJob()
	same := append([]Split(nil), j.Splits...)
	if d := j.SameCut(same); d != "" {
		t.Errorf("same cut: %s", d)
	}
	moved := append([]Split(nil), j.Splits...)
	moved[1].StopRow = []byte("u")
	if d := j.SameCut(moved); !strings.Contains(d, "split b is") {
		t.Errorf("moved bound: %q", d)
	}
	if d := j.SameCut(j.Splits[:2]); !strings.Contains(d, "split c") {
		t.Errorf("missing split: %q", d)
	}
	extra := append(append([]Split(nil), j.Splits...), Split{ID: "d", Region: "r3"})
	if d := j.SameCut(extra); !strings.Contains(d, "split d") {
		t.Errorf("extra split: %q", d)
	}
}

// TestPublishRaceOnObjectStore: of two first tasks on an object store,
// the one whose write lands second gets fs.ErrExist at Close; it must
// take the winner's record, not remove it (the plan's publish removed
// the winner's file before this fix).
func TestPublishRaceOnObjectStore(t *testing.T) {
	fs := vfstest.LateExclusive{Mem: vfs.NewMem()}
	fs.MkdirAll("/st")
	winner := testJob()
	winner.Task = "winner"
	if _, won, err := PublishJob(fs, "/st/job.json", winner); err != nil || !won {
		t.Fatalf("first publish: won %v, %v", won, err)
	}
	loser := testJob()
	loser.Task = "loser"
	got, won, err := PublishJob(fs, "/st/job.json", loser)
	if err != nil || won || got.Task != "winner" {
		t.Fatalf("second publish: won %v, record of %q, %v; want the winner's record", won, got.Task, err)
	}
	if _, found, err := ReadJob(fs, "/st/job.json"); !found || err != nil {
		t.Fatalf("the winner's record is gone after the loser's publish: found %v, %v", found, err)
	}
}

// TestReadRefusesDamage: a record that never becomes whole, one of a
// later format and one whose splits are dealt outside its shard count are
// refused, each by name.
func TestReadRefusesDamage(t *testing.T) {
	saved := Wait
	Wait = 10 * time.Millisecond
	defer func() { Wait = saved }()
	fs := vfs.NewMem()
	fs.WriteFile("/short.json", []byte(`{"format": 1, "shards": 2, "spl`))
	fs.WriteFile("/later.json", []byte(`{"format": 99, "shards": 1}`))
	fs.WriteFile("/dealt.json", []byte(`{"format": 1, "shards": 1, "splits": [{"id": "a", "shard": 3}]}`))
	fs.WriteFile("/unknown.json", []byte(`{"format": 1, "shards": 1, "novel": true}`))
	for name, want := range map[string]string{
		"/short.json":   "is not a whole job record",
		"/later.json":   "newer than this build's",
		"/dealt.json":   "dealt to shard 3 of 1",
		"/unknown.json": "is not a whole job record",
	} {
		_, _, err := ReadJob(fs, name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	if _, found, err := ReadJob(fs, "/none.json"); found || err != nil {
		t.Errorf("no record: found %v, %v", found, err)
	}
}

// TestShardCommits: commits under another record are skipped, a damaged
// one refused by name.
func TestShardCommits(t *testing.T) {
	fs := vfs.NewMem()
	j := testJob()
	if err := CommitShard(fs, "/c.shards", ShardCommit{Shard: 0, Count: 2, Record: j.Digest(), Splits: []string{"a", "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := CommitShard(fs, "/c.shards", ShardCommit{Shard: 1, Count: 2, Record: "earlier", Splits: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	cs, err := ReadShardCommits(fs, "/c.shards", j.Digest(), 2)
	if err != nil || len(cs) != 1 || cs[0].Shard != 0 {
		t.Fatalf("commits %+v, %v; want shard 0's only", cs, err)
	}
	if err := j.Cover(Commits(cs)); !errors.Is(err, ErrCoverage) {
		t.Errorf("one of two shards: %v, want ErrCoverage", err)
	}
	// A damaged file of another count is no commit of this job's.
	fs.WriteFile("/c.shards/shard-0002-of-0004.json", []byte(`{"shard": 2,`))
	if _, err := ReadShardCommits(fs, "/c.shards", j.Digest(), 2); err != nil {
		t.Errorf("a damaged commit of another shard count: %v", err)
	}
	fs.WriteFile("/c.shards/shard-0001-of-0002.json", []byte(`{"shard": 1,`))
	if _, err := ReadShardCommits(fs, "/c.shards", j.Digest(), 2); err == nil || !strings.Contains(err.Error(), "shard-0001-of-0002.json is damaged") {
		t.Errorf("damaged commit: %v", err)
	}
}
