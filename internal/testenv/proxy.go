package testenv

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to one server, and
// lets a test make the server unreachable for the client behind it: Hold
// closes the port (new connections are refused) and holds the bytes of the
// connections already open, as a network that stopped delivering would;
// Release opens the port again and lets held bytes through. A test that
// points one client at the proxy can cut that client off without touching
// the server the other tests share, and name the proxy's side of each
// connection (Upstreams) to the server.
type Proxy struct {
	target string
	addr   string

	mu    sync.Mutex
	cond  *sync.Cond
	ln    net.Listener
	held  bool
	pairs map[*proxyPair]bool
	done  bool
}

type proxyPair struct {
	client, server net.Conn
}

// NewProxy starts a proxy to target (host:port) on a free loopback port;
// it is closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln, pairs: map[*proxyPair]bool{}}
	p.cond = sync.NewCond(&p.mu)
	go p.accept(ln)
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address, host:port, for the client.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by Hold or Close
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pair := &proxyPair{client: c, server: s}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.pairs[pair] = true
		p.mu.Unlock()
		go p.pump(pair, c, s)
		go p.pump(pair, s, c)
	}
}

// pump copies from src to dst, waiting while the proxy holds; when either
// side ends, both are closed.
func (p *Proxy) pump(pair *proxyPair, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	defer p.drop(pair)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held && !p.done {
				p.cond.Wait()
			}
			done := p.done
			p.mu.Unlock()
			if done {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) drop(pair *proxyPair) {
	pair.client.Close()
	pair.server.Close()
	p.mu.Lock()
	delete(p.pairs, pair)
	p.mu.Unlock()
}

// Upstreams returns the proxy's local address (host:port) of each
// connection it holds open to the server: the address the server sees the
// client at.
func (p *Proxy) Upstreams() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for pair := range p.pairs {
		out = append(out, pair.server.LocalAddr().String())
	}
	return out
}

// Hold refuses new connections and holds the bytes of open ones until
// Release. A connection either side closes meanwhile is closed through.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held || p.done {
		return
	}
	p.held = true
	p.ln.Close()
}

// Release listens on the same port again and lets held bytes through.
func (p *Proxy) Release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held || p.done {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.ln, p.held = ln, false
	p.cond.Broadcast()
	go p.accept(ln)
	return nil
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	if !p.held {
		p.ln.Close()
	}
	pairs := p.pairs
	p.pairs = map[*proxyPair]bool{}
	p.cond.Broadcast()
	p.mu.Unlock()
	for pair := range pairs {
		pair.client.Close()
		pair.server.Close()
	}
}

// ExpireSession cuts the ZooKeeper client behind p off (p holds) and has
// the ZooKeeper server end that client's session, as it does when a client
// stays away past its session timeout. The proxy refuses connections until
// Release.
func ExpireSession(t testing.TB, st *State, p *Proxy) {
	t.Helper()
	ups := p.Upstreams()
	if len(ups) == 0 {
		t.Fatal("the client holds no connection through the ZooKeeper proxy")
	}
	p.Hold()
	for _, up := range ups {
		ans, err := st.Control("zk-expire-session " + up)
		if err != nil {
			t.Fatalf("expiring the ZooKeeper session of %s: %v", up, err)
		}
		t.Logf("zk-expire-session %s: %s", up, ans)
	}
}
