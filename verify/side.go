package verify

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"io"
	iofs "io/fs"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/vfs"
)

// Reader reads the cells of one row range of one side of a comparison.
// Implementations are safe for concurrent use; each call reads on its own.
type Reader interface {
	// Read calls fn for every cell whose row lies in r, in the side's own
	// order. The cell is valid only during the call.
	Read(ctx context.Context, r transform.KeyRange, fn func(*cell.Cell) error) error
	// BytesRead is the bytes this reader has fetched so far: file bytes for
	// a snapshot (pages fetched, not served from its cache), cell bytes
	// returned by the servers for a live table.
	BytesRead() int64
	// Live says the side may change while it is read (a live table), so a
	// mismatch is re-read before it is declared.
	Live() bool
	// String names the side in reports.
	String() string
}

// SnapshotReader reads row ranges of a snapshot, seeking each store file to
// the range's start, never reading regions outside it.
type SnapshotReader struct {
	snap    *snapshot.Snapshot
	splits  []snapshot.Split
	opts    snapshot.ScanOptions
	count   *countingFS
	name    string
	closeFS func() error

	// cuts holds the ways the snapshot was cut into pieces (pieces).
	mu   sync.Mutex
	cuts map[pieceCut][]snapshot.Split
}

// OpenSnapshot opens snapshot name under root (a path or URL as the job
// file gives it) for range reads, counting the file bytes it reads. now is
// the time TTLs are judged at (zero: the current time, as HBase does).
func OpenSnapshot(ctx context.Context, root, name string, now time.Time) (*SnapshotReader, error) {
	return openSnapshot(ctx, root, name, now, vfs.Options{})
}

// openSnapshot is OpenSnapshot, opening root with vo (a Kerberos login).
func openSnapshot(ctx context.Context, root, name string, now time.Time, vo vfs.Options) (*SnapshotReader, error) {
	loc, err := vfs.OpenWith(root, vo)
	if err != nil {
		return nil, fmt.Errorf("verify: snapshot root %s: %w", root, err)
	}
	cfs := newCountingFS(loc.FS)
	s, err := snapshot.Open(ctx, loc.Path, name, snapshot.OpenOptions{FS: cfs})
	if err != nil {
		loc.Close()
		return nil, err
	}
	sr, err := newSnapshotReader(s, cfs, now)
	if err != nil {
		s.Close()
		loc.Close()
		return nil, err
	}
	sr.closeFS = loc.Close
	return sr, nil
}

func newSnapshotReader(s *snapshot.Snapshot, cfs *countingFS, now time.Time) (*SnapshotReader, error) {
	splits, err := s.Splits(snapshot.SplitOptions{})
	if err != nil {
		return nil, err
	}
	return &SnapshotReader{
		snap: s, splits: splits, count: cfs, opts: snapshot.ScanOptions{Now: now},
		name: "snapshot " + s.Info().Name,
	}, nil
}

// Snapshot returns the snapshot read.
func (s *SnapshotReader) Snapshot() *snapshot.Snapshot { return s.snap }

// Read implements Reader.
func (s *SnapshotReader) Read(ctx context.Context, r transform.KeyRange, fn func(*cell.Cell) error) error {
	// Regions are sorted by start key: the first that may hold r.Start is
	// the last starting at or before it.
	i := sort.Search(len(s.splits), func(i int) bool {
		return bytes.Compare(s.splits[i].StartRow, r.Start) > 0
	})
	if i > 0 {
		i--
	}
	for ; i < len(s.splits); i++ {
		sp := s.splits[i]
		if len(r.Stop) > 0 && bytes.Compare(sp.StartRow, r.Stop) >= 0 {
			break
		}
		if len(sp.EndRow) > 0 && bytes.Compare(sp.EndRow, r.Start) <= 0 {
			continue
		}
		if err := s.readPiece(ctx, sp, r, fn); err != nil {
			return err
		}
	}
	return nil
}

