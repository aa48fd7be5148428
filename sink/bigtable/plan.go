package bigtable

import (
	"fmt"

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

// planWarnings says what the largest new row of the plan's sample meets
// in Bigtable: past MaxReadableRow Bigtable cannot return it in one read
// (the run fails on it unless allow_large_rows); past MaxMutations cells
// it is written in pieces that Bigtable applies one by one (a bad key
// with atomic_rows).
func planWarnings(_ *job.Job, f sink.PlanFacts) []sink.PlanWarning {
	var out []sink.PlanWarning
	if f.LargestBytes > MaxReadableRow {
		out = append(out, sink.PlanWarning{Code: "bigtable-row-too-large", Message: fmt.Sprintf(
			"new row %s holds %d bytes in the sample, over the 256 MiB Bigtable returns in one read: rekey run stops at it unless target.bigtable.allow_large_rows is true", f.LargestRow, f.LargestBytes)})
	}
	if f.LargestCells > MaxMutations {
		out = append(out, sink.PlanWarning{Code: "bigtable-row-in-pieces", Message: fmt.Sprintf(
			"new row %s holds %d cells in the sample, over the 100,000 mutations of one atomic Bigtable entry: it is written in pieces, not atomically (a bad key with target.bigtable.atomic_rows)", f.LargestRow, f.LargestCells)})
	}
	return out
}
