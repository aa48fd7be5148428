// Package bigtable is the sink that writes a run's cells into a Cloud
// Bigtable table (target.bigtable, sink.type bigtable) with batched
// MutateRows calls through Google's client, cloud.google.com/go/bigtable.
//
// What maps and what does not:
//
//   - A cell becomes a SetCell with the HBase timestamp ×1000 (Bigtable
//     counts microseconds at millisecond granularity), never the server's
//     clock, so every mutation is idempotent: the client retries failed
//     entries, and a resumed run writes the same cells again without
//     adding versions. Timestamps past Bigtable's largest map to it
//     (Micros), counted.
//   - A split's consecutive cells of one row are one MutateRows entry,
//     which Bigtable applies atomically. An entry holds at most 100,000
//     mutations (Bigtable's limit for a whole request) and a bounded
//     number of bytes: a longer row is written whole in several entries,
//     which Bigtable applies one by one, and the run names it; with
//     atomic_rows such a row is a bad key instead.
//   - Entries of one request may be applied in any order, even for one
//     row. A split's requests hold only SetCells, so no two mutations of
//     a request can undo each other: delete markers (raw mode, refused
//     unless deletes: apply, and a catch-up's removed cells) are spilled
//     and applied by Finish once every put of the run is in (deletes.go).
//   - A row key over 4 KiB (Bigtable's limit) is a bad key; a row past
//     256 MiB, which Bigtable cannot return in one read, fails the run
//     unless allow_large_rows.
//   - Tags (per-cell TTLs, visibility labels) have no Bigtable place:
//     the cell is written without them and counted, or the run fails
//     with tags: fail.
//
// A split's Commit returns when every one of its entries is acknowledged
// or has failed after every retry (counted in Ack.Failed with examples),
// so the run's checkpoint records a split done only once its cells are
// in Bigtable.
package bigtable

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/pause"
	"github.com/rekeyhq/rekey/sink"
)

// Bigtable's limits.
const (
	// MaxMutations is the most mutations one MutateRows request holds,
	// all its entries together.
	MaxMutations = 100_000
	// MaxRowKey is the longest row key Bigtable takes.
	MaxRowKey = 4 << 10
	// MaxReadableRow is the largest row Bigtable returns in one read.
	MaxReadableRow = 256 << 20
)

// Options tune the sink; zero fields take the defaults.
type Options struct {
	// BatchMutations and BatchBytes bound one MutateRows request (default
	// 10,000 mutations, 4 MiB less 64 KiB); BatchBytes counts its entries
	// as they go on the wire (keys, mutations, framing), not the table
	// name and app profile before them, for which the default leaves the
	// 64 KiB: a default request fits the 4 MiB a gRPC server takes unless
	// told otherwise (the emulators'). A single entry larger than
	// BatchBytes is sent alone.
	BatchMutations int
	BatchBytes     int64
	// EntryBytes bounds one row's entry (default 32 MiB, at least
	// BatchBytes): a row past it, or past MaxMutations, is written in
	// pieces.
	EntryBytes int64
	// Timeout bounds one request with all its retries (default 2
	// minutes); entries still failing then are counted failed.
	Timeout time.Duration
	// Workers is how many splits' delete markers the delete pass
	// applies at once (the run's workers; default 1).
	Workers int
	// AtomicRows, AllowLargeRows and FailOnTags are the job's
	// target.bigtable options (job.Bigtable).
	AtomicRows, AllowLargeRows, FailOnTags bool
	// Warn receives what the run's summary lists as warnings.
	Warn func(format string, args ...any)
}

func (o *Options) defaults() {
	if o.BatchMutations <= 0 {
		o.BatchMutations = 10_000
	}
	o.BatchMutations = min(o.BatchMutations, MaxMutations)
	if o.BatchBytes <= 0 {
		o.BatchBytes = 4<<20 - 64<<10
	}
	if o.EntryBytes <= 0 {
		o.EntryBytes = 32 << 20
	}
	o.EntryBytes = max(o.EntryBytes, o.BatchBytes)
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	o.Workers = max(o.Workers, 1)
	if o.Warn == nil {
		o.Warn = func(string, ...any) {}
	}
}