// readPiece calls fn for every cell of split sp (a region, or a piece of
// one from pieces) whose row lies in r.
func (s *SnapshotReader) readPiece(ctx context.Context, sp snapshot.Split, r transform.KeyRange, fn func(*cell.Cell) error) error {
	opts := s.opts
	opts.StartRow, opts.StopRow = r.Start, r.Stop
	sc, err := s.snap.NewScanner(ctx, sp, opts)
	if err != nil {
		return err
	}
	for sc.Next() {
		if err := fn(sc.Cell()); err != nil {
			sc.Close()
			return err
		}
	}
	if err := sc.Close(); err != nil {
		return err
	}
	return sc.Err()
}

// pieceCut names one way of cutting the snapshot into pieces.
type pieceCut struct {
	target int64
	inRow  bool
}

// pieces returns the pieces of the snapshot, cut at about target store
// file bytes (inside rows too with inRow, at column starts, as a run cuts
// a huge row: snapshot.SplitOptions.InRow), that hold rows of r, in key
// order. The snapshot is cut once per way and the cut kept: it reads the
// data index of each region larger than target.
func (s *SnapshotReader) pieces(r transform.KeyRange, target int64, inRow bool) ([]snapshot.Split, error) {
	k := pieceCut{target, inRow}
	s.mu.Lock()
	all, ok := s.cuts[k]
	s.mu.Unlock()
	if !ok {
		var err error
		if all, err = s.snap.Splits(snapshot.SplitOptions{TargetBytes: target, InRow: inRow}); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.cuts == nil {
			s.cuts = map[pieceCut][]snapshot.Split{}
		}
		s.cuts[k] = all
		s.mu.Unlock()
	}
	var out []snapshot.Split
	for _, sp := range all {
		if len(r.Stop) > 0 && bytes.Compare(sp.StartRow, r.Stop) >= 0 {
			break
		}
		if stop := sp.StopRow(); len(stop) > 0 && bytes.Compare(stop, r.Start) <= 0 {
			continue
		}
		out = append(out, sp)
	}
	return out, nil
}

// BytesRead implements Reader.
func (s *SnapshotReader) BytesRead() int64 { return s.count.n.Load() }

// Live implements Reader: a snapshot does not change.
func (s *SnapshotReader) Live() bool { return false }

// String implements Reader.
func (s *SnapshotReader) String() string { return s.name }

// Close releases the snapshot's files and connection.
func (s *SnapshotReader) Close() error {
	err := s.snap.Close()
	if s.closeFS != nil {
		if e := s.closeFS(); err == nil {
			err = e
		}
	}
	return err
}

// countingFS counts the bytes fetched through it, and keeps the most
// recently read pages of every file in memory. Verifying entities one range
// at a time seeks each store file again and again, mostly into blocks a
// neighbouring entity just read; the snapshot reader keeps no block cache,
// so without this every entity would fetch its blocks anew (measured: a
// sample of 1000 entities read four times the snapshot's size).
type countingFS struct {
	vfs.FS
	n atomic.Int64

	mu    sync.Mutex
	pages map[pageKey]*list.Element
	lru   list.List // of *page, most recent first
	max   int       // pages kept
}

// pageSize is the unit cached. A miss fetches the whole run of missing
// pages a read covers in one ReadAt, so small pages cost no extra round
// trips; they only keep what is fetched close to the blocks asked for.
const pageSize = 4 << 10

// cachePages bounds the cache: 16384 pages of 4 KiB, 64 MiB.
const cachePages = 16384

type pageKey struct {
	file string
	idx  int64
}

type page struct {
	key   pageKey
	data  []byte
	err   error
	ready chan struct{} // closed once data or err is set
}

func newCountingFS(fsys vfs.FS) *countingFS {
	return &countingFS{FS: fsys, pages: map[pageKey]*list.Element{}, max: cachePages}
}

func (c *countingFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &countingFile{File: f, fs: c}, nil
}

func (c *countingFS) Stat(name string) (iofs.FileInfo, error) { return c.FS.Stat(name) }

