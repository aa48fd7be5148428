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
	// but not yet acknowledged or failed: the arena chunks their encodings
	// and their mutations live in, counted whole until every mutation in a
	// chunk settled, and each mutation's place in a call (see reserve and
	// heldMutation); Write blocks beyond it [64 MiB].
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
	Buffered int    // memory held for cells written but not yet acknowledged or failed, with the arena chunk being filled (see MaxBufferedBytes)
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

	tname string // table as the region cache names it

	// wmu serializes the gathering of rows by WriteCell and Flush: the
	// mutation being gathered, the arena chunk it is copied into, and the
	// next mutation index. It is held while WriteCell waits for buffer
	// space, so a second writer goroutine waits behind the first.
	wmu       sync.Mutex
	cur       *mutation // the row being gathered
	chunk     *chunk    // the arena chunk cells are copied into now
	mutCap    int       // mutation slots for the next chunk
	nextIndex uint64

	mu          sync.Mutex
	servers     map[string]*serverBuf
	retryQ      []*mutation
	outstanding int // mutations routed and not yet finished
	buffered    int // memory held for those (mutation.held)
	idle        chan struct{}
	space       chan struct{} // closed and replaced when space frees and someone waits
	waiters     int           // goroutines waiting on space
	failures    []Failure
	stats       WriterStats
	closed      bool

	wake chan struct{}
	stop chan struct{}
	bg   sync.WaitGroup
}

// A mutation is one row's cells, kept as they travel: their cell block
// encoding (KeyValueCodecWithTags), which every attempt sends as it is, so
// a cell is copied once, when written, and never re-encoded on a retry.
// The row and the encoding live in an arena chunk, and so does the
// mutation itself (a slot of the chunk's slab): writing a cell allocates
// nothing of its own.
type mutation struct {
	index   uint64
	row     []byte // in ch
	del     bool   // delete markers (a Delete mutation) rather than puts
	n       int    // cells
	enc     []byte // the cells' cell block encoding, in ch
	ch      *chunk
	held    int       // memory counted for the mutation outside its chunk, set when it is admitted
	first   time.Time // first send
	attempt int
	due     time.Time // when a retry is due
	lastErr error
}

func (m *mutation) kind() pb.MutationProto_MutationType {
	if m.del {
		return pb.MutationProto_DELETE
	}
	return pb.MutationProto_PUT
}

// cells decodes a copy of m's cells, for a Failure: the copy owns its
// bytes, so a failure the caller keeps does not pin an arena chunk.
func (m *mutation) cells() ([]cell.Cell, error) {
	enc := append([]byte(nil), m.enc...)
	row := append([]byte(nil), m.row...)
	cells, err := rpc.DecodeCells(rpc.NewCellBlock(enc), m.n, make([]cell.Cell, 0, m.n))
	for i := range cells {
		cells[i].Row = row // one copy of the row for all of them
	}
	return cells, err
}

// A chunk is a piece of the Writer's arena: rows and cell encodings copied
// one after another into buf, and the mutations that hold them in muts,
// whose capacity is fixed when the chunk is made (its slots are never
// reused: a chunk is garbage once nothing points into it). Its memory is
// counted in Writer.buffered from its making until every mutation in it
// settled and the Writer moved on to another chunk.
type chunk struct {
	buf  []byte
	muts []mutation
	refs int // admitted mutations not yet settled, +1 while it is the Writer's current chunk
	held int // what Writer.buffered counts for it
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
		tname:   normTable(string(table)),
		mutCap:  64,
		servers: map[string]*serverBuf{},
		idle:    make(chan struct{}), space: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	close(w.idle)
	w.bg.Add(1)
	go w.background()
	return w
}

// Write queues cells for writing, as WriteCell does for each.
func (w *Writer) Write(ctx context.Context, cells ...cell.Cell) error {
	for i := range cells {
		if err := w.WriteCell(ctx, &cells[i]); err != nil {
			return err
		}
	}
	return nil
}

