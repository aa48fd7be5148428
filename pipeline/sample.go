package pipeline

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/source"
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
	return sample(ctx, source.FromSnapshot(snap), scan, pl, limit)
}

// sample is Sample over any source; it leaves the source open.
func sample(ctx context.Context, src source.Source, scan source.ScanOptions, pl *transform.Planner, limit int64) (bool, error) {
	splits, err := src.Splits(source.CutOptions{})
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
		err := readSplit(ctx, src, sp, scan, func(c *cell.Cell) error {
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
	return planSplitKeys(ctx, j, source.FromSnapshot(snap))
}

// planSplitKeys is PlanSplitKeys over any source; it leaves the source
// open. The source's regions are its splits uncut.
func planSplitKeys(ctx context.Context, j *job.Job, src source.Source) ([][]byte, error) {
	regions := j.Target.Create.Regions
	if regions <= 0 {
		splits, err := src.Splits(source.CutOptions{})
		if err != nil {
			return nil, fmt.Errorf("splits: %w", err)
		}
		regions = len(splits)
	}
	pl := j.Program.NewPlanner(transform.PlanOptions{Regions: regions})
	if _, err := sample(ctx, src, scanOptions(j, src.Describe().Created), pl, PlanSample); err != nil {
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

// readSplit scans sp with scan and calls fn with each cell until the end,
// an error, or fn returning cell.ErrStop, as snapshot.Snapshot.ReadSplit
// does; errors name the split.
func readSplit(ctx context.Context, src source.Source, sp source.Split, scan source.ScanOptions, fn func(*cell.Cell) error) error {
	sc, err := src.Open(ctx, sp, scan)
	if err != nil {
		return fmt.Errorf("split %s: %w", sp.ID, err)
	}
	if err := cell.ForEach(sc, fn); err != nil {
		return fmt.Errorf("split %s: %w", sp.ID, err)
	}
	return nil
}
