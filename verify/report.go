package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/transform"
)

// ReportFormat names the JSON report, so `--only` refuses other files.
const ReportFormat = "rekey-verify-report"

// Report is the outcome of one verification. Its JSON form is documented in
// docs/verify-report.md; Redo is what `rekey run --only` and `rekey verify
// --only` read.
type Report struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Job     string `json:"job,omitempty"`
	// Build names the program that wrote the report (the rekey command
	// puts what `rekey version` prints); empty when the caller says none.
	Build string `json:"rekey,omitempty"`
	// File is where the caller writes this report as JSON (rekey verify
	// --out), for the redo commands the HTML page prints; not written.
	File string `json:"-"`
	// Old and New name the two sides.
	Old string `json:"old"`
	New string `json:"new"`
	// NewSide says how the new side was read: "table" (scans of the live
	// table), "snapshot" (the HFiles of a snapshot of it, taken by the
	// check with --snapshot auto or named), "staging" (the HFiles a run
	// staged) or "bigtable".
	NewSide string `json:"new_side,omitempty"`
	// Method is how the sides were compared (inverse, forward or both),
	// and MethodWhy why: what the new key keeps or drops, and whether the
	// method was asked for.
	Method    Method `json:"method"`
	MethodWhy string `json:"method_reason,omitempty"`
	// Entity names the entity fields.
	Entity   []string  `json:"entity_fields"`
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Summary  Summary   `json:"summary"`
	Entities []Result  `json:"entities"`
	// Redo lists, for every mismatched entity, the key ranges to redo: the
	// old range to read again from the snapshot and the new range it
	// writes to.
	Redo []Redo `json:"redo"`
	// Rejected accounts for the old cells whose keys do not fit the old
	// layout, which no entity holds (nil when there are none to report).
	Rejected *Rejected `json:"rejected,omitempty"`
	// Outside accounts for the new cells a check of every entity found
	// that no entity can be given (nil when none, and always without
	// --all: a sampled check reads only its entities' ranges).
	Outside *Outside `json:"outside,omitempty"`
	// Run is the summary of the run whose output was checked, when its
	// state folder keeps one.
	Run *RunSummary `json:"run,omitempty"`
}

// Summary totals a report.
type Summary struct {
	// Entities and Mismatched count entities (each once, when both
	// methods compared it).
	Entities   int `json:"entities"`
	Mismatched int `json:"mismatched"`
	// CellsCompared is old plus new cells compared.
	CellsCompared int64           `json:"cells_compared"`
	Newer         int64           `json:"newer_than_snapshot"`
	Mismatches    map[Class]int64 `json:"mismatches,omitempty"`
	// OldBytesRead and NewBytesRead are what each side read, against the
	// whole old snapshot's store file size when known.
	OldBytesRead int64 `json:"old_bytes_read"`
	NewBytesRead int64 `json:"new_bytes_read"`
	OldBytesAll  int64 `json:"old_bytes_total,omitempty"`
	// CountBytesRead is what the one pass over the old snapshot read, when
	// --find-worst or --all made one (its pages then serve the comparison,
	// which reads little more).
	CountBytesRead int64 `json:"find_worst_bytes_read,omitempty"`
	// Disagree names the entities the inverse and the forward comparison
	// (method both) give different verdicts: the transform maps them
	// wrong, whatever the data.
	Disagree []string `json:"methods_disagree,omitempty"`
}

// Redo is one entity to write again.
type Redo struct {
	Entity string `json:"entity"`
	Key    string `json:"key"`
	Old    Range  `json:"old_range"`
	New    Range  `json:"new_range"`
	// FilterByEntity says the old layout gives the entity no key range
	// (Old is the whole table): redo it by reading the whole snapshot and
	// keeping the cells whose entity key is Key.
	FilterByEntity bool `json:"filter_by_entity,omitempty"`
	// NewOnly says the old snapshot holds no cell of the entity (one a
	// check of every entity found only on the new side): there is nothing
	// to write again, so RedoRanges leaves it out; delete its cells in New
	// from the target instead.
	NewOnly bool `json:"new_only,omitempty"`
}

