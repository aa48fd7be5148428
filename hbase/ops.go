package hbase

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

// Get describes a single-row read. The zero value reads the latest version
// of every column.
type Get struct {
	// Families and Columns restrict the read as in Scan.
	Families [][]byte
	Columns  []Column
	// MinTime and MaxTime select MinTime <= ts < MaxTime; zero means all.
	MinTime, MaxTime int64
	// MaxVersions is the versions per column; 0 means 1.
	MaxVersions int
}

// Get reads one row of table. It returns no cells and no error when the
// row does not exist. The cells share one buffer owned by the caller.
func (c *Client) Get(ctx context.Context, table, row []byte, g *Get) ([]cell.Cell, error) {
	if g == nil {
		g = &Get{}
	}
	sc := Scan{Families: g.Families, Columns: g.Columns}
	gp := &pb.Get{Row: row, Column: sc.columns(), TimeRange: timeRange(g.MinTime, g.MaxTime)}
	if g.MaxVersions > 1 {
		gp.MaxVersions = proto.Uint32(uint32(g.MaxVersions))
	}
	var cells []cell.Cell
	err := c.withRegion(ctx, fmt.Sprintf("get %q from %s", row, table), table, row, func(ctx context.Context, r *Region) error {
		var resp pb.GetResponse
		cb, err := c.call(ctx, r.Server, rpc.ClientService, "Get", &pb.GetRequest{Region: r.spec(), Get: gp}, nil, rpc.PriorityNormal, &resp)
		if err != nil {
			return err
		}
		if resp.Result == nil {
			return nil
		}
		res, err := resultsOf([]*pb.Result{resp.Result}, nil, nil, cb)
		if err != nil {
			return fmt.Errorf("hbase: get %q from region %s: %w", row, r.Name, err)
		}
		cells = res[0].cells
		return nil
	})
	return cells, err
}

// Put writes cells of one row (every cell's Row must equal row) in one
// atomic mutation, keeping each cell's timestamp. Cells of type Put only;
// for many rows use a Writer.
func (c *Client) Put(ctx context.Context, table, row []byte, cells []cell.Cell) error {
	return c.mutate(ctx, table, row, pb.MutationProto_PUT, cells)
}

// Delete writes the delete markers in markers (types Delete, DeleteColumn,
// DeleteFamily, DeleteFamilyVersion; all of row). With no markers it deletes
// the whole row: every family, every version up to now.
func (c *Client) Delete(ctx context.Context, table, row []byte, markers []cell.Cell) error {
	return c.mutate(ctx, table, row, pb.MutationProto_DELETE, markers)
}

func (c *Client) mutate(ctx context.Context, table, row []byte, typ pb.MutationProto_MutationType, cells []cell.Cell) error {
	var block []byte
	for i := range cells {
		cl := &cells[i]
		if string(cl.Row) != string(row) {
			return fmt.Errorf("hbase: %s of row %q: cell %d is of row %q", typ, row, i, cl.Row)
		}
		if typ == pb.MutationProto_PUT && cl.Type != cell.Put {
			return fmt.Errorf("hbase: put of row %q: cell %d has type %s", row, i, cl.Type)
		}
		if typ == pb.MutationProto_DELETE && !cl.Type.IsDelete() {
			return fmt.Errorf("hbase: delete of row %q: cell %d has type %s, not a delete marker", row, i, cl.Type)
		}
		if err := rpc.CheckTags(cl); err != nil {
			return err
		}
		block = rpc.AppendCell(block, cl)
	}
	m := &pb.MutationProto{Row: row, MutateType: typ.Enum(), AssociatedCellCount: proto.Int32(int32(len(cells)))}
	if typ == pb.MutationProto_DELETE && len(cells) == 0 {
		m.Timestamp = proto.Uint64(uint64(cell.LatestTimestamp))
	}
	return c.withRegion(ctx, fmt.Sprintf("%s of row %q in %s", typ, row, table), table, row, func(ctx context.Context, r *Region) error {
		var resp pb.MutateResponse
		_, err := c.call(ctx, r.Server, rpc.ClientService, "Mutate", &pb.MutateRequest{Region: r.spec(), Mutation: m}, block, rpc.PriorityNormal, &resp)
		return err
	})
}
