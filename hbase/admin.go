package hbase

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/internal/pause"
)

// Family describes a column family for CreateTable. Attributes use the
// names of HBase's shell and descriptors, values as the shell prints them:
// VERSIONS "3", TTL "86400" (seconds), COMPRESSION "SNAPPY", "ZSTD", "GZ",
// "NONE", DATA_BLOCK_ENCODING "FAST_DIFF", BLOOMFILTER "ROW", BLOCKSIZE
// "65536", and so on.
type Family struct {
	Name       string
	Attributes map[string]string
}

// TableSpec describes a table for CreateTable.
type TableSpec struct {
	// Name is "namespace:qualifier" or "qualifier" (default namespace).
	Name     string
	Families []Family
	// Attributes are table attributes (MAX_FILESIZE, ...).
	Attributes map[string]string
	// SplitKeys pre-split the table: n keys make n+1 regions.
	SplitKeys [][]byte
}

// masterCall sends one MasterService call, following the active master and
// retrying while it starts up.
func (c *Client) masterCall(ctx context.Context, method string, req, resp proto.Message) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OperationTimeout)
	defer cancel()
	start := time.Now()
	for attempt := 0; ; attempt++ {
		addr, err := c.zk.master(ctx)
		server := "the active master (from ZooKeeper)"
		if err == nil {
			server = addr
			_, err = c.call(ctx, addr, rpc.MasterService, method, req, nil, rpc.PriorityAdmin, resp)
			if err == nil {
				return nil
			}
		}
		class := rpc.RetryOf(err)
		if class == rpc.GiveUp {
			return fmt.Errorf("hbase: master %s: %w", method, err)
		}
		if ctx.Err() != nil || attempt+1 >= c.cfg.Retries {
			return &RetriesExhaustedError{Op: "master " + method, Attempts: attempt + 1, Elapsed: time.Since(start), Err: err}
		}
		c.log.retry(ctx, "HBase master "+method, server, attempt+1, err)
		if err := pause.For(ctx, c.pauseFor(attempt, class, err)); err != nil {
			return &RetriesExhaustedError{Op: "master " + method, Attempts: attempt + 1, Elapsed: time.Since(start), Err: err}
		}
	}
}

// ProcedureError reports a master procedure that finished with an error.
type ProcedureError struct {
	ProcID  uint64
	Op      string
	Class   string
	Message string
}

func (e *ProcedureError) Error() string {
	return fmt.Sprintf("hbase: %s (procedure %d) failed: %s: %s", e.Op, e.ProcID, e.Class, e.Message)
}

// Is lets errors.Is match the RemoteError sentinels by class.
func (e *ProcedureError) Is(target error) bool {
	return (&rpc.RemoteError{Class: e.Class}).Is(target)
}

// waitProcedure polls the master until the procedure finishes. The method
// is spelled getProcedureResult in HBase's Master.proto, lower-case g.
func (c *Client) waitProcedure(ctx context.Context, op string, procID uint64) error {
	wait := 50 * time.Millisecond
	for {
		var resp pb.GetProcedureResultResponse
		if err := c.masterCall(ctx, "getProcedureResult", &pb.GetProcedureResultRequest{ProcId: proto.Uint64(procID)}, &resp); err != nil {
			return fmt.Errorf("hbase: %s: waiting for procedure %d: %w", op, procID, err)
		}
		switch resp.GetState() {
		case pb.GetProcedureResultResponse_FINISHED:
			if e := resp.GetException(); e != nil {
				ge := e.GetGenericException()
				return &ProcedureError{ProcID: procID, Op: op, Class: ge.GetClassName(), Message: ge.GetMessage()}
			}
			return nil
		case pb.GetProcedureResultResponse_NOT_FOUND:
			// Finished long enough ago to be forgotten, or never existed.
			return fmt.Errorf("hbase: %s: procedure %d not found on the master", op, procID)
		}
		if err := pause.For(ctx, wait); err != nil {
			return fmt.Errorf("hbase: %s: waiting for procedure %d: %w", op, procID, err)
		}
		if wait < time.Second {
			wait *= 2
		}
	}
}

func bbPairs(m map[string]string) []*pb.BytesBytesPair {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*pb.BytesBytesPair
	for _, k := range keys {
		out = append(out, &pb.BytesBytesPair{First: []byte(k), Second: []byte(m[k])})
	}
	return out
}