// Stats is the sink's account of a run (sink.Accounted), in the run's
// summary as sink_stats.
type Stats struct {
	// Requests counts the MutateRows requests the sink made, Retries the
	// requests sent again (by the client, or by the sink after
	// RESOURCE_EXHAUSTED).
	Requests uint64 `json:"requests"`
	Retries  uint64 `json:"retries"`
	// TimestampsAtMax counts cells whose HBase timestamp ×1000 passed
	// Bigtable's largest timestamp, written at it.
	TimestampsAtMax int64 `json:"timestamps_at_max"`
	// TagsDropped counts cells written without their tags.
	TagsDropped int64 `json:"cells_tags_dropped"`
	// RowsInPieces names every row written in several entries, not
	// atomically.
	RowsInPieces []RowPieces `json:"rows_in_pieces,omitempty"`
	// LargeRows names every row past MaxReadableRow written (with
	// allow_large_rows).
	LargeRows []string `json:"large_rows,omitempty"`
	// DeleteMarkers counts the delete markers the delete pass applied
	// (deletes: apply), DeleteMutations the range deletes it sent for
	// them, DeleteRows on how many rows (a row counted once per split
	// with markers for it).
	DeleteMarkers   int64 `json:"delete_markers,omitempty"`
	DeleteMutations int64 `json:"delete_mutations,omitempty"`
	DeleteRows      int64 `json:"delete_rows,omitempty"`
}

// RowPieces is a row written in several MutateRows entries.
type RowPieces struct {
	Row    string `json:"row"`
	Pieces int    `json:"pieces"`
	Cells  int64  `json:"cells"`
}

// Sink writes cells into one Bigtable table, each split through its own
// batches, so a split's Commit waits for exactly its own entries.
type Sink struct {
	tbl   *bigtable.Table
	table string
	o     Options

	calls    *atomic.Uint64 // MutateRows calls seen on the wire, retries included (nil: not counted)
	requests atomic.Uint64  // MutateRows requests made (first attempts)
	resends  atomic.Uint64  // entries the sink sent again itself

	mu    sync.Mutex
	stats Stats

	// delDir, when set (ApplyDeletes), is where splits spill their
	// delete markers; delSplits are every split of the run, whose
	// markers Finish applies.
	delDir    string
	delSplits []string
}

// New returns the sink writing into table tbl (named table in messages).
// calls, when not nil, counts the MutateRows calls the client makes, its
// own retries included (see counter), so that Retries can report them.
func New(tbl *bigtable.Table, table string, calls *atomic.Uint64, o Options) *Sink {
	o.defaults()
	return &Sink{tbl: tbl, table: table, o: o, calls: calls}
}

// Name implements sink.Sink.
func (s *Sink) Name() string { return "bigtable" }

// Begin implements sink.Sink.
func (s *Sink) Begin(_ context.Context, si sink.SplitInfo) (sink.SplitSink, error) {
	return &split{s: s, id: si.ID}, nil
}

// Finish implements sink.Sink: every split's cells are in Bigtable at
// its Commit; with deletes: apply, the run's delete markers are applied
// now that they are (applyDeletes), again on each resume.
func (s *Sink) Finish(ctx context.Context, rep sink.Reporter) error {
	if s.delDir == "" {
		return nil
	}
	return s.applyDeletes(ctx, rep)
}

// Close implements sink.Sink; the client belongs to whoever built the
// sink.
func (s *Sink) Close() error { return nil }

// Retries implements sink.Retrier: the MutateRows calls sent again, by
// the client (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED) or by the sink
// (RESOURCE_EXHAUSTED), so that the run slows down while Bigtable
// pushes back.
func (s *Sink) Retries() uint64 {
	r := s.resends.Load()
	if s.calls != nil {
		if c, q := s.calls.Load(), s.requests.Load(); c > q {
			r += c - q
		}
	}
	return r
}

// Account implements sink.Accounted.
func (s *Sink) Account() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.RowsInPieces = append([]RowPieces(nil), st.RowsInPieces...)
	st.LargeRows = append([]string(nil), st.LargeRows...)
	st.Requests = s.requests.Load()
	st.Retries = s.Retries()
	return st
}

