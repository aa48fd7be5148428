package hbase

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

// WriterConfig bounds a Writer's batches, concurrency and retries. Zero
// fields take the defaults in brackets.
type WriterConfig struct {
	// MaxCellsPerCall caps the cells of one Multi call [5000]; HBase warns
	// about calls with more rows than hbase.rpc.rows.warning.threshold
	// (5000).
	MaxCellsPerCall int
	// MaxBytesPerCall caps the encoded cell bytes of one Multi call [2 MiB,
	// like hbase.client.write.buffer].
	MaxBytesPerCall int
	// InFlightPerServer is the Multi calls in flight to one region server
	// at once [2].
	InFlightPerServer int
	// MaxBufferedBytes bounds the memory the Writer holds for cells written
	// but not yet acknowledged or failed (each cell's copy and its place in
	// its mutation, its encoding for the call, each mutation's own
	// structures: see heldBytes); Write blocks beyond it [64 MiB].
	MaxBufferedBytes int
	// RetryTimeout is how long a mutation is retried, from its first send,
	// before it is reported failed [2 min].
	RetryTimeout time.Duration
	// FlushInterval sends partly filled batches that waited this long
	// [1 s].
	FlushInterval time.Duration
}

func (c *WriterConfig) fill() {
	if c.MaxCellsPerCall <= 0 {
		c.MaxCellsPerCall = 5000
	}
	if c.MaxBytesPerCall <= 0 {
		c.MaxBytesPerCall = 2 << 20
	}
	if c.InFlightPerServer <= 0 {
		c.InFlightPerServer = 2
	}
	if c.MaxBufferedBytes <= 0 {
		c.MaxBufferedBytes = 64 << 20
	}
	if c.RetryTimeout <= 0 {
		c.RetryTimeout = 2 * time.Minute
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = time.Second
	}
}

// Failure is one mutation the Writer gave up on: one row's cells, written
// together, and the last error (the server's exception, or why retrying
// stopped).
type Failure struct {
	// Index is the mutation's position among all mutations of the Writer,
	// counting from 0: consecutive cells of one row passed to Write form
	// one mutation.
	Index uint64
	Row   []byte
	Cells []cell.Cell
	Err   error
}

// WriteError lists the mutations that failed since the last Flush. Every
// mutation not listed was acknowledged by HBase. A listed mutation may still
// have been applied (its last call may have reached the server before
// timing out); writing it again is safe, since cells keep their timestamps.
type WriteError struct {
	Failures []Failure
}

func (e *WriteError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hbase: %d mutation(s) failed", len(e.Failures))
	for i, f := range e.Failures {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Failures)-3)
			break
		}
		fmt.Fprintf(&b, "; #%d row %q: %v", f.Index, f.Row, f.Err)
	}
	return b.String()
}

// WriterStats counts what a Writer did so far.
type WriterStats struct {
	Written  uint64 // cells acknowledged
	Failed   uint64 // cells reported failed
	Calls    uint64 // Multi calls sent
	Retries  uint64 // mutation retries
	Buffered int    // memory held for cells written but not yet acknowledged or failed (see MaxBufferedBytes)
}

// Writer batches puts like Java's BufferedMutator: cells are grouped into
// row mutations (a row's puts form a Put, its delete markers a Delete, so a
// raw copy keeps its markers), mutations by region server into Multi calls bounded by
// cells and bytes, with a few calls in flight per server. Retriable errors
// (region moved, split, busy, server restarting, queue full) are retried
// with back-off, re-locating regions, for up to RetryTimeout; what still
// fails is reported by Flush with its row and the server's error. Nothing
// is dropped silently and nothing is reported written that HBase did not
// acknowledge.
//
// A retried mutation may reach HBase twice (the first attempt may have
// succeeded before its answer was lost). Cells keep their timestamps, so a
// second write of the same cell stores the same version again: rekey's
// writes are idempotent by design. Writes of the same cell with different
// values may land in either order.
//
// Write and Flush may be called from several goroutines; Close must be
// called once at the end.
type Writer struct {
	c     *Client
	table []byte
	cfg   WriterConfig

	mu          sync.Mutex
	cur         *mutation // the row being gathered by Write
	nextIndex   uint64
	servers     map[string]*serverBuf
	retryQ      []*mutation
	outstanding int // mutations routed and not yet finished
	buffered    int // memory held for those (mutation.held)
	idle        chan struct{}
	space       chan struct{}
	failures    []Failure
	stats       WriterStats
	closed      bool

	wake chan struct{}
	stop chan struct{}
	bg   sync.WaitGroup
}

