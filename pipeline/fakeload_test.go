package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/vfs"
)

// fakeCluster is the target cluster of the whole-protocol schedules: a
// bulk loader over a simStore (hfiles.Cluster). Its regions are the ones
// the job's staging folder was planned for (plan.json). A load it takes
// copies each file's bytes into a store file of the region under
// /hbase/data, as a region server copies a file from another file system,
// or moves it (removes the staged file), as it does on its own; each call
// may instead be refused, or its answer lost, as the schedule's draws
// say. What landed is judged by reading the store files (landedCells).
type fakeCluster struct {
	st    *simStore
	table string

	mu      sync.Mutex
	rng     *rand.Rand
	faults  bool // draw refusals and lost answers
	move    bool // the region servers move the staged files (else copy)
	regions []*hbase.Region
	dirs    []string // each region's plan dir
	seq     int
	log     []string
	// landings counts the store files written, so that what landed is
	// read again only when it changed (landedCells).
	landings int
	cached   map[uint64]int
	cachedAt int
}

// errUnanswered is a bulk load call whose answer never came (a timeout,
// a broken connection), after the client's own retries.
var errUnanswered = errors.New("fake cluster: the BulkLoadHFile call went unanswered")

// storeRoot is where the fake keeps the regions' store files.
const storeRoot = "/hbase/data"

func (c *fakeCluster) note(format string, args ...any) {
	c.log = append(c.log, fmt.Sprintf("  cluster: "+format, args...))
}

// loadRegions reads the staging folder's region map once.
func (c *fakeCluster) loadRegions(staging string) error {
	if c.regions != nil {
		return nil
	}
	b, err := vfs.ReadFile(c.st.mem, path.Join(staging, "plan.json"))
	if err != nil {
		return fmt.Errorf("fake cluster: no region map yet: %w", err)
	}
	var p hfiles.RegionMap
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("fake cluster: region map: %w", err)
	}
	for i, r := range p.Regions {
		c.regions = append(c.regions, &hbase.Region{Table: c.table, Name: fmt.Appendf(nil, "%s,%s,%d", c.table, r.Start, i), StartKey: r.Start, EndKey: r.End, ID: uint64(i + 1), Server: "fake:16020"})
		c.dirs = append(c.dirs, r.Dir)
	}
	return nil
}

// regionOf is the index of the region holding row.
func (c *fakeCluster) regionOf(row []byte) int {
	return sort.Search(len(c.regions), func(i int) bool {
		return len(c.regions[i].EndKey) == 0 || bytes.Compare(row, c.regions[i].EndKey) < 0
	})
}

// Regions implements hfiles.Cluster.
func (c *fakeCluster) Regions(context.Context, string) ([]*hbase.Region, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadRegions("/staging"); err != nil {
		return nil, err
	}
	return c.regions, nil
}

// DescribeTable implements hfiles.Cluster: the families' options are the
// writer's defaults.
func (c *fakeCluster) DescribeTable(_ context.Context, table string) (*hbase.TableSpec, error) {
	return &hbase.TableSpec{Name: table}, nil
}

// StoreFiles implements hfiles.Cluster: the region holding row and its
// store files of family, as paths on the staging folder's file system.
func (c *fakeCluster) StoreFiles(_ context.Context, _ string, row, family []byte) (*hbase.Region, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadRegions("/staging"); err != nil {
		return nil, nil, err
	}
	i := c.regionOf(row)
	dir := path.Join(storeRoot, c.dirs[i], string(family))
	infos, err := c.st.mem.ReadDir(dir)
	if err != nil && !strings.Contains(err.Error(), "not exist") {
		return nil, nil, err
	}
	var out []string
	for _, fi := range infos {
		out = append(out, path.Join(dir, fi.Name()))
	}
	return c.regions[i], out, nil
}

// CleanupBulkLoad implements hfiles.Cluster.
func (c *fakeCluster) CleanupBulkLoad(_ context.Context, _ string, _ []byte, token string) error {
	return c.st.mem.RemoveAll(token)
}

// The ways a call goes.
const (
	callOK          = iota
	callRefused     // loaded=false, nothing taken
	callRefusedHalf // loaded=false, a file left in the bulk token's folder
	callLost        // unanswered, and nothing loaded
	callLostLanded  // unanswered, but the files landed
	callLostAsked   // unanswered; the client asks Landed, and sends again on false
)

