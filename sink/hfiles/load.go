package hfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/internal/pause"
	"github.com/rekeyhq/rekey/sink"
	"golang.org/x/sync/errgroup"
)

// maxLoadAttempts bounds how often one region's load is retried after its
// target regions changed under it (each retry re-splits the files).
const maxLoadAttempts = 5

// loadParallel is how many regions are loaded at once. A region's load is
// mostly waiting: for the region server to open and move its files, and for
// finish.json to be written before and after. HBase's own bulk load tool
// also loads several regions at once.
const loadParallel = 4

// loadAll bulk loads the HFiles region by region, loadParallel regions at
// a time, marking each loaded region in finish.json (recordLoaded), so a
// load that fails part way resumes with the regions not loaded. After the first
// failure or an interrupt no other region's load starts; those under way
// finish. From a kerberized HDFS it sends the caller's delegation token,
// obtained for this load, renewed or replaced while it runs (loadToken),
// and cancelled after.
func (s *Sink) loadAll(ctx context.Context, rep sink.Reporter, st *finishState) (err error) {
	tok, done, err := s.fsToken(ctx, rep)
	if err != nil {
		return err
	}
	defer done()
	type regionLoad struct {
		reg   *Region
		parts []*partState
	}
	var todo []regionLoad
	for i := range s.regions.Regions {
		reg := &s.regions.Regions[i]
		if st.Loaded[reg.Dir] {
			s.mu.Lock()
			s.stats.RegionsLoaded++
			s.mu.Unlock()
			continue
		}
		var parts []*partState
		for _, ps := range st.Parts {
			if ps.Region == i && len(ps.Files) > 0 {
				parts = append(parts, ps)
			}
		}
		if len(parts) == 0 {
			continue
		}
		sort.Slice(parts, func(a, b int) bool { return parts[a].Family < parts[b].Family })
		todo = append(todo, regionLoad{reg, parts})
	}
	// The regions marked loaded since the last save (recordLoaded) are
	// saved once at the end, whatever the outcome.
	defer func() {
		s.finMu.Lock()
		defer s.finMu.Unlock()
		if !s.loadedUnsaved {
			return
		}
		if serr := s.saveFinish(st); serr != nil {
			err = errors.Join(err, fmt.Errorf("hfiles: record the regions loaded: %w", serr))
		}
	}()
	var g errgroup.Group
	g.SetLimit(loadParallel)
	var failed atomic.Bool
	for _, l := range todo {
		if failed.Load() || ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := s.loadRegion(ctx, rep, st, l.reg, l.parts, tok); err != nil {
				failed.Store(true)
				return err
			}
			if testAfterLoaded != nil {
				testAfterLoaded(l.reg)
			}
			rep.Printf("hfiles: loaded region %s into %s", l.reg.Dir, s.o.Table)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// Interrupted: the loads under way have finished (a load, once sent, is
	// waited for), and the regions not started wait for a resume.
	return ctx.Err()
}

// recordLoaded marks reg loaded in the load state. The mark is not saved
// by itself: the next save carries it (another region's markSent, or the
// one loadAll makes as it ends if none did), a write of finish.json less per region
// (on HDFS such writes, one at a time, were a large part of a short load). A run cut
// short before the mark is saved loses only the mark: the region's files
// are gone from the folder (moved into the region), a load of it was
// sent, and each file's id is in a store file of the region, so a resumed
// load counts them loaded (toSend) and sends nothing again. Files the
// region servers copied rather than moved stay in the folder: their mark
// is saved at once (markLoaded).
func (s *Sink) recordLoaded(st *finishState, reg *Region) {
	s.finMu.Lock()
	defer s.finMu.Unlock()
	st.Loaded[reg.Dir] = true
	s.loadedUnsaved = true
	s.mu.Lock()
	s.stats.RegionsLoaded++
	s.mu.Unlock()
}

// loadRegion loads the files of one planned region and marks it loaded
// (recordLoaded, or saveLoaded when the region servers copied the files).
// Files HBase already took (a bulk load moves them away) are gone from the
// staging folder and are not sent again, so resuming after a partial load
// adds nothing twice; once a load of the region was sent, a file counts as
// taken only if a store file of the region carries its id (toSend). If
// the target region split (or merged) since the region map, files that now span
// regions are split again at the current boundaries and the load is
// retried.
func (s *Sink) loadRegion(ctx context.Context, rep sink.Reporter, st *finishState, reg *Region, parts []*partState, lt *loadToken) error {
	s.removeStrayHFiles(reg, parts)
	for attempt := 1; ; attempt++ {
		files, ids, copied, err := s.toSend(ctx, rep, st, reg, parts)
		if err != nil {
			return err
		}
		if len(files) == 0 {
			// An earlier load took every file (a resumed load): its
			// staging directories that hold no file go now, as they
			// would have gone after it had the run not stopped.
			s.cleanEarlierTokens(ctx, rep, st, reg, "")
			return s.markLoaded(rep, st, reg, copied)
		}
		var token string
		prepared := func(t string) error {
			token = t
			return s.markSent(st, reg, t)
		}
		landed := func(ctx context.Context, sent []hbase.BulkFile) (bool, error) {
			return s.sentLanded(ctx, reg, sent, ids, token)
		}
		err = s.o.Client.BulkLoadWith(ctx, s.o.Table, files, hbase.BulkLoadOptions{FSToken: lt.current(ctx, rep), Prepared: prepared, Landed: landed})
		if err == nil {
			s.cleanEarlierTokens(ctx, rep, st, reg, token)
			// A region server moves a file on its own file system and
			// copies one from another (S3, another HDFS), leaving it here.
			for _, f := range files {
				if _, err := s.fs.Stat(s.fsPath(f.Path)); err == nil {
					copied = append(copied, s.fsPath(f.Path))
				}
			}
			return s.markLoaded(rep, st, reg, copied)
		}
		var se *hbase.SpanError
		var le *hbase.BulkLoadError
		if !errors.As(err, &se) && !errors.As(err, &le) {
			return fmt.Errorf("hfiles: load region %s: %w", reg.Dir, err)
		}
		if attempt >= maxLoadAttempts {
			if le != nil {
				return fmt.Errorf("hfiles: load region %s: refused %d times: %w", reg.Dir, attempt, err)
			}
			return fmt.Errorf("hfiles: load region %s: target regions kept changing (%d attempts): %w", reg.Dir, attempt, err)
		}
		n, rerr := s.resplitRegion(ctx, st, parts)
		if rerr != nil {
			return fmt.Errorf("hfiles: load region %s: %w (after: %v)", reg.Dir, rerr, err)
		}
		if n == 0 && le != nil {
			// Nothing spans a region, yet the region server answered
			// loaded=false. HBase's own bulk load tool takes that for a
			// passing failure and loads again, and so does this: seen here
			// when a region server's file system was closed under one load
			// by the cleanup of another of the same user's. The next
			// attempt takes back what the refused one left in HBase's
			// staging directory (reclaim), and loads nothing twice.
			rep.Printf("warning: hfiles: region %s: the region server refused the load (loaded=false, attempt %d of %d); loading again: %v", reg.Dir, attempt, maxLoadAttempts, err)
			if err := pause.For(ctx, time.Duration(attempt)*refusedLoadPause); err != nil {
				return fmt.Errorf("hfiles: load region %s: %w (after: %v)", reg.Dir, err, le)
			}
		}
	}
}

// toSend validates and returns the files of reg still to be sent, the id
// of each by its URL (for sentLanded), and the staged files that are
// already in the region although still in the folder (copied there by a
// load whose Loaded mark was never saved). Before any load of reg was sent
// every recorded file must be here. After one was, a file in a store file
// of the region (its id found there, landedIDs) is not sent again, and a
// missing file that is neither there nor in HBase's staging directory of
// an earlier load (reclaim) fails the load with ErrMissingHFile, naming
// it: its cells are in no region, and counting it loaded would lose them
// without a word.
func (s *Sink) toSend(ctx context.Context, rep sink.Reporter, st *finishState, reg *Region, parts []*partState) (files []hbase.BulkFile, ids map[string]string, copied []string, err error) {
	sent := s.wasSent(st, reg)
	copies := s.copiedByServers()
	ids = map[string]string{}
	for _, ps := range parts {
		var landed map[string]string
		for _, f := range ps.Files {
			p := path.Join(s.root, f.Name)
			present := true
			if _, err := s.fs.Stat(p); err != nil {
				if !notExist(err) {
					return nil, nil, nil, fmt.Errorf("hfiles: load region %s: %w", reg.Dir, err)
				}
				if !sent {
					return nil, nil, nil, fmt.Errorf("hfiles: load region %s: %s is recorded as written but is missing, and no load of this region was ever sent: the staging folder was changed behind the run (rerun the merge with --fresh): %w", reg.Dir, s.url(p), ErrMissingHFile)
				}
				back, err := s.reclaim(rep, st, reg, ps.Family, p)
				if err != nil {
					return nil, nil, nil, fmt.Errorf("hfiles: load region %s: %w", reg.Dir, err)
				}
				present = back
			}
			// A file still here was not moved into a region; one the
			// region servers copy from another file system may have been
			// loaded all the same. Only those are looked for: reading a
			// region's store files needs the right to, which a secure
			// cluster's root dir may not give.
			if sent && (!present || copies) {
				if landed == nil {
					first, last := partRows(ps)
					if landed, err = s.lookupLanded(ctx, ps.Family, first, last); err != nil {
						return nil, nil, nil, fmt.Errorf("hfiles: load region %s: a load of it was sent before, and looking for its files among the region's store files failed: %w", reg.Dir, err)
					}
				}
				if f.ID != "" && landed[f.ID] != "" {
					if present {
						copied = append(copied, p)
					}
					continue // loaded by an earlier attempt
				}
				if !present {
					return nil, nil, nil, s.missingError(reg, p, f)
				}
			}
			bf, err := s.validate(p, ps.Family, f)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("hfiles: load region %s: %w", reg.Dir, err)
			}
			ids[bf.Path] = f.ID
			files = append(files, bf)
		}
	}
	return files, ids, copied, nil
}

