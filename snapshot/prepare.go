package snapshot

import (
	"sync"

	"github.com/rekeyhq/rekey/vfs"
)

// Opening a store file costs round trips before its first cell: on HDFS,
// NameNode lookups (the file's status, its block locations) and a read of
// its trailer and load-on-open section from a DataNode, a few milliseconds
// per file that a scan would otherwise spend waiting. So the files of a
// region are opened side by side, and a worker can have its next split's
// files opened while it reads the current one (Prepare).

// openFiles is how many store files of one region are opened at once.
const openFiles = 8

// acquiredFile is a store file resolved and acquired for a scan.
type acquiredFile struct {
	rf   *resolvedFile
	rd   storeReader
	file vfs.File
}

// acquireRegion resolves and acquires the store files of every family of
// region that want accepts, up to openFiles at a time. The result is
// indexed like region.Families, files in manifest order (nil for families
// not wanted). On error nothing stays acquired and the error is the one of
// the first failing file in that order, as a one-by-one open would report.
func (s *Snapshot) acquireRegion(region *Region, want func(family []byte) bool) ([][]acquiredFile, error) {
	out := make([][]acquiredFile, len(region.Families))
	errs := make([][]error, len(region.Families))
	var wg sync.WaitGroup
	slots := make(chan struct{}, openFiles)
	for fi := range region.Families {
		fam := &region.Families[fi]
		if !want(fam.Family) {
			continue
		}
		out[fi] = make([]acquiredFile, len(fam.Files))
		errs[fi] = make([]error, len(fam.Files))
		for i := range fam.Files {
			wg.Add(1)
			slots <- struct{}{}
			go func() {
				defer func() { <-slots; wg.Done() }()
				rf, err := s.resolve(region, fam.Family, &fam.Files[i])
				if err != nil {
					errs[fi][i] = err
					return
				}
				rd, file, err := s.acquire(rf)
				if err != nil {
					errs[fi][i] = err
					return
				}
				out[fi][i] = acquiredFile{rf: rf, rd: rd, file: file}
			}()
		}
	}
	wg.Wait()
	for fi := range errs {
		for _, err := range errs[fi] {
			if err != nil {
				s.releaseAll(out)
				return nil, err
			}
		}
	}
	return out, nil
}

// releaseAll releases every file acquireRegion acquired.
func (s *Snapshot) releaseAll(files [][]acquiredFile) {
	for _, fam := range files {
		for _, f := range fam {
			if f.rf != nil {
				s.release(f.rf)
			}
		}
	}
}

// Prepare starts opening, in the background, the store files a scan of sp
// with opts would read (their NameNode lookups, trailers, indexes and file
// info), and returns at once. The readers wait idle in the Snapshot's pool
// (OpenOptions.MaxOpenFiles) for the scan, which then starts reading at
// once. A worker calls it for the split it will read next before reading
// the current one, so one split's opening overlaps another's reading.
//
// Preparing is only a head start: errors are dropped (the scan meets them
// again and reports them), and preparing more files ahead than the pool
// keeps wastes the opens. Close waits for preparations under way.
func (s *Snapshot) Prepare(sp Split, opts ScanOptions) {
	if sp.snap != s {
		return // NewScanner reports it
	}
	all, wanted := opts.selection()
	s.mu.Lock()
	if s.fileCache == nil {
		s.mu.Unlock()
		return // closed
	}
	s.preparing.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.preparing.Done()
		files, err := s.acquireRegion(&sp.Region, func(fam []byte) bool { _, ok := wanted[string(fam)]; return all || ok })
		if err == nil {
			s.releaseAll(files)
		}
	}()
}
