package pipeline

import (
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
)

// CheckPlanFamilies holds the families the job writes (TargetFamilies)
// to what its sink's target takes (sink.Kind.PlanFamilies), before
// `rekey plan` reads a sample: nil for a sink that takes any name HBase
// does, or a kind this build lacks (Prepare refuses that one).
func CheckPlanFamilies(j *job.Job, snap *snapshot.Snapshot) error {
	kind, ok := sink.Lookup(j.Sink.Kind)
	if !ok || kind.PlanFamilies == nil {
		return nil
	}
	return kind.PlanFamilies(j, TargetFamilies(j, snap))
}

// PlanWarnings are the warnings the job's sink adds to a plan from what
// its sample found of the new rows (sink.Kind.PlanWarnings), in the
// plan's own form; none for a sink that declares no checks.
func PlanWarnings(j *job.Job, rep *transform.PlanReport) []transform.Warning {
	kind, ok := sink.Lookup(j.Sink.Kind)
	if !ok || kind.PlanWarnings == nil || rep == nil {
		return nil
	}
	facts := sink.PlanFacts{
		Complete: rep.Complete,
		RowsPast: func(bytes, cells int64) []sink.RowFact {
			var out []sink.RowFact
			for _, r := range rep.RowsPast(bytes, cells) {
				out = append(out, sink.RowFact{Row: r.Row, Cells: r.Cells, Bytes: r.Bytes})
			}
			return out
		},
	}
	var out []transform.Warning
	for _, w := range kind.PlanWarnings(j, facts) {
		out = append(out, transform.Warning{Code: w.Code, Message: w.Message})
	}
	return out
}
