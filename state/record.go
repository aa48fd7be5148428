// The job record, a job's one truth across machines.
//
// A job runs as many tasks on many machines (spill shards, merge parts, a
// load; puts shards), each of which cuts the snapshot into splits and
// takes its share. Two tasks that cut differently (another build's cut
// rule, another --split-bytes for one retried pod, another shard count)
// each finish exactly, and together read some keys twice and others
// never. So the first task of a job publishes, by exclusive create in
// the job's state folder, what the job is (its identity, the split size
// and cut rule, the shard count) and the whole ordered list of its
// splits with their key ranges and shards. Every later task checks it
// before it reads a cell and takes its splits from it; and whatever
// merges, loads or ends the job proves first that the splits the tasks
// committed are the record's, each exactly once (Job.Cover).
//
// The record is written once and never changed: a job started over is
// a new record (--fresh removes the old one).

package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/vfs"
)

// FormatVersion is the record's format. A reader refuses a record of a
// later format, whose fields it may not know.
const FormatVersion = 1

// ErrMismatch is matched by the error of a task whose job differs from
// the job record in its state folder: another snapshot, layout, scan,
// sink, shard count or an explicit split size. The task's options are at
// fault, not the data.
var ErrMismatch = errors.New("state: the task is not of the job its state folder records")

// ErrCoverage is matched by the error of a merge, load or end of a job
// whose committed splits are not the job record's, each exactly once: a
// split no task committed, one committed twice, or one the record does
// not hold. It is final: running the same tasks again does not mend it.
var ErrCoverage = errors.New("state: the committed splits do not cover the job exactly once")

// Job is the job record.
type Job struct {
	// Format is FormatVersion when written.
	Format int `json:"format"`
	// JobFile is the job file the first task ran, for messages.
	JobFile string `json:"job_file"`
	// Build is the rekey build that published the record.
	Build string `json:"build,omitempty"`
	// Task names the task that published it ("puts shard 0/3").
	Task      string    `json:"published_by"`
	Published time.Time `json:"published"`
	// Identity is what decides which cells the job writes where, apart
	// from the cut: each field named, in a fixed order.
	Identity []Field `json:"identity"`
	// SplitBytes is the split size the job cuts by (0: a split per
	// region); DefaultSize says it was the build's default, not a size
	// the job or a flag gave.
	SplitBytes  int64 `json:"split_bytes"`
	DefaultSize bool  `json:"default_split_size"`
	// CutRule is how the regions are cut ("at rows", ...).
	CutRule string `json:"cut_rule"`
	// Shards is how many tasks read the splits.
	Shards int `json:"shards"`
	// Splits are every split of the job, in the order they were dealt.
	Splits []Split `json:"splits"`
	// TTLTime is the time, in epoch milliseconds, every task of a job
	// that measures TTLs from "now" reads them as of: the first task's
	// start. Without it each task and each resumed attempt read as of its
	// own start, and a cell that expired in between was in some splits'
	// output and not in others'. 0: the job fixes its TTL time itself
	// (scan.ttl_at), or the record is of a build before this field.
	TTLTime int64 `json:"ttl_time_ms,omitempty"`
}

// Field is one named part of a job's identity; Value is its canonical
// text (JSON for structured values).
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Split is one split of a job: its ID, where it lies and which shard
// reads it.
type Split struct {
	ID     string `json:"id"`
	Region string `json:"region"`
	// StartRow is inclusive, StopRow exclusive (empty: to the end); a
	// piece cut inside a row names the column it starts or ends at.
	StartRow    []byte  `json:"start_row"`
	StopRow     []byte  `json:"stop_row"`
	StartColumn *Column `json:"start_column,omitempty"`
	EndColumn   *Column `json:"end_column,omitempty"`
	Bytes       int64   `json:"bytes"`
	Shard       int     `json:"shard"`
}

// Column is where a piece cut inside a row starts or ends.
type Column struct {
	Family    []byte `json:"family"`
	Qualifier []byte `json:"qualifier"`
}

// Range names the split's key range for a message.
func (s Split) Range() string {
	var b strings.Builder
	fmt.Fprintf(&b, "region %s, rows [%s, %s)", s.Region, printable(s.StartRow), printable(s.StopRow))
	if c := s.StartColumn; c != nil {
		fmt.Fprintf(&b, " from column %s:%s", printable(c.Family), printable(c.Qualifier))
	}
	if c := s.EndColumn; c != nil {
		fmt.Fprintf(&b, " before column %s:%s", printable(c.Family), printable(c.Qualifier))
	}
	return b.String()
}

