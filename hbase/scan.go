package hbase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/internal/pause"
)

// Column names one column (Qualifier set) or a whole family (Qualifier nil).
type Column struct {
	Family    []byte
	Qualifier []byte
}

// Scan describes a scan. The zero value scans every row, latest version,
// all families.
type Scan struct {
	// Start is the first row (inclusive); nil means the table's start.
	Start []byte
	// Stop is the row to stop before (exclusive); nil means the table's end.
	Stop []byte
	// Families restricts the scan to whole families.
	Families [][]byte
	// Columns restricts the scan to single columns (combined with Families).
	Columns []Column
	// MinTime and MaxTime select cells with MinTime <= ts < MaxTime; both
	// zero means all time.
	MinTime, MaxTime int64
	// MaxVersions is the versions returned per column; 0 means 1.
	MaxVersions int
	// Raw returns delete markers and the cells they mask, as stored.
	Raw bool
	// Caching is the rows asked for per RPC; 0 means 1000.
	Caching int
	// MaxResultSize bounds the bytes of one RPC's results; 0 means 2 MiB
	// (hbase.client.scanner.max.result.size).
	MaxResultSize int64
	// Limit stops after this many rows; 0 means no limit.
	Limit int
	// Batch, when set, makes the server return at most Batch cells of a row
	// per result: a huge row arrives in slices and never has to fit in one
	// response.
	Batch int
	// CacheBlocks lets the scan fill the region servers' block cache; off by
	// default, as for any bulk scan.
	CacheBlocks bool
}

// PrefixStop returns the stop row of a scan over every row that starts with
// prefix: the prefix with its last byte below 0xFF incremented and the rest
// cut. It returns nil (scan to the end) when prefix is empty or all 0xFF.
func PrefixStop(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xFF {
			stop := append([]byte(nil), prefix[:i+1]...)
			stop[i]++
			return stop
		}
	}
	return nil
}

// rawAttr is the Scan attribute HBase's client sets for raw scans.
const rawAttr = "_raw_"

func (s *Scan) columns() []*pb.Column {
	var out []*pb.Column
	for _, f := range s.Families {
		out = append(out, &pb.Column{Family: f})
	}
	for _, c := range s.Columns {
		if c.Qualifier == nil {
			out = append(out, &pb.Column{Family: c.Family})
			continue
		}
		// Several qualifiers of one family share an entry.
		merged := false
		for _, o := range out {
			if bytes.Equal(o.Family, c.Family) && len(o.Qualifier) > 0 {
				o.Qualifier = append(o.Qualifier, c.Qualifier)
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, &pb.Column{Family: c.Family, Qualifier: [][]byte{c.Qualifier}})
		}
	}
	return out
}

func timeRange(min, max int64) *pb.TimeRange {
	if min == 0 && max == 0 {
		return nil
	}
	if max == 0 {
		max = cell.LatestTimestamp
	}
	return &pb.TimeRange{From: proto.Uint64(uint64(min)), To: proto.Uint64(uint64(max))}
}

// Scanner streams the cells of a scan, region after region. It follows the
// cell.Iterator contract:
//
//	sc := client.Scan(ctx, table, &hbase.Scan{...})
//	for sc.Next() {
//		c := sc.Cell() // valid until the next call to Next
//	}
//	if err := sc.Close(); err != nil { ... } // the scan's error, if any
//
// Exhaustion is not an error. Cells come in scan order: rows ascending, and
// within a row in HBase's cell order. Rows are never assembled in memory:
// the scanner lets the server cut huge rows into partial results.
//
// On scanner errors (lease expired, region moved or split, server
// restarted) the scanner reopens at the row of the last cell it returned and
// skips that row's cells already returned, reading at the same MVCC point
// when it stays in the same region, so no cell is returned twice or
// skipped. While the caller holds a batch for longer than half the scanner
// lease, the scanner renews the lease in the background.
type Scanner struct {
	c     *Client
	ctx   context.Context
	table []byte
	scan  Scan

	mu        sync.Mutex // guards the server-side scanner against a concurrent renew
	region    *Region
	open      bool
	scannerID uint64
	seq       uint64
	mvcc      uint64
	mvccFor   []byte // region name the read point belongs to
	ttl       time.Duration
	renew     *time.Timer

	// regionStart is where the current region's part of the scan starts;
	// delivered says whether a cell of that part was returned yet;
	// regionDone says the server finished the region.
	regionStart []byte
	delivered   bool
	regionDone  bool

	// Restart bookkeeping: the row of the last returned cell, how many of
	// its cells were returned, and after a reopen how many to skip.
	lastRow        []byte
	cellsInLastRow int
	skipRow        []byte
	skip           int
	rows           int
	restarts       int

	buf  []cell.Cell
	pos  int
	cur  *cell.Cell
	done bool
	err  error
}

// Scan starts a scan of table. Nothing is sent until the first Next.
func (c *Client) Scan(ctx context.Context, table []byte, s *Scan) *Scanner {
	sc := &Scanner{c: c, ctx: ctx, table: table, scan: *s, regionStart: s.Start}
	if sc.scan.Caching <= 0 {
		sc.scan.Caching = 1000
	}
	if sc.scan.MaxResultSize <= 0 {
		sc.scan.MaxResultSize = 2 << 20
	}
	return sc
}