// copiedByServers says the region servers copy the staged files rather
// than move them, leaving them in the folder: the folder is not on HDFS
// (S3, GCS, Azure, a local folder), so not on the root dir's file system.
// A folder on another cluster's HDFS is copied from too, but names can
// not tell (see onStagingFS); its files are then taken as moved.
func (s *Sink) copiedByServers() bool {
	u, err := url.Parse(s.loc.URL)
	return err != nil || !strings.EqualFold(u.Scheme, "hdfs")
}

// missingError is the error of a staged file missing after a load of reg
// was sent, whose id no store file of the target region carries.
func (s *Sink) missingError(reg *Region, p string, f hfileInfo) error {
	if f.ID == "" {
		return fmt.Errorf("hfiles: load region %s: %s is missing; a load of this region was sent before, but the file was staged without a file id (by an earlier rekey), so whether the region holds it cannot be told: put the file back and load again, or stage again into a fresh folder (--fresh; loading the same cells twice is harmless, their timestamps are kept): %w", reg.Dir, s.url(p), ErrMissingHFile)
	}
	return fmt.Errorf("hfiles: load region %s: %s is missing, and no store file of the region carries its id %s (nor is it in HBase's staging directory of an earlier load): a load of the region was sent, but HBase did not take this file, so its cells are in no region; the staging folder was changed behind the run (cleaned, or another loader). Put the file back and load again, or stage again into a fresh folder (--fresh; loading the same cells twice is harmless, their timestamps are kept). (A region that split, or compacted the file away, since the load also hides the id.): %w", reg.Dir, s.url(p), f.ID, ErrMissingHFile)
}

