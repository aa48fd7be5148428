package stage

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/pipeline/sink"
	"golang.org/x/sync/errgroup"
)

// Finish implements sink.Sink: it merges every partition's runs into
// HFiles under STAGING/hfiles/REGION/FAMILY/ (skipping HFiles a previous
// Finish recorded), removes the runs, and bulk loads region by region
// (skipping regions already loaded) unless the sink is offline or NoLoad;
// then it prints the command that loads the files later.
func (s *Sink) Finish(ctx context.Context, rep sink.Reporter) error {
	recs, err := readSplits(s.fs, s.root)
	if err != nil {
		return err
	}
	st, err := s.finishState(recs)
	if err != nil {
		return err
	}
	if !st.Written {
		began := time.Now()
		err := s.writeAll(ctx, rep, recs, st)
		s.mu.Lock()
		s.stats.MergeSeconds = time.Since(began).Seconds()
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	s.mu.Lock()
	// Spill figures of the whole job, from the records (a resumed process
	// staged only part of it itself).
	s.stats.Runs, s.stats.RunBytes, s.stats.CellsStaged = 0, 0, 0
	for _, r := range recs {
		s.stats.Runs += int64(len(r.Runs))
		for _, f := range r.Runs {
			s.stats.RunBytes += f.Size
		}
		s.stats.CellsStaged += r.Cells
	}
	s.stats.Cells, s.stats.HFiles, s.stats.HFileBytes = 0, 0, 0
	s.stats.Duplicates, s.stats.Collisions = 0, 0
	for _, ps := range st.Parts {
		for _, f := range ps.Files {
			s.stats.Cells += f.Cells
			s.stats.HFiles++
			s.stats.HFileBytes += f.Size
		}
		s.stats.Duplicates += ps.Duplicates
		s.stats.Collisions += ps.Collisions
	}
	s.mu.Unlock()
	if s.o.Client == nil || s.o.NoLoad {
		cmd := fmt.Sprintf("hbase org.apache.hadoop.hbase.tool.BulkLoadHFilesTool -Dcreate.table=no %s %s -loadTable", s.url(path.Join(s.root, hfilesDir)), s.o.Table)
		s.mu.Lock()
		s.stats.LoadCommand = cmd
		s.mu.Unlock()
		where := ""
		if !strings.HasPrefix(s.loc.URL, "hdfs://") {
			where = " after copying the folder to the cluster's HDFS (and naming it there)"
		}
		rep.Printf("hfiles: %d HFiles in %s, not loaded; to load them into %s%s (the tool re-splits files whose region split since):\n  %s", len(allFiles(st)), s.url(path.Join(s.root, hfilesDir)), s.o.Table, where, cmd)
		return nil
	}
	began := time.Now()
	err = s.loadAll(ctx, rep, st)
	s.mu.Lock()
	s.stats.LoadSeconds = time.Since(began).Seconds()
	s.mu.Unlock()
	return err
}

func allFiles(st *finishState) []hfileInfo {
	var out []hfileInfo
	for _, ps := range st.Parts {
		out = append(out, ps.Files...)
	}
	return out
}

// finishState reads finish.json, or starts a new one when there is none or
// when the committed splits changed since it was written.
func (s *Sink) finishState(recs []*splitRecord) (*finishState, error) {
	var st finishState
	found, err := readJSON(s.fs, path.Join(s.root, finishFile), &st)
	if err != nil {
		return nil, err
	}
	fp := fingerprint(recs)
	if found && st.Splits != fp {
		if len(st.Loaded) > 0 || st.Written {
			return nil, fmt.Errorf("stage: staging folder %s: splits were staged again after their HFiles were written or loaded; stage into a fresh folder", s.loc.URL)
		}
		// HFiles of an earlier set of runs are stale: start the merge over.
		if err := s.fs.RemoveAll(path.Join(s.root, hfilesDir)); err != nil {
			return nil, fmt.Errorf("stage: remove stale HFiles: %w", err)
		}
		found = false
	}
	if !found {
		st = finishState{Splits: fp}
	}
	if st.Parts == nil {
		st.Parts = map[string]*partState{}
	}
	if st.Loaded == nil {
		st.Loaded = map[string]bool{}
	}
	return &st, nil
}

func (s *Sink) saveFinish(st *finishState) error {
	return writeJSON(s.fs, path.Join(s.root, finishFile), st)
}

// writeAll merges every partition not yet done, Workers of them at once,
// then removes the runs. Partitions are independent (each writes its own
// region and family folder), so the merge phase scales with the workers
// like the spill phase; the biggest partitions start first so one large
// partition does not run alone at the end.
func (s *Sink) writeAll(ctx context.Context, rep sink.Reporter, recs []*splitRecord, st *finishState) error {
	type pk struct {
		region int
		family string
	}
	runs := map[pk][]partRun{}
	size := map[pk]int64{}
	var keys []pk
	for _, r := range recs {
		for _, f := range r.Runs {
			for _, p := range f.Parts {
				k := pk{p.Region, p.Family}
				if p.Region < 0 || p.Region >= len(s.plan.Regions) {
					return fmt.Errorf("stage: run %s names region %d, but the plan has %d", f.Name, p.Region, len(s.plan.Regions))
				}
				if _, ok := runs[k]; !ok {
					keys = append(keys, k)
				}
				runs[k] = append(runs[k], partRun{name: path.Join(s.root, f.Name), part: p})
				size[k] += p.Bytes
			}
		}
	}
	// Every partition's state exists before the workers start: they only
	// change their own partState, under finMu, never the map.
	var todo []pk
	for _, k := range keys {
		ps := st.Parts[partKey(k.region, k.family)]
		if ps == nil {
			ps = &partState{Region: k.region, Family: k.family}
			st.Parts[partKey(k.region, k.family)] = ps
		}
		if !ps.Done {
			todo = append(todo, k)
		}
	}
	sort.Slice(todo, func(i, j int) bool {
		a, b := todo[i], todo[j]
		if size[a] != size[b] {
			return size[a] > size[b]
		}
		if a.region != b.region {
			return a.region < b.region
		}
		return a.family < b.family
	})
	workers := max(min(s.o.Workers, len(todo)), 1)
	// The merge's memory bound holds over all workers together.
	fan := s.o.mergeFanIn(workers)
	doneBefore := len(keys) - len(todo)
	var finished int
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, k := range todo {
		if gctx.Err() != nil {
			break
		}
		ps := st.Parts[partKey(k.region, k.family)]
		part := runs[k]
		g.Go(func() error {
			if err := s.writePartition(gctx, st, ps, part, fan); err != nil {
				return s.full(err, fmt.Sprintf("merging region %s family %s", s.plan.Regions[k.region].Dir, k.family))
			}
			s.finMu.Lock()
			defer s.finMu.Unlock()
			finished++
			rep.Printf("hfiles: region %s family %s: %d HFiles (%d of %d partitions)", s.plan.Regions[k.region].Dir, k.family, len(ps.Files), doneBefore+finished, len(keys))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st.Written = true
	if err := s.saveFinish(st); err != nil {
		return s.full(err, "recording the merged HFiles")
	}
	// The runs are merged into HFiles; free their space.
	var freed int64
	for _, r := range recs {
		for _, f := range r.Runs {
			freed += f.Size
		}
	}
	if err := s.fs.RemoveAll(path.Join(s.root, runsDir)); err != nil {
		return fmt.Errorf("stage: remove merged runs: %w", err)
	}
	s.staged.Add(-freed)
	return nil
}

// familyOptions is the HFile writer configuration of a family.
func (s *Sink) familyOptions(family string) hfile.WriterOptions {
	o, ok := s.o.Families[family]
	if !ok {
		o = s.o.HFile
	}
	// Cells may carry tags; a file without a tags section would have to
	// refuse them. HFileOutputFormat2 writes the section too.
	o.Tags = true
	return o
}

// newHFileName returns a fresh HFile name: 32 hex digits, the form HBase's
// own store files have, which the bulk load tool accepts.
func newHFileName() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// hfileOut is one HFile being written: first to _NAME (the bulk load tool
// skips names starting with '_'), renamed to NAME when closed and synced.
type hfileOut struct {
	rel, tmp, final string
	f               interface{ Sync() error }
	closeFile       func() error
	bw              *bufio.Writer
	w               *hfile.Writer
	cells, bytes    int64
}

func (s *Sink) createHFile(dir string, opts hfile.WriterOptions) (*hfileOut, error) {
	name := newHFileName()
	rel := path.Join(dir, name)
	out := &hfileOut{rel: rel, final: path.Join(s.root, rel), tmp: path.Join(s.root, dir, "_"+name)}
	f, err := s.fs.Create(out.tmp)
	if err != nil {
		return nil, fmt.Errorf("stage: create HFile %s: %w", out.tmp, err)
	}
	out.f, out.closeFile = f, f.Close
	out.bw = bufio.NewWriterSize(f, 64<<10)
	opts.Name = s.url(out.final)
	w, err := hfile.NewWriter(out.bw, opts)
	if err != nil {
		f.Close()
		s.fs.Remove(out.tmp)
		return nil, fmt.Errorf("stage: HFile %s: %w", out.final, err)
	}
	out.w = w
	return out, nil
}

func (o *hfileOut) append(c *cell.Cell) error {
	o.cells++
	o.bytes += cell.Size(c)
	return o.w.Append(c)
}

// finish closes, syncs and renames the file and describes it.
func (s *Sink) finishHFile(o *hfileOut) (hfileInfo, error) {
	st := o.w.Stats()
	err := o.w.Close()
	if err == nil {
		err = o.bw.Flush()
	}
	if err == nil {
		err = o.f.Sync()
	}
	if cerr := o.closeFile(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(o.tmp, o.final)
	}
	if err != nil {
		s.fs.Remove(o.tmp)
		return hfileInfo{}, fmt.Errorf("stage: write HFile %s: %w", o.final, err)
	}
	size := o.w.Stats().Written
	return hfileInfo{Name: o.rel, Size: size, Cells: st.Entries, FirstRow: st.FirstRow, LastRow: st.LastRow}, nil
}

func (o *hfileOut) abort(s *Sink) {
	o.closeFile()
	s.fs.Remove(o.tmp)
}

func (s *Sink) example(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stats.Examples) < s.o.Examples {
		s.stats.Examples = append(s.stats.Examples, e)
	}
}

func notExist(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, os.ErrNotExist)
}
