package snapshot

import (
	"container/list"
	"errors"
	"fmt"
	iofs "io/fs"
	"sync"

	"github.com/rekeyhq/rekey/vfs"
)

// DefaultMaxOpenFiles is OpenOptions.MaxOpenFiles when it is 0.
const DefaultMaxOpenFiles = 64

// Store file readers are opened when a scanner (or a split cut) needs them
// and shared with a reference count: scanners of the splits of one region,
// running in parallel, read the same files through one reader each. When
// the last user releases a reader it is kept, idle, for the next split of
// the same region, but only while fewer than MaxOpenFiles readers are
// open; past that the least recently released idle readers are closed. So
// a snapshot of any number of regions holds at most max(MaxOpenFiles, the
// files of the scanners currently open) readers, with their file handles,
// index blocks and file info. Readers in use are never closed under a
// scanner, so the limit never blocks a scan.

// pooledReader is the reader state of one resolvedFile.
type pooledReader struct {
	rd   storeReader
	file vfs.File
	refs int
	// idle is the file's element in readerPool.idle while refs == 0.
	idle *list.Element
	// opening is non-nil while a goroutine opens the file; others wait on
	// it instead of opening the file twice.
	opening chan struct{}
}

// readerPool tracks the open readers of a Snapshot.
type readerPool struct {
	mu     sync.Mutex
	max    int
	closed bool
	// open is every resolvedFile with an open reader.
	open map[*resolvedFile]struct{}
	// idle lists the open readers nobody uses, most recently released
	// first.
	idle list.List
	// pending counts the opens under way; peak is the most readers ever
	// open at once; opens counts every open.
	pending, peak, opens int
}

// ReaderStats describes a Snapshot's store file readers.
type ReaderStats struct {
	// Open is the number of readers open now (each holds an open file).
	Open int
	// Peak is the most that were open at once.
	Peak int
	// Opens counts every reader opened since the Snapshot was.
	Opens int
}

// ReaderStats reports how many store file readers the Snapshot holds.
func (s *Snapshot) ReaderStats() ReaderStats {
	p := &s.readers
	p.mu.Lock()
	defer p.mu.Unlock()
	return ReaderStats{Open: len(p.open), Peak: p.peak, Opens: p.opens}
}

// acquire returns f's reader, opening it when no one has it open; every
// successful acquire is paired with a release.
func (s *Snapshot) acquire(f *resolvedFile) (storeReader, error) {
	p := &s.readers
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("snapshot: closed")
		}
		if f.open.rd != nil {
			if f.open.idle != nil {
				p.idle.Remove(f.open.idle)
				f.open.idle = nil
			}
			f.open.refs++
			rd := f.open.rd
			p.mu.Unlock()
			return rd, nil
		}
		if f.open.opening == nil {
			break
		}
		wait := f.open.opening
		p.mu.Unlock()
		<-wait
		p.mu.Lock()
	}
	done := make(chan struct{})
	f.open.opening = done
	// Make room first, so the files open never exceed the limit while
	// idle readers could have been closed instead.
	evicted := p.evictLocked(1)
	p.pending++
	p.mu.Unlock()
	closeAll(evicted)

	rd, file, path, err := s.openReader(f)

	p.mu.Lock()
	p.pending--
	f.open.opening = nil
	close(done)
	if err == nil && p.closed {
		err = errors.New("snapshot: closed")
	}
	if err != nil {
		p.mu.Unlock()
		if rd != nil {
			rd.close()
			file.Close()
		}
		return nil, err
	}
	f.path = path
	f.open.rd, f.open.file, f.open.refs = rd, file, 1
	if p.open == nil {
		p.open = map[*resolvedFile]struct{}{}
	}
	p.open[f] = struct{}{}
	p.opens++
	p.peak = max(p.peak, len(p.open))
	p.mu.Unlock()
	return rd, nil
}

// release gives back a reader taken with acquire.
func (s *Snapshot) release(f *resolvedFile) {
	p := &s.readers
	p.mu.Lock()
	if f.open.rd == nil || f.open.refs <= 0 {
		p.mu.Unlock()
		return // closed with the Snapshot meanwhile
	}
	f.open.refs--
	if f.open.refs == 0 {
		f.open.idle = p.idle.PushFront(f)
	}
	evicted := p.evictLocked(0)
	p.mu.Unlock()
	closeAll(evicted)
}

// evictLocked detaches the least recently released idle readers while more
// than max-room are open; the caller closes them outside the lock.
func (p *readerPool) evictLocked(room int) []pooledReader {
	var out []pooledReader
	for len(p.open)+p.pending+room > p.max && p.idle.Len() > 0 {
		f := p.idle.Remove(p.idle.Back()).(*resolvedFile)
		out = append(out, f.open)
		f.open = pooledReader{}
		delete(p.open, f)
	}
	return out
}

// closeAllReaders closes every reader, in use or not, for Snapshot.Close.
func (p *readerPool) closeAllReaders() {
	p.mu.Lock()
	p.closed = true
	var out []pooledReader
	for f := range p.open {
		out = append(out, f.open)
		f.open = pooledReader{opening: f.open.opening}
	}
	p.open = nil
	p.idle.Init()
	p.mu.Unlock()
	closeAll(out)
}

func closeAll(rs []pooledReader) {
	for _, r := range rs {
		r.rd.close()
		r.file.Close()
	}
}

// openReader opens f's file and its HFile reader. It returns the path the
// file was found at: a file compacted away since it was resolved is looked
// for again where HBase's FileLink looks.
func (s *Snapshot) openReader(f *resolvedFile) (storeReader, vfs.File, string, error) {
	if openStoreReader == nil {
		return nil, nil, "", fmt.Errorf("%w: no HFile reader linked in", ErrUnsupported)
	}
	at := f.path
	file, err := s.fs.Open(at)
	if err != nil && errors.Is(err, iofs.ErrNotExist) {
		for _, p := range s.relocate(at) {
			if file, err = s.fs.Open(p); err == nil {
				at = p
				break
			}
		}
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("snapshot %s: opening %s: %w", s.info.Name, f.where(), err)
	}
	file = vfs.Full(file)
	rd, err := openStoreReader(file, file.Size(), at)
	if err != nil {
		file.Close()
		return nil, nil, "", fmt.Errorf("snapshot %s: %s: %w", s.info.Name, f.where(), err)
	}
	return rd, file, at, nil
}