// partRows returns the first and last rows of the files of ps.
func partRows(ps *partState) (first, last []byte) {
	for i, f := range ps.Files {
		if i == 0 || bytes.Compare(f.FirstRow, first) < 0 {
			first = f.FirstRow
		}
		if i == 0 || bytes.Compare(f.LastRow, last) > 0 {
			last = f.LastRow
		}
	}
	return first, last
}

// sentLanded says whether a BulkLoadHFile call for sent, which went
// unanswered (a timeout, a broken connection), loaded them after all: the
// region server goes on with a call its client stopped waiting for, and
// sending again would load the files twice (when it copies them from
// another file system, they are still there to copy). True when every
// file's id (ids, by URL) is in the region's store files. While a file
// sits in the load's staging directory (token; hbase.BulkStagedPath) the
// earlier call is still at work, and the answer waits for it (up to
// inFlightWait): two calls copying into one staging path were seen to
// fail one another. Then none in the region is false (send again), and
// some but not all is an error: neither answer is safe.
func (s *Sink) sentLanded(ctx context.Context, reg *Region, sent []hbase.BulkFile, ids map[string]string, token string) (bool, error) {
	byFamily := map[string][]hbase.BulkFile{}
	for _, f := range sent {
		byFamily[string(f.Family)] = append(byFamily[string(f.Family)], f)
	}
	fss := &storeFSs{s: s}
	defer fss.close()
	deadline := time.Now().Add(inFlightWait)
	for {
		var in, out []string
		for family, fs := range byFamily {
			first, last := fs[0].FirstRow, fs[0].LastRow
			for _, f := range fs[1:] {
				if bytes.Compare(f.FirstRow, first) < 0 {
					first = f.FirstRow
				}
				if bytes.Compare(f.LastRow, last) > 0 {
					last = f.LastRow
				}
			}
			landed, err := s.lookupLanded(ctx, family, first, last)
			if err != nil {
				return false, fmt.Errorf("hfiles: load region %s: a load went unanswered, and looking for its files among the region's store files failed: %w", reg.Dir, err)
			}
			for _, f := range fs {
				if id := ids[f.Path]; id != "" && landed[id] != "" {
					in = append(in, f.Path)
				} else {
					out = append(out, f.Path)
				}
			}
		}
		if len(out) == 0 {
			return true, nil
		}
		busy := ""
		if token != "" {
			for _, f := range sent {
				if !slices.Contains(out, f.Path) {
					continue
				}
				u := hbase.BulkStagedPath(token, f.Family, f.Path)
				fsys, p, err := fss.open(u)
				if err != nil {
					return false, fmt.Errorf("hfiles: load region %s: a load went unanswered: %s: %w", reg.Dir, u, err)
				}
				if _, err := fsys.Stat(p); err == nil {
					busy = u
					break
				} else if !notExist(err) {
					return false, fmt.Errorf("hfiles: load region %s: a load went unanswered: %s: %w", reg.Dir, u, err)
				}
			}
		}
		if busy == "" {
			if len(in) == 0 {
				return false, nil
			}
			return false, fmt.Errorf("hfiles: load region %s: a load went unanswered, and the region holds %d of its files (%s) but not %d (%s); loading again would load the first twice: %w", reg.Dir, len(in), in[0], len(out), out[0], ErrPartialLoad)
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("hfiles: load region %s: a load went unanswered, and after %v its file %s is still in HBase's staging directory: the region server may still be loading it; resume the load later: %w", reg.Dir, inFlightWait, busy, ErrPartialLoad)
		}
		if err := pause.For(ctx, inFlightPoll); err != nil {
			return false, err
		}
	}
}