// CreateTable creates a table and waits until its regions are open.
func (c *Client) CreateTable(ctx context.Context, spec TableSpec) error {
	if len(spec.Families) == 0 {
		return fmt.Errorf("hbase: create table %s: no column families", spec.Name)
	}
	schema := &pb.TableSchema{TableName: tableName(spec.Name), Attributes: bbPairs(spec.Attributes)}
	for _, f := range spec.Families {
		attrs := map[string]string{}
		for k, v := range f.Attributes {
			attrs[strings.ToUpper(k)] = v
		}
		schema.ColumnFamilies = append(schema.ColumnFamilies, &pb.ColumnFamilySchema{Name: []byte(f.Name), Attributes: bbPairs(attrs)})
	}
	req := &pb.CreateTableRequest{TableSchema: schema, SplitKeys: spec.SplitKeys}
	var resp pb.CreateTableResponse
	if err := c.masterCall(ctx, "CreateTable", req, &resp); err != nil {
		return fmt.Errorf("hbase: create table %s: %w", spec.Name, err)
	}
	return c.waitProcedure(ctx, "create table "+spec.Name, resp.GetProcId())
}

// DisableTable disables a table and waits until it is disabled.
func (c *Client) DisableTable(ctx context.Context, table string) error {
	var resp pb.DisableTableResponse
	if err := c.masterCall(ctx, "DisableTable", &pb.DisableTableRequest{TableName: tableName(table)}, &resp); err != nil {
		return fmt.Errorf("hbase: disable table %s: %w", table, err)
	}
	return c.waitProcedure(ctx, "disable table "+table, resp.GetProcId())
}

// EnableTable enables a table and waits until it is enabled.
func (c *Client) EnableTable(ctx context.Context, table string) error {
	var resp pb.EnableTableResponse
	if err := c.masterCall(ctx, "EnableTable", &pb.EnableTableRequest{TableName: tableName(table)}, &resp); err != nil {
		return fmt.Errorf("hbase: enable table %s: %w", table, err)
	}
	return c.waitProcedure(ctx, "enable table "+table, resp.GetProcId())
}

// DeleteTable deletes a disabled table and waits until it is gone.
func (c *Client) DeleteTable(ctx context.Context, table string) error {
	var resp pb.DeleteTableResponse
	if err := c.masterCall(ctx, "DeleteTable", &pb.DeleteTableRequest{TableName: tableName(table)}, &resp); err != nil {
		return fmt.Errorf("hbase: delete table %s: %w", table, err)
	}
	c.cache.forgetTable(normTable(table))
	return c.waitProcedure(ctx, "delete table "+table, resp.GetProcId())
}

// TableExists reports whether the table exists.
func (c *Client) TableExists(ctx context.Context, table string) (bool, error) {
	var resp pb.GetTableStateResponse
	err := c.masterCall(ctx, "GetTableState", &pb.GetTableStateRequest{TableName: tableName(table)}, &resp)
	if errors.Is(err, rpc.ErrTableNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("hbase: table exists %s: %w", table, err)
	}
	return true, nil
}

// TableEnabled reports whether the table exists and is enabled.
func (c *Client) TableEnabled(ctx context.Context, table string) (bool, error) {
	var resp pb.GetTableStateResponse
	if err := c.masterCall(ctx, "GetTableState", &pb.GetTableStateRequest{TableName: tableName(table)}, &resp); err != nil {
		return false, fmt.Errorf("hbase: state of table %s: %w", table, err)
	}
	return resp.GetTableState().GetState() == pb.TableState_ENABLED, nil
}

// Flush flushes the memstores of every region of table to HFiles, through
// each region server's AdminService (synchronous there).
func (c *Client) Flush(ctx context.Context, table string) error {
	regions, err := c.Regions(ctx, table)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, r := range regions {
		g.Go(func() error {
			return c.withRegion(gctx, fmt.Sprintf("flush region %s", r.Name), []byte(table), r.StartKey, func(ctx context.Context, cur *Region) error {
				req := &pb.FlushRegionRequest{Region: cur.spec()}
				var resp pb.FlushRegionResponse
				_, err := c.call(ctx, cur.Server, rpc.AdminService, "FlushRegion", req, nil, rpc.PriorityAdmin, &resp)
				return err
			})
		})
	}
	return g.Wait()
}

// Snapshot describes a completed snapshot.
type Snapshot struct {
	Name    string
	Table   string
	Created time.Time
	Version int
}