// Next advances to the next cell. It returns false at the end of the scan
// or on error (see Err).
func (s *Scanner) Next() bool {
	if s.next() {
		return true
	}
	s.cur = nil
	return false
}

func (s *Scanner) next() bool {
	for {
		if s.err != nil {
			return false
		}
		if s.pos < len(s.buf) {
			c := &s.buf[s.pos]
			s.pos++
			if s.skip > 0 {
				if bytes.Equal(c.Row, s.skipRow) {
					s.skip--
					continue
				}
				s.skip = 0
			}
			if s.lastRow != nil && bytes.Equal(c.Row, s.lastRow) {
				s.cellsInLastRow++
			} else {
				if s.scan.Limit > 0 && s.rows >= s.scan.Limit {
					s.finish()
					return false
				}
				s.rows++
				s.lastRow = append(s.lastRow[:0], c.Row...)
				s.cellsInLastRow = 1
			}
			s.delivered = true
			s.cur = c
			return true
		}
		if s.done {
			s.finish()
			return false
		}
		if err := s.fill(); err != nil {
			s.err = err
			s.finish()
			return false
		}
	}
}

// Cell returns the current cell; it is valid until the next call to Next.
func (s *Scanner) Cell() *cell.Cell { return s.cur }

// Restarts returns how many times the scan hit an error and reopened (or
// tried to).
func (s *Scanner) Restarts() int { return s.restarts }

// Err returns the error that ended the scan, if any.
func (s *Scanner) Err() error { return s.err }

// Close releases the server-side scanner (best effort: a server that cannot
// be reached lets the scanner's lease expire) and returns the error that
// ended the scan, if any. It is safe to call more than once and after an
// error.
func (s *Scanner) Close() error {
	s.finish()
	s.cur = nil
	return s.err
}

// finish stops the scan and closes the server-side scanner, best effort.
func (s *Scanner) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	s.buf, s.pos = nil, 0
	if s.renew != nil {
		s.renew.Stop()
	}
	if s.open {
		s.open = false
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 5*time.Second)
		defer cancel()
		req := &pb.ScanRequest{ScannerId: proto.Uint64(s.scannerID), NumberOfRows: proto.Uint32(0), CloseScanner: proto.Bool(true)}
		s.c.call(ctx, s.region.Server, rpc.ClientService, "Scan", req, nil, s.priority(), nil)
	}
}

func (s *Scanner) priority() uint32 {
	if normTable(string(s.table)) == MetaTable {
		return rpc.PriorityHigh
	}
	return rpc.PriorityNormal
}

// fill fetches the next batch into s.buf, retrying as errors say. It runs
// only once the previous batch is consumed, so the restart bookkeeping
// describes exactly what the caller has seen.
func (s *Scanner) fill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.renew != nil {
		s.renew.Stop()
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.c.cfg.OperationTimeout)
	defer cancel()
	start := time.Now()
	op := fmt.Sprintf("scan of %s", s.table)
	for attempt := 0; ; attempt++ {
		if s.regionDone {
			s.regionDone = false
			end := s.region.EndKey
			if len(end) == 0 || (len(s.scan.Stop) > 0 && bytes.Compare(end, s.scan.Stop) >= 0) {
				s.done = true
				return nil
			}
			s.regionStart, s.delivered = end, false
		}
		got, err := s.step(ctx)
		if err == nil {
			if got && s.open {
				s.armRenew()
			}
			if got || s.done {
				return nil
			}
			attempt = -1 // a heartbeat or an empty region is progress
			continue
		}
		if errors.Is(err, context.Canceled) && s.ctx.Err() != nil {
			return err
		}
		class := rpc.RetryOf(err)
		s.restarts++
		if s.region != nil {
			s.c.onError(s.region, err)
		}
		// Whatever happened, the server-side scanner is out of step with us
		// (or gone): reopen from the last returned cell.
		s.open = false
		if class == rpc.GiveUp {
			return fmt.Errorf("hbase: %s: %w", op, err)
		}
		if ctx.Err() != nil || attempt+1 >= s.c.cfg.Retries {
			return &RetriesExhaustedError{Op: op, Attempts: attempt + 1, Elapsed: time.Since(start), Err: err}
		}
		if class == rpc.RestartScanner {
			class = rpc.RetryNow
		}
		server := "hbase:meta (locating the region)"
		if s.region != nil {
			server = s.region.Server
		}
		s.c.log.retry(ctx, "HBase "+op, server, attempt+1, err)
		if err := pause.For(ctx, s.c.pauseFor(attempt, class, err)); err != nil {
			return &RetriesExhaustedError{Op: op, Attempts: attempt + 1, Elapsed: time.Since(start), Err: err}
		}
	}
}