// inFlightWait bounds how long sentLanded waits for an unanswered load
// still at work in the region server, and inFlightPoll is how often it
// looks.
const (
	inFlightWait = 2 * time.Minute
	inFlightPoll = 250 * time.Millisecond
)

// ErrPartialLoad is matched by the error of a load that finds part of an
// unanswered bulk load's files in the region and part not.
var ErrPartialLoad = errors.New("hfiles: a bulk load landed in part")

// markLoaded marks reg loaded. When copied names staged files still in the
// folder though the region holds them (the region servers copied them from
// another file system), the mark is saved at once and then they are
// removed: a run stopped between the load and a lazy save would otherwise
// find them, and load them again. Otherwise the mark is saved lazily
// (recordLoaded).
func (s *Sink) markLoaded(rep sink.Reporter, st *finishState, reg *Region, copied []string) error {
	if len(copied) == 0 {
		s.recordLoaded(st, reg)
		return nil
	}
	if err := s.saveLoaded(st, reg); err != nil {
		return fmt.Errorf("hfiles: load region %s: loaded, but recording it failed: %w", reg.Dir, err)
	}
	for _, p := range copied {
		if err := s.fs.Remove(p); err != nil && !notExist(err) {
			rep.Printf("warning: hfiles: region %s is loaded, but its staged file %s could not be removed: %v", reg.Dir, s.url(p), err)
		}
	}
	return nil
}

