package verify

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/transform"
)

// BigtableReader reads row ranges of a Cloud Bigtable table (a job's
// target.bigtable) with Google's client, through the job's app profile,
// every version the table holds. Cells come back as the bigtable sink
// wrote them from HBase's: timestamps divided by 1000 (Bigtable counts
// microseconds), every cell a Put.
type BigtableReader struct {
	c     *bigtable.Client
	conn  *grpc.ClientConn // the emulator's, when dialed here
	tbl   *bigtable.Table
	table string
	n     atomic.Int64
}

// OpenBigtable opens table in the instance bt names, with its app
// profile and credentials (BIGTABLE_EMULATOR_HOST, when set, sends the
// reads to that emulator).
func OpenBigtable(ctx context.Context, bt *job.Bigtable, table string) (*BigtableReader, error) {
	var opts []option.ClientOption
	if bt.CredentialsFile != "" {
		opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, bt.CredentialsFile))
	}
	var conn *grpc.ClientConn
	if host := os.Getenv("BIGTABLE_EMULATOR_HOST"); host != "" {
		// The emulator sends a row in one message, and the connection the
		// client dials for an emulator takes 4 MiB at most: dial it with
		// the 256 MiB the client asks of a real instance.
		var err error
		conn, err = grpc.NewClient("passthrough:///"+emulatorScheme.ReplaceAllString(host, ""), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<28)))
		if err != nil {
			return nil, fmt.Errorf("verify: bigtable emulator %s: %w", host, err)
		}
		opts = []option.ClientOption{option.WithGRPCConn(conn)}
	}
	c, err := bigtable.NewClientWithConfig(ctx, bt.Project, bt.Instance,
		bigtable.ClientConfig{AppProfile: bt.AppProfile, MetricsProvider: bigtable.NoopMetricsProvider{}}, opts...)
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, fmt.Errorf("verify: bigtable %s/%s: %w", bt.Project, bt.Instance, err)
	}
	return &BigtableReader{c: c, conn: conn, tbl: c.Open(table), table: fmt.Sprintf("bigtable %s/%s table %s", bt.Project, bt.Instance, table)}, nil
}

// emulatorScheme strips a URL scheme from BIGTABLE_EMULATOR_HOST, as
// Google's clients do.
var emulatorScheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://`)

// Read implements Reader: one ReadRows over r, each row's families in
// name order (HBase's order; a Row holds them in a map), columns and
// versions as Bigtable returns them (qualifier order, newest first).
func (b *BigtableReader) Read(ctx context.Context, r transform.KeyRange, fn func(*cell.Cell) error) error {
	var ferr error
	var c cell.Cell
	err := b.tbl.ReadRows(ctx, bigtable.NewRange(string(r.Start), string(r.Stop)), func(row bigtable.Row) bool {
		fams := make([]string, 0, len(row))
		for f := range row {
			fams = append(fams, f)
		}
		sort.Strings(fams)
		for _, f := range fams {
			for _, it := range row[f] {
				c = cell.Cell{Row: []byte(it.Row), Family: []byte(f), Qualifier: []byte(strings.TrimPrefix(it.Column, f+":")),
					Timestamp: int64(it.Timestamp) / 1000, Type: cell.Put, Value: it.Value}
				b.n.Add(cell.Size(&c))
				if ferr = fn(&c); ferr != nil {
					return false
				}
			}
		}
		return true
	})
	if ferr != nil {
		return ferr
	}
	if err != nil {
		return fmt.Errorf("verify: reading %s over %s: %w", b.table, r, err)
	}
	return nil
}

// bigtableMaxMillis is the largest HBase timestamp (ms) a Bigtable table
// holds as it is: Bigtable counts microseconds at millisecond
// granularity, up to the largest int64 rounded down to a millisecond.
// The bigtable sink writes every later HBase timestamp (HBase's
// LATEST_TIMESTAMP among them) at Bigtable's largest, which reads back
// as this, as Google's HBase client for Bigtable does.
const bigtableMaxMillis = (math.MaxInt64 - math.MaxInt64%1000) / 1000

// MaxTimestampMillis is the largest timestamp, in HBase's milliseconds, a
// cell read here can have: old cells past it are compared at it.
func (b *BigtableReader) MaxTimestampMillis() int64 { return bigtableMaxMillis }

// BytesRead implements Reader: the KeyValue bytes of the cells returned.
func (b *BigtableReader) BytesRead() int64 { return b.n.Load() }

// Live implements Reader.
func (b *BigtableReader) Live() bool { return true }

// String implements Reader.
func (b *BigtableReader) String() string { return b.table }

// Close closes the client.
func (b *BigtableReader) Close() error {
	err := b.c.Close()
	if b.conn != nil {
		b.conn.Close()
	}
	return err
}