// claim returns the pages first..last of file, cached or in flight, and
// for those neither it registers new pages that the caller must fetch
// (owned[i] is true). Workers verifying neighbouring entities often want the
// same page at once: one fetches it and the others wait for it.
func (c *countingFS) claim(file string, first, last int64) (pages []*page, owned []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for idx := first; idx <= last; idx++ {
		k := pageKey{file, idx}
		if e, ok := c.pages[k]; ok {
			c.lru.MoveToFront(e)
			pages = append(pages, e.Value.(*page))
			owned = append(owned, false)
			continue
		}
		p := &page{key: k, ready: make(chan struct{})}
		c.pages[k] = c.lru.PushFront(p)
		pages = append(pages, p)
		owned = append(owned, true)
	}
	for c.lru.Len() > c.max {
		e := c.lru.Back()
		c.lru.Remove(e)
		delete(c.pages, e.Value.(*page).key)
	}
	return pages, owned
}

// fail forgets pages whose fetch failed, so the next reader tries again.
func (c *countingFS) fail(ps []*page) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps {
		if e, ok := c.pages[p.key]; ok && e.Value.(*page) == p {
			c.lru.Remove(e)
			delete(c.pages, p.key)
		}
	}
}

type countingFile struct {
	vfs.File
	fs *countingFS
}

// ReadAt serves p from cached pages, fetching each run of missing pages
// with one read (the last page of a file is short). Like every vfs.File, it
// returns a short read only with an error.
func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	size := f.File.Size()
	if off < 0 {
		return 0, fmt.Errorf("verify: %s: negative offset %d", f.Name(), off)
	}
	end := min(off+int64(len(p)), size)
	if end <= off {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	first, last := off/pageSize, (end-1)/pageSize
	pages, owned := f.fs.claim(f.Name(), first, last)
	// Fetch the runs this call owns before waiting for any other, so two
	// readers never wait on each other.
	var ferr error
	for i := 0; i < len(pages); {
		if !owned[i] {
			i++
			continue
		}
		j := i
		for j < len(pages) && owned[j] {
			j++
		}
		start := pages[i].key.idx * pageSize
		buf := make([]byte, min(int64(j-i)*pageSize, size-start))
		n, err := f.File.ReadAt(buf, start)
		f.fs.n.Add(int64(n))
		if n < len(buf) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			err = fmt.Errorf("verify: %s: reading %d bytes at %d: %w", f.Name(), len(buf), start, err)
			ferr = err
			f.fs.fail(pages[i:j])
		}
		for k := i; k < j; k++ {
			if err != nil {
				pages[k].err = err
			} else {
				lo := int64(k-i) * pageSize
				pages[k].data = buf[lo:min(lo+pageSize, int64(len(buf)))]
			}
			close(pages[k].ready)
		}
		i = j
	}
	if ferr != nil {
		return 0, ferr
	}
	done := 0
	for _, pg := range pages {
		<-pg.ready
		if pg.err != nil {
			return done, pg.err
		}
		pos := off + int64(done)
		done += copy(p[done:], pg.data[pos-pg.key.idx*pageSize:])
	}
	if done < len(p) {
		return done, io.EOF
	}
	return done, nil
}

// TableReader reads row ranges of a live table with the HBase client, every
// version the table keeps.
type TableReader struct {
	c     *hbase.Client
	table []byte
	n     atomic.Int64
}

// NewTableReader reads table through c.
func NewTableReader(c *hbase.Client, table string) *TableReader {
	return &TableReader{c: c, table: []byte(table)}
}

// Read implements Reader.
func (t *TableReader) Read(ctx context.Context, r transform.KeyRange, fn func(*cell.Cell) error) error {
	sc := t.c.Scan(ctx, t.table, &hbase.Scan{Start: r.Start, Stop: r.Stop, MaxVersions: math.MaxInt32, Batch: 10_000})
	defer sc.Close()
	for sc.Next() {
		c := sc.Cell()
		t.n.Add(cell.Size(c))
		if err := fn(c); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("verify: scanning %s over %s: %w", t.table, r, err)
	}
	return nil
}

// BytesRead implements Reader: the KeyValue bytes the servers returned.
func (t *TableReader) BytesRead() int64 { return t.n.Load() }

// Live implements Reader.
func (t *TableReader) Live() bool { return true }

// String implements Reader.
func (t *TableReader) String() string { return "table " + string(t.table) }
