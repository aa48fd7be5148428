package job

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// IdentityField is one named part of what a job writes: a refusal names
// the part that differs instead of showing two digests.
type IdentityField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// OutputIdentity is what decides which cells a job's output holds under
// which keys, whatever run or task wrote it: the source snapshot, the old
// and new key layouts, the family mapping, the entity and the target
// table, in the order the job record (package state) has always listed
// them, so a record's digest does not change with this function. A staging folder records it (StagedIdentityFile), so that a
// run or a verify of another job on the folder is refused by name rather
// than mixing two jobs' cells, or reporting every cell missing.
func (j *Job) OutputIdentity() []IdentityField {
	oldKey, newKey := "", ""
	if j.Program != nil {
		oldKey, newKey = j.Program.Describe()
	}
	fams := make([]string, 0, len(j.Spec.Families))
	for o, n := range j.Spec.Families {
		fams = append(fams, o+"->"+n)
	}
	sort.Strings(fams)
	entity, _ := json.Marshal(j.Spec.Entity)
	return []IdentityField{
		{Name: "source snapshot", Value: j.Source.Name},
		{Name: "old key layout", Value: oldKey},
		{Name: "new key layout", Value: newKey},
		{Name: "family mapping", Value: "[" + strings.Join(fams, ", ") + "]"},
		{Name: "entity fields", Value: string(entity)},
		{Name: "target table", Value: j.Target.Table},
	}
}

// StagedIdentityFile is the file in a staging folder naming the job
// whose output the folder holds: a StagedIdentity, written once by the
// first run or spill task that staged into it.
const StagedIdentityFile = "identity.json"

// RunSummaryFile is the file in a job's state folder (Job.StateDir) that
// holds the summary of the job's last run in one process, as its --json
// prints it: verify reports beside what it checked what the run did
// (cells read, written, rejected, collided; its time).
const RunSummaryFile = "summary.json"

// StagedIdentity is the content of StagedIdentityFile.
type StagedIdentity struct {
	Format int `json:"format"`
	// JobFile is the job file of the run that wrote it, for messages.
	JobFile  string          `json:"job_file"`
	Identity []IdentityField `json:"identity"`
	// StateDir is the state folder of the run or task that began the
	// folder (Job.StateDir, absolute when local): where its entity
	// sketches and reject files are, which a verify of the folder reads
	// even when the run's --checkpoint put them elsewhere than the job
	// file's default. Empty in folders staged before it was recorded.
	StateDir string `json:"state_dir,omitempty"`
	// Since is the snapshot a catch-up started from when the folder holds
	// a catch-up's output (rekey run JOB --since A): only the difference
	// between that snapshot and the source snapshot, puts and version
	// deletes, which is no copy of the source to verify against. Empty
	// for a whole run.
	Since string `json:"since,omitempty"`
}

// Mismatch names the first part of a recorded identity that differs from
// ours, as "new key layout: "a" there, "b" in this job"; "" when every
// part both name agrees. A part only one side names (a field added by a
// later version) decides nothing.
func Mismatch(recorded, ours []IdentityField) string {
	have := make(map[string]string, len(recorded))
	for _, f := range recorded {
		have[f.Name] = f.Value
	}
	for _, f := range ours {
		if v, ok := have[f.Name]; ok && v != f.Value {
			return fmt.Sprintf("%s: %q there, %q in this job", f.Name, v, f.Value)
		}
	}
	return ""
}
