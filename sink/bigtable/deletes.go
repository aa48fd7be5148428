package bigtable

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"
	"golang.org/x/sync/errgroup"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/pause"
	"github.com/rekeyhq/rekey/sink"
)

// The delete pass (target.bigtable.deletes: apply, and every catch-up's
// removed cells: build.go).
//
// An HBase delete marker masks every cell at or below its timestamp,
// whenever either was written; a Bigtable delete removes what the row
// holds when it is applied and masks nothing written later, and the
// entries of one MutateRows request are applied in any order. So a
// marker is applied only once every put of the run that it could mask
// is in Bigtable: a re-keyed row may gather cells from many splits.
// Each split spills its mapped markers to a file beside the checkpoint,
// synced and renamed before its Commit returns (so a split recorded done
// has its markers on disk), and Finish, which the run calls once every
// split is committed, applies the files of all the run's splits. A
// resumed run calls Finish again and it applies them all again: a
// Bigtable delete is idempotent, and nothing but this pass deletes.

// rangeDelete is one marker in Bigtable's terms: a DeleteFromColumn
// time range [Start, End) µs (End 0: no end) on one column, or, with
// Wide, on every column of the family the row holds at the pass (a
// family marker: Bigtable's DeleteFromFamily has no time range).
type rangeDelete struct {
	Row       []byte `json:"r"`
	Family    string `json:"f"`
	Qualifier []byte `json:"q,omitempty"`
	Wide      bool   `json:"w,omitempty"`
	Start     int64  `json:"s"`
	End       int64  `json:"e"`
}

// covers says whether the range holds the Bigtable timestamp ts.
func (d *rangeDelete) covers(ts int64) bool {
	return ts >= d.Start && (d.End == 0 || ts < d.End)
}

// mapMarker maps a delete marker to a range delete, or says why it has
// no exact Bigtable form. HBase timestamps are ms, Bigtable's µs.
func mapMarker(c *cell.Cell) (rangeDelete, string) {
	d := rangeDelete{Row: append([]byte(nil), c.Row...), Family: string(c.Family), Qualifier: append([]byte(nil), c.Qualifier...)}
	t := c.Timestamp
	if t < 0 {
		return d, fmt.Sprintf("its timestamp %d is negative", t)
	}
	switch c.Type {
	case cell.Delete, cell.DeleteFamilyVersion:
		// One version: the cells at exactly t.
		if t >= overflowMillis {
			return d, fmt.Sprintf("its timestamp %d ms is past Bigtable's largest: every cell from %d ms on is written at %d µs, so the one version it deletes cannot be told apart", t, overflowMillis, int64(MaxTimestamp))
		}
		d.Start, d.End = t*1000, (t+1)*1000
	case cell.DeleteColumn, cell.DeleteFamily:
		// Every version at or below t.
		switch {
		case t == math.MaxInt64:
			d.End = 0 // every cell, those at Bigtable's largest included
		case t >= overflowMillis:
			return d, fmt.Sprintf("its timestamp %d ms is past Bigtable's largest: cells from %d ms on are all written at %d µs, some above it and some not", t, overflowMillis, int64(MaxTimestamp))
		default:
			d.End = (t + 1) * 1000
		}
	default:
		return d, fmt.Sprintf("%s is not a delete marker", c.Type)
	}
	if c.Type == cell.DeleteFamily || c.Type == cell.DeleteFamilyVersion {
		d.Wide, d.Qualifier = true, nil
	}
	return d, ""
}

// DeletesDir is the folder beside a run's checkpoint where the bigtable
// sink spills the markers of a raw run with deletes: apply.
func DeletesDir(checkpoint string) string {
	return strings.TrimSuffix(strings.TrimPrefix(checkpoint, "file://"), ".json") + ".bigtable-deletes"
}

// spillName is a split's file in the deletes folder: split IDs are the
// run's own strings, not file names.
func spillName(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:16]) + ".deletes"
}