type mutation struct {
	index   uint64
	row     []byte
	del     bool // delete markers (a Delete mutation) rather than puts
	cells   []cell.Cell
	bytes   int       // encoded cell bytes (rpc.CellBlockLen), for the call limits
	copied  int       // bytes of the cells' copies, row left out (shared)
	held    int       // memory the mutation holds, set when it is admitted
	first   time.Time // first send
	attempt int
	due     time.Time // when a retry is due
	lastErr error
}

func (m *mutation) kind() *pb.MutationProto_MutationType {
	if m.del {
		return pb.MutationProto_DELETE.Enum()
	}
	return pb.MutationProto_PUT.Enum()
}

type regionBatch struct {
	region *Region
	muts   []*mutation
}

type serverBuf struct {
	addr    string
	regions []*regionBatch
	cells   int
	bytes   int
	since   time.Time
	sem     chan struct{}
}

// NewWriter returns a Writer to table.
func (c *Client) NewWriter(table []byte, cfg WriterConfig) *Writer {
	cfg.fill()
	w := &Writer{
		c: c, table: table, cfg: cfg,
		servers: map[string]*serverBuf{},
		idle:    make(chan struct{}), space: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	close(w.idle)
	w.bg.Add(1)
	go w.background()
	return w
}

// Write queues cells for writing. Consecutive cells of the same row become
// one mutation (a row larger than one call's limits becomes several).
// Cells are copied. Write blocks while MaxBufferedBytes are
// outstanding; it fails only on a cell whose type is neither Put nor a
// delete marker or whose tags outgrow a cell block, after Close, or
// when ctx ends while waiting.
func (w *Writer) Write(ctx context.Context, cells ...cell.Cell) error {
	for i := range cells {
		cl := &cells[i]
		if cl.Type != cell.Put && !cl.Type.IsDelete() {
			return fmt.Errorf("hbase: writer to %s: cell %s is neither a Put nor a delete marker", w.table, cl)
		}
		if err := rpc.CheckTags(cl); err != nil {
			return fmt.Errorf("hbase: writer to %s: %w", w.table, err)
		}
		del := cl.Type.IsDelete()
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return fmt.Errorf("hbase: writer to %s is closed", w.table)
		}
		if w.cur != nil && (!bytes.Equal(w.cur.row, cl.Row) || w.cur.del != del) {
			m := w.cur
			w.cur = nil
			w.mu.Unlock()
			if err := w.admit(ctx, m); err != nil {
				return err
			}
			w.mu.Lock()
		}
		if w.cur == nil {
			w.cur = &mutation{index: w.nextIndex, row: append([]byte(nil), cl.Row...), del: del}
			w.nextIndex++
		}
		cp := cl.Clone()
		cp.Row = w.cur.row
		w.cur.cells = append(w.cur.cells, cp)
		w.cur.bytes += rpc.CellBlockLen(cl)
		// Clone's one allocation, rounded up as the allocator's size
		// classes round it (16-byte steps for small objects).
		w.cur.copied += (len(cl.Row) + len(cl.Family) + len(cl.Qualifier) + len(cl.Value) + len(cl.Tags) + 15) &^ 15
		if len(w.cur.cells) >= w.cfg.MaxCellsPerCall || w.cur.bytes >= w.cfg.MaxBytesPerCall {
			// A huge row goes out in slices: memory stays bounded and no
			// call outgrows its limits. The slices are separate mutations,
			// which is fine for cells that keep their timestamps.
			m := w.cur
			w.cur = nil
			w.mu.Unlock()
			if err := w.admit(ctx, m); err != nil {
				return err
			}
			continue
		}
		w.mu.Unlock()
	}
	return nil
}

