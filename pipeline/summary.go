package pipeline

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/state"
)

// SplitStats counts one split's work, as the checkpoint records it
// (state.SplitStats).
type SplitStats = state.SplitStats

// Summary is what a run did.
type Summary struct {
	Job      string `json:"job"`
	Snapshot string `json:"snapshot"`
	Table    string `json:"target_table"`
	Sink     string `json:"sink"`
	// Workers is how many splits were read at once, and Budget how the
	// memory budget was divided between them and the sink.
	Workers int        `json:"workers"`
	Budget  job.Budget `json:"memory_budget"`
	// SplitBytes is the piece size regions were cut by (0 = one split per
	// region): the job's or --split-bytes, else the snapshot's default.
	SplitBytes int64 `json:"split_bytes"`
	// SplitInRow says the pieces may start and end inside a row, at a
	// column (the run maps cell by cell; see snapshot.SplitOptions.InRow);
	// false: every split holds whole rows.
	SplitInRow bool `json:"split_in_row"`
	// Splits counts every split of the run; Done those finished (also in
	// earlier runs); Skipped those an earlier run had finished.
	Splits  int `json:"splits"`
	Done    int `json:"splits_done"`
	Skipped int `json:"splits_skipped"`
	// Totals over every split the checkpoint records finished, by this run
	// or an earlier one (an unfinished split is redone, so its partial
	// counts are left out); BytesRead is what this run's splits read (a
	// sample read to plan the target's split keys is left out).
	Read      int64 `json:"cells_read"`
	Written   int64 `json:"cells_written"`
	Rejected  int64 `json:"cells_rejected"`
	Collided  int64 `json:"cells_collided"`
	Failed    int64 `json:"cells_failed"`
	Bytes     int64 `json:"bytes_written"`
	BytesRead int64 `json:"bytes_read"`
	// FilesChecked counts store files whose cell count was checked
	// against their trailer (see SplitStats).
	FilesChecked int `json:"files_count_checked"`
	// CollisionScope says how far collisions were looked for: "none" when
	// the layout maps one to one, "split" when within each split.
	CollisionScope string   `json:"collision_scope"`
	Examples       []string `json:"examples,omitempty"`
	Warnings       []string `json:"warnings,omitempty"`
	Seconds        float64  `json:"seconds"`
	CellsPerSec    float64  `json:"cells_per_sec"`
	MBPerSec       float64  `json:"read_mb_per_sec"`
	PeakRSS        int64    `json:"peak_rss_bytes"`
	// Interrupted says the run stopped early on a signal or Stop; the
	// checkpoint holds what was finished and --resume goes on.
	Interrupted bool `json:"interrupted"`
	// ReadUnfinished is the cells read in splits the run left unfinished
	// (interrupted, or stopped by an error): not in Read, and read again
	// when the run resumes.
	ReadUnfinished int64 `json:"cells_read_unfinished,omitempty"`
	// Finished says every split is done and the sink's Finish ran.
	Finished bool `json:"finished"`
	// Coverage is what the run knows of its job's coverage, for a task
	// of a job in one process that finished (nil otherwise).
	Coverage *JobCoverage `json:"coverage,omitempty"`
	// Catchup is what a catch-up (Options.Since) read, skipped and
	// changed; nil for any other run.
	Catchup    *CatchupSummary `json:"catchup,omitempty"`
	Checkpoint string          `json:"checkpoint"`
	// SinkStats is the sink's own account, for sinks that keep one
	// (sink.Accounted); Staged reads the hfiles sink's back.
	SinkStats any `json:"sink_stats,omitempty"`
	// Heaviest are the entities with the most cells, from the sketch.
	Heaviest []entity.Count `json:"heaviest_entities,omitempty"`
	Entities string         `json:"entities_file,omitempty"`
	Rejects  string         `json:"rejects_file,omitempty"`
	Error    string         `json:"error,omitempty"`
	PerSplit []SplitStats   `json:"per_split"`
	// SplitTimes compares the slowest finished split with the mean one,
	// so a bench can read how evenly the work was cut.
	SplitTimes SplitTimes `json:"split_times"`
}

// SplitTimes is the spread of the finished splits' times (SplitStats.Seconds,
// each the time of the split's last attempt, in this run or the one that
// finished it).
type SplitTimes struct {
	// Splits counts the finished splits measured.
	Splits int `json:"splits"`
	// MeanSeconds and MaxSeconds are their mean and largest time; Slowest
	// is the ID of the split that took MaxSeconds.
	MeanSeconds float64 `json:"mean_seconds"`
	MaxSeconds  float64 `json:"max_seconds"`
	Slowest     string  `json:"slowest,omitempty"`
	// MaxToMean is MaxSeconds / MeanSeconds (0 when nothing was measured):
	// 1 for perfectly even splits, and issue 28's goal is at most 2.
	MaxToMean float64 `json:"max_to_mean"`
}

// splitTimes measures the spread of the finished splits among per.
func splitTimes(per []SplitStats) SplitTimes {
	var t SplitTimes
	var sum float64
	for _, st := range per {
		if !st.Done {
			continue // an unfinished split's time is not a split's time
		}
		t.Splits++
		sum += st.Seconds
		if t.Slowest == "" || st.Seconds > t.MaxSeconds {
			t.MaxSeconds, t.Slowest = st.Seconds, st.ID
		}
	}
	if t.Splits > 0 && sum > 0 {
		t.MeanSeconds = sum / float64(t.Splits)
		t.MaxToMean = t.MaxSeconds / t.MeanSeconds
	}
	return t
}

// Problems reports whether the run finished with something to report:
// rejected keys, collisions or failed cells.
func (s *Summary) Problems() bool {
	return s.Rejected > 0 || s.Collided > 0 || s.Failed > 0
}

// peakRSS reads the process's peak resident set (VmHWM) from /proc; 0
// where there is none.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func seconds(d time.Duration) float64 { return d.Seconds() }