// saveLoaded marks reg loaded and saves the mark before it returns.
func (s *Sink) saveLoaded(st *finishState, reg *Region) error {
	s.finMu.Lock()
	defer s.finMu.Unlock()
	st.Loaded[reg.Dir] = true
	if err := s.saveFinish(st); err != nil {
		delete(st.Loaded, reg.Dir)
		return err
	}
	s.mu.Lock()
	s.stats.RegionsLoaded++
	s.mu.Unlock()
	return nil
}

// fsPath is the path on the staging folder's file system of u, a URL
// Sink.url made.
func (s *Sink) fsPath(u string) string {
	if t, err := url.Parse(u); err == nil && t.Scheme != "" {
		return t.Path
	}
	return u
}

// cleanEarlierTokens removes, once reg is loaded, HBase's staging
// directories of its earlier loads that were left in place (refused or
// unanswered: hbase.BulkLoadWith keeps them, as they may hold files on
// their way in or not moved back), so they do not pile up in HBase's
// staging area; last is the token of the load just made, which cleaned
// its own. Each one is removed only when it holds no file: the load just
// made took every staged file back from them (reclaim) or found it in the
// region. A directory that cannot be listed, or holds a file, is kept and
// named in a warning; a failed removal is a warning too, the load being
// done.
func (s *Sink) cleanEarlierTokens(ctx context.Context, rep sink.Reporter, st *finishState, reg *Region, last string) {
	s.finMu.Lock()
	tokens := slices.Clone(st.Tokens[reg.Dir])
	s.finMu.Unlock()
	for _, token := range tokens {
		if token == last {
			continue
		}
		dir, ok := s.onStagingFS(token)
		if !ok {
			continue
		}
		held, err := s.holdsFile(dir)
		switch {
		case notExist(err):
			continue // cleaned already
		case err != nil:
			rep.Printf("warning: hfiles: region %s: HBase's staging directory %s of an earlier load is kept: listing it failed: %v", reg.Dir, token, err)
			continue
		case held != "":
			rep.Printf("warning: hfiles: region %s: HBase's staging directory %s of an earlier load is kept: it holds %s", reg.Dir, token, held)
			continue
		}
		if err := s.o.Client.CleanupBulkLoad(ctx, s.o.Table, reg.Start, token); err != nil {
			rep.Printf("warning: hfiles: region %s: %v", reg.Dir, err)
		}
	}
}

// holdsFile returns the path of a file under dir (one level of family
// folders, as a bulk load's staging directory has), or "" when it holds
// none.
func (s *Sink) holdsFile(dir string) (string, error) {
	fams, err := s.fs.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, f := range fams {
		p := path.Join(dir, f.Name())
		if !f.IsDir() {
			return p, nil
		}
		files, err := s.fs.ReadDir(p)
		if err != nil {
			return "", err
		}
		if len(files) > 0 {
			return path.Join(p, files[0].Name()), nil
		}
	}
	return "", nil
}

