package pipeline

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
)

// PlanSample is how many cells PlanSplitKeys reads to plan a target's
// split keys: enough to see every region's first keys, few enough to
// take seconds.
const PlanSample = 200_000

// Sample feeds the planner the first cells of every split (read with
// scan), an equal share of limit each, so the sample sees every region
// rather than the first one only; limit 0 reads every cell. It reports
// whether that was every cell of the snapshot. `rekey plan` and the
// planning of a new target's split keys read the same sample.
func Sample(ctx context.Context, snap *snapshot.Snapshot, scan snapshot.ScanOptions, pl *transform.Planner, limit int64) (bool, error) {
	splits, err := snap.Splits(snapshot.SplitOptions{})
	if err != nil {
		return false, fmt.Errorf("splits: %w", err)
	}
	complete := true
	per := int64(0)
	if limit > 0 && len(splits) > 0 {
		per = max(1, limit/int64(len(splits)))
	}
	for _, sp := range splits {
		n := int64(0)
		err := snap.ReadSplit(ctx, sp, scan, func(c *cell.Cell) error {
			if per > 0 && n == per {
				complete = false // a cell beyond this split's share
				return cell.ErrStop
			}
			pl.Add(c)
			n++
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	return complete, nil
}

// PlanSplitKeys samples the snapshot (PlanSample cells) and returns the
// plan's split keys for target.create.regions regions (default: as many as
// the source has), the keys a run pre-splits a new target at when the job
// gives none.
func PlanSplitKeys(ctx context.Context, j *job.Job, snap *snapshot.Snapshot) ([][]byte, error) {
	regions := j.Target.Create.Regions
	if regions <= 0 {
		regions = len(snap.Regions())
	}
	pl := j.Program.NewPlanner(transform.PlanOptions{Regions: regions})
	if _, err := Sample(ctx, snap, ScanOptions(j, snap.Info()), pl, PlanSample); err != nil {
		return nil, err
	}
	var keys [][]byte
	for _, h := range pl.Report(false).SplitKeysHex {
		if k, err := hex.DecodeString(h); err == nil && len(k) > 0 {
			keys = append(keys, k)
		}
	}
	return keys, nil
}