// note adds what one split saw to the run's account, and warns of what
// the summary must name.
func (s *Sink) note(clamped, tagged int64, pieces []RowPieces, large []string) {
	s.mu.Lock()
	first := s.stats.TimestampsAtMax == 0 && clamped > 0
	firstTags := s.stats.TagsDropped == 0 && tagged > 0
	s.stats.TimestampsAtMax += clamped
	s.stats.TagsDropped += tagged
	s.stats.RowsInPieces = append(s.stats.RowsInPieces, pieces...)
	s.stats.LargeRows = append(s.stats.LargeRows, large...)
	s.mu.Unlock()
	if first {
		s.o.Warn("cells with HBase timestamps from %d ms on are written at Bigtable's largest timestamp %d µs (×1000 would overflow), as Google's HBase client writes them; sink_stats.timestamps_at_max counts them", overflowMillis, int64(MaxTimestamp))
	}
	if firstTags {
		s.o.Warn("cells with tags (per-cell TTLs, visibility labels) are written without them: Bigtable has no place for tags (tags: fail refuses them); sink_stats.cells_tags_dropped counts them")
	}
	for _, p := range pieces {
		s.o.Warn("row %s (%d cells) written in %d pieces, not atomic: Bigtable applies at most %d mutations in one entry (atomic_rows makes such a row a bad key)", p.Row, p.Cells, p.Pieces, MaxMutations)
	}
	for _, r := range large {
		s.o.Warn("row %s is over 256 MiB (allow_large_rows): Bigtable cannot return it in one read", r)
	}
}

// entry is one MutateRows entry being built: one row's mutations.
type entry struct {
	row   string
	mut   *bigtable.Mutation
	cells int64
	bytes int64
	// kept are copies of its cells, with atomic_rows only: what a row
	// refused after its cells were taken gives back to the run.
	kept []cell.Cell
}

// split is one split's output: the entry being built, the batch of
// closed entries, and the counts of what was acknowledged.
type split struct {
	s  *Sink
	id string

	cur    *entry
	pieces int   // entries of the current row closed before cur
	rowC   int64 // cells of the current row so far, all pieces
	rowB   int64 // bytes of the current row so far
	large  bool  // the current row passed MaxReadableRow
	// refused is a row refused under atomic_rows: its further cells are
	// refused with it.
	refused string
	why     string

	batch      []*entry
	batchMuts  int
	batchBytes int64

	given, written, failed, bytes int64
	examples                      []string
	clamped, tagged               int64
	rowsInPieces                  []RowPieces
	largeRows                     []string
	done                          bool
	del                           *spill // the split's delete markers, with deletes: apply
	// pend are the current row's markers, held until the row ends
	// (pendCells their cells, with atomic_rows).
	pend      []rangeDelete
	pendCells []cell.Cell
}

// cellBytes is what one cell adds to a MutateRows request on the wire:
// its SetCell (family, qualifier, timestamp ts, value) in the protobuf
// frames of a Mutation and of the entry's mutations field. Counted
// exactly, so that BatchBytes bounds the request Bigtable receives, not
// an estimate of it.
func cellBytes(c *cell.Cell, ts bigtable.Timestamp) int64 {
	set := protowire.SizeTag(1) + protowire.SizeBytes(len(c.Family)) + // SetCell.family_name
		protowire.SizeTag(2) + protowire.SizeBytes(len(c.Qualifier)) + // column_qualifier
		protowire.SizeTag(3) + protowire.SizeVarint(uint64(ts)) + // timestamp_micros
		protowire.SizeTag(4) + protowire.SizeBytes(len(c.Value)) // value
	mut := protowire.SizeTag(1) + protowire.SizeBytes(set)        // Mutation.set_cell
	return int64(protowire.SizeTag(2) + protowire.SizeBytes(mut)) // Entry.mutations
}

// entryOverhead is what an entry adds to a request besides its
// mutations: its row key, which every entry carries (a 4 KiB key with
// one small cell is mostly key), and the frame of the request's entries
// field, whose length takes at most 5 bytes for entries below 32 GiB.
func entryOverhead(row []byte) int64 {
	return int64(protowire.SizeTag(1)+protowire.SizeBytes(len(row))) + // Entry.row_key
		int64(protowire.SizeTag(3)) + 5 // MutateRowsRequest.entries
}

// shortRow is a row key for a message: quoted, and cut after 64 bytes
// (a key may be 4 KiB).
func shortRow(row string) string {
	if len(row) <= 64 {
		return fmt.Sprintf("%q", row)
	}
	return fmt.Sprintf("%q… (%d bytes)", row[:64], len(row))
}