// openRequest builds the request that opens a scanner at the restart point.
func (s *Scanner) openRequest(r *Region) *pb.ScanRequest {
	start, incl := s.regionStart, true
	s.skip, s.skipRow = 0, nil
	if s.delivered {
		start = s.lastRow
		s.skipRow = append([]byte(nil), s.lastRow...)
		s.skip = s.cellsInLastRow
	}
	sp := &pb.Scan{
		Column:              s.scan.columns(),
		StartRow:            start,
		StopRow:             s.scan.Stop,
		TimeRange:           timeRange(s.scan.MinTime, s.scan.MaxTime),
		CacheBlocks:         proto.Bool(s.scan.CacheBlocks),
		MaxResultSize:       proto.Uint64(uint64(s.scan.MaxResultSize)),
		Caching:             proto.Uint32(uint32(s.scan.Caching)),
		AllowPartialResults: proto.Bool(true),
		IncludeStartRow:     proto.Bool(incl),
	}
	if s.scan.MaxVersions > 1 {
		sp.MaxVersions = proto.Uint32(uint32(s.scan.MaxVersions))
	}
	if s.scan.Batch > 0 {
		sp.BatchSize = proto.Uint32(uint32(s.scan.Batch))
	}
	if s.scan.Raw {
		sp.Attribute = append(sp.Attribute, &pb.NameBytesPair{Name: proto.String(rawAttr), Value: []byte{0xFF}})
	}
	if s.delivered && s.mvcc > 0 && bytes.Equal(s.mvccFor, r.Name) {
		// Same region as before the error: read at the same point so the
		// cells skipped on reopen are exactly the ones already returned.
		sp.MvccReadPoint = proto.Uint64(s.mvcc)
	}
	return &pb.ScanRequest{
		Region:                  r.spec(),
		Scan:                    sp,
		NumberOfRows:            proto.Uint32(uint32(s.scan.Caching)),
		ClientHandlesPartials:   proto.Bool(true),
		ClientHandlesHeartbeats: proto.Bool(true),
	}
}

// step makes one open or next call. It reports whether cells arrived.
func (s *Scanner) step(ctx context.Context) (bool, error) {
	var req *pb.ScanRequest
	opening := !s.open
	if opening {
		row := s.regionStart
		if s.delivered {
			row = s.lastRow
		}
		r, err := s.c.Locate(ctx, s.table, row)
		if err != nil {
			return false, err
		}
		s.region = r
		s.seq = 0
		req = s.openRequest(r)
	} else {
		req = &pb.ScanRequest{
			ScannerId:               proto.Uint64(s.scannerID),
			NumberOfRows:            proto.Uint32(uint32(s.scan.Caching)),
			NextCallSeq:             proto.Uint64(s.seq),
			ClientHandlesPartials:   proto.Bool(true),
			ClientHandlesHeartbeats: proto.Bool(true),
		}
	}
	var resp pb.ScanResponse
	cb, err := s.c.call(ctx, s.region.Server, rpc.ClientService, "Scan", req, nil, s.priority(), &resp)
	if err != nil {
		return false, err
	}
	if opening {
		s.scannerID = resp.GetScannerId()
		s.open = true
		if rp := resp.GetMvccReadPoint(); rp > 0 {
			s.mvcc, s.mvccFor = rp, s.region.Name
		}
	} else {
		s.seq++
	}
	if t := resp.GetTtl(); t > 0 {
		s.ttl = time.Duration(t) * time.Millisecond
	}
	results, err := resultsOf(resp.GetResults(), resp.GetCellsPerResult(), resp.GetPartialFlagPerResult(), cb)
	if err != nil {
		return false, fmt.Errorf("hbase: scan of %s in region %s: %w", s.table, s.region.Name, err)
	}
	s.buf, s.pos = s.buf[:0], 0
	for _, r := range results {
		s.buf = append(s.buf, r.cells...)
	}
	switch {
	case resp.MoreResults != nil && !resp.GetMoreResults():
		s.open = false // the server closed the scanner: the whole scan is done
		s.done = true
	case resp.MoreResultsInRegion != nil && !resp.GetMoreResultsInRegion(),
		resp.MoreResultsInRegion == nil && len(results) == 0 && !resp.GetHeartbeatMessage():
		s.open = false // the server closed this region's scanner
		s.regionDone = true
	}
	return len(s.buf) > 0, nil
}

// armRenew renews the scanner lease if the caller has not asked for the
// next batch within half the lease period.
func (s *Scanner) armRenew() {
	ttl := s.ttl
	if ttl <= 0 {
		ttl = 60 * time.Second
	}
	id, seq, server := s.scannerID, s.seq, s.region.Server
	var renewFn func()
	renewFn = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.open || s.scannerID != id || s.seq != seq || s.done {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 10*time.Second)
		defer cancel()
		req := &pb.ScanRequest{ScannerId: proto.Uint64(id), NumberOfRows: proto.Uint32(0), NextCallSeq: proto.Uint64(seq), Renew: proto.Bool(true)}
		if _, err := s.c.call(ctx, server, rpc.ClientService, "Scan", req, nil, s.priority(), nil); err == nil {
			s.renew = time.AfterFunc(ttl/2, renewFn)
		}
		// On failure the next fill finds the scanner gone and reopens.
	}
	s.renew = time.AfterFunc(ttl/2, renewFn)
}

var _ cell.Iterator = (*Scanner)(nil)