// WriteCell queues one cell for writing. Consecutive cells of the same row
// become one mutation (a row larger than one call's limits becomes
// several). The cell is copied before WriteCell returns (c is not kept),
// into an arena the Writer allocates in chunks, so writing a cell makes no
// allocation of its own. WriteCell blocks while MaxBufferedBytes are
// outstanding; it fails only on a cell whose type is neither Put nor a
// delete marker or whose tags outgrow a cell block, after Close, or when
// ctx ends while waiting (the row being gathered is then reported failed
// by Flush).
func (w *Writer) WriteCell(ctx context.Context, c *cell.Cell) error {
	if (c.Type != cell.Put && !c.Type.IsDelete()) || len(c.Tags) > rpc.MaxTagsLen {
		return w.badCell(*c)
	}
	del := c.Type.IsDelete()
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return fmt.Errorf("hbase: writer to %s is closed", w.table)
	}
	if w.cur != nil && (!bytes.Equal(w.cur.row, c.Row) || w.cur.del != del) {
		if err := w.admit(ctx, w.takeCur()); err != nil {
			return err
		}
	}
	n := rpc.CellBlockLen(c)
	need := n
	if w.cur == nil {
		need += len(c.Row)
	}
	if err := w.reserve(ctx, need, w.cur == nil); err != nil {
		return err
	}
	ch := w.chunk
	if w.cur == nil {
		ch.muts = ch.muts[:len(ch.muts)+1]
		m := &ch.muts[len(ch.muts)-1]
		start := len(ch.buf)
		ch.buf = append(ch.buf, c.Row...)
		*m = mutation{index: w.nextIndex, row: ch.buf[start:len(ch.buf):len(ch.buf)], del: del, ch: ch, enc: ch.buf[len(ch.buf):len(ch.buf)]}
		w.nextIndex++
		w.cur = m
	}
	m := w.cur
	ch.buf = rpc.AppendCell(ch.buf, c)
	m.enc = ch.buf[len(ch.buf)-len(m.enc)-n : len(ch.buf)]
	m.n++
	if m.n >= w.cfg.MaxCellsPerCall || len(m.enc) >= w.cfg.MaxBytesPerCall {
		// A huge row goes out in slices: memory stays bounded and no
		// call outgrows its limits. The slices are separate mutations,
		// which is fine for cells that keep their timestamps.
		return w.admit(ctx, w.takeCur())
	}
	return nil
}

// badCell is the error for a cell WriteCell refuses. It takes a copy, so
// that the cell WriteCell is given does not escape to the heap.
func (w *Writer) badCell(c cell.Cell) error {
	if err := rpc.CheckTags(&c); err != nil {
		return fmt.Errorf("hbase: writer to %s: %w", w.table, err)
	}
	return fmt.Errorf("hbase: writer to %s: cell %s is neither a Put nor a delete marker", w.table, &c)
}

// takeCur returns the mutation being gathered and forgets it. Called with
// wmu held.
func (w *Writer) takeCur() *mutation {
	m := w.cur
	w.cur = nil
	if m != nil {
		m.enc = m.enc[:len(m.enc):len(m.enc)]
	}
	return m
}

// Chunk sizes: a chunk holds chunkBytes of rows and cells (less under a
// small MaxBufferedBytes; twice a row too large for it, as it grows), and
// between minMutCap and maxMutCap mutation slots, sized from how many rows
// the last chunk's bytes held, so chunks of small rows and of wide rows
// both fill.
const (
	chunkBytes = 128 << 10
	minMutCap  = 16
	maxMutCap  = chunkBytes / 32
)

// mutationSize is the memory of one mutation slot.
const mutationSize = int(unsafe.Sizeof(mutation{}))

// heldMutation is the memory an admitted mutation holds outside its chunk
// (besides its row, counted apart, for the copy in the call's request):
// its place in its region's batch and in a call's list of cell block
// pieces, and the rest of its Action in the request.
const heldMutation = 64

// reserve makes room in the current chunk for need more bytes (and a
// mutation slot, when newMut), starting a new chunk when the current one
// has no room; the row being gathered, if any, moves to the new chunk, so
// a mutation's bytes are always contiguous. A new chunk waits for buffer
// space first. Called with wmu held.
func (w *Writer) reserve(ctx context.Context, need int, newMut bool) error {
	old := w.chunk
	if old != nil && cap(old.buf)-len(old.buf) >= need && (!newMut || len(old.muts) < cap(old.muts)) {
		return nil
	}
	partial := 0
	if w.cur != nil {
		partial = len(w.cur.row) + len(w.cur.enc)
	}
	size := min(chunkBytes, max(4<<10, w.cfg.MaxBufferedBytes/16))
	if 2*(partial+need) > size {
		// In whole 8 KiB pages, as the allocator hands out large
		// objects: the count then matches what the chunk takes.
		size = (2*(partial+need) + 8<<10 - 1) &^ (8<<10 - 1)
	}
	if old != nil && len(old.buf) > 0 {
		// As many slots as the last chunk's bytes held rows, and a
		// quarter more; a chunk that ran out of slots first gets more.
		w.mutCap = max(minMutCap, min(maxMutCap, len(old.muts)*chunkBytes/len(old.buf)*5/4+1))
	}
	// The slots' array as the allocator rounds it (its size classes waste
	// up to an eighth), and the chunk itself.
	slots := w.mutCap * mutationSize
	held := size + slots + slots/8 + 64
	w.mu.Lock()
	// Wait only while something outstanding will free space; the chunk
	// being left goes at once when nothing in it is outstanding.
	for w.outstanding > 0 {
		b := w.buffered
		if old != nil && old.refs == 1 {
			b -= old.held
		}
		if b+held <= w.cfg.MaxBufferedBytes {
			break
		}
		if err := w.waitSpaceLocked(ctx); err != nil {
			if m := w.takeCur(); m != nil {
				// m's cells were accepted by earlier calls; they are lost
				// to the caller's cancellation: say so.
				w.failLocked(m, err)
			}
			w.mu.Unlock()
			return fmt.Errorf("hbase: writer to %s: waiting for buffer space: %w", w.table, err)
		}
	}
	w.buffered += held
	w.mu.Unlock()
	nc := &chunk{buf: make([]byte, 0, size), muts: make([]mutation, 0, w.mutCap), refs: 1, held: held}
	if cur := w.cur; cur != nil {
		nc.muts = nc.muts[:1]
		m := &nc.muts[0]
		*m = *cur
		nc.buf = append(nc.buf, cur.row...)
		m.row = nc.buf[:len(nc.buf):len(nc.buf)]
		start := len(nc.buf)
		nc.buf = append(nc.buf, cur.enc...)
		m.enc = nc.buf[start:]
		m.ch = nc
		w.cur = m
	}
	w.chunk = nc
	if old != nil {
		w.mu.Lock()
		w.unrefLocked(old)
		w.spaceFreedLocked()
		w.mu.Unlock()
	}
	return nil
}