// ApplyDeletes makes the sink take delete markers (a raw run with
// target.bigtable.deletes: apply): each split of splits (every split
// of the run, done or not) spills its mapped markers into dir, and
// Finish applies them all. Files of other splits (an earlier run's with
// other splits) and files never renamed (a killed run's) are removed.
func (s *Sink) ApplyDeletes(dir string, splits []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bigtable sink: deletes folder: %w", err)
	}
	keep := make(map[string]bool, len(splits))
	for _, id := range splits {
		keep[spillName(id)] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("bigtable sink: deletes folder: %w", err)
	}
	for _, e := range ents {
		if !keep[e.Name()] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("bigtable sink: deletes folder: %w", err)
			}
		}
	}
	s.delDir, s.delSplits = dir, splits
	return nil
}

// spill is one split's markers on their way to its file.
type spill struct {
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	n   int64
}

// writeMarker maps a marker and holds it until its row ends, or refuses
// it (a bad key, by the job's bad_keys) when it has no exact Bigtable
// form or its row was refused whole (atomic_rows).
func (sp *split) writeMarker(c *cell.Cell) error {
	s := sp.s
	if s.delDir == "" {
		// Only raw mode carries delete markers, and build refuses it
		// without deletes: apply.
		return fmt.Errorf("bigtable sink: %s marker in row %q: Bigtable keeps no tombstones, and raw mode is refused for a Bigtable target without target.bigtable.deletes: apply", c.Type, c.Row)
	}
	if len(c.Row) == 0 || len(c.Row) > MaxRowKey {
		return &sink.BadKeyError{Why: fmt.Sprintf("the new row key is %d bytes; Bigtable takes 1 to %d", len(c.Row), MaxRowKey)}
	}
	if sp.refused != "" && string(c.Row) == sp.refused {
		return &sink.BadKeyError{Why: sp.why}
	}
	d, why := mapMarker(c)
	if why != "" {
		return &sink.BadKeyError{Why: fmt.Sprintf("%s marker at %d ms on %q %s:%q has no exact Bigtable delete: %s", c.Type, c.Timestamp, c.Row, c.Family, c.Qualifier, why)}
	}
	if sp.pend != nil && string(sp.pend[0].Row) != string(c.Row) {
		if err := sp.spillPending(); err != nil {
			return err
		}
	}
	sp.pend = append(sp.pend, d)
	if s.o.AtomicRows {
		// A row refused later gives its markers back with its cells.
		sp.pendCells = append(sp.pendCells, c.Clone())
	}
	// A marker counts as taken, and acknowledged once its spill is
	// durable: the run's count of a split's cells includes it.
	sp.given++
	sp.bytes += cell.Size(c)
	return nil
}

// nextRow spills the markers held for the row before row, which has
// ended.
func (sp *split) nextRow(row []byte) error {
	if sp.pend == nil || string(sp.pend[0].Row) == string(row) {
		return nil
	}
	return sp.spillPending()
}

// dropPending gives back the markers held for row, refused with its
// cells (atomic_rows).
func (sp *split) dropPending(row string) []cell.Cell {
	if sp.pend == nil || string(sp.pend[0].Row) != row {
		return nil
	}
	out := sp.pendCells
	sp.given -= int64(len(out))
	for i := range out {
		sp.bytes -= cell.Size(&out[i])
	}
	sp.pend, sp.pendCells = nil, nil
	return out
}

// spillPending writes the markers held for the current row to the
// split's spill file. Markers are held until their row ends so that a
// row refused whole under atomic_rows refuses them too: its cells and
// its deletes alike stay out of the table.
func (sp *split) spillPending() error {
	s := sp.s
	if sp.del == nil {
		f, err := os.CreateTemp(s.delDir, spillName(sp.id)+".*.tmp")
		if err != nil {
			return fmt.Errorf("bigtable sink: spilling deletes: %w", err)
		}
		w := bufio.NewWriterSize(f, 256<<10)
		sp.del = &spill{f: f, w: w, enc: json.NewEncoder(w)}
	}
	for i := range sp.pend {
		if err := sp.del.enc.Encode(&sp.pend[i]); err != nil {
			return fmt.Errorf("bigtable sink: spilling deletes to %s: %w", sp.del.f.Name(), err)
		}
	}
	sp.del.n += int64(len(sp.pend))
	sp.pend, sp.pendCells = nil, nil
	return nil
}

