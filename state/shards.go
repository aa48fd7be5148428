package state

import (
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/vfs"
)

// ShardCommit is what a shard of a job in one process (puts, dry-run, or
// staged HFiles each shard loading its own folder) records once every
// split it was dealt is durable: the last shard to finish reads every
// shard's commit and proves the job's coverage (Job.Cover).
type ShardCommit struct {
	Shard int `json:"shard"`
	Count int `json:"count"`
	// Record is the Digest of the job record the shard ran under.
	Record    string    `json:"record"`
	Splits    []string  `json:"splits"`
	Committed time.Time `json:"committed"`
	// Lease is the shard's lease as its attempt held it when it committed
	// (none on a local path), and LeaseFile that lease's folder (a URL):
	// HDFS cannot refuse a commit's rename, so a commit of an attempt
	// another took the shard from can land late, over the holder's; the
	// reader leaves it out (LeaveOutSuperseded).
	Lease     Stamp  `json:"lease,omitzero"`
	LeaseFile string `json:"lease_file,omitempty"`
}

// Task names the shard for messages.
func (c ShardCommit) Task() string { return fmt.Sprintf("shard %d/%d", c.Shard, c.Count) }

// RecordBeside is where the job record of a job in one process lies:
// beside the job's checkpoint (a path or URL ending .json), which every
// shard's checkpoint sits beside, so all shards find one record.
func RecordBeside(checkpoint string) string {
	return strings.TrimSuffix(checkpoint, ".json") + ".job.json"
}

// CommitsBeside is the folder the shards commit to beside the record at
// record (RecordBeside's).
func CommitsBeside(record string) string {
	return strings.TrimSuffix(record, ".job.json") + ".shards"
}

// shardFile is a shard's commit inside the commit folder.
func shardFile(dir string, shard, count int) string {
	return path.Join(dir, fmt.Sprintf("shard-%04d-of-%04d.json", shard, count))
}

// CommitShard records c in the commit folder dir, atomically; an attempt
// run again replaces its earlier commit.
func CommitShard(fsys vfs.WriteFS, dir string, c ShardCommit) error {
	if err := fsys.MkdirAll(dir); err != nil {
		return fmt.Errorf("record: create %s: %w", dir, err)
	}
	if c.Splits == nil {
		c.Splits = []string{}
	}
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return err
	}
	name := shardFile(dir, c.Shard, c.Count)
	if err := vfs.WriteFileAtomic(fsys, name, b); err != nil {
		return fmt.Errorf("record: commit %s: %w", name, err)
	}
	return nil
}

// RemoveShard removes the commit of shard of count in dir, if any: the
// shard starts over (--fresh), so what it committed before no longer
// stands for its splits.
func RemoveShard(fsys vfs.WriteFS, dir string, shard, count int) error {
	name := shardFile(dir, shard, count)
	if err := fsys.Remove(name); err != nil && !errors.Is(err, iofs.ErrNotExist) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("record: remove %s: %w", name, err)
	}
	return nil
}

// ReadShardCommits reads every shard commit in dir made under the record
// whose Digest is digest, of count shards; commits under another record
// (an earlier job in the same folder) are skipped, and so, unread, are
// the files of another shard count, which no task of this record wrote.
func ReadShardCommits(fsys vfs.FS, dir, digest string, count int) ([]ShardCommit, error) {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("record: list %s: %w", dir, err)
	}
	var out []ShardCommit
	for _, e := range ents {
		var i, n int
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue // WriteFileAtomic's temporaries
		}
		if _, err := fmt.Sscanf(e.Name(), "shard-%04d-of-%04d.json", &i, &n); err != nil || n != count {
			continue
		}
		name := path.Join(dir, e.Name())
		b, err := vfs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("record: read %s: %w", name, err)
		}
		var c ShardCommit
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("record: %s is damaged (%v); rerun shard %d/%d", name, err, i, n)
		}
		if c.Shard != i || c.Count != n {
			return nil, fmt.Errorf("record: %s records shard %d/%d; the folder is damaged", name, c.Shard, c.Count)
		}
		if c.Record != digest {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// LeaveOutSuperseded returns the commits of cs but those made by an
// attempt that lost its shard's lease to a takeover, with a line for each
// one left out: that shard counts as not committed, until its holder
// commits again. read reads the superseded attempts of the lease folder a
// commit names (ReadSuperseded); it is asked once per folder. Unstamped
// commits (a local run's, a rekey's from before stamps) are kept.
func LeaveOutSuperseded(cs []ShardCommit, read func(lease string) (Superseded, error)) ([]ShardCommit, []string, error) {
	seen := map[string]Superseded{}
	out := make([]ShardCommit, 0, len(cs))
	var ignored []string
	for _, c := range cs {
		if c.Lease.Token == "" || c.LeaseFile == "" {
			out = append(out, c)
			continue
		}
		sup, ok := seen[c.LeaseFile]
		if !ok {
			var err error
			if sup, err = read(c.LeaseFile); err != nil {
				return nil, nil, fmt.Errorf("record: the commit of %s: %w", c.Task(), err)
			}
			seen[c.LeaseFile] = sup
		}
		if sup.Of(c.Lease) {
			ignored = append(ignored, fmt.Sprintf("left out the commit of %s, since %s; the shard counts as committed once its holder commits", c.Task(), sup.Why(c.Lease)))
			continue
		}
		out = append(out, c)
	}
	return out, ignored, nil
}

// Commits turns shard commits into what Cover takes.
func Commits(cs []ShardCommit) []Commit {
	out := make([]Commit, 0, len(cs))
	for _, c := range cs {
		out = append(out, Commit{Task: c.Task(), Splits: c.Splits})
	}
	return out
}