// refusedLoadPause is the pause before loading a refused region again,
// times the attempt: the refusals seen were races that end at once.
const refusedLoadPause = 200 * time.Millisecond

// ErrMissingHFile is matched by the error of a load that finds a staged
// HFile missing that no earlier load could have moved into HBase: its
// cells would be lost without a word.
var ErrMissingHFile = errors.New("hfiles: a staged HFile is missing")

// markSent records, before the first request of a bulk load for reg, that
// its files may from now on be in HBase rather than in the folder, and the
// load's bulk token. A file found missing later counts as loaded only if a
// load was sent, and only if it is in none of the tokens' directories.
func (s *Sink) markSent(st *finishState, reg *Region, token string) error {
	s.finMu.Lock()
	defer s.finMu.Unlock()
	if st.Sent == nil {
		st.Sent = map[string]bool{}
	}
	if st.Tokens == nil {
		st.Tokens = map[string][]string{}
	}
	st.Sent[reg.Dir] = true
	st.Tokens[reg.Dir] = append(st.Tokens[reg.Dir], token)
	if err := s.saveFinish(st); err != nil {
		return err
	}
	// The save checked the fence before it wrote; an attempt that lost
	// the load while it wrote must not send what its successor may load
	// too (their states are apart: loadStateName).
	if err := s.fenced("send the load of region " + reg.Dir); err != nil {
		return err
	}
	if testAfterSent != nil {
		testAfterSent(reg)
	}
	return nil
}

// testAfterLoaded, when set by a test, is called once a region is loaded
// and marked so (markLoaded): a test takes the durable state there as a
// run killed at that point leaves it.
var testAfterLoaded func(reg *Region)

// testAfterSent, when set by a test, is called once a region's Sent mark
// is saved, before its first request: a test stops the load there (an
// interrupt) to leave a region sent and not loaded.
var testAfterSent func(reg *Region)

// reclaim looks for the staged file p, missing from the folder after a
// load of reg was sent, where a region server holds it mid-load: under the
// bulk token of each load sent for reg (hbase.BulkStagedPath), newest
// first. A load cut short (the region server failed between taking the
// file and moving it into the region, or a killed run left it working)
// leaves it there, its cells in no region. Found, it is moved back to p
// and loaded again (true); found nowhere, the region has it (false). A
// region server still finishing such a load races the move safely, as
// both are renames: it either took the file into the region first (not
// found here) or finds it gone and fails that load.
func (s *Sink) reclaim(rep sink.Reporter, st *finishState, reg *Region, family, p string) (bool, error) {
	s.finMu.Lock()
	tokens := slices.Clone(st.Tokens[reg.Dir])
	s.finMu.Unlock()
	for i := len(tokens) - 1; i >= 0; i-- {
		q, ok := s.onStagingFS(hbase.BulkStagedPath(tokens[i], []byte(family), p))
		if !ok {
			continue
		}
		if _, err := s.fs.Stat(q); err != nil {
			if notExist(err) {
				continue
			}
			return false, err
		}
		if err := s.fs.Rename(q, p); err != nil {
			return false, fmt.Errorf("%s was sent but never loaded (a load cut short left it in HBase's bulk-load staging directory); moving it back failed: %w", s.url(q), err)
		}
		rep.Printf("warning: hfiles: %s was sent to region %s but never loaded: an earlier load was cut short and left it in HBase's bulk-load staging directory; moved back, it is loaded again", s.url(p), reg.Dir)
		return true, nil
	}
	return false, nil
}