// Snapshot takes a flush snapshot of table and waits until it is complete.
func (c *Client) Snapshot(ctx context.Context, name, table string) error {
	desc := &pb.SnapshotDescription{
		Name: proto.String(name), Table: proto.String(table),
		Type: pb.SnapshotDescription_FLUSH.Enum(), Version: proto.Int32(2),
	}
	var resp pb.SnapshotResponse
	if err := c.masterCall(ctx, "Snapshot", &pb.SnapshotRequest{Snapshot: desc}, &resp); err != nil {
		return fmt.Errorf("hbase: snapshot %s of %s: %w", name, table, err)
	}
	deadline := time.Now().Add(time.Duration(resp.GetExpectedTimeout()) * time.Millisecond)
	if resp.GetExpectedTimeout() <= 0 {
		deadline = time.Now().Add(5 * time.Minute)
	}
	wait := 50 * time.Millisecond
	for {
		var done pb.IsSnapshotDoneResponse
		if err := c.masterCall(ctx, "IsSnapshotDone", &pb.IsSnapshotDoneRequest{Snapshot: desc}, &done); err != nil {
			return fmt.Errorf("hbase: snapshot %s of %s: %w", name, table, err)
		}
		if done.GetDone() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hbase: snapshot %s of %s: not done within the master's expected %d ms", name, table, resp.GetExpectedTimeout())
		}
		if err := pause.For(ctx, wait); err != nil {
			return fmt.Errorf("hbase: snapshot %s of %s: %w", name, table, err)
		}
		if wait < time.Second {
			wait *= 2
		}
	}
}

// Snapshots lists the completed snapshots.
func (c *Client) Snapshots(ctx context.Context) ([]Snapshot, error) {
	var resp pb.GetCompletedSnapshotsResponse
	if err := c.masterCall(ctx, "GetCompletedSnapshots", &pb.GetCompletedSnapshotsRequest{}, &resp); err != nil {
		return nil, fmt.Errorf("hbase: list snapshots: %w", err)
	}
	var out []Snapshot
	for _, s := range resp.GetSnapshots() {
		out = append(out, Snapshot{Name: s.GetName(), Table: s.GetTable(), Created: time.UnixMilli(s.GetCreationTime()), Version: int(s.GetVersion())})
	}
	return out, nil
}

// DeleteSnapshot deletes a snapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, name string) error {
	req := &pb.DeleteSnapshotRequest{Snapshot: &pb.SnapshotDescription{Name: proto.String(name)}}
	if err := c.masterCall(ctx, "DeleteSnapshot", req, &pb.DeleteSnapshotResponse{}); err != nil {
		return fmt.Errorf("hbase: delete snapshot %s: %w", name, err)
	}
	return nil
}

// DescribeTable returns a table's families with their attributes, as the
// master's descriptor holds them (the names HBase's shell prints: VERSIONS,
// TTL, COMPRESSION, ...). A missing table is a *TableNotFoundError.
func (c *Client) DescribeTable(ctx context.Context, table string) (*TableSpec, error) {
	var resp pb.GetTableDescriptorsResponse
	req := &pb.GetTableDescriptorsRequest{TableNames: []*pb.TableName{tableName(table)}}
	if err := c.masterCall(ctx, "GetTableDescriptors", req, &resp); err != nil {
		return nil, fmt.Errorf("hbase: describe table %s: %w", table, err)
	}
	if len(resp.GetTableSchema()) == 0 {
		return nil, fmt.Errorf("hbase: describe table %s: %w", table, &TableNotFoundError{Table: table})
	}
	s := resp.GetTableSchema()[0]
	spec := &TableSpec{Name: table, Attributes: map[string]string{}}
	for _, a := range s.GetAttributes() {
		spec.Attributes[string(a.GetFirst())] = string(a.GetSecond())
	}
	for _, f := range s.GetColumnFamilies() {
		fam := Family{Name: string(f.GetName()), Attributes: map[string]string{}}
		for _, a := range f.GetAttributes() {
			fam.Attributes[string(a.GetFirst())] = string(a.GetSecond())
		}
		spec.Families = append(spec.Families, fam)
	}
	return spec, nil
}

// StoreFiles returns the region of table holding row and the paths of its
// store files of family, as the region server serving it lists them
// (AdminService GetStoreFile): full paths on HBase's file system, each
// file under the name the region gave it. A bulk-loaded file is among
// them under a new name with its own bytes, so a caller that wrote an id
// into a file's file info can tell whether a load of it landed.
func (c *Client) StoreFiles(ctx context.Context, table string, row, family []byte) (*Region, []string, error) {
	var (
		reg   *Region
		paths []string
	)
	err := c.withRegion(ctx, fmt.Sprintf("list the store files of %s at row %q", table, row), []byte(table), row, func(ctx context.Context, r *Region) error {
		req := &pb.GetStoreFileRequest{Region: r.spec(), Family: [][]byte{family}}
		var resp pb.GetStoreFileResponse
		if _, err := c.call(ctx, r.Server, rpc.AdminService, "GetStoreFile", req, nil, rpc.PriorityAdmin, &resp); err != nil {
			return err
		}
		reg, paths = r, resp.GetStoreFile()
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return reg, paths, nil
}