// Write implements sink.SplitSink.
func (sp *split) Write(ctx context.Context, c *cell.Cell) error {
	o := &sp.s.o
	switch c.Type {
	case cell.Delete, cell.DeleteColumn, cell.DeleteFamily, cell.DeleteFamilyVersion:
		return sp.writeMarker(c)
	}
	if len(c.Row) == 0 || len(c.Row) > MaxRowKey {
		return &sink.BadKeyError{Why: fmt.Sprintf("the new row key is %d bytes; Bigtable takes 1 to %d", len(c.Row), MaxRowKey)}
	}
	ts, clamped, ok := Micros(c.Timestamp)
	if !ok {
		return fmt.Errorf("bigtable sink: row %q column %s:%q has timestamp %d, which Bigtable cannot hold (no negative timestamps)", c.Row, c.Family, c.Qualifier, c.Timestamp)
	}
	if len(c.Tags) > 0 {
		if o.FailOnTags {
			return fmt.Errorf("bigtable sink: row %q column %s:%q has tags (a per-cell TTL or visibility label), which Bigtable has no place for, and the job says tags: fail", c.Row, c.Family, c.Qualifier)
		}
		sp.tagged++
	}
	if sp.refused != "" && string(c.Row) == sp.refused {
		return &sink.BadKeyError{Why: sp.why}
	}
	sp.refused = ""
	if err := sp.nextRow(c.Row); err != nil {
		return err
	}
	if sp.cur != nil && sp.cur.row != string(c.Row) {
		if err := sp.endRow(ctx); err != nil {
			return err
		}
	}
	n := cellBytes(c, ts)
	if sp.cur != nil && (sp.cur.cells+1 > MaxMutations || sp.cur.bytes+n > o.EntryBytes) {
		if o.AtomicRows {
			return sp.refuse(c)
		}
		// A piece of the row: Bigtable applies it on its own.
		if err := sp.add(ctx, sp.cur); err != nil {
			return err
		}
		sp.cur = nil
		sp.pieces++
	}
	if sp.rowB+n > MaxReadableRow && !sp.large {
		if !o.AllowLargeRows {
			return fmt.Errorf("bigtable sink: row %q passes 256 MiB, which Bigtable cannot return in one read; set target.bigtable.allow_large_rows: true to write it anyway", c.Row)
		}
		sp.large = true
		sp.largeRows = append(sp.largeRows, fmt.Sprintf("%q", c.Row))
	}
	if sp.cur == nil {
		sp.cur = &entry{row: string(c.Row), mut: bigtable.NewMutation(), bytes: entryOverhead(c.Row)}
	}
	// The mutation keeps the value's slice: c's is valid only during
	// this call.
	sp.cur.mut.Set(string(c.Family), string(c.Qualifier), ts, append([]byte(nil), c.Value...))
	if o.AtomicRows {
		sp.cur.kept = append(sp.cur.kept, c.Clone())
	}
	sp.cur.cells++
	sp.cur.bytes += n
	sp.rowC++
	sp.rowB += n
	sp.given++
	sp.bytes += cell.Size(c)
	if clamped {
		sp.clamped++
	}
	return nil
}

// refuse refuses the current row under atomic_rows: the cells taken so
// far go back to the run with c's refusal, and the row's later cells are
// refused too.
func (sp *split) refuse(c *cell.Cell) error {
	why := fmt.Sprintf("row %q has more than %d cells or %d bytes, which Bigtable cannot apply in one atomic entry, and the job says atomic_rows", c.Row, min(sp.cur.cells, MaxMutations), sp.s.o.EntryBytes)
	dropped := sp.cur.kept
	sp.given -= sp.cur.cells
	for i := range dropped {
		sp.bytes -= cell.Size(&dropped[i])
	}
	// The row's delete markers go back with its cells.
	dropped = append(dropped, sp.dropPending(sp.cur.row)...)
	sp.refused, sp.why = sp.cur.row, why
	sp.cur, sp.pieces, sp.rowC, sp.rowB, sp.large = nil, 0, 0, 0, false
	return &sink.BadKeyError{Why: why, Dropped: dropped}
}

// endRow closes the current row's entry into the batch, and notes a row
// that took several pieces.
func (sp *split) endRow(ctx context.Context) error {
	if sp.cur == nil {
		return nil
	}
	e := sp.cur
	if sp.pieces > 0 {
		sp.rowsInPieces = append(sp.rowsInPieces, RowPieces{Row: fmt.Sprintf("%q", e.row), Pieces: sp.pieces + 1, Cells: sp.rowC})
	}
	sp.cur, sp.pieces, sp.rowC, sp.rowB, sp.large = nil, 0, 0, 0, false
	return sp.add(ctx, e)
}