// onStagingFS gives the path of u (a URI or a bare path) on the staging
// folder's file system, or false when u is on another kind of file system.
// Hosts are not compared: HBase names its NameNode as it is configured
// ("localhost:8020" where the folder says "127.0.0.1:8020", or a
// nameservice), and nothing is lost by looking: a region server moves a
// file only within one file system (it copies from another, leaving the
// folder's file in place), so a file missing from the folder can only be
// on the folder's own, and a path under another cluster's random staging
// directory names nothing here.
func (s *Sink) onStagingFS(u string) (string, bool) {
	t, err := url.Parse(u)
	if err != nil || t.Scheme == "" {
		return u, err == nil
	}
	own, err := url.Parse(s.loc.URL)
	if err != nil || !strings.EqualFold(own.Scheme, t.Scheme) {
		return "", false
	}
	return t.Path, true
}

// wasSent says a load of reg was sent before (markSent).
func (s *Sink) wasSent(st *finishState, reg *Region) bool {
	s.finMu.Lock()
	defer s.finMu.Unlock()
	return st.Sent[reg.Dir]
}

// resplitRegion splits every file of parts that spans more than one of the
// table's current regions into one file per region, records the new files
// in place of the old, then removes the old. It returns how many files it
// split.
func (s *Sink) resplitRegion(ctx context.Context, st *finishState, parts []*partState) (int, error) {
	regions, err := s.o.Client.Regions(ctx, s.o.Table)
	if err != nil {
		return 0, err
	}
	find := func(row []byte) int {
		return sort.Search(len(regions), func(i int) bool {
			return len(regions[i].EndKey) == 0 || bytes.Compare(row, regions[i].EndKey) < 0
		})
	}
	var replaced []string
	newFiles := make([][]hfileInfo, len(parts))
	for k, ps := range parts {
		var files []hfileInfo
		for _, f := range ps.Files {
			p := path.Join(s.root, f.Name)
			if _, err := s.fs.Stat(p); notExist(err) || find(f.FirstRow) == find(f.LastRow) {
				files = append(files, f) // loaded already, or inside one region
				continue
			}
			pieces, err := s.resplitFile(f, path.Dir(f.Name), ps.Family, regions)
			if err != nil {
				return 0, err
			}
			files = append(files, pieces...)
			replaced = append(replaced, p)
		}
		newFiles[k] = files
	}
	// Record the pieces before removing the originals: a crash in between
	// leaves an unrecorded file (removed by the next load), never a lost one.
	// Under finMu, as other regions' loads save finish.json meanwhile.
	s.finMu.Lock()
	for k, ps := range parts {
		ps.Files = newFiles[k]
	}
	err = s.saveFinish(st)
	s.finMu.Unlock()
	if err != nil {
		return 0, err
	}
	for _, p := range replaced {
		s.fs.Remove(p)
	}
	s.mu.Lock()
	s.stats.FilesResplit += int64(len(replaced))
	s.mu.Unlock()
	return len(replaced), nil
}

// resplitFile reads the HFile f with the hfile reader and writes its cells
// into one new HFile per current region they fall in.
func (s *Sink) resplitFile(f hfileInfo, rel, family string, regions []*hbase.Region) ([]hfileInfo, error) {
	p := path.Join(s.root, f.Name)
	in, err := s.fs.Open(p)
	if err != nil {
		return nil, fmt.Errorf("hfiles: re-split %s: %w", p, err)
	}
	defer in.Close()
	rd, err := hfile.Open(in, in.Size(), s.url(p))
	if err != nil {
		return nil, fmt.Errorf("hfiles: re-split: %w", err)
	}
	defer rd.Close()
	it := rd.NewIterator()
	defer it.Close()
	opts := s.familyOptions(family)
	var (
		out    []hfileInfo
		cur    *hfileOut
		curReg *hbase.Region
	)
	fail := func(err error) ([]hfileInfo, error) {
		if cur != nil {
			cur.abort(s)
		}
		for _, o := range out {
			s.fs.Remove(path.Join(s.root, o.Name))
		}
		return nil, err
	}
	var cells int64
	for ok := it.First(); ok; ok = it.Next() {
		c := it.Cell()
		if cur != nil && !curReg.Contains(c.Row) {
			info, err := s.finishHFile(cur)
			cur = nil
			if err != nil {
				return fail(err)
			}
			out = append(out, info)
		}
		if cur == nil {
			i := sort.Search(len(regions), func(i int) bool {
				return len(regions[i].EndKey) == 0 || bytes.Compare(c.Row, regions[i].EndKey) < 0
			})
			if i == len(regions) {
				return fail(fmt.Errorf("hfiles: re-split %s: no region of %s holds row %q", p, s.o.Table, c.Row))
			}
			curReg = regions[i]
			o, err := s.createHFile(rel, opts)
			if err != nil {
				return fail(err)
			}
			cur = o
		}
		if err := cur.append(c); err != nil {
			return fail(fmt.Errorf("hfiles: re-split %s: %w", p, err))
		}
		cells++
	}
	if err := it.Err(); err != nil {
		return fail(fmt.Errorf("hfiles: re-split %s: %w", p, err))
	}
	if cur != nil {
		info, err := s.finishHFile(cur)
		if err != nil {
			return fail(err)
		}
		out = append(out, info)
	}
	if cells != f.Cells {
		return fail(fmt.Errorf("hfiles: re-split %s: read %d cells, the file was written with %d", p, cells, f.Cells))
	}
	return out, nil
}

