package stage

import (
	"bufio"
	"bytes"
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
				return err
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
		return err
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

// writePartition merges one partition's runs into HFiles. Rows up to the
// last row of the HFiles a previous Finish recorded are skipped (files
// roll only between rows, so those rows are complete in them). Cells with
// equal keys collapse into one: a duplicate when value and tags agree
// (a redone split), a collision otherwise (counted, the first run's cell
// kept).
//
// Partitions merge in parallel: ps is this call's own, but finish.json
// holds every partition, so changes to ps that others may save (and the
// save itself) happen under finMu.
func (s *Sink) writePartition(ctx context.Context, st *finishState, ps *partState, runs []partRun, fan int) error {
	reg := &s.plan.Regions[ps.Region]
	rel := path.Join(hfilesDir, reg.Dir, ps.Family)
	dir := path.Join(s.root, rel)
	if err := s.fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("stage: create %s: %w", dir, err)
	}
	// Remove what a crash left that no record names.
	recorded := map[string]bool{}
	for _, f := range ps.Files {
		recorded[path.Join(s.root, f.Name)] = true
	}
	if ents, err := s.fs.ReadDir(dir); err == nil {
		for _, e := range ents {
			if p := path.Join(dir, e.Name()); !recorded[p] {
				s.fs.Remove(p)
			}
		}
	}
	var resume []byte
	if n := len(ps.Files); n > 0 {
		resume = ps.Files[n-1].LastRow
	}
	var total int64
	for _, r := range runs {
		total += r.part.Bytes
	}
	limit := s.o.HFileSize
	if s.o.MaxFiles > 1 {
		// Every file but the last holds at least limit bytes, so at most
		// MaxFiles files are written.
		limit = max(limit, (total+int64(s.o.MaxFiles)-2)/int64(s.o.MaxFiles-1))
	} else {
		limit = 1<<63 - 1
	}

	runs, made, err := s.reduce(runs, ps.Region, ps.Family, fan)
	defer func() {
		for _, m := range made {
			fi, err := s.fs.Stat(m)
			if err == nil && s.fs.Remove(m) == nil {
				s.staged.Add(-fi.Size())
			}
		}
	}()
	if err != nil {
		return err
	}
	m, err := newMerger(s.fs, runs)
	if err != nil {
		return err
	}
	defer m.close()

	opts := s.familyOptions(ps.Family)
	var (
		out     *hfileOut
		prev    cell.Cell
		prevBuf []byte
		has     bool
		n       int
		// Counted here, folded into ps when a file is recorded: a resumed
		// merge skips the recorded files' rows, and counts the rest again.
		dups, colls int64
	)
	record := func(info *hfileInfo, done bool) error {
		s.finMu.Lock()
		defer s.finMu.Unlock()
		if info != nil {
			ps.Files = append(ps.Files, *info)
		}
		ps.Duplicates += dups
		ps.Collisions += colls
		dups, colls = 0, 0
		ps.Done = done
		return s.saveFinish(st)
	}
	closeOut := func() error {
		info, err := s.finishHFile(out)
		out = nil
		if err != nil {
			return err
		}
		if err := s.addStaged(info.Size); err != nil {
			return fmt.Errorf("stage: region %s family %s: %w", reg.Dir, ps.Family, err)
		}
		return record(&info, false)
	}
	err = m.each(func(c *cell.Cell) error {
		if !reg.Contains(c.Row) {
			return fmt.Errorf("stage: run cell %s lies outside its partition's region %s (runs and plan disagree)", c, reg)
		}
		if resume != nil && bytes.Compare(c.Row, resume) <= 0 {
			return nil
		}
		if has && cell.Compare(&prev, c) == 0 {
			if sameCell(&prev, c) {
				dups++
			} else {
				colls++
				s.example(fmt.Sprintf("%s: kept value %x (%d bytes), dropped %x (%d bytes)", c, clip(prev.Value), len(prev.Value), clip(c.Value), len(c.Value)))
			}
			return nil
		}
		newRow := !has || !bytes.Equal(prev.Row, c.Row)
		if out != nil && newRow && out.bytes >= limit {
			if err := closeOut(); err != nil {
				return err
			}
		}
		if out == nil {
			o, err := s.createHFile(rel, opts)
			if err != nil {
				return err
			}
			out = o
		}
		if err := out.append(c); err != nil {
			return fmt.Errorf("stage: region %s family %s: %w", reg.Dir, ps.Family, err)
		}
		prevBuf = prevBuf[:0]
		prevBuf = append(prevBuf, c.Row...)
		prevBuf = append(prevBuf, c.Family...)
		prevBuf = append(prevBuf, c.Qualifier...)
		prevBuf = append(prevBuf, c.Value...)
		prevBuf = append(prevBuf, c.Tags...)
		o := 0
		cut := func(k int) []byte { b := prevBuf[o : o+k : o+k]; o += k; return b }
		prev = cell.Cell{Timestamp: c.Timestamp, Type: c.Type}
		prev.Row, prev.Family, prev.Qualifier, prev.Value = cut(len(c.Row)), cut(len(c.Family)), cut(len(c.Qualifier)), cut(len(c.Value))
		prev.Tags = cut(len(c.Tags))
		has = true
		n++
		if n%4096 == 0 {
			return ctx.Err()
		}
		return nil
	})
	if err != nil {
		if out != nil {
			out.abort(s)
		}
		return err
	}
	if out != nil {
		if err := closeOut(); err != nil {
			return err
		}
	}
	return record(nil, true)
}

func clip(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
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
