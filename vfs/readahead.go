package vfs

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
)

// DefaultChunk is the read-ahead chunk size when ReadAheadOptions.Chunk is
// 0: large enough that an HDFS stream spends its time moving bytes, not
// setting up reads, and small enough that two per open store file stay
// cheap.
const DefaultChunk = 4 << 20

// ReadAheadOptions configure a ReadAhead.
type ReadAheadOptions struct {
	// Off turns read-ahead off: every read is a positional ReadAt.
	Off bool
	// Chunk is the size of one sequential read (0 = DefaultChunk).
	Chunk int
	// NoPrefetch reads each chunk when it is first needed instead of
	// reading the next one in the background while the current one is
	// consumed. Prefetch holds two chunks per stream, else one.
	NoPrefetch bool
	// Budget, when set, accounts the chunk buffers. A stream that cannot
	// get its buffers from it reads positionally rather than wait, so a
	// small budget slows reads down but never blocks or fails them.
	Budget *Budget
	// AllFiles makes readers that choose by file (snapshot scanners) read
	// ahead on every file, not only on files that stream (Streamer: HDFS).
	// Local files gain nothing from it, the OS reads ahead for sequential
	// preads already, and the chunk copies cost CPU per cell for nothing
	// on a page-cached file.
	AllFiles bool
}

// Wants reports whether a reader that chooses by file should read f
// through a ReadAhead with these options.
func (o ReadAheadOptions) Wants(f File) bool {
	if o.Off {
		return false
	}
	_, streams := f.(Streamer)
	return streams || o.AllFiles
}

// Streamer is implemented by Files that read a range front to back faster
// through one stream than through repeated ReadAt calls. HDFS is the case:
// its ReadAt sets up a new block read on the DataNode (a new connection) for
// every call, where one stream keeps the connection open and the DataNode
// sending.
type Streamer interface {
	// Stream returns a reader of the file's bytes from off on. Reads from
	// it may be short; io.EOF ends it.
	Stream(off int64) (io.ReadCloser, error)
}

// ReadAhead serves ReadAt calls for one sequential reader of a file (a
// scan over a store file) from large chunks read ahead, while keeping the
// io.ReaderAt contract for any access pattern:
//
//   - A read the current chunk holds is a copy.
//   - A read that continues where the previous one ended starts (or
//     continues) a stream at that offset: through the File's Streamer when
//     it has one, else by chunk-sized ReadAt calls; with prefetch the next
//     chunk is read in the background meanwhile.
//   - Any other read (the first one, a seek, a jump backwards) is a
//     positional ReadAt on the file, and stops the stream.
//
// So an HFile iterator reads its first block and the block after a seek
// positionally, and everything after that as one stream. A ReadAhead is for
// one goroutine at a time (an iterator's); Close is required and waits for
// a prefetch under way.
type ReadAhead struct {
	f     File
	end   int64 // the stream never reads at or past end
	chunk int
	pre   bool
	bud   *Budget
	// held is what the stream holds of the budget now.
	held int64

	// cur is the chunk reads are served from.
	cur chunk
	// expect is where the last read ended: a read starting there is
	// sequential.
	expect int64
	st     *stream
	err    error // sticky: the stream failed and the File's ReaderAt is used

	stats ReadAheadStats
}

// ReadAheadStats counts a ReadAhead's work.
type ReadAheadStats struct {
	// Streams is the number of streams started; Chunks the chunks read by
	// them; StreamBytes their bytes.
	Streams, Chunks int
	StreamBytes     int64
	// Positional is the number of reads passed to the File's ReadAt.
	Positional int
}

// chunk is a buffer of the file's bytes [start, start+len(data)).
type chunk struct {
	data  []byte
	buf   []byte // the whole buffer data was cut from
	start int64
	err   error
}

func (c *chunk) end() int64 { return c.start + int64(len(c.data)) }

// NewReadAhead returns a read-ahead reader of f. The stream reads no bytes
// at or past end (0 or more than the file's size = the file's size): an
// HFile's data section ends where its load-on-open section starts, which is
// read positionally once.
func NewReadAhead(f File, end int64, opts ReadAheadOptions) *ReadAhead {
	if end <= 0 || end > f.Size() {
		end = f.Size()
	}
	c := opts.Chunk
	if c <= 0 {
		c = DefaultChunk
	}
	r := &ReadAhead{f: f, end: end, chunk: c, pre: !opts.NoPrefetch, bud: opts.Budget, expect: -1}
	if opts.Off {
		r.err = errReadAheadOff
	}
	return r
}

var errReadAheadOff = errors.New("vfs: read-ahead off")

// Stats returns the counters so far.
func (r *ReadAhead) Stats() ReadAheadStats { return r.stats }