// NewReport orders results worst first and totals them. Its Method is the
// results' (both when they hold both).
func NewReport(results []Result) *Report {
	r := &Report{Format: ReportFormat, Version: 1, Entities: results, Method: methodOf(results)}
	sort.SliceStable(r.Entities, func(i, j int) bool {
		a, b := &r.Entities[i], &r.Entities[j]
		if a.Match != b.Match {
			return !a.Match
		}
		da, db := abs(a.Old.Cells-a.New.Cells), abs(b.Old.Cells-b.New.Cells)
		if da != db {
			return da > db
		}
		if a.Old.Cells != b.Old.Cells {
			return a.Old.Cells > b.Old.Cells
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Method > b.Method // inverse before forward
	})
	s := &r.Summary
	verdicts := map[string][]bool{}
	seen := map[string]bool{}
	for i := range r.Entities {
		e := &r.Entities[i]
		s.CellsCompared += e.Old.Cells + e.New.Cells
		if !seen[e.Key] {
			s.Entities++
			s.Newer += e.Newer
		}
		verdicts[e.Key] = append(verdicts[e.Key], e.Match)
		if e.Match {
			seen[e.Key] = true
			continue
		}
		if s.Mismatches == nil {
			s.Mismatches = map[Class]int64{}
		}
		for c, n := range e.Mismatches {
			s.Mismatches[c] += n
		}
		if !r.redone(e.Key) {
			s.Mismatched++
			r.Redo = append(r.Redo, Redo{Entity: e.Entity, Key: e.Key, Old: e.Old.Range, New: e.New.Range, FilterByEntity: e.Old.FullScan, NewOnly: newOnly(e)})
		}
		seen[e.Key] = true
	}
	for i := range r.Entities {
		e := &r.Entities[i]
		if v := verdicts[e.Key]; len(v) == 2 && v[0] != v[1] {
			s.Disagree = append(s.Disagree, e.Entity)
			verdicts[e.Key] = nil
		}
	}
	if r.Redo == nil {
		r.Redo = []Redo{}
	}
	return r
}

// newOnly says the old side holds no cell of e while the new side does:
// redoing e writes nothing, its new cells must be deleted.
func newOnly(e *Result) bool {
	return e.Old.Cells == 0 && e.Old.Rejected == 0 && e.New.Cells > 0
}

// AddOutside adds what a check of every entity found outside every entity
// (CompareAll's Outside; nil: nothing) to the report: its cells count in
// the summary's mismatches and fail the check.
func (r *Report) AddOutside(o *Outside) {
	if o == nil || o.Cells == 0 {
		return
	}
	r.Outside = o
	if r.Summary.Mismatches == nil {
		r.Summary.Mismatches = map[Class]int64{}
	}
	for c, n := range o.Mismatches {
		r.Summary.Mismatches[c] += n
	}
}

// redone says whether the redo list has entity key already.
func (r *Report) redone(key string) bool {
	for i := range r.Redo {
		if r.Redo[i].Key == key {
			return true
		}
	}
	return false
}

// methodOf is the method results were compared by: theirs, or both when
// they hold the two.
func methodOf(results []Result) Method {
	var m Method
	for i := range results {
		switch {
		case m == "":
			m = results[i].Method
		case results[i].Method != m:
			return Both
		}
	}
	return m
}

// MethodLine says how the sides were compared and why, in one line.
func (r *Report) MethodLine() string {
	if r.Method == "" {
		return ""
	}
	line := "method: " + string(r.Method)
	if r.MethodWhy != "" {
		line += " (" + r.MethodWhy + ")"
	}
	return line + ": " + r.Method.describe()
}

// OK says every entity matched, every old cell whose key does not fit is
// in the run's reject files, and (a check of every entity) the new side
// holds no cell outside every entity.
func (r *Report) OK() bool {
	return r.Summary.Mismatched == 0 && (r.Rejected == nil || r.Rejected.Unaccounted == 0) && (r.Outside == nil || r.Outside.Cells == 0)
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadReport reads a JSON report (for --only).
func ReadReport(rd io.Reader) (*Report, error) {
	var r Report
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("verify: report: %w", err)
	}
	if r.Format != ReportFormat || r.Version != 1 {
		return nil, fmt.Errorf("verify: report: format %q version %d, want %q version 1", r.Format, r.Version, ReportFormat)
	}
	return &r, nil
}

// WriteText writes the report as a table of every entity checked, worst
// first, and a summary line. Differences of mismatched entities follow the
// table.
func (r *Report) WriteText(w io.Writer) error { return r.writeText(w, true) }

// WriteTextMismatches writes the report as WriteText does, but its table
// lists only the mismatched entities and says how many matched: what a
// person reads after a check of hundreds of entities.
func (r *Report) WriteTextMismatches(w io.Writer) error { return r.writeText(w, false) }

func (r *Report) writeText(w io.Writer, all bool) error {
	if line := r.MethodLine(); line != "" {
		fmt.Fprintf(w, "%s\n\n", line)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Numbers align right; the entity column, padded here, reads left.
	width := len("entity")
	for i := range r.Entities {
		width = max(width, len(r.Entities[i].Entity))
	}
	both := r.Method == Both
	method := func(m string) string {
		if both {
			return m + "\t"
		}
		return ""
	}
	listed := 0
	for i := range r.Entities {
		if all || !r.Entities[i].Match {
			listed++
		}
	}
	if listed > 0 {
		fmt.Fprintf(tw, "%-*s\t%sold rows\tnew rows\told cells\tnew cells\tdiff\told bytes\tnew bytes\tnewer\tverdict\t\n", width, "entity", method("method"))
	}
	for i := range r.Entities {
		e := &r.Entities[i]
		if !all && e.Match {
			continue
		}
		fmt.Fprintf(tw, "%-*s\t%s%d\t%d\t%d\t%d\t%+d\t%d\t%d\t%d\t%s\t\n", width, e.Entity, method(string(e.Method)), e.Old.Rows, e.New.Rows, e.Old.Cells, e.New.Cells,
			e.New.Cells-e.Old.Cells, e.Old.Bytes, e.New.Bytes, e.Newer, e.Verdict())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if matched := len(r.Entities) - listed; !all && matched > 0 {
		fmt.Fprintf(w, "%d entities match (--verbose lists each)\n", matched)
	}
	for i := range r.Entities {
		e := &r.Entities[i]
		if e.Match {
			continue
		}
		by := ""
		if both {
			by = " (" + string(e.Method) + ")"
		}
		fmt.Fprintf(w, "\n%s%s: %s\n  old %s %s\n  new %s %s\n", e.Entity, by, ClassList(e.Mismatches), r.Old, e.Old.Range.String(), r.New, e.New.Range.String())
		if newOnly(e) {
			fmt.Fprintf(w, "  only in the new side: the old snapshot has no cell of it, so there is nothing to write again; delete its cells in the new range\n")
		}
		for _, d := range e.First {
			fmt.Fprintf(w, "  %s\n", d.Class)
			for _, l := range [][3]string{{"old", d.Old, d.OldFields}, {"new", d.New, d.NewFields}, {"maps to", d.MapsTo, d.MapsToFields}, {"why", d.Reason}} {
				if l[1] == "" {
					continue
				}
				fmt.Fprintf(w, "    %s: %s\n", l[0], strings.TrimRight(l[1], "\n"))
				if l[2] != "" {
					fmt.Fprintf(w, "    %*s  %s\n", len(l[0]), "", l[2])
				}
			}
		}
	}
	if rj := r.Rejected; rj != nil {
		fmt.Fprintf(w, "\n%s\n", rj.Line())
		for _, e := range rj.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if o := r.Outside; o != nil {
		fmt.Fprintf(w, "\n%s\n", o.Line())
		for _, d := range o.Examples {
			fmt.Fprintf(w, "  %s: %s", d.Class, d.New)
			if d.NewFields != "" {
				fmt.Fprintf(w, "    %s\n", d.NewFields)
			}
			fmt.Fprintf(w, "    why: %s\n", d.Reason)
		}
	}
	if r.Run != nil {
		fmt.Fprintf(w, "\n%s\n", r.Run.Line())
	}
	_, err := fmt.Fprintln(w, "\n"+r.SummaryLine())
	return err
}

// SummaryLine is the one-line outcome.
func (r *Report) SummaryLine() string {
	s := &r.Summary
	line := fmt.Sprintf("%d entities checked, %d mismatched, %d cells compared, %d newer than the snapshot, read %s old and %s new in %.1fs",
		s.Entities, s.Mismatched, s.CellsCompared, s.Newer, human.Bytes(s.OldBytesRead), human.Bytes(s.NewBytesRead), r.Seconds)
	if s.OldBytesAll > 0 {
		line += fmt.Sprintf(" (old: %.1f%% of the snapshot)", 100*float64(s.OldBytesRead)/float64(s.OldBytesAll))
	}
	if s.CountBytesRead > 0 {
		line += fmt.Sprintf(", after one pass over the old snapshot reading %s", human.Bytes(s.CountBytesRead))
	}
	if len(s.Mismatches) > 0 {
		line += "; " + ClassList(s.Mismatches)
	}
	if len(s.Disagree) > 0 {
		line += fmt.Sprintf("; inverse and forward disagree on %d entities (%s): the transform maps them wrong",
			len(s.Disagree), strings.Join(s.Disagree[:min(len(s.Disagree), 5)], ", "))
	}
	if rj := r.Rejected; rj != nil && rj.Counted && rj.Cells > 0 {
		line += fmt.Sprintf("; %d old cells do not fit the old layout: %d rejected by the run, %d in no reject file", rj.Cells, rj.ByRun, rj.Unaccounted)
	}
	return line
}

// String renders the range as [start, stop).
func (r Range) String() string {
	stop := r.Stop
	if r.StopHex == "" {
		stop = "(end)"
	}
	return "[" + r.Start + ", " + stop + ")"
}

// ErrNeedsEntityFilter is returned by RedoRanges for an entity whose old
// layout gives it no key range: redoing it means filtering a whole read by
// entity, which a range list cannot express.
var ErrNeedsEntityFilter = errors.New("verify: an entity to redo has no old key range (filter_by_entity)")

// RedoRanges returns the old-key row ranges to redo, sorted and with
// overlapping or touching ranges merged: what `rekey run --only REPORT.json`
// reads again. Entities only the new side has (Redo.NewOnly) give none.
func (r *Report) RedoRanges() ([]transform.KeyRange, error) {
	var out []transform.KeyRange
	for _, e := range r.Redo {
		if e.NewOnly {
			continue // nothing to write again: its new cells go
		}
		if e.FilterByEntity {
			return nil, fmt.Errorf("%w: %s", ErrNeedsEntityFilter, e.Entity)
		}
		k, err := e.Old.KeyRange()
		if err != nil {
			return nil, fmt.Errorf("verify: redo %s: %w", e.Entity, err)
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Start, out[j].Start) < 0 })
	merged := out[:0]
	for _, k := range out {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			if len(last.Stop) == 0 {
				continue // already to the end of the table
			}
			if bytes.Compare(k.Start, last.Stop) <= 0 {
				if len(k.Stop) == 0 || bytes.Compare(k.Stop, last.Stop) > 0 {
					last.Stop = k.Stop
				}
				continue
			}
		}
		merged = append(merged, k)
	}
	return merged, nil
}