// removeStrayHFiles removes files under the region's folders that no
// record names: left by a crash while writing or re-splitting. They must
// not reach HBase (the bulk load tool would load them too).
func (s *Sink) removeStrayHFiles(reg *Region, parts []*partState) {
	for _, ps := range parts {
		recorded := map[string]bool{}
		for _, f := range ps.Files {
			recorded[path.Join(s.root, f.Name)] = true
		}
		dir := path.Join(s.root, hfilesDir, reg.Dir, ps.Family)
		ents, err := s.fs.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if p := path.Join(dir, e.Name()); !recorded[p] {
				s.fs.Remove(p)
			}
		}
	}
}

// validate opens a staged HFile before it is loaded and checks it is the
// file that was recorded: it opens (trailer, index, file info), holds the
// recorded number of cells and spans the recorded rows. A file damaged or
// replaced since it was written fails here, naming the file, rather than
// in the region server.
func (s *Sink) validate(p, family string, f hfileInfo) (hbase.BulkFile, error) {
	bf := hbase.BulkFile{Family: []byte(family), Path: s.url(p)}
	in, err := s.fs.Open(p)
	if err != nil {
		return bf, err
	}
	defer in.Close()
	if in.Size() != f.Size {
		return bf, fmt.Errorf("HFile %s is %d bytes, %d were written", bf.Path, in.Size(), f.Size)
	}
	rd, err := hfile.Open(in, in.Size(), bf.Path)
	if err != nil {
		return bf, err
	}
	defer rd.Close()
	fk, ok1 := rd.FirstKey()
	lk, ok2 := rd.LastKey()
	if !ok1 || !ok2 {
		return bf, fmt.Errorf("HFile %s has no first key or LASTKEY; HBase refuses to load it", bf.Path)
	}
	var first, last cell.Cell
	if err := cell.ParseKey(fk, &first); err != nil {
		return bf, fmt.Errorf("HFile %s: first key: %w", bf.Path, err)
	}
	if err := cell.ParseKey(lk, &last); err != nil {
		return bf, fmt.Errorf("HFile %s: LASTKEY: %w", bf.Path, err)
	}
	if !bytes.Equal(first.Row, f.FirstRow) || !bytes.Equal(last.Row, f.LastRow) {
		return bf, fmt.Errorf("HFile %s spans rows %q..%q, %q..%q were written", bf.Path, first.Row, last.Row, f.FirstRow, f.LastRow)
	}
	bf.FirstRow, bf.LastRow = f.FirstRow, f.LastRow
	if n := rd.Entries(); n != uint64(f.Cells) {
		return bf, fmt.Errorf("HFile %s holds %d cells, %d were written", bf.Path, n, f.Cells)
	}
	return bf, nil
}
