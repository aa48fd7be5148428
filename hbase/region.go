package hbase

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

type cellT = cell.Cell

// result is one Result of a Get or Scan: the cells of one row (all of them,
// or a slice when partial).
type result struct {
	cells   []cell.Cell
	partial bool
}

func fromPB(pc *pb.Cell) cell.Cell {
	return cell.Cell{
		Row: pc.GetRow(), Family: pc.GetFamily(), Qualifier: pc.GetQualifier(),
		Timestamp: int64(pc.GetTimestamp()), Type: cell.Type(pc.GetCellType()),
		Value: pc.GetValue(), Tags: pc.GetTags(),
	}
}

// MetaTable is the catalog table listing every region.
const MetaTable = "hbase:meta"

// metaRegionName is the region name of hbase:meta's only region.
var metaRegionName = []byte("hbase:meta,,1")

// Region is one region of a table and where it is served.
type Region struct {
	// Table is the table name, "namespace:qualifier" or just "qualifier" in
	// the default namespace.
	Table string
	// Name is the full region name (the hbase:meta row key).
	Name []byte
	// StartKey is the first row of the region ("" for the first region).
	StartKey []byte
	// EndKey is the first row after the region ("" for the last region).
	EndKey []byte
	// ID is the region id (creation time in ms).
	ID uint64
	// Server is host:port of the region server, "" when unassigned.
	Server string
}

// Contains reports whether row falls in [StartKey, EndKey).
func (r *Region) Contains(row []byte) bool {
	return bytes.Compare(row, r.StartKey) >= 0 && (len(r.EndKey) == 0 || bytes.Compare(row, r.EndKey) < 0)
}

func (r *Region) isMeta() bool { return bytes.Equal(r.Name, metaRegionName) }

func (r *Region) spec() *pb.RegionSpecifier {
	return &pb.RegionSpecifier{Type: pb.RegionSpecifier_REGION_NAME.Enum(), Value: r.Name}
}

// String names the region for error messages.
func (r *Region) String() string {
	return fmt.Sprintf("%s [%q, %q) on %s", r.Name, r.StartKey, r.EndKey, r.Server)
}

// tableName splits "ns:qualifier" into a TableName message.
func tableName(table string) *pb.TableName {
	ns, q := "default", table
	if i := strings.IndexByte(table, ':'); i >= 0 {
		ns, q = table[:i], table[i+1:]
	}
	return &pb.TableName{Namespace: []byte(ns), Qualifier: []byte(q)}
}

// tableString renders a TableName the way users write it.
func tableString(t *pb.TableName) string {
	if ns := string(t.GetNamespace()); ns != "" && ns != "default" {
		return ns + ":" + string(t.GetQualifier())
	}
	return string(t.GetQualifier())
}

// normTable drops an explicit "default:" namespace so cache keys agree.
func normTable(table string) string {
	return strings.TrimPrefix(table, "default:")
}

// regionCache holds the known regions of each table, sorted by start key
// and never overlapping.
type regionCache struct {
	mu     sync.RWMutex
	tables map[string]*tableRegions
}

type tableRegions struct {
	regions []*Region
}

func (c *regionCache) lookup(table string, row []byte) *Region {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t := c.tables[table]
	if t == nil {
		return nil
	}
	i := sort.Search(len(t.regions), func(i int) bool { return bytes.Compare(t.regions[i].StartKey, row) > 0 }) - 1
	if i < 0 || !t.regions[i].Contains(row) {
		return nil
	}
	return t.regions[i]
}

// overlaps reports whether [a.Start, a.End) and [b.Start, b.End) intersect.
func overlaps(a, b *Region) bool {
	aEndsBeforeB := len(a.EndKey) > 0 && bytes.Compare(a.EndKey, b.StartKey) <= 0
	bEndsBeforeA := len(b.EndKey) > 0 && bytes.Compare(b.EndKey, a.StartKey) <= 0
	return !aEndsBeforeB && !bEndsBeforeA
}

// add caches r, evicting every cached region it overlaps (they are stale:
// split parents, merged regions).
func (c *regionCache) add(r *Region) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tables[r.Table]
	if t == nil {
		t = &tableRegions{}
		c.tables[r.Table] = t
	}
	kept := t.regions[:0]
	for _, o := range t.regions {
		if !overlaps(o, r) {
			kept = append(kept, o)
		}
	}
	kept = append(kept, r)
	sort.Slice(kept, func(i, j int) bool { return bytes.Compare(kept[i].StartKey, kept[j].StartKey) < 0 })
	t.regions = kept
}

// forget drops r if it is still cached.
func (c *regionCache) forget(r *Region) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tables[r.Table]
	if t == nil {
		return
	}
	for i, o := range t.regions {
		if o == r {
			t.regions = append(t.regions[:i:i], t.regions[i+1:]...)
			return
		}
	}
}