// printable quotes a key for a message; the empty key is an open end.
func printable(k []byte) string {
	if len(k) == 0 {
		return "''"
	}
	return fmt.Sprintf("%q", k)
}

// ShardSplits returns the IDs of the splits the record deals to shard i,
// in the record's order.
func (j *Job) ShardSplits(i int) []string {
	var out []string
	for _, s := range j.Splits {
		if s.Shard == i {
			out = append(out, s.ID)
		}
	}
	return out
}

// CheckIdentity compares a task's identity with the record's, field by
// field, and names the first that differs (or is missing on one side).
func (j *Job) CheckIdentity(task []Field) error {
	have := map[string]string{}
	for _, f := range j.Identity {
		have[f.Name] = f.Value
	}
	for _, f := range task {
		v, ok := have[f.Name]
		if !ok {
			return fmt.Errorf("%w: the job record holds no %s (it was published by %s); this build records it", ErrMismatch, f.Name, j.by())
		}
		if v != f.Value {
			return fmt.Errorf("%w: %s is %s in the job record (published by %s), %s for this task", ErrMismatch, f.Name, v, j.by(), f.Value)
		}
		delete(have, f.Name)
	}
	for _, f := range j.Identity {
		if _, left := have[f.Name]; left {
			return fmt.Errorf("%w: the job record's %s (%s) is not known to this build; finish the job with the build that started it (%s)", ErrMismatch, f.Name, f.Value, j.by())
		}
	}
	return nil
}

// SameCut reports where splits, cut by this task with the record's size
// and rule, differ from the record's: the first split that is not the
// same key range, or "" when they are alike.
func (j *Job) SameCut(splits []Split) string {
	mine := map[string]Split{}
	for _, s := range splits {
		mine[s.ID] = s
	}
	for _, s := range j.Splits {
		m, ok := mine[s.ID]
		if !ok {
			return fmt.Sprintf("split %s (%s) is not among this task's", s.ID, s.Range())
		}
		if !bytes.Equal(m.StartRow, s.StartRow) || !bytes.Equal(m.StopRow, s.StopRow) || !sameColumn(m.StartColumn, s.StartColumn) || !sameColumn(m.EndColumn, s.EndColumn) {
			return fmt.Sprintf("split %s is %s in the record, %s for this task", s.ID, s.Range(), m.Range())
		}
		delete(mine, s.ID)
	}
	for _, s := range splits {
		if _, left := mine[s.ID]; left {
			return fmt.Sprintf("this task's split %s (%s) is not in the record", s.ID, s.Range())
		}
	}
	return ""
}

func sameColumn(a, b *Column) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return bytes.Equal(a.Family, b.Family) && bytes.Equal(a.Qualifier, b.Qualifier)
}

func (j *Job) by() string {
	s := j.Task
	if j.Build != "" {
		s += ", rekey " + j.Build
	}
	return s + " at " + j.Published.Format(time.RFC3339)
}

// Commit is what one task committed: its name and the IDs of its splits.
type Commit struct {
	Task   string
	Splits []string
}

