package verify

import (
	"bytes"
	"context"
	"fmt"
	iofs "io/fs"
	"math"
	"sort"
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
	// a snapshot, cell bytes returned by the servers for a live table.
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
}

// OpenSnapshot opens snapshot name under root (a path or URL as the job
// file gives it) for range reads, counting the file bytes it reads. now is
// the time TTLs are judged at (zero: the current time, as HBase does).
func OpenSnapshot(ctx context.Context, root, name string, now time.Time) (*SnapshotReader, error) {
	loc, err := vfs.Open(root)
	if err != nil {
		return nil, fmt.Errorf("verify: snapshot root %s: %w", root, err)
	}
	cfs := &countingFS{FS: loc.FS}
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
		if err := sc.Err(); err != nil {
			return err
		}
	}
	return nil
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

// countingFS counts the bytes read through it.
type countingFS struct {
	vfs.FS
	n atomic.Int64
}

func (c *countingFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, n: &c.n}, nil
}

func (c *countingFS) Stat(name string) (iofs.FileInfo, error) { return c.FS.Stat(name) }

type countingFile struct {
	vfs.File
	n *atomic.Int64
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
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
		t.n.Add(cellSize(c))
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

// cellSize is a cell's size as a serialized KeyValue, what HBase measures.
func cellSize(c *cell.Cell) int64 {
	n := int64(4 + 4 + 2 + len(c.Row) + 1 + len(c.Family) + len(c.Qualifier) + 8 + 1 + len(c.Value))
	if len(c.Tags) > 0 {
		n += int64(2 + len(c.Tags))
	}
	return n
}
