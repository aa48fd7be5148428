package hfiles

import (
	"context"

	"github.com/rekeyhq/rekey/hbase"
)

// Cluster is what the sink asks of the target cluster: its regions and
// families, the bulk load, and the store files a load may have landed
// in. *hbase.Client is the one rekey ships. The seam exists so that the
// whole protocol of a job in phases (spill, merge, load) can be played
// against a bulk loader that refuses, or loses its answers, on demand
// (the schedule test in package pipeline), which a live cluster cannot
// be made to do at every step.
type Cluster interface {
	Regions(ctx context.Context, table string) ([]*hbase.Region, error)
	DescribeTable(ctx context.Context, table string) (*hbase.TableSpec, error)
	StoreFiles(ctx context.Context, table string, row, family []byte) (*hbase.Region, []string, error)
	BulkLoadWith(ctx context.Context, table string, files []hbase.BulkFile, o hbase.BulkLoadOptions) error
	CleanupBulkLoad(ctx context.Context, table string, row []byte, token string) error
}

var _ Cluster = (*hbase.Client)(nil)