// BulkLoadWith implements hfiles.Cluster.
func (c *fakeCluster) BulkLoadWith(ctx context.Context, table string, files []hbase.BulkFile, o hbase.BulkLoadOptions) error {
	c.mu.Lock()
	if err := c.loadRegions("/staging"); err != nil {
		c.mu.Unlock()
		return err
	}
	c.seq++
	token := fmt.Sprintf("/hbase/staging/token-%04d", c.seq)
	how := callOK
	if c.faults {
		switch r := c.rng.IntN(100); {
		case r < 3:
			how = callRefused
		case r < 5:
			how = callRefusedHalf
		case r < 9:
			how = callLost
		case r < 13:
			how = callLostLanded
		case r < 17:
			how = callLostAsked
		}
	}
	c.mu.Unlock()
	if o.Prepared != nil {
		if err := o.Prepared(token); err != nil {
			return err
		}
	}
	reg := c.regions[c.regionOf(files[0].FirstRow)]
	switch how {
	case callRefused:
		c.noteLocked("load of %d files into %s refused", len(files), reg.Name)
		return &hbase.BulkLoadError{Region: reg, Files: files}
	case callRefusedHalf:
		// HBase moved the first file into the token's folder and failed
		// to move it back.
		src := filePath(files[0].Path)
		if err := c.st.mem.Rename(src, hbase.BulkStagedPath(token, files[0].Family, src)); err != nil {
			return err
		}
		c.noteLocked("load of %d files into %s refused, %s left in %s", len(files), reg.Name, path.Base(src), token)
		return &hbase.BulkLoadError{Region: reg, Files: files}
	case callLost:
		c.noteLocked("load of %d files into %s unanswered, not landed", len(files), reg.Name)
		return fmt.Errorf("hbase: bulk load into %s: %w", table, errUnanswered)
	}
	if err := c.land(files); err != nil {
		return err
	}
	switch how {
	case callLostLanded:
		c.noteLocked("load of %d files into %s landed, unanswered", len(files), reg.Name)
		return fmt.Errorf("hbase: bulk load into %s: %w", table, errUnanswered)
	case callLostAsked:
		// As hbase.Client.BulkLoadWith does: ask before sending again.
		if o.Landed != nil {
			done, err := o.Landed(ctx, files)
			if err != nil {
				return err
			}
			if done {
				c.noteLocked("load of %d files into %s landed, unanswered; Landed said so", len(files), reg.Name)
				return nil
			}
		}
		c.noteLocked("load of %d files into %s landed, unanswered; Landed said no: sent again", len(files), reg.Name)
		if err := c.land(files); err != nil {
			return err
		}
	default:
		c.noteLocked("load of %d files into %s", len(files), reg.Name)
	}
	return nil
}

func (c *fakeCluster) noteLocked(format string, args ...any) {
	c.mu.Lock()
	c.note(format, args...)
	c.mu.Unlock()
}

// filePath is the path on the store of a file URL the sink sent.
func filePath(u string) string {
	if t, err := url.Parse(u); err == nil && t.Scheme != "" {
		return t.Path
	}
	return u
}

// land takes files into their regions, as a region server does: it opens
// each (HBase reads the trailer and the first and last keys: a file it
// cannot open is refused), checks it lies in the region, and copies or
// moves it into a store file.
func (c *fakeCluster) land(files []hbase.BulkFile) error {
	for _, f := range files {
		src := filePath(f.Path)
		b, err := vfs.ReadFile(c.st.mem, src)
		if err != nil {
			return fmt.Errorf("fake cluster: %s: %w", f.Path, err)
		}
		i := c.regionOf(f.FirstRow)
		if c.regionOf(f.LastRow) != i {
			return &hbase.SpanError{File: f, Region: c.regions[i]}
		}
		rd, err := hfile.Open(bytes.NewReader(b), int64(len(b)), f.Path)
		if err != nil {
			return &hbase.BulkLoadError{Region: c.regions[i], Files: files}
		}
		rd.Close()
		c.mu.Lock()
		c.seq++
		dst := path.Join(storeRoot, c.dirs[i], string(f.Family), fmt.Sprintf("%032x", c.seq))
		c.mu.Unlock()
		c.st.mem.WriteFile(dst, b)
		c.mu.Lock()
		c.landings++
		c.mu.Unlock()
		if c.move {
			c.st.mem.Remove(src)
		}
	}
	return nil
}

// landedCells counts each cell (cellHash) in the regions' store files,
// and checks each file lies in its region.
func (c *fakeCluster) landedCells() (map[uint64]int, error) {
	c.mu.Lock()
	n := c.landings
	if c.cached != nil && c.cachedAt == n {
		c.mu.Unlock()
		return c.cached, nil
	}
	c.mu.Unlock()
	out, err := c.readLanded()
	if err == nil {
		c.mu.Lock()
		c.cached, c.cachedAt = out, n
		c.mu.Unlock()
	}
	return out, err
}

// readLanded reads every store file (landedCells).
func (c *fakeCluster) readLanded() (map[uint64]int, error) {
	out := map[uint64]int{}
	var walk func(dir string) error
	walk = func(dir string) error {
		infos, err := c.st.mem.ReadDir(dir)
		if err != nil {
			return nil
		}
		for _, fi := range infos {
			p := path.Join(dir, fi.Name())
			if fi.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			f, err := c.st.mem.Open(p)
			if err != nil {
				return err
			}
			rd, err := hfile.Open(f, f.Size(), p)
			if err != nil {
				return fmt.Errorf("store file %s: %w", p, err)
			}
			region := strings.Split(strings.TrimPrefix(p, storeRoot+"/"), "/")[0]
			it := rd.NewIterator()
			for ok := it.First(); ok; ok = it.Next() {
				cl := it.Cell()
				if d := c.dirs[c.regionOf(cl.Row)]; d != region {
					it.Close()
					rd.Close()
					return fmt.Errorf("store file %s of region %s holds row %q of region %s", p, region, cl.Row, d)
				}
				out[cellHash(cl)]++
			}
			err = it.Close()
			rd.Close()
			if err != nil {
				return fmt.Errorf("store file %s: %w", p, err)
			}
		}
		return nil
	}
	return out, walk(storeRoot)
}