// The parts of heldBytes: a cell.Cell in a mutation's slice (144 bytes on
// 64-bit), and a mutation with the Action and MutationProto a call builds
// for it (the protobuf pair allocates 204 bytes, measured with
// runtime.MemStats over 100,000 of them; 256 leaves room for the request's
// slices).
const (
	heldCell     = int(unsafe.Sizeof(cell.Cell{}))
	heldMutation = int(unsafe.Sizeof(mutation{})) + 256
)

// heldBytes is the memory m holds from Write to its settling: its cells'
// structs (the slice's capacity), their copies (Clone copies the row too,
// though the cell then points at the mutation's), the row, the cells'
// encoding into a call's cell block and the mutation's own structures.
// Counting only the encoded bytes (m.bytes) undercounts small cells
// several times over: a 40-byte cell holds about 250 bytes.
func heldBytes(m *mutation) int {
	return heldMutation + 2*len(m.row) + cap(m.cells)*heldCell + m.copied + m.bytes
}

// admit waits for buffer space, then routes m.
func (w *Writer) admit(ctx context.Context, m *mutation) error {
	m.held = heldBytes(m)
	w.mu.Lock()
	for w.buffered > 0 && w.buffered+m.held > w.cfg.MaxBufferedBytes {
		ch := w.space
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			// m is lost to the caller's cancellation; say so.
			w.mu.Lock()
			w.failures = append(w.failures, Failure{Index: m.index, Row: m.row, Cells: m.cells, Err: ctx.Err()})
			w.stats.Failed += uint64(len(m.cells))
			w.mu.Unlock()
			return fmt.Errorf("hbase: writer to %s: waiting for buffer space: %w", w.table, ctx.Err())
		}
		w.mu.Lock()
	}
	if w.outstanding == 0 {
		w.idle = make(chan struct{})
	}
	w.outstanding++
	w.buffered += m.held
	m.first = time.Now()
	w.mu.Unlock()
	w.route(ctx, m)
	return nil
}

// route finds m's region and adds m to its server's batch, sending the
// batch when full.
func (w *Writer) route(ctx context.Context, m *mutation) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.c.cfg.RPCTimeout)
	r, err := w.c.Locate(lctx, w.table, m.row)
	cancel()
	if err != nil {
		w.retryOrFail(m, err)
		return
	}
	w.mu.Lock()
	sb := w.servers[r.Server]
	if sb == nil {
		sb = &serverBuf{addr: r.Server, sem: make(chan struct{}, w.cfg.InFlightPerServer)}
		w.servers[r.Server] = sb
	}
	if sb.cells == 0 {
		sb.since = time.Now()
	}
	var rb *regionBatch
	for _, b := range sb.regions {
		if b.region == r {
			rb = b
			break
		}
	}
	if rb == nil {
		rb = &regionBatch{region: r}
		sb.regions = append(sb.regions, rb)
	}
	rb.muts = append(rb.muts, m)
	sb.cells += len(m.cells)
	sb.bytes += m.bytes
	var full []*regionBatch
	if sb.cells >= w.cfg.MaxCellsPerCall || sb.bytes >= w.cfg.MaxBytesPerCall {
		full = w.takeLocked(sb)
	}
	w.mu.Unlock()
	if full != nil {
		w.dispatch(sb, full)
	}
}

// takeLocked empties sb's batch and returns it.
func (w *Writer) takeLocked(sb *serverBuf) []*regionBatch {
	b := sb.regions
	sb.regions, sb.cells, sb.bytes = nil, 0, 0
	return b
}

// dispatch sends a batch in its own goroutine once the server has a free
// in-flight slot.
func (w *Writer) dispatch(sb *serverBuf, batch []*regionBatch) {
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		sb.sem <- struct{}{}
		defer func() { <-sb.sem }()
		w.send(sb.addr, batch)
	}()
}