// commitMarkers makes the split's spill durable under its name: synced,
// then renamed, so the file is whole or absent. A split without markers
// leaves an empty file, so that Finish can tell it from a lost one.
func (sp *split) commitMarkers() error {
	s := sp.s
	if s.delDir == "" {
		return nil
	}
	final := filepath.Join(s.delDir, spillName(sp.id))
	// spillPending opens the file even with nothing held: a split
	// without markers leaves an empty one.
	if err := sp.spillPending(); err != nil {
		return err
	}
	d := sp.del
	err := d.w.Flush()
	if err == nil {
		err = d.f.Sync()
	}
	if cerr := d.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(d.f.Name(), final)
	}
	if err != nil {
		os.Remove(d.f.Name())
		return fmt.Errorf("bigtable sink: spilling deletes of split %s: %w", sp.id, err)
	}
	sp.del = nil
	sp.written += d.n
	if err := syncDir(s.delDir); err != nil {
		return fmt.Errorf("bigtable sink: spilling deletes of split %s: %w", sp.id, err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// abortMarkers drops a split's unfinished spill.
func (sp *split) abortMarkers() {
	sp.pend, sp.pendCells = nil, nil
	if sp.del != nil {
		sp.del.f.Close()
		os.Remove(sp.del.f.Name())
		sp.del = nil
	}
}

// passRows is how many rows the delete pass resolves at once: one read
// of their columns (values stripped) for the family markers among them.
const passRows = 500

// applyDeletes is the delete pass: every split's spilled markers, in
// requests of whole rows' deletes, after every put of the run. Splits'
// files go through Options.Workers at once: deletes commute, so the
// order between them does not matter. Every file is looked for first, so
// that a lost one fails the pass before it deletes anything.
func (s *Sink) applyDeletes(ctx context.Context, rep sink.Reporter) error {
	start := time.Now()
	for _, id := range s.delSplits {
		p := filepath.Join(s.delDir, spillName(id))
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("bigtable sink: the delete markers of split %s are not in %s (%s: %w): the delete pass cannot be done; run again on the machine that wrote them, or start over with --fresh", id, s.delDir, filepath.Base(p), err)
		}
	}
	var markers, rows, muts atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.o.Workers)
	for _, id := range s.delSplits {
		g.Go(func() error {
			m, r, n, err := s.applySpill(gctx, filepath.Join(s.delDir, spillName(id)))
			markers.Add(m)
			rows.Add(r)
			muts.Add(n)
			return err
		})
	}
	err := g.Wait()
	s.mu.Lock()
	s.stats.DeleteMarkers += markers.Load()
	s.stats.DeleteMutations += muts.Load()
	s.stats.DeleteRows += rows.Load()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	rep.Printf("bigtable: applied %d delete markers as %d range deletes on %d rows in %v, after every put of the run", markers.Load(), muts.Load(), rows.Load(), time.Since(start).Round(time.Millisecond))
	return nil
}