// waitSpaceLocked waits, with mu held on entry and on return, until some
// buffer space was freed or ctx ends.
func (w *Writer) waitSpaceLocked(ctx context.Context) error {
	ch := w.space
	w.waiters++
	w.mu.Unlock()
	var err error
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	}
	w.mu.Lock()
	w.waiters--
	return err
}

// unrefLocked drops one reference to ch, taking its memory off the count
// with the last. Called with mu held; the caller wakes the waiters
// (spaceFreedLocked).
func (w *Writer) unrefLocked(ch *chunk) {
	ch.refs--
	if ch.refs == 0 {
		w.buffered -= ch.held
	}
}

// spaceFreedLocked wakes the goroutines waiting for buffer space: once per
// batch of settled mutations, since each wake replaces the channel.
func (w *Writer) spaceFreedLocked() {
	if w.waiters > 0 {
		close(w.space)
		w.space = make(chan struct{})
	}
}

// failLocked reports m failed with err. Called with mu held.
func (w *Writer) failLocked(m *mutation, err error) {
	cells, derr := m.cells()
	if derr != nil {
		err = fmt.Errorf("%w (and its cells could not be listed: %v)", err, derr)
	}
	row := append([]byte(nil), m.row...)
	if len(cells) > 0 {
		row = cells[0].Row
	}
	w.failures = append(w.failures, Failure{Index: m.index, Row: row, Cells: cells, Err: err})
	w.stats.Failed += uint64(m.n)
}

// admit waits for buffer space for m's structures outside its chunk, then
// routes m. Called with wmu held.
func (w *Writer) admit(ctx context.Context, m *mutation) error {
	m.held = heldMutation + len(m.row)
	w.mu.Lock()
	for w.outstanding > 0 && w.buffered+m.held > w.cfg.MaxBufferedBytes {
		if err := w.waitSpaceLocked(ctx); err != nil {
			// m is lost to the caller's cancellation; say so.
			w.failLocked(m, err)
			w.mu.Unlock()
			return fmt.Errorf("hbase: writer to %s: waiting for buffer space: %w", w.table, err)
		}
	}
	if w.outstanding == 0 {
		w.idle = make(chan struct{})
	}
	w.outstanding++
	w.buffered += m.held
	m.ch.refs++
	m.first = time.Now()
	w.mu.Unlock()
	w.route(ctx, m)
	return nil
}