// moved replaces r by a copy on server addr.
func (c *regionCache) moved(r *Region, addr string) {
	n := *r
	n.Server = addr
	c.add(&n)
}

// forgetServer drops every region cached on addr.
func (c *regionCache) forgetServer(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.tables {
		kept := t.regions[:0:0]
		for _, o := range t.regions {
			if o.Server != addr {
				kept = append(kept, o)
			}
		}
		t.regions = kept
	}
}

// forgetTable drops every cached region of table.
func (c *regionCache) forgetTable(table string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.tables, table)
}

// metaRegion returns hbase:meta's region, reading its server from ZooKeeper
// when not known.
func (c *Client) metaRegion(ctx context.Context) (*Region, error) {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	if c.metaAddr == "" {
		addr, err := c.zk.metaServer(ctx)
		if err != nil {
			return nil, err
		}
		c.metaAddr = addr
	}
	return &Region{Table: MetaTable, Name: metaRegionName, Server: c.metaAddr}, nil
}

// metaMoved records hbase:meta on server to, unless another caller has
// already replaced from, the location the error came from.
func (c *Client) metaMoved(from, to string) {
	c.metaMu.Lock()
	if c.metaAddr == from {
		c.metaAddr = to
	}
	c.metaMu.Unlock()
}

func (c *Client) forgetMeta() {
	c.metaMu.Lock()
	c.metaAddr = ""
	c.metaMu.Unlock()
}

// TableNotFoundError reports a table (or a row's region) missing from
// hbase:meta.
type TableNotFoundError struct{ Table string }

func (e *TableNotFoundError) Error() string {
	return fmt.Sprintf("hbase: table %s not found in %s", e.Table, MetaTable)
}

// Is lets errors.Is(err, rpc.ErrTableNotFound) match both the local and the
// remote form.
func (e *TableNotFoundError) Is(target error) bool { return target == rpc.ErrTableNotFound }

// TableNotEnabledError reports a read or write to a disabled table.
type TableNotEnabledError struct{ Table string }

func (e *TableNotEnabledError) Error() string {
	return fmt.Sprintf("hbase: table %s is disabled", e.Table)
}

// Is lets errors.Is(err, rpc.ErrTableNotEnabled) match.
func (e *TableNotEnabledError) Is(target error) bool { return target == rpc.ErrTableNotEnabled }

// regionNotReadyError is retriable: the region exists but is offline,
// splitting or unassigned right now.
type regionNotReadyError struct {
	region string
	why    string
}

// Retry makes the error retriable after a pause.
func (e *regionNotReadyError) Retry() rpc.Retry { return rpc.Backoff }

func (e *regionNotReadyError) Error() string {
	return fmt.Sprintf("hbase: region %s is %s", e.region, e.why)
}

// Locate returns the region of table holding row, from the cache or by a
// reversed scan of hbase:meta.
func (c *Client) Locate(ctx context.Context, table []byte, row []byte) (*Region, error) {
	t := normTable(string(table))
	if t == MetaTable {
		return c.metaRegion(ctx)
	}
	if r := c.cache.lookup(t, row); r != nil {
		return r, nil
	}
	r, err := c.lookupMeta(ctx, t, row)
	if err != nil {
		return nil, err
	}
	c.cache.add(r)
	return r, nil
}

// metaKey builds "table,row,99999999999999": the greatest meta row key a
// region holding row can have, so a reversed scan from it finds the region.
func metaKey(table string, row []byte) []byte {
	k := make([]byte, 0, len(table)+len(row)+16)
	k = append(k, table...)
	k = append(k, ',')
	k = append(k, row...)
	return append(k, ",99999999999999"...)
}

var infoFamily = []byte("info")

// lookupMeta asks hbase:meta for the region of table holding row, retrying
// while meta is moving.
func (c *Client) lookupMeta(ctx context.Context, table string, row []byte) (*Region, error) {
	var found *Region
	err := c.withRegion(ctx, "locate "+table, []byte(MetaTable), nil, func(ctx context.Context, meta *Region) error {
		req := &pb.ScanRequest{
			Region: meta.spec(),
			Scan: &pb.Scan{
				StartRow: metaKey(table, row),
				Reversed: proto.Bool(true),
				Column:   []*pb.Column{{Family: infoFamily}},
				Caching:  proto.Uint32(1),
			},
			NumberOfRows:            proto.Uint32(1),
			CloseScanner:            proto.Bool(true),
			ClientHandlesPartials:   proto.Bool(true),
			ClientHandlesHeartbeats: proto.Bool(true),
		}
		var resp pb.ScanResponse
		cb, err := c.call(ctx, meta.Server, rpc.ClientService, "Scan", req, nil, rpc.PriorityHigh, &resp)
		if err != nil {
			return err
		}
		results, err := resultsOf(resp.GetResults(), resp.GetCellsPerResult(), resp.GetPartialFlagPerResult(), cb)
		if err != nil {
			return fmt.Errorf("hbase: scanning %s for %s: %w", MetaTable, table, err)
		}
		if len(results) == 0 {
			return &TableNotFoundError{Table: table}
		}
		m, err := parseMetaRowFull(results[0].cells)
		if err != nil {
			return err
		}
		if m == nil || m.region.Table != table {
			return &TableNotFoundError{Table: table}
		}
		r := m.region
		if m.offline || m.split {
			return &regionNotReadyError{region: string(r.Name), why: "offline or a split parent"}
		}
		if r.Server == "" || m.state == "CLOSED" {
			// Regions of a disabled table stay in meta, closed; retrying
			// cannot help, so ask the master before backing off.
			if on, err := c.TableEnabled(ctx, table); err == nil && !on {
				return &TableNotEnabledError{Table: table}
			}
		}
		if !r.Contains(row) {
			// A hole in meta: the region covering row is being created
			// (split or merge in progress).
			return &regionNotReadyError{region: string(r.Name), why: fmt.Sprintf("not covering row %q (meta has a hole; split or merge in progress)", row)}
		}
		if r.Server == "" {
			return &regionNotReadyError{region: string(r.Name), why: "not assigned to a server"}
		}
		found = r
		return nil
	})
	return found, err
}

