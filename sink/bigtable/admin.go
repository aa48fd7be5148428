package bigtable

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
)

// Target is what ready makes sure of before the first write.
type Target struct {
	// Table is the table's id in the instance.
	Table string
	// Families are the run's source families (sink.Env.Families).
	Families []sink.Family
	// Create creates the table when it does not exist, pre-split at
	// SplitKeys, its families' GC rules from the source families.
	Create    bool
	SplitKeys [][]byte
	// PlanSplitKeys, when set and SplitKeys are none, plans them (it
	// samples the source); called only when the table is created.
	PlanSplitKeys func(ctx context.Context) ([][]byte, error)
	// Warn receives what does not map.
	Warn func(format string, args ...any)
	// Since is the snapshot a catch-up starts from ("" for a whole run):
	// a catch-up writes only the difference, so a missing table is never
	// created, whatever Create says, and the refusal says why.
	Since string
}

// Ready checks the target table, or creates it: an existing table must
// have every family the run writes, none with a GC rule that would
// remove cells the run writes; a created one gets each family with the
// GC rule of what HBase kept (VERSIONS and TTL), and a warning names
// what of the source families' settings Bigtable has no place for. It
// reports whether it created the table. Its refusals wrap sink.ErrTarget.
func Ready(ctx context.Context, ac *bigtable.AdminClient, t Target) (bool, error) {
	fams := families(t.Families)
	for _, f := range fams {
		if err := job.CheckBigtableFamily(f.name); err != nil {
			return false, fmt.Errorf("%w: family %s: %w", sink.ErrTarget, f.name, err)
		}
	}
	info, err := ac.TableInfo(ctx, t.Table)
	switch {
	case err == nil:
		return false, check(t.Table, info, fams)
	case status.Code(err) != codes.NotFound:
		return false, fmt.Errorf("bigtable table %s: %w", t.Table, err)
	case t.Since != "":
		return false, fmt.Errorf("%w: table %s does not exist; a catch-up (--since %s) writes only the difference, so it does not create it: run the job whole", sink.ErrTarget, t.Table, t.Since)
	case !t.Create:
		return false, fmt.Errorf("%w: table %s does not exist (create it, or set target.create: true in the job)", sink.ErrTarget, t.Table)
	}
	keys := t.SplitKeys
	if len(keys) == 0 && t.PlanSplitKeys != nil {
		if keys, err = t.PlanSplitKeys(ctx); err != nil {
			return false, err
		}
	}
	conf := &bigtable.TableConf{TableID: t.Table, ColumnFamilies: map[string]bigtable.Family{}}
	for _, k := range keys {
		conf.SplitKeys = append(conf.SplitKeys, string(k))
	}
	for _, f := range fams {
		conf.ColumnFamilies[f.name] = bigtable.Family{GCPolicy: policy(f.kept)}
		for _, s := range f.sources {
			if u := unmapped(s); len(u) > 0 && t.Warn != nil {
				t.Warn("family %s (from %s): Bigtable has no %s; not carried over", f.name, s.Source, strings.Join(u, ", "))
			}
		}
	}
	if err := ac.CreateTableFromConf(ctx, conf); err != nil {
		if status.Code(err) == codes.AlreadyExists {
			// Created meanwhile (another shard): check it as it is.
			if info, err = ac.TableInfo(ctx, t.Table); err != nil {
				return false, fmt.Errorf("bigtable table %s: %w", t.Table, err)
			}
			return false, check(t.Table, info, fams)
		}
		return false, fmt.Errorf("creating bigtable table %s: %w", t.Table, err)
	}
	return true, nil
}

// check refuses an existing table that lacks a family the run writes, or
// whose GC rule for one would remove cells the run writes.
func check(table string, info *bigtable.TableInfo, fams []*family) error {
	have := map[string]bigtable.FamilyInfo{}
	var names []string
	for _, fi := range info.FamilyInfos {
		have[fi.Name] = fi
		names = append(names, fi.Name)
	}
	var problems []string
	for _, f := range fams {
		fi, ok := have[f.name]
		if !ok {
			problems = append(problems, fmt.Sprintf("it has no family %s (it has %s)", f.name, strings.Join(names, ", ")))
			continue
		}
		if why := drops(fi.FullGCPolicy, f.writes); why != "" {
			problems = append(problems, fmt.Sprintf("the GC rule of family %s (%s) would remove cells the job writes: %s", f.name, fi.GCPolicy, why))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: bigtable table %s: %s; change the table, or the job's scan (versions) to fit it", sink.ErrTarget, table, strings.Join(problems, "; "))
	}
	return nil
}
