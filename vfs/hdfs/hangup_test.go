package hdfs_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// hangupProxy forwards TCP connections to a NameNode. Once armed, it
// hangs up on the next client connection that sends it bytes, without
// passing them on: the client's call meets a bare EOF, as it does when the
// NameNode stops during the call.
type hangupProxy struct {
	ln      net.Listener
	to      string
	armed   atomic.Bool
	hangups atomic.Int64
}

func newHangupProxy(t *testing.T, to string) *hangupProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangupProxy{ln: ln, to: to}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

func (p *hangupProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *hangupProxy) forward(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.to)
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(c, up)
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && p.armed.CompareAndSwap(true, false) {
			p.hangups.Add(1)
			return
		}
		if n > 0 {
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestNameNodeHangsUpOnFirstRead: the NameNode hangs up during the
// block-locations call of an opened file's first read (what a NameNode
// that stops does to the calls it has taken). The HDFS client returns that
// connection's bare EOF as the read's result, the same io.EOF that ends a
// file; a positional read and a stream of a file whose size is known go on
// after it, and return every byte of the file, not none. (A CI run read
// 0 bytes of a store file this way and reported it truncated.)
func TestNameNodeHangsUpOnFirstRead(t *testing.T) {
	st := testenv.Require(t)
	u, err := url.Parse(st.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := hdfs.Dial(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	dir := fmt.Sprintf("%s/%svfs-hangup-%d", u.Path, os.Getenv("REKEY_TEST_PREFIX"), rand.Uint32())
	if err := direct.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	defer direct.RemoveAll(dir)
	data := make([]byte, 200<<10+17)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	w, err := direct.Create(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	proxy := newHangupProxy(t, u.Host)
	h, err := hdfs.DialWith(proxy.ln.Addr().String(), hdfs.Options{NameNodeWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	// A positional read of the whole file, as an HFile's open reads a
	// small file's tail.
	f, err := h.Open(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	proxy.armed.Store(true)
	got := make([]byte, len(data))
	if n, err := f.ReadAt(got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("ReadAt of the whole file across a NameNode hang-up: %d of %d bytes, %v, or other bytes", n, len(data), err)
	}

	// A stream's first read, on another open of the file.
	g, err := h.Open(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s, err := g.(vfs.Streamer).Stream(0)
	if err != nil {
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	all, err := io.ReadAll(s)
	s.Close()
	if err != nil || !bytes.Equal(all, data) {
		t.Fatalf("stream across a NameNode hang-up: %d of %d bytes, %v, or other bytes", len(all), len(data), err)
	}
	if n := proxy.hangups.Load(); n != 2 {
		t.Fatalf("the proxy hung up %d times, want 2: the test missed the first reads", n)
	}
	t.Logf("NameNode waits: %d, reads retried: %d", h.Stats().NameNodeRetries, h.Stats().Retries)
}