// ReadAt implements io.ReaderAt.
func (r *ReadAhead) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		o := off + int64(n)
		if o >= r.cur.start && o < r.cur.end() {
			n += copy(p[n:], r.cur.data[o-r.cur.start:])
			continue
		}
		if r.st != nil && o >= r.cur.end() && o < r.cur.end()+int64(r.chunk) && o < r.end {
			// The stream's next chunk holds it.
			if err := r.advance(); err != nil {
				return n, err
			}
			continue
		}
		if r.err == nil && o == r.expect && o < r.end && r.startStream(o) {
			continue
		}
		// Positional.
		r.stopStream()
		r.stats.Positional++
		m, err := r.f.ReadAt(p[n:], o)
		n += m
		r.expect = off + int64(n)
		return n, err
	}
	r.expect = off + int64(n)
	return n, nil
}

// advance replaces the current chunk with the stream's next one.
func (r *ReadAhead) advance() error {
	if r.cur.buf != nil {
		r.st.give(r.cur.buf)
	}
	r.cur = chunk{}
	c := r.st.take()
	if c.err != nil {
		// The stream failed: report it (the caller names the file and
		// offset); later reads start over.
		r.stopStream()
		return c.err
	}
	r.cur = c
	r.stats.Chunks++
	r.stats.StreamBytes += int64(len(c.data))
	return nil
}

// Prefetch tells r that its reader will start reading sequentially at off
// (a scan from the first data block): the stream starts there now, and
// with prefetch its first chunk is read in the background, so the first
// read costs no positional round trip of its own, and a merge that
// prefetches each of its files before reading any of them waits for their
// first chunks side by side rather than one after another. A first read
// elsewhere is served as without it (positionally, ending the stream).
// Without room in the budget, or with read-ahead off, it does nothing.
func (r *ReadAhead) Prefetch(off int64) {
	if r.err != nil || r.st != nil || off < 0 || off >= r.end {
		return
	}
	if r.open(off) {
		// An empty current chunk ending at off: the read at off takes the
		// stream's first chunk (ReadAt's "next chunk" case).
		r.cur = chunk{start: off}
		r.expect = off
	}
}

// startStream starts streaming at off, if the budget allows, and takes
// its first chunk.
func (r *ReadAhead) startStream(off int64) bool {
	if !r.open(off) {
		return false
	}
	// A stream that fails at once leaves this read to ReadAt, which
	// reports the failure in its own words (or succeeds, on a passing
	// fault); the next sequential read tries a stream again.
	return r.advance() == nil
}

// open starts a stream at off, if the budget allows; with prefetch its
// first chunk is being read when it returns.
func (r *ReadAhead) open(off int64) bool {
	r.stopStream()
	// A stream over less than a chunk needs buffers no larger than that.
	// With prefetch it still reads in the background whenever it reads
	// more than one chunk (the first is capped at firstChunk): a store file
	// smaller than a chunk, read by a merge, is otherwise read chunk by
	// chunk on the scan's goroutine, with no overlap at all.
	size := int(min(int64(r.chunk), r.end-off))
	bufs := 1
	if r.pre && r.end-off > firstChunk {
		bufs = 2
	}
	bufSize := bufferSize(size, r.chunk)
	want := int64(bufs * bufSize)
	if !r.bud.TryAcquire(want) {
		if bufs == 1 || !r.bud.TryAcquire(int64(bufSize)) {
			return false
		}
		bufs, want = 1, int64(bufSize)
	}
	r.held = want
	var src io.ReadCloser
	if s, ok := r.f.(Streamer); ok {
		var err error
		if src, err = s.Stream(off); err != nil {
			r.bud.Release(r.held)
			r.held = 0
			r.err = err // fall back to positional reads for good
			return false
		}
	} else {
		src = &readerAtStream{f: r.f, off: off}
	}
	r.st = newStream(src, off, r.end, size, bufSize, bufs)
	r.stats.Streams++
	return true
}

// stopStream ends the stream, if any, and gives its buffers back.
func (r *ReadAhead) stopStream() {
	if r.st == nil {
		return
	}
	if r.cur.buf != nil {
		r.st.give(r.cur.buf)
	}
	r.cur = chunk{}
	r.st.stop()
	r.st = nil
	r.bud.Release(r.held)
	r.held = 0
}

// Close stops the stream and releases its buffers; it does not close the
// File.
func (r *ReadAhead) Close() error {
	r.stopStream()
	return nil
}

// readerAtStream reads a File front to back with ReadAt, for files that
// have no Streamer (local files: the chunks still overlap I/O with
// decoding when prefetched).
type readerAtStream struct {
	f   File
	off int64
}

func (s *readerAtStream) Read(p []byte) (int, error) {
	n, err := s.f.ReadAt(p, s.off)
	s.off += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}

func (s *readerAtStream) Close() error { return nil }

// stream fills chunks from src in order: in a goroutine with two buffers
// (prefetch), or on demand with one.
type stream struct {
	src  io.ReadCloser
	pos  int64 // next offset to read
	end  int64
	size int // the largest chunk read
	// bufSize is the length of its buffers: size rounded up for reuse.
	bufSize int
	bg      bool
	ready   chan chunk
	free    chan []byte
	quit    chan struct{}
	done    sync.WaitGroup
	// spare is the one buffer of a stream without prefetch.
	spare []byte
	// next is the size of the next chunk: streams start with a small one
	// and double it up to size, so the first bytes arrive quickly (a scan
	// that stops early, a small file) and a long scan soon reads whole
	// chunks.
	next int
}

