package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/source"
)

// What makes two runs the same work is the run's to say (the job, the
// source, the cut); package state stores the fingerprint in the
// checkpoint's base and journal header, and the run refuses a checkpoint
// whose fingerprint is not its own (checkCheckpoint).

// cutRule is how a run's regions are cut into splits, as its checkpoint's
// fingerprint records it.
type cutRule int

const (
	// cutRows cuts at row starts only.
	cutRows cutRule = iota
	// cutInRowGreedy cuts inside rows by the rule of the builds before
	// even in-row cuts (snapshot.SplitOptions.GreedyInRow).
	cutInRowGreedy
	// cutInRowEven cuts inside rows nearest even shares of each region.
	cutInRowEven
)

func (c cutRule) String() string {
	switch c {
	case cutInRowGreedy:
		return "inside rows, greedily"
	case cutInRowEven:
		return "inside rows, at even shares"
	default:
		return "at rows"
	}
}

// fingerprint hashes the parts of a run that decide which cells it writes
// where; anything else (workers, limits, progress) may change between a run
// and its resume.
func fingerprint(j *job.Job, id source.Identity, scan source.ScanOptions, splitBytes int64, cut cutRule, setTS int64, sink string, only []KeyRange, shard Shard) string {
	oldKey, newKey := j.Program.Describe()
	fams := make([]string, 0, len(j.Spec.Families))
	for o, n := range j.Spec.Families {
		fams = append(fams, o+"->"+n)
	}
	sort.Strings(fams)
	doc := struct {
		Snapshot, Table string
		Created         int64
		OldKey, NewKey  string
		Families        []string
		Entity          []string
		Target          string
		Scan            source.ScanOptions
		SplitBytes      int64
		SetTimestamp    int64
		Sink            string
		Only            []KeyRange
		Shard           Shard
		// InRow is left out when false, so the fingerprints of runs cut
		// at rows are those of the builds before in-row cuts; a run cut
		// inside rows never adopts their checkpoints, whose splits are
		// other key ranges.
		InRow bool `json:",omitempty"`
		// EvenCut is left out for the greedy in-row rule, so the
		// fingerprints of its runs are those of the builds before even
		// cuts.
		EvenCut bool `json:",omitempty"`
		// Kind and More are left out for a snapshot, so its fingerprints
		// are those of the builds before sources; another source's
		// differ from any snapshot's.
		Kind string         `json:",omitempty"`
		More []source.Field `json:",omitempty"`
	}{id.Name, id.Table, id.Created.UnixMilli(), oldKey, newKey, fams, j.Spec.Entity, j.Target.Table, scan, splitBytes, setTS, sink, only, shard, cut != cutRows, cut == cutInRowEven, "", id.More}
	if id.Kind != source.KindSnapshot {
		doc.Kind = id.Kind
	}
	b, _ := json.Marshal(doc)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