// sendAll dispatches every partly filled batch (older than minAge).
func (w *Writer) sendAll(minAge time.Duration) {
	type job struct {
		sb    *serverBuf
		batch []*regionBatch
	}
	var jobs []job
	now := time.Now()
	w.mu.Lock()
	for _, sb := range w.servers {
		if sb.cells > 0 && now.Sub(sb.since) >= minAge {
			jobs = append(jobs, job{sb, w.takeLocked(sb)})
		}
	}
	w.mu.Unlock()
	for _, j := range jobs {
		w.dispatch(j.sb, j.batch)
	}
}

// send makes one Multi call and settles every mutation in it.
func (w *Writer) send(addr string, batch []*regionBatch) {
	req := &pb.MultiRequest{}
	var block []byte
	for _, rb := range batch {
		ra := &pb.RegionAction{Region: rb.region.spec()}
		for i, m := range rb.muts {
			ra.Action = append(ra.Action, &pb.Action{
				Index: proto.Uint32(uint32(i)),
				Mutation: &pb.MutationProto{
					Row: m.row, MutateType: m.kind(),
					AssociatedCellCount: proto.Int32(int32(len(m.cells))),
				},
			})
			for j := range m.cells {
				block = rpc.AppendCell(block, &m.cells[j])
			}
		}
		req.RegionAction = append(req.RegionAction, ra)
	}
	w.mu.Lock()
	w.stats.Calls++
	w.mu.Unlock()
	// The call may not outlive the retry deadline of its oldest mutation:
	// a server that hangs must not hold rows past the time the caller was
	// promised an answer. (c.call adds the RPC timeout on top.)
	var oldest time.Time
	for _, rb := range batch {
		for _, m := range rb.muts {
			if oldest.IsZero() || m.first.Before(oldest) {
				oldest = m.first
			}
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), oldest.Add(w.cfg.RetryTimeout).Add(w.c.cfg.Pause))
	defer cancel()
	var resp pb.MultiResponse
	_, err := w.c.call(ctx, addr, rpc.ClientService, "Multi", req, block, rpc.PriorityNormal, &resp)
	if err != nil {
		for _, rb := range batch {
			w.c.onError(rb.region, err)
			for _, m := range rb.muts {
				w.retryOrFail(m, err)
			}
		}
		w.kick()
		return
	}
	results := resp.GetRegionActionResult()
	for i, rb := range batch {
		if i >= len(results) {
			err := fmt.Errorf("hbase: Multi to %s answered %d region actions of %d", addr, len(results), len(batch))
			for _, m := range rb.muts {
				w.retryOrFail(m, err)
			}
			continue
		}
		rr := results[i]
		if e := rr.GetException(); e != nil {
			re := rpc.ActionError(e, addr)
			w.c.onError(rb.region, re)
			for _, m := range rb.muts {
				w.retryOrFail(m, fmt.Errorf("region %s: %w", rb.region.Name, re))
			}
			continue
		}
		seen := make([]bool, len(rb.muts))
		relocated := false
		for _, roe := range rr.GetResultOrException() {
			idx := int(roe.GetIndex())
			if idx < 0 || idx >= len(rb.muts) || seen[idx] {
				continue
			}
			seen[idx] = true
			m := rb.muts[idx]
			if e := roe.GetException(); e != nil {
				re := rpc.ActionError(e, addr)
				if !relocated {
					w.c.onError(rb.region, re)
					relocated = true
				}
				w.retryOrFail(m, fmt.Errorf("region %s: %w", rb.region.Name, re))
				continue
			}
			w.finish(m, nil)
		}
		for idx, ok := range seen {
			if !ok {
				w.retryOrFail(rb.muts[idx], fmt.Errorf("hbase: Multi to %s returned no result for action %d of region %s", addr, idx, rb.region.Name))
			}
		}
	}
	w.kick()
}

