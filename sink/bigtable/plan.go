package bigtable

import (
	"fmt"
	"math"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
)

// planFamilies refuses, before `rekey plan` samples, a target family
// whose name Bigtable does not take: a source family the job does not
// rename keeps its name, which HBase may allow and Bigtable not.
func planFamilies(_ *job.Job, families []string) error {
	for _, fam := range families {
		if err := job.CheckBigtableFamily(fam); err != nil {
			return err
		}
	}
	return nil
}

// planListed is how many rows past a bound a plan names one by one; the
// rest are counted in one more warning, so a sample of many large rows
// does not bury the plan's other warnings.
const planListed = 10

// planWarnings says what the new rows of the plan's sample meet in
// Bigtable, row by row with each one's size: past MaxReadableRow
// Bigtable cannot return a row in one read (the run fails on it unless
// allow_large_rows); past MaxMutations cells a row is written in pieces
// that Bigtable applies one by one (a bad key with atomic_rows). The
// first planListed rows past each bound are named, largest first; a
// further warning counts the rest.
func planWarnings(_ *job.Job, f sink.PlanFacts) []sink.PlanWarning {
	if f.RowsPast == nil {
		return nil
	}
	var out []sink.PlanWarning
	list := func(code string, rows []sink.RowFact, what func(r sink.RowFact) string, rest string) {
		for i, r := range rows {
			if i == planListed {
				out = append(out, sink.PlanWarning{Code: code, Message: fmt.Sprintf("and %d more new rows of the sample %s", len(rows)-planListed, rest)})
				break
			}
			out = append(out, sink.PlanWarning{Code: code, Message: what(r)})
		}
	}
	list("bigtable-row-too-large", f.RowsPast(MaxReadableRow, math.MaxInt64), func(r sink.RowFact) string {
		return fmt.Sprintf("new row %s holds %d bytes (%d cells) in the sample, over the 256 MiB Bigtable returns in one read: rekey run stops at it unless target.bigtable.allow_large_rows is true", r.Row, r.Bytes, r.Cells)
	}, "over 256 MiB")
	list("bigtable-row-in-pieces", f.RowsPast(math.MaxInt64, MaxMutations), func(r sink.RowFact) string {
		return fmt.Sprintf("new row %s holds %d cells in the sample, over the 100,000 mutations of one atomic Bigtable entry: it is written in pieces, not atomically (a bad key with target.bigtable.atomic_rows)", r.Row, r.Cells)
	}, "over 100,000 cells")
	return out
}