// add puts a closed entry into the batch, sending the batch first when
// the entry would take it past a bound.
func (sp *split) add(ctx context.Context, e *entry) error {
	o := &sp.s.o
	if len(sp.batch) > 0 && (sp.batchMuts+int(e.cells) > o.BatchMutations || sp.batchBytes+e.bytes > o.BatchBytes) {
		if err := sp.flush(ctx); err != nil {
			return err
		}
	}
	e.kept = nil
	sp.batch = append(sp.batch, e)
	sp.batchMuts += int(e.cells)
	sp.batchBytes += e.bytes
	return nil
}

// retryable says whether an entry that failed with err is worth sending
// again: Bigtable pushing back, or out of reach. The client retries the
// same codes but RESOURCE_EXHAUSTED itself within the request's time.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.ResourceExhausted:
		// gRPC says a message past the server's size limit with the same
		// code as Bigtable's push-back: sent again it is refused again
		// (an emulator takes 4 MiB, a real instance 256 MB).
		return !tooLarge(err)
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return true
	}
	return false
}

// tooLarge says whether err is a server refusing a message past its
// size limit ("received message larger than max").
func tooLarge(err error) bool {
	return strings.Contains(status.Convert(err).Message(), "larger than max")
}

// flush sends the batch and waits for every entry: acknowledged, or
// failed after every retry within the timeout (counted, with examples).
// An error is returned only when the run's context ended: the split is
// then redone.
func (sp *split) flush(ctx context.Context) error {
	if len(sp.batch) == 0 {
		return nil
	}
	s := sp.s
	actx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	pending := sp.batch
	errs := make([]error, len(pending))
	backoff := 100 * time.Millisecond
	for {
		keys := make([]string, len(pending))
		muts := make([]*bigtable.Mutation, len(pending))
		for i, e := range pending {
			keys[i], muts[i] = e.row, e.mut
		}
		s.requests.Add(1)
		perEntry, err := s.tbl.ApplyBulk(actx, keys, muts)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var again []*entry
		errs = errs[:0]
		for i, e := range pending {
			var eerr error
			switch {
			case err != nil:
				eerr = err
			case perEntry != nil:
				eerr = perEntry[i]
			}
			if eerr == nil {
				sp.written += e.cells
				continue
			}
			if retryable(eerr) && actx.Err() == nil {
				again = append(again, e)
				continue
			}
			sp.fail(e, eerr)
		}
		if len(again) == 0 {
			break
		}
		s.resends.Add(uint64(len(again)))
		if pause.For(actx, backoff) != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, e := range again {
				sp.fail(e, fmt.Errorf("still failing after %v of retries: %w", s.o.Timeout, context.DeadlineExceeded))
			}
			break
		}
		backoff = min(2*backoff, 5*time.Second)
		pending = again
	}
	sp.batch, sp.batchMuts, sp.batchBytes = sp.batch[:0], 0, 0
	return nil
}

// fail counts an entry's cells failed, keeping a few examples.
func (sp *split) fail(e *entry, err error) {
	sp.failed += e.cells
	if len(sp.examples) < 5 {
		sp.examples = append(sp.examples, fmt.Sprintf("row %s (%d cells): %v", shortRow(e.row), e.cells, err))
	}
}

// Commit implements sink.SplitSink: it sends what is left and returns
// once every entry is acknowledged or failed.
func (sp *split) Commit(ctx context.Context) (sink.Ack, error) {
	if err := sp.endRow(ctx); err != nil {
		return sink.Ack{}, err
	}
	if err := sp.flush(ctx); err != nil {
		return sink.Ack{}, err
	}
	if err := sp.commitMarkers(); err != nil {
		return sink.Ack{}, err
	}
	sp.done = true
	sp.s.note(sp.clamped, sp.tagged, sp.rowsInPieces, sp.largeRows)
	ack := sink.Ack{Cells: sp.written, Bytes: sp.bytes, Failed: sp.failed, FailedExamples: sp.examples}
	if sp.written+sp.failed != sp.given {
		// Every cell taken must be accounted for.
		return ack, fmt.Errorf("bigtable sink, split %s: %d cells taken, %d acknowledged and %d failed", sp.id, sp.given, sp.written, sp.failed)
	}
	return ack, nil
}

// Abort implements sink.SplitSink: what was sent may have landed
// (harmless: the same cells at the same timestamps are written again when
// the split is redone); the rest is dropped.
func (sp *split) Abort() {
	sp.cur, sp.batch = nil, nil
	sp.abortMarkers()
}