// metaRow is one parsed hbase:meta row.
type metaRow struct {
	region  *Region
	offline bool
	split   bool
	state   string // info:state, the region state name (OPEN, CLOSED, ...)
}

// parseMetaRow reads one hbase:meta row. It returns nil, nil for a row
// without info:regioninfo (a table state row).
func parseMetaRow(cells []cell.Cell) (*Region, error) {
	m, err := parseMetaRowFull(cells)
	if err != nil || m == nil {
		return nil, err
	}
	if m.offline || m.split {
		return nil, &regionNotReadyError{region: string(m.region.Name), why: "offline or a split parent"}
	}
	return m.region, nil
}

func parseMetaRowFull(cells []cell.Cell) (*metaRow, error) {
	var m metaRow
	var info *pb.RegionInfo
	var server string
	for i := range cells {
		c := &cells[i]
		if !bytes.Equal(c.Family, infoFamily) {
			continue
		}
		switch string(c.Qualifier) {
		case "regioninfo":
			if !bytes.HasPrefix(c.Value, pbMagic) {
				return nil, fmt.Errorf("hbase: %s row %q: info:regioninfo lacks the PBUF magic", MetaTable, c.Row)
			}
			info = &pb.RegionInfo{}
			if err := proto.Unmarshal(c.Value[len(pbMagic):], info); err != nil {
				return nil, fmt.Errorf("hbase: %s row %q: info:regioninfo: %w", MetaTable, c.Row, err)
			}
		case "server":
			server = string(c.Value)
		case "state":
			m.state = string(c.Value)
		}
	}
	if info == nil || len(cells) == 0 {
		return nil, nil
	}
	m.region = &Region{
		Table:    tableString(info.GetTableName()),
		Name:     append([]byte(nil), cells[0].Row...),
		StartKey: append([]byte{}, info.GetStartKey()...),
		EndKey:   append([]byte{}, info.GetEndKey()...),
		ID:       info.GetRegionId(),
		Server:   server,
	}
	m.offline, m.split = info.GetOffline(), info.GetSplit()
	return &m, nil
}

// Regions lists every region of table in key order, straight from
// hbase:meta (refreshing the cache). Split parents and offline regions are
// left out; a region without a server is listed with Server "".
func (c *Client) Regions(ctx context.Context, table string) ([]*Region, error) {
	table = normTable(table)
	// hbase:meta sorts rows with its own comparator, which splits them at
	// commas into table, start key and region id. "table,," is the least
	// row of table (empty start key, empty id); "table ," (a space sorts
	// before ',') is past the last. A plain "table," would sort after the
	// first region's row and miss it.
	start := append([]byte(table), ',', ',')
	stop := append([]byte(table), ' ', ',')
	sc := c.Scan(ctx, []byte(MetaTable), &Scan{Start: start, Stop: stop, Families: [][]byte{infoFamily}, Caching: 1000})
	defer sc.Close()
	var regions []*Region
	var row []cell.Cell
	flush := func() error {
		if len(row) == 0 {
			return nil
		}
		m, err := parseMetaRowFull(row)
		row = row[:0]
		if err != nil {
			return err
		}
		if m == nil || m.offline || m.split || m.region.Table != table {
			return nil
		}
		regions = append(regions, m.region)
		return nil
	}
	for sc.Next() {
		cl := sc.Cell()
		if len(row) > 0 && !bytes.Equal(row[0].Row, cl.Row) {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		row = append(row, cl.Clone())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hbase: listing regions of %s: %w", table, err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(regions) == 0 {
		return nil, &TableNotFoundError{Table: table}
	}
	c.cache.forgetTable(table)
	for _, r := range regions {
		if r.Server != "" {
			c.cache.add(r)
		}
	}
	return regions, nil
}
