package vfs

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// blocks cuts n bytes into the reads an HFile scan makes: variable-sized
// blocks, each read together with the next block's 33-byte header, which
// the following read then skips (so each read starts where the last one
// ended).
func scanReads(n int64, seed uint64) [][2]int64 {
	rng := rand.New(rand.NewPCG(seed, seed))
	var out [][2]int64
	for off := int64(0); off < n; {
		size := int64(1000 + rng.IntN(70000))
		if off+size > n {
			size = n - off
		}
		out = append(out, [2]int64{off, size})
		off += size
	}
	return out
}

// randomFile writes n random bytes (from seed) to /f of a new in-memory
// file system.
func randomFile(n int, seed uint64) (*Mem, []byte) {
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	mem := NewMem()
	mem.WriteFile("/f", data)
	return mem, data
}

func TestReadAheadServesTheFile(t *testing.T) {
	mem, data := randomFile(3<<20+12345, 1)
	for _, tc := range []struct {
		name string
		opts ReadAheadOptions
		end  int64
	}{
		{"chunks smaller than a read", ReadAheadOptions{Chunk: 4 << 10}, 0},
		{"64 KB chunks", ReadAheadOptions{Chunk: 64 << 10}, 0},
		{"chunks larger than the file", ReadAheadOptions{Chunk: 8 << 20}, 0},
		{"no prefetch", ReadAheadOptions{Chunk: 64 << 10, NoPrefetch: true}, 0},
		{"stream ends before the file", ReadAheadOptions{Chunk: 1 << 20}, 2 << 20},
		{"off", ReadAheadOptions{Off: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := mem.Open("/f")
			if err != nil {
				t.Fatal(err)
			}
			ra := NewReadAhead(f, tc.end, tc.opts)
			defer ra.Close()
			// A scan front to back, then a seek backwards and a scan on,
			// then reads that jump about.
			reads := scanReads(int64(len(data)), 3)
			reads = append(reads, [2]int64{1 << 20, 5000}, [2]int64{1<<20 + 5000, 70000}, [2]int64{100, 10}, [2]int64{int64(len(data)) - 10, 10}, [2]int64{2<<20 - 5, 10})
			for _, r := range reads {
				p := make([]byte, r[1])
				n, err := ra.ReadAt(p, r[0])
				if err != nil || n != len(p) {
					t.Fatalf("ReadAt(%d, %d) = %d, %v", r[1], r[0], n, err)
				}
				if !bytes.Equal(p, data[r[0]:r[0]+r[1]]) {
					t.Fatalf("ReadAt(%d, %d) returned other bytes than the file's", r[1], r[0])
				}
			}
			// Past the end: io.EOF with the bytes there are.
			p := make([]byte, 100)
			if n, err := ra.ReadAt(p, int64(len(data))-50); n != 50 || err != io.EOF {
				t.Fatalf("read over the end = %d, %v; want 50, io.EOF", n, err)
			}
			st := ra.Stats()
			if tc.opts.Off {
				if st.Streams != 0 {
					t.Fatalf("read-ahead off streamed: %+v", st)
				}
				return
			}
			// The first scan streams: one positional read to begin with,
			// then everything from the stream.
			streamable := int64(len(data))
			if tc.end > 0 {
				streamable = tc.end
			}
			if st.Streams == 0 || st.StreamBytes < streamable/2 {
				t.Fatalf("the scan did not stream: %+v", st)
			}
			t.Logf("%+v", st)
		})
	}
}

// TestReadAheadBudget checks a stream takes its buffers from the budget,
// gives them back on Close, and reads positionally (still correctly) when
// the budget has no room.
func TestReadAheadBudget(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	mem := NewMem()
	mem.WriteFile("/f", data)
	read := func(ra *ReadAhead) {
		t.Helper()
		for _, r := range scanReads(int64(len(data)), 4) {
			p := make([]byte, r[1])
			if _, err := ra.ReadAt(p, r[0]); err != nil || !bytes.Equal(p, data[r[0]:r[0]+r[1]]) {
				t.Fatalf("ReadAt(%d, %d): %v or wrong bytes", r[1], r[0], err)
			}
		}
	}
	b := NewBudget(256 << 10)
	f, _ := mem.Open("/f")
	ra := NewReadAhead(f, 0, ReadAheadOptions{Chunk: 128 << 10, Budget: b})
	read(ra)
	if _, peak := b.Used(); peak != 256<<10 {
		t.Errorf("peak budget use %d, want two 128 KiB chunks", peak)
	}
	// A second stream finds the budget taken and reads positionally.
	ra2 := NewReadAhead(f, 0, ReadAheadOptions{Chunk: 128 << 10, Budget: b})
	read(ra2)
	if st := ra2.Stats(); st.Streams != 0 {
		t.Errorf("a stream started beyond the budget: %+v", st)
	}
	ra2.Close()
	ra.Close()
	if now, _ := b.Used(); now != 0 {
		t.Errorf("%d bytes of the budget still taken after Close", now)
	}
}

// TestReadAheadFault checks a failed read in the middle of a stream is an
// error, never short or wrong data.
func TestReadAheadFault(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 1<<20)
	mem := NewMem()
	mem.WriteFile("/f", data)
	faulty := NewFaulty(mem, Fault{Op: "read", Offset: 600 << 10})
	f, err := faulty.Open("/f")
	if err != nil {
		t.Fatal(err)
	}
	for _, pre := range []bool{true, false} {
		ra := NewReadAhead(f, 0, ReadAheadOptions{Chunk: 64 << 10, NoPrefetch: !pre})
		var failed error
		for _, r := range scanReads(int64(len(data)), 5) {
			p := make([]byte, r[1])
			n, err := ra.ReadAt(p, r[0])
			if err != nil {
				failed = err
				break
			}
			if n != len(p) {
				t.Fatalf("short read without an error: %d of %d", n, len(p))
			}
		}
		ra.Close()
		if !errors.Is(failed, ErrInjected) {
			t.Errorf("prefetch %v: error %v, want the injected fault", pre, failed)
		}
	}
}