// route finds m's region and adds m to its server's batch, sending the
// batch when full.
func (w *Writer) route(ctx context.Context, m *mutation) {
	// The cached region, found without the context a meta lookup needs.
	r := w.c.cache.lookup(w.tname, m.row)
	if r == nil || w.tname == MetaTable {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.c.cfg.RPCTimeout)
		var err error
		r, err = w.c.Locate(lctx, w.table, m.row)
		cancel()
		if err != nil {
			w.retryOrFail(m, "hbase:meta (locating the region)", err)
			return
		}
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
	sb.cells += m.n
	sb.bytes += len(m.enc)
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

// send makes one Multi call and settles every mutation in it. The request
// is encoded by hand (appendMulti), and the cell block is the mutations'
// encodings, copied straight into the frame.
func (w *Writer) send(addr string, batch []*regionBatch) {
	nmuts, size := 0, 0
	for _, rb := range batch {
		nmuts += len(rb.muts)
		size += bytesFieldLen(fMultiRegionAction, regionActionLen(rb))
	}
	req := appendMulti(make([]byte, 0, size), batch)
	pieces := make([][]byte, 0, nmuts)
	for _, rb := range batch {
		for _, m := range rb.muts {
			pieces = append(pieces, m.enc)
		}
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
	msg, _, err := w.c.callRaw(ctx, addr, rpc.ClientService, "Multi", req, pieces, rpc.PriorityNormal)
	if err != nil {
		for _, rb := range batch {
			w.c.onError(rb.region, err)
			for _, m := range rb.muts {
				w.retryOrFail(m, addr, err)
			}
		}
		w.kick()
		return
	}
	// seen[i] marks the answered actions of region i; it stays nil when
	// region i got no result, or failed whole (regionDone).
	seen := make([][]bool, len(batch))
	regionDone := make([]bool, len(batch))
	relocated := make([]bool, len(batch))
	answered := 0
	acked := make([]*mutation, 0, nmuts)
	derr := multiResults(msg, func(i int, exc *pb.NameBytesPair) {
		answered++
		if i >= len(batch) {
			return
		}
		rb := batch[i]
		if exc != nil {
			re := rpc.ActionError(exc, addr)
			w.c.onError(rb.region, re)
			regionDone[i] = true
			for _, m := range rb.muts {
				w.retryOrFail(m, addr, fmt.Errorf("region %s: %w", rb.region.Name, re))
			}
			return
		}
		seen[i] = make([]bool, len(rb.muts))
	}, func(i int, index uint32, exc *pb.NameBytesPair) {
		if i >= len(batch) || seen[i] == nil {
			return
		}
		rb := batch[i]
		idx := int(index)
		if idx >= len(rb.muts) || seen[i][idx] {
			return
		}
		seen[i][idx] = true
		m := rb.muts[idx]
		if exc != nil {
			re := rpc.ActionError(exc, addr)
			if !relocated[i] {
				w.c.onError(rb.region, re)
				relocated[i] = true
			}
			w.retryOrFail(m, addr, fmt.Errorf("region %s: %w", rb.region.Name, re))
			return
		}
		acked = append(acked, m)
	})
	w.finishAcked(acked)
	// Whatever the answer left unsettled is retried: a region or an action
	// it did not answer, or all that a malformed part hid.
	for i, rb := range batch {
		if regionDone[i] {
			continue
		}
		for idx, m := range rb.muts {
			if seen[i] != nil && seen[i][idx] {
				continue
			}
			var err error
			switch {
			case derr != nil:
				err = fmt.Errorf("hbase: Multi to %s: %w", addr, derr)
			case seen[i] == nil:
				err = fmt.Errorf("hbase: Multi to %s answered %d region actions of %d", addr, answered, len(batch))
			default:
				err = fmt.Errorf("hbase: Multi to %s returned no result for action %d of region %s", addr, idx, rb.region.Name)
			}
			w.retryOrFail(m, addr, err)
		}
	}
	w.kick()
}

// retryOrFail queues m for another attempt, or reports it failed when the
// error says give up or its retry time is spent. server is where the
// attempt failed, for the retry log.
func (w *Writer) retryOrFail(m *mutation, server string, err error) {
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
	what := "HBase put"
	if m.del {
		what = "HBase delete"
	}
	w.c.log.retryLeft(what, server, m.attempt+1, err, w.cfg.RetryTimeout-time.Since(m.first))
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
	w.finishLocked(m, err)
	w.spaceFreedLocked()
}

// finishAcked settles acknowledged mutations under one hold of the lock:
// a call of small rows acknowledges thousands at once.
func (w *Writer) finishAcked(ms []*mutation) {
	if len(ms) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range ms {
		w.finishLocked(m, nil)
	}
	w.spaceFreedLocked()
}

func (w *Writer) finishLocked(m *mutation, err error) {
	if err != nil {
		w.failLocked(m, err)
	} else {
		w.stats.Written += uint64(m.n)
	}
	w.outstanding--
	w.buffered -= m.held
	w.unrefLocked(m.ch)
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
	w.wmu.Lock()
	var err error
	if m := w.takeCur(); m != nil {
		err = w.admit(ctx, m)
	}
	w.wmu.Unlock()
	if err != nil {
		return err
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
		w.wmu.Lock()
		if w.chunk != nil {
			w.mu.Lock()
			w.unrefLocked(w.chunk)
			w.spaceFreedLocked()
			w.mu.Unlock()
			w.chunk = nil
		}
		w.wmu.Unlock()
	}
	return err
}
