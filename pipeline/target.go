package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/source"
)

// ScanOptions turns the job's source.scan section into the snapshot
// scanner's options; plan, run and verify read the same cells this way.
func ScanOptions(j *job.Job, info snapshot.Info) snapshot.ScanOptions {
	return scanOptions(j, info.CreationTime)
}

// scanOptions is ScanOptions for a source created at created (the time
// TTLs expire at when the job reads as of the source).
func scanOptions(j *job.Job, created time.Time) source.ScanOptions {
	s := j.Source.Scan
	o := snapshot.ScanOptions{
		Raw:         s.Raw,
		MaxVersions: s.Versions,
		TimeRange:   snapshot.TimeRange{Min: s.From, Max: s.To},
	}
	for _, f := range s.Families {
		o.Families = append(o.Families, []byte(f))
	}
	switch {
	case s.TTLAtSnapshot:
		o.Now = created
	case !s.TTLAt.IsZero():
		o.Now = s.TTLAt
	}
	return o
}

// TargetFamilies returns the new families the job writes: each source
// family of the snapshot (or of source.scan.families) under its new name.
func TargetFamilies(j *job.Job, snap *snapshot.Snapshot) []string {
	return targetFamilies(j, snap.Table())
}

// targetFamilies is TargetFamilies for a source table's schema.
func targetFamilies(j *job.Job, table source.Table) []string {
	var olds []string
	if len(j.Source.Scan.Families) > 0 {
		olds = j.Source.Scan.Families
	} else {
		for _, f := range table.Families {
			olds = append(olds, string(f.Name))
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range olds {
		n := o
		if m, ok := j.Spec.Families[o]; ok {
			n = m
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// sinkFamilies describes the source families the run reads for a sink
// that makes or checks the target's families itself (sink.Env.Families):
// each under its new name, with the versions the scan reads of it and
// the job's target.create.families overrides.
func sinkFamilies(j *job.Job, table source.Table) []sink.Family {
	read := map[string]bool{}
	for _, f := range j.Source.Scan.Families {
		read[f] = true
	}
	var out []sink.Family
	for _, f := range table.Families {
		name := string(f.Name)
		if len(read) > 0 && !read[name] {
			continue
		}
		nf := name
		if m, ok := j.Spec.Families[name]; ok {
			nf = m
		}
		sf := sink.Family{Target: nf, Source: name, MaxVersions: f.MaxVersions, MinVersions: f.MinVersions,
			KeepDeletedCells: f.KeepDeletedCells != snapshot.KeepDeletedFalse, Attributes: map[string]string{}}
		if v := j.Source.Scan.Versions; v > 0 && v < sf.MaxVersions {
			sf.MaxVersions = v
		}
		if ms := f.TTLMillis(); ms != 1<<63-1 {
			sf.TTL = time.Duration(ms) * time.Millisecond
		}
		for k, v := range f.Attributes {
			sf.Attributes[k] = v
		}
		for k, v := range j.Target.Create.Families[nf] {
			sf.Attributes[k] = v
		}
		out = append(out, sf)
	}
	return out
}

// ErrTargetFamilies refuses a target table that lacks families the job
// writes: HBase would reject every cell of them.
var ErrTargetFamilies = errors.New("pipeline: the target table lacks families the job writes")

// PrepareTarget makes sure the target table can take the run's cells: when
// it exists, its families must cover the mapped families; when it does not
// and the job says target.create, it is created with the source families'
// attributes (VERSIONS, TTL, COMPRESSION, DATA_BLOCK_ENCODING, BLOOMFILTER,
// ...) or the job's overrides, pre-split at splitKeys. It reports whether
// it created the table.
func PrepareTarget(ctx context.Context, c *hbase.Client, j *job.Job, snap *snapshot.Snapshot, splitKeys [][]byte) (bool, error) {
	return prepareTarget(ctx, c, j, snap.Table(), splitKeys)
}

// prepareTarget is PrepareTarget for a source table's schema.
func prepareTarget(ctx context.Context, c *hbase.Client, j *job.Job, table source.Table, splitKeys [][]byte) (bool, error) {
	want := targetFamilies(j, table)
	desc, err := c.DescribeTable(ctx, j.Target.Table)
	switch {
	case err == nil:
		have := map[string]bool{}
		for _, f := range desc.Families {
			have[f.Name] = true
		}
		var missing []string
		for _, f := range want {
			if !have[f] {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			return false, fmt.Errorf("%w: %s has no %s (it has %s)", ErrTargetFamilies, j.Target.Table, strings.Join(missing, ", "), familyNames(desc.Families))
		}
		return false, waitEnabled(ctx, c, j.Target.Table)
	case !errors.Is(err, hbase.ErrTableNotFound):
		return false, err
	case !j.Target.Create.Enabled:
		return false, fmt.Errorf("target table %s does not exist (create it, or set target.create: true in the job): %w", j.Target.Table, err)
	}
	spec := hbase.TableSpec{Name: j.Target.Table, SplitKeys: splitKeys}
	for _, nf := range want {
		attrs := map[string]string{}
		for _, f := range table.Families {
			n := string(f.Name)
			if m, ok := j.Spec.Families[n]; ok {
				n = m
			}
			if n != nf {
				continue
			}
			for _, k := range copiedAttributes {
				if v, ok := f.Attributes[k]; ok {
					attrs[k] = v
				}
			}
		}
		for k, v := range j.Target.Create.Families[nf] {
			attrs[k] = v
		}
		spec.Families = append(spec.Families, hbase.Family{Name: nf, Attributes: attrs})
	}
	if err := c.CreateTable(ctx, spec); err != nil {
		if errors.Is(err, hbase.ErrTableExists) {
			// Created meanwhile: by another shard, or by an earlier run that
			// was killed while the master was still creating it.
			// Check it as an existing table, without trying to create again.
			again := *j
			again.Target.Create.Enabled = false
			return prepareTarget(ctx, c, &again, table, splitKeys)
		}
		return false, err
	}
	return true, waitEnabled(ctx, c, j.Target.Table)
}

// waitEnabled waits until table is enabled: a table still being created
// (by an earlier, killed run, or another shard) is ENABLING for a while,
// and writes to it would fail.
func waitEnabled(ctx context.Context, c *hbase.Client, table string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, err := c.TableEnabled(ctx, table)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("target table %s is not enabled (enable it, or wait for its creation to finish)", table)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// copiedAttributes are the family attributes a created target takes from
// its source family: how cells are kept and stored, not where they were.
var copiedAttributes = []string{"VERSIONS", "MIN_VERSIONS", "TTL", "KEEP_DELETED_CELLS", "COMPRESSION", "DATA_BLOCK_ENCODING", "BLOOMFILTER", "BLOCKSIZE", "IN_MEMORY"}

func familyNames(fs []hbase.Family) string {
	var n []string
	for _, f := range fs {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}