// TestReadAheadPrefetch: a stream started by Prefetch serves a scan from
// that offset without any positional read; a first read elsewhere (before
// the offset, or far past it) still returns the file's bytes; Prefetch
// past the end, twice, or with read-ahead off changes nothing.
func TestReadAheadPrefetch(t *testing.T) {
	mem, data := randomFile(2<<20+777, 5)
	check := func(t *testing.T, ra *ReadAhead, off, n int64) {
		t.Helper()
		p := make([]byte, n)
		if m, err := ra.ReadAt(p, off); err != nil || m != len(p) {
			t.Fatalf("ReadAt(%d, %d) = %d, %v", n, off, m, err)
		}
		if !bytes.Equal(p, data[off:off+n]) {
			t.Fatalf("ReadAt(%d, %d) returned other bytes than the file's", n, off)
		}
	}
	for _, pre := range []bool{true, false} {
		f, _ := mem.Open("/f")
		ra := NewReadAhead(f, 0, ReadAheadOptions{Chunk: 256 << 10, NoPrefetch: !pre})
		ra.Prefetch(4096)
		ra.Prefetch(4096) // a second call while streaming: no new stream
		for _, r := range scanReads(int64(len(data))-4096, 9) {
			check(t, ra, 4096+r[0], r[1])
		}
		if st := ra.Stats(); st.Positional != 0 || st.Streams != 1 || st.StreamBytes != int64(len(data))-4096 {
			t.Errorf("prefetch %v: a scan from the prefetched offset: %+v, want one stream of %d bytes and no positional read", pre, st, len(data)-4096)
		}
		ra.Close()
	}
	for name, first := range map[string][2]int64{"before": {100, 5000}, "far past": {1 << 20, 70000}, "inside the first chunk": {4096 + 1000, 3000}} {
		t.Run(name, func(t *testing.T) {
			f, _ := mem.Open("/f")
			ra := NewReadAhead(f, 0, ReadAheadOptions{Chunk: 256 << 10})
			defer ra.Close()
			ra.Prefetch(4096)
			check(t, ra, first[0], first[1])
			check(t, ra, first[0]+first[1], 10000)
			check(t, ra, 0, 4096)
		})
	}
	f, _ := mem.Open("/f")
	for _, o := range []ReadAheadOptions{{Off: true}, {}} {
		ra := NewReadAhead(f, 0, o)
		ra.Prefetch(int64(len(data)))
		if o.Off {
			ra.Prefetch(0)
		}
		if st := ra.Stats(); st.Streams != 0 {
			t.Errorf("%+v: Prefetch at the end or with read-ahead off started a stream: %+v", o, st)
		}
		check(t, ra, 0, 100)
		ra.Close()
	}
}

// TestReadAheadFileSmallerThanChunk checks a stream over less than a chunk
// still prefetches in the background (a merge of small flushes otherwise
// reads every chunk on the scan's goroutine), with buffers rounded up to a
// power of two for reuse and counted as such in the budget.
func TestReadAheadFileSmallerThanChunk(t *testing.T) {
	mem, data := randomFile(700<<10, 11)
	for _, tc := range []struct {
		pre      bool
		wantPeak int64
	}{{true, 2 << 20}, {false, 1 << 20}} {
		b := NewBudget(64 << 20)
		f, _ := mem.Open("/f")
		ra := NewReadAhead(f, 0, ReadAheadOptions{Chunk: 4 << 20, Budget: b, NoPrefetch: !tc.pre})
		ra.Prefetch(0)
		if ra.st == nil || ra.st.bg != tc.pre {
			t.Fatalf("prefetch %v: stream %+v, want one reading in the background: %v", tc.pre, ra.st, tc.pre)
		}
		for _, r := range scanReads(int64(len(data)), 12) {
			p := make([]byte, r[1])
			if _, err := ra.ReadAt(p, r[0]); err != nil || !bytes.Equal(p, data[r[0]:r[0]+r[1]]) {
				t.Fatalf("prefetch %v: ReadAt(%d, %d): %v or other bytes than the file's", tc.pre, r[1], r[0], err)
			}
		}
		if st := ra.Stats(); st.Positional != 0 || st.Streams != 1 {
			t.Errorf("prefetch %v: %+v, want one stream and no positional read", tc.pre, st)
		}
		ra.Close()
		if now, peak := b.Used(); now != 0 || peak != tc.wantPeak {
			t.Errorf("prefetch %v: budget %d taken after Close, peak %d, want 0 and %d (1 MiB buffers for a 700 KiB file)", tc.pre, now, peak, tc.wantPeak)
		}
	}
}

func TestBufferSize(t *testing.T) {
	for _, tc := range [][3]int{
		// size, chunk, want
		{700 << 10, 4 << 20, 1 << 20},
		{1 << 20, 4 << 20, 1 << 20},
		{4 << 20, 4 << 20, 4 << 20},
		{3 << 20, 3 << 20, 3 << 20},     // a chunk that is no power of two
		{2<<20 + 1, 3 << 20, 2<<20 + 1}, // rounding would pass the chunk
		{1, 4 << 20, 1},
	} {
		if got := bufferSize(tc[0], tc[1]); got != tc[2] {
			t.Errorf("bufferSize(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
}