// firstChunk is the size a stream's first chunk is capped at.
const firstChunk = 128 << 10

func newStream(src io.ReadCloser, off, end int64, size, bufSize, bufs int) *stream {
	s := &stream{src: src, pos: off, end: end, size: size, bufSize: bufSize, bg: bufs > 1, next: min(size, firstChunk)}
	if !s.bg {
		s.spare = getBuf(bufSize)
		return s
	}
	s.ready = make(chan chunk, 1)
	s.free = make(chan []byte, bufs)
	s.quit = make(chan struct{})
	for i := 0; i < bufs; i++ {
		s.free <- getBuf(bufSize)
	}
	s.done.Add(1)
	go s.run()
	return s
}

// fill reads the next chunk into buf.
func (s *stream) fill(buf []byte) chunk {
	want := int64(min(len(buf), s.next))
	if left := s.end - s.pos; left < want {
		want = left
	}
	s.next = min(2*s.next, s.size)
	if want <= 0 {
		return chunk{buf: buf, start: s.pos, err: io.ErrUnexpectedEOF}
	}
	n, err := io.ReadFull(s.src, buf[:want])
	c := chunk{data: buf[:n], buf: buf, start: s.pos}
	s.pos += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the file is shorter than its size
		}
		c.err = fmt.Errorf("vfs: read-ahead at offset %d: %w", c.start+int64(n), err)
	}
	return c
}

func (s *stream) run() {
	defer s.done.Done()
	for {
		var buf []byte
		select {
		case buf = <-s.free:
		case <-s.quit:
			return
		}
		c := s.fill(buf)
		select {
		case s.ready <- c:
		case <-s.quit:
			putBuf(buf)
			return
		}
		if c.err != nil {
			return
		}
	}
}

// take returns the next chunk.
func (s *stream) take() chunk {
	if !s.bg {
		buf := s.spare
		s.spare = nil
		if buf == nil {
			buf = getBuf(s.bufSize)
		}
		return s.fill(buf)
	}
	c, ok := <-s.ready
	if !ok {
		return chunk{err: errors.New("vfs: read-ahead stream stopped")}
	}
	return c
}

// give returns a consumed chunk's buffer for reuse.
func (s *stream) give(buf []byte) {
	if !s.bg {
		s.spare = buf
		return
	}
	s.free <- buf // never blocks: the channel holds every buffer
}

// stop ends the stream: it waits for a read under way, closes the source
// and recycles the buffers.
func (s *stream) stop() {
	if s.bg {
		close(s.quit)
		s.done.Wait()
		for {
			select {
			case c := <-s.ready:
				putBuf(c.buf)
				continue
			case b := <-s.free:
				putBuf(b)
				continue
			default:
			}
			break
		}
	} else if s.spare != nil {
		putBuf(s.spare)
		s.spare = nil
	}
	s.src.Close()
}

// Chunk buffers are recycled by size: scans open and close streams per
// store file, and megabyte buffers are not worth handing to the GC each
// time (a 3-way merge of small flushes allocated 5 MB per file and ran the
// GC five times as often as from a local copy). Only power-of-two sizes
// are kept: bufferSize rounds a stream's buffers up to one.
var bufPools sync.Map // int -> *sync.Pool

// bufferSize is the buffer length for a stream whose largest chunk is size
// bytes, at most chunk: size rounded up to a power of two, so a stream over
// a file smaller than a chunk shares pooled buffers with the streams of
// similar files, unless that would pass chunk (a chunk that is no power of
// two, or size itself the chunk).
func bufferSize(size, chunk int) int {
	if size <= 0 {
		return size
	}
	b := 1 << bits.Len(uint(size-1))
	if b > chunk {
		return size
	}
	return b
}

func getBuf(size int) []byte {
	if p, ok := bufPools.Load(size); ok {
		if b, ok := p.(*sync.Pool).Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, size)
}

func putBuf(b []byte) {
	size := cap(b)
	if size == 0 || size&(size-1) != 0 {
		return // only whole power-of-two chunks are worth keeping
	}
	p, _ := bufPools.LoadOrStore(size, &sync.Pool{})
	b = b[:size]
	p.(*sync.Pool).Put(&b)
}

// Budget counts bytes of buffers against a limit; the read-ahead of every
// scan of a job draws on one Budget, so memory is bounded by configuration.
// A nil *Budget is unlimited. It is safe for concurrent use.
type Budget struct {
	mu          sync.Mutex
	limit, used int64
	peak        int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// TryAcquire takes n bytes if they fit, and reports whether it did.
func (b *Budget) TryAcquire(n int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

// Release gives back n bytes taken with TryAcquire.
func (b *Budget) Release(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Used returns the bytes taken now and the most ever taken at once.
func (b *Budget) Used() (now, peak int64) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