// Cover proves that the commits hold every split of the record exactly
// once and nothing else; the error names the split's key range and the
// tasks involved.
func (j *Job) Cover(commits []Commit) error {
	byID := map[string]*Split{}
	for i := range j.Splits {
		byID[j.Splits[i].ID] = &j.Splits[i]
	}
	who := map[string]string{}
	var problems []string
	for _, c := range commits {
		for _, id := range c.Splits {
			s := byID[id]
			switch {
			case s == nil:
				problems = append(problems, fmt.Sprintf("%s committed split %s, which is not in the job's cut (the task cut the snapshot differently)", c.Task, id))
			case who[id] != "":
				problems = append(problems, fmt.Sprintf("split %s (%s) is committed twice, by %s and by %s", id, s.Range(), who[id], c.Task))
			default:
				who[id] = c.Task
			}
		}
	}
	for _, s := range j.Splits {
		if who[s.ID] == "" {
			problems = append(problems, fmt.Sprintf("split %s (%s) of shard %d/%d is committed by no task", s.ID, s.Range(), s.Shard, j.Shards))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	more := ""
	if len(problems) > 3 {
		more = fmt.Sprintf("; and %d more", len(problems)-3)
		problems = problems[:3]
	}
	return fmt.Errorf("%w: %s%s; rerun the tasks named with --fresh, or the whole job with --fresh on every task", ErrCoverage, strings.Join(problems, "; "), more)
}

// PublishJob records j as the job of the state folder at name unless a task
// recorded one first, and returns the record in force and whether it is
// j. The file is created exclusively, so of two first tasks one wins and
// the other reads the winner's record.
func PublishJob(fsys vfs.WriteFS, name string, j *Job) (*Job, bool, error) {
	ex, ok := fsys.(vfs.ExclusiveFS)
	if !ok {
		return nil, false, fmt.Errorf("record: %s cannot create a file exclusively, so the tasks of a job cannot agree on one record", fsys)
	}
	j.Format = FormatVersion
	b, err := json.MarshalIndent(j, "", " ")
	if err != nil {
		return nil, false, err
	}
	won, err := vfs.WriteExclusive(ex, name, b)
	if err != nil {
		return nil, false, fmt.Errorf("record: write %s: %w", name, err)
	}
	if won {
		return j, true, nil
	}
	got, found, err := ReadJob(fsys, name)
	if err != nil {
		return nil, false, err
	}
	if !found {
		return nil, false, fmt.Errorf("record: %s was created by another task and then removed; run this task again", name)
	}
	return got, false, nil
}

// Wait bounds how long a reader waits for a record still being written:
// the first task creates the file, then writes it (on HDFS and a local
// disk the name exists before its bytes do).
var Wait = 10 * time.Second

// ReadJob reads the job record at name; found is false when there is none.
// A record that does not parse is read again for up to Wait before it is
// called damaged.
func ReadJob(fsys vfs.FS, name string) (_ *Job, found bool, _ error) {
	deadline := time.Now().Add(Wait)
	for {
		b, err := vfs.ReadFile(fsys, name)
		if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("record: read %s: %w", name, err)
		}
		var j Job
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&j)
		if err == nil {
			if j.Format > FormatVersion {
				return nil, false, fmt.Errorf("%w: %s is a job record of format %d, newer than this build's %d (published by %s); finish the job with that build", ErrMismatch, name, j.Format, FormatVersion, j.by())
			}
			if err := j.check(); err != nil {
				return nil, false, fmt.Errorf("record: %s is damaged: %v; start the job over with --fresh on every task", name, err)
			}
			return &j, true, nil
		}
		if time.Now().After(deadline) {
			return nil, false, fmt.Errorf("record: %s is not a whole job record (%v) after %s; if the task that began the job died while writing it, start the job over with --fresh on every task", name, err, Wait)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// check holds a record read back to what any writer writes: a shard
// count, splits dealt within it, no ID twice.
func (j *Job) check() error {
	if j.Shards < 1 {
		return fmt.Errorf("shard count %d", j.Shards)
	}
	seen := map[string]bool{}
	for _, s := range j.Splits {
		if s.ID == "" || seen[s.ID] {
			return fmt.Errorf("split %q listed twice or unnamed", s.ID)
		}
		seen[s.ID] = true
		if s.Shard < 0 || s.Shard >= j.Shards {
			return fmt.Errorf("split %s dealt to shard %d of %d", s.ID, s.Shard, j.Shards)
		}
	}
	return nil
}

// RemoveJob removes the record at name (a job started over); a missing
// record is not an error.
func RemoveJob(fsys vfs.WriteFS, name string) error {
	if err := fsys.Remove(name); err != nil && !errors.Is(err, iofs.ErrNotExist) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("record: remove %s: %w", name, err)
	}
	return nil
}

// Digest identifies the record, so that what a task commits under it is
// told from what it committed under an earlier record of the same folder
// (a job started over).
func (j *Job) Digest() string {
	b, _ := json.Marshal(struct {
		Identity   []Field
		SplitBytes int64
		CutRule    string
		Shards     int
		Splits     []Split
		Published  time.Time
	}{j.Identity, j.SplitBytes, j.CutRule, j.Shards, j.Splits, j.Published})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