// retryOrFail queues m for another attempt, or reports it failed when the
// error says give up or its retry time is spent.
func (w *Writer) retryOrFail(m *mutation, err error) {
	class := rpc.RetryOf(err)
	m.lastErr = err
	delay := w.c.pauseFor(m.attempt, class, err)
	if class == rpc.GiveUp || class == rpc.RestartScanner {
		w.finish(m, err)
		return
	}
	if time.Since(m.first)+delay > w.cfg.RetryTimeout {
		w.finish(m, &RetriesExhaustedError{Op: fmt.Sprintf("put of row %q", m.row), Attempts: m.attempt + 1, Elapsed: time.Since(m.first), Err: err})
		return
	}
	m.attempt++
	m.due = time.Now().Add(delay)
	w.mu.Lock()
	w.retryQ = append(w.retryQ, m)
	w.stats.Retries++
	w.mu.Unlock()
	w.kick()
}

// finish settles m: acknowledged (err nil) or failed.
func (w *Writer) finish(m *mutation, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.failures = append(w.failures, Failure{Index: m.index, Row: m.row, Cells: m.cells, Err: err})
		w.stats.Failed += uint64(len(m.cells))
	} else {
		w.stats.Written += uint64(len(m.cells))
	}
	w.outstanding--
	w.buffered -= m.held
	close(w.space)
	w.space = make(chan struct{})
	if w.outstanding == 0 {
		close(w.idle)
	}
}

func (w *Writer) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// background re-routes due retries and sends batches that waited
// FlushInterval.
func (w *Writer) background() {
	defer w.bg.Done()
	tick := time.NewTicker(w.cfg.FlushInterval / 4)
	defer tick.Stop()
	for {
		var next time.Duration = time.Hour
		w.mu.Lock()
		now := time.Now()
		var due []*mutation
		kept := w.retryQ[:0]
		for _, m := range w.retryQ {
			if !m.due.After(now) {
				due = append(due, m)
			} else {
				kept = append(kept, m)
				if d := m.due.Sub(now); d < next {
					next = d
				}
			}
		}
		w.retryQ = kept
		w.mu.Unlock()
		if len(due) > 0 {
			sort.Slice(due, func(i, j int) bool { return due[i].index < due[j].index })
			for _, m := range due {
				w.route(context.Background(), m)
			}
			// Retries go out at once rather than waiting for a full batch.
			w.sendAll(0)
			continue
		}
		timer := time.NewTimer(next)
		select {
		case <-w.stop:
			timer.Stop()
			return
		case <-w.wake:
		case <-timer.C:
		case <-tick.C:
			w.sendAll(w.cfg.FlushInterval)
		}
		timer.Stop()
	}
}

// Flush sends everything written so far and waits until each mutation is
// acknowledged or has failed for good. It returns a *WriteError listing the
// failures since the last Flush, or ctx's error if ctx ends first (the
// mutations stay in flight; a later Flush reports them).
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	m := w.cur
	w.cur = nil
	w.mu.Unlock()
	if m != nil {
		if err := w.admit(ctx, m); err != nil {
			return err
		}
	}
	w.sendAll(0)
	for {
		w.mu.Lock()
		if w.outstanding == 0 {
			f := w.failures
			w.failures = nil
			w.mu.Unlock()
			if len(f) > 0 {
				sort.Slice(f, func(i, j int) bool { return f[i].Index < f[j].Index })
				return &WriteError{Failures: f}
			}
			return nil
		}
		idle := w.idle
		w.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("hbase: flushing writer to %s: %w", w.table, ctx.Err())
		}
	}
}

// Stats returns counters of the Writer's work so far.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Buffered = w.buffered
	return s
}

// Close flushes and stops the Writer. Its error is Flush's.
func (w *Writer) Close(ctx context.Context) error {
	err := w.Flush(ctx)
	w.mu.Lock()
	already := w.closed
	w.closed = true
	w.mu.Unlock()
	if !already {
		close(w.stop)
		w.bg.Wait()
	}
	return err
}