// applySpill applies one split's spill file, passRows rows at a time,
// and returns the markers read, the rows and the range deletes sent.
func (s *Sink) applySpill(ctx context.Context, p string) (markers, rows, muts int64, err error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("bigtable sink: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 256<<10))
	var batch []rangeDelete
	nrows := 0
	for {
		var d rangeDelete
		err := dec.Decode(&d)
		if err == io.EOF || (err == nil && nrows == passRows && string(d.Row) != string(batch[len(batch)-1].Row)) {
			r, m, aerr := s.applyRows(ctx, batch)
			rows, muts = rows+r, muts+m
			if aerr != nil {
				return markers, rows, muts, aerr
			}
			batch, nrows = batch[:0], 0
		}
		if err == io.EOF {
			return markers, rows, muts, nil
		}
		if err != nil {
			return markers, rows, muts, fmt.Errorf("bigtable sink: reading %s: %w", p, err)
		}
		if len(batch) == 0 || string(d.Row) != string(batch[len(batch)-1].Row) {
			nrows++
		}
		batch = append(batch, d)
		markers++
	}
}

// applyRows applies the deletes of a few rows (each row's consecutive
// in ds): a column's as they are, a family's on every column of the
// family the row holds now with a cell in its range, read first.
// It returns the rows and mutations sent.
func (s *Sink) applyRows(ctx context.Context, ds []rangeDelete) (int64, int64, error) {
	if len(ds) == 0 {
		return 0, 0, nil
	}
	var wide bigtable.RowList
	isWide := map[string]bool{}
	for i := range ds {
		if r := string(ds[i].Row); ds[i].Wide && !isWide[r] {
			isWide[r] = true
			wide = append(wide, r)
		}
	}
	held := map[string]bigtable.Row{}
	if len(wide) > 0 {
		err := s.tbl.ReadRows(ctx, wide, func(r bigtable.Row) bool {
			held[r.Key()] = r
			return true
		}, bigtable.RowFilter(bigtable.StripValueFilter()))
		if err != nil {
			return 0, 0, fmt.Errorf("bigtable sink: reading the columns of %d rows for their family delete markers: %w", len(wide), err)
		}
	}
	var keys []string
	var entries []*bigtable.Mutation
	var nmuts []int
	var muts int64
	rowSet := map[string]bool{}
	seen := map[string]bool{}
	var cur *bigtable.Mutation
	curN := 0
	add := func(row, fam, col string, d *rangeDelete) {
		k := fam + "\x00" + col + "\x00" + fmt.Sprint(d.Start, d.End)
		if seen[k] {
			return
		}
		seen[k] = true
		if cur == nil || curN == s.o.BatchMutations {
			// A row's deletes in pieces: deletes commute, so pieces
			// applied one by one end where one entry would.
			cur, curN = bigtable.NewMutation(), 0
			keys, entries, nmuts = append(keys, row), append(entries, cur), append(nmuts, 0)
		}
		cur.DeleteTimestampRange(fam, col, bigtable.Timestamp(d.Start), bigtable.Timestamp(d.End))
		curN++
		nmuts[len(nmuts)-1]++
		muts++
	}
	for i := range ds {
		d := &ds[i]
		row := string(d.Row)
		if i == 0 || row != string(ds[i-1].Row) {
			rowSet[row] = true
			cur, seen = nil, map[string]bool{}
		}
		if !d.Wide {
			add(row, d.Family, string(d.Qualifier), d)
			continue
		}
		for _, it := range held[row][d.Family] {
			if d.covers(int64(it.Timestamp)) {
				add(row, d.Family, strings.TrimPrefix(it.Column, d.Family+":"), d)
			}
		}
	}
	// Requests of at most BatchMutations mutations.
	for lo := 0; lo < len(entries); {
		hi, n := lo, 0
		for hi < len(entries) && (hi == lo || n+nmuts[hi] <= s.o.BatchMutations) {
			n += nmuts[hi]
			hi++
		}
		if err := s.sendDeletes(ctx, keys[lo:hi], entries[lo:hi]); err != nil {
			return int64(len(rowSet)), muts, err
		}
		lo = hi
	}
	return int64(len(rowSet)), muts, nil
}

// sendDeletes sends one request of deletes, sending again what fails
// with a retryable code within the timeout; any entry failing for good
// fails the pass (a resume runs it again).
func (s *Sink) sendDeletes(ctx context.Context, keys []string, muts []*bigtable.Mutation) error {
	actx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		s.requests.Add(1)
		errs, err := s.tbl.ApplyBulk(actx, keys, muts)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var k2 []string
		var m2 []*bigtable.Mutation
		for i := range keys {
			e := err
			if e == nil && errs != nil {
				e = errs[i]
			}
			if e == nil {
				continue
			}
			if !retryable(e) || actx.Err() != nil {
				return fmt.Errorf("bigtable sink: deleting in row %q: %w", keys[i], e)
			}
			k2, m2 = append(k2, keys[i]), append(m2, muts[i])
		}
		if len(k2) == 0 {
			return nil
		}
		s.resends.Add(uint64(len(k2)))
		if err := pause.For(actx, backoff); err != nil {
			return fmt.Errorf("bigtable sink: deletes in row %q still failing after %v: %w", k2[0], s.o.Timeout, err)
		}
		backoff = min(2*backoff, 5*time.Second)
		keys, muts = k2, m2
	}
}
