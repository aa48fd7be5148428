package rpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
)

// Service names, as ConnectionHeader.service_name spells them.
const (
	ClientService = "ClientService"
	AdminService  = "AdminService"
	MasterService = "MasterService"
)

// Priorities HBase gives its call queues (HConstants): admin and meta calls
// go ahead of user calls.
const (
	PriorityNormal = 0
	PriorityAdmin  = 100
	PriorityHigh   = 200
)

// Config describes one connection.
type Config struct {
	// User is the effective user HBase checks permissions against (and owns
	// bulk-loaded files). Required.
	User string
	// Service is the one service this connection serves.
	Service string
	// DialTimeout bounds the TCP connect, the SASL exchange and the header
	// write; 0 means 10 s.
	DialTimeout time.Duration
	// Kerberos, when not nil, authenticates the connection with SASL
	// GSSAPI; the connection header then names no user (the server takes
	// the authenticated principal) and User only fills the version info.
	Kerberos *Kerberos
}

// Conn is one TCP connection to an HBase server for one service. Any number
// of goroutines may call Call at once; calls are matched to responses by id.
// When the connection breaks, every call in flight fails with an error
// wrapping ErrConnBroken and so does every later call: the owner dials anew.
type Conn struct {
	addr    string
	service string
	nc      net.Conn
	br      *bufio.Reader // reads nc
	w       io.Writer     // nc, or a wrapWriter over it
	rd      io.Reader     // br, or an unwrapReader over it
	secure  bool          // authenticated with SASL

	wmu  sync.Mutex // serializes frame writes
	wbuf []byte

	mu      sync.Mutex
	nextID  uint32
	pending map[uint32]chan *Response
	err     error         // why the connection broke, once it has
	done    chan struct{} // closed when broken
}

// Dial connects to addr and sends the preamble and connection header.
func Dial(ctx context.Context, addr string, cfg Config) (*Conn, error) {
	if cfg.User == "" || cfg.Service == "" {
		return nil, fmt.Errorf("hbase/rpc: dial %s: user and service are required", addr)
	}
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (%s): %v", ErrDial, addr, cfg.Service, err)
	}
	c := &Conn{addr: addr, service: cfg.Service, nc: nc, pending: map[uint32]chan *Response{}, done: make(chan struct{})}
	c.br = bufio.NewReaderSize(nc, 64<<10)
	c.w, c.rd = nc, c.br
	if cfg.Kerberos != nil {
		deadline := time.Now().Add(timeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		layer, err := saslHandshake(nc, c.br, addr, cfg.Service, cfg.Kerberos, deadline)
		if err != nil {
			nc.Close()
			return nil, err
		}
		c.secure = true
		if layer != nil {
			c.w = &wrapWriter{w: nc, layer: layer}
			c.rd = &unwrapReader{r: c.br, layer: layer}
		}
	}
	hb, err := proto.Marshal(connectionHeader(cfg))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("hbase/rpc: encoding connection header: %w", err)
	}
	// A plain connection sends the preamble with the header, in one write;
	// a secure one sent its preamble with the first SASL token.
	var buf []byte
	if cfg.Kerberos == nil {
		buf = append([]byte("HBas"), 0, authSimple)
	}
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(hb)))
	buf = append(buf, hb...)
	nc.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.w.Write(buf); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: %s (%s): writing connection header: %v", ErrDial, addr, cfg.Service, err)
	}
	nc.SetWriteDeadline(time.Time{})
	go c.readLoop()
	return c, nil
}

// connectionHeader is the header a connection starts with. A secure
// connection names no user: the server takes the authenticated principal,
// and any other name would ask it to let that principal act as a proxy.
func connectionHeader(cfg Config) *pb.ConnectionHeader {
	hdr := &pb.ConnectionHeader{
		ServiceName:         proto.String(cfg.Service),
		CellBlockCodecClass: proto.String(CodecClass),
		// Servers check the client version before sending Get results in a
		// cell block; claim a 2.x client.
		VersionInfo: &pb.VersionInfo{
			Version: proto.String("2.5.0"), Url: proto.String("rekey"), Revision: proto.String("rekey"),
			User: proto.String(cfg.User), Date: proto.String(""), SrcChecksum: proto.String(""),
			VersionMajor: proto.Uint32(2), VersionMinor: proto.Uint32(5),
		},
	}
	if cfg.Kerberos == nil {
		hdr.UserInfo = &pb.UserInformation{EffectiveUser: proto.String(cfg.User)}
	}
	return hdr
}

// Addr returns the server address.
func (c *Conn) Addr() string { return c.addr }

// Err returns why the connection broke, or nil while it works.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; calls in flight fail with ErrConnBroken.
func (c *Conn) Close() error {
	c.fail(errors.New("closed by client"))
	return nil
}

// fail marks the connection broken (once), closes the socket and fails
// every pending call.
func (c *Conn) fail(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	var ae *AuthError
	if errors.As(cause, &ae) {
		// Keep the refusal matchable: its Retry says not to dial again.
		c.err = fmt.Errorf("%w: %w", ErrConnBroken, ae)
	} else {
		c.err = fmt.Errorf("%w: %s (%s): %v", ErrConnBroken, c.addr, c.service, cause)
	}
	pending := c.pending
	c.pending = nil
	close(c.done)
	c.mu.Unlock()
	c.nc.Close()
	for _, ch := range pending {
		close(ch)
	}
}

// callIDNone is the call id of a response that answers no call: HBase
// sends -1 when it refuses the connection itself.
const callIDNone = math.MaxUint32

func (c *Conn) readLoop() {
	if c.secure {
		if err := c.checkSASLError(); err != nil {
			c.fail(err)
			return
		}
	}
	var lenBuf [4]byte
	for {
		if _, err := io.ReadFull(c.rd, lenBuf[:]); err != nil {
			c.fail(fmt.Errorf("reading response: %v", err))
			return
		}
		n := binary.BigEndian.Uint32(lenBuf[:])
		if n > MaxFrame {
			c.fail(fmt.Errorf("%w: response frame of %d bytes is over the limit", ErrCorrupt, n))
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(c.rd, frame); err != nil {
			c.fail(fmt.Errorf("reading %d-byte response: %v", n, err))
			return
		}
		resp, err := ParseResponse(frame)
		if err != nil {
			// The framing is intact (we read exactly n bytes) but we cannot
			// tell whose call this was: the stream is no longer trustworthy.
			c.fail(err)
			return
		}
		id := resp.Header.GetCallId()
		if e := resp.Header.Exception; id == callIDNone && e != nil {
			msg := firstLine(e.GetStackTrace())
			c.fail(&AuthError{Server: c.addr, Service: c.service, Class: e.GetExceptionClassName(), Message: msg, Hint: hintFor(e.GetExceptionClassName(), msg, c.secure)})
			return
		}
		c.mu.Lock()
		ch, ok := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ok {
			ch <- resp // buffered: never blocks
		}
		// A response nobody waits for belongs to a call that timed out.
	}
}

// checkSASLError waits for the server's first bytes after the SASL
// exchange and reads them as a SASL error reply when they are one. HBase
// sends nothing when the exchange succeeded, but answers a last step it
// rejects (the layer choice) with an error status and closes. An error
// status reads as a length of 1, which no response frame or wrap token
// can have, so the two cannot be confused.
func (c *Conn) checkSASLError() error {
	b, err := c.br.Peek(4)
	if err != nil {
		return fmt.Errorf("reading response: %v", err)
	}
	if binary.BigEndian.Uint32(b) != saslError {
		return nil
	}
	c.br.Discard(4)
	err = readSASLError(c.br)
	var se *saslServerError
	if errors.As(err, &se) {
		return &AuthError{Server: c.addr, Service: c.service, Class: se.class, Message: se.msg, Hint: hintFor(se.class, se.msg, true)}
	}
	return fmt.Errorf("reading the SASL error reply: %v", err)
}

// Call sends one request and waits for its response, decoding the response
// message into resp (which may be nil for a response the caller ignores).
// It returns the response cell block, which the caller owns. The context's
// deadline is sent to the server as the call timeout. A remote exception is
// returned as *RemoteError.
func (c *Conn) Call(ctx context.Context, method string, param proto.Message, cellBlock []byte, priority uint32, resp proto.Message) ([]byte, error) {
	var cells [][]byte
	if len(cellBlock) > 0 {
		cells = [][]byte{cellBlock}
	}
	msg, cb, err := c.call(ctx, method, body{msg: param}, cells, priority)
	if err != nil {
		return nil, err
	}
	if resp != nil {
		if err := proto.Unmarshal(msg, resp); err != nil {
			return nil, fmt.Errorf("%w: %s response from %s: %v", ErrCorrupt, method, c.addr, err)
		}
	}
	return cb, nil
}

// CallRaw is Call for a caller that encodes its request and decodes its
// response itself (the batched writer, whose Multi calls would otherwise
// build and parse a few protobuf structs per row): param is the encoded
// request message, sent as it is, and the cell block is the concatenation
// of cells, copied straight into the frame. It returns the encoded response
// message and the response cell block, both owned by the caller.
func (c *Conn) CallRaw(ctx context.Context, method string, param []byte, cells [][]byte, priority uint32) (msg, cellBlock []byte, err error) {
	return c.call(ctx, method, body{raw: param, isRaw: true}, cells, priority)
}

// body is a request message: a protobuf to encode, or one encoded already.
type body struct {
	msg   proto.Message
	raw   []byte
	isRaw bool
}

func (c *Conn) call(ctx context.Context, method string, param body, cells [][]byte, priority uint32) ([]byte, []byte, error) {
	ch := make(chan *Response, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("%s: %w", method, err)
	}
	id := c.nextID
	c.nextID++
	c.pending[id] = ch
	c.mu.Unlock()

	hdr := &pb.RequestHeader{CallId: proto.Uint32(id), MethodName: proto.String(method)}
	if priority != PriorityNormal {
		hdr.Priority = proto.Uint32(priority)
	}
	if dl, ok := ctx.Deadline(); ok {
		ms := time.Until(dl).Milliseconds()
		if ms < 1 {
			ms = 1
		}
		if ms < 1<<31 {
			hdr.Timeout = proto.Uint32(uint32(ms))
		}
	}
	if err := c.write(ctx, hdr, param, cells); err != nil {
		c.forget(id)
		return nil, nil, fmt.Errorf("%s to %s: %w", method, c.addr, err)
	}

	select {
	case r, ok := <-ch:
		if !ok {
			return nil, nil, fmt.Errorf("%s: %w", method, c.Err())
		}
		if e := r.Header.Exception; e != nil {
			return nil, nil, remoteError(e, c.addr)
		}
		return r.Message, r.CellBlock, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, nil, fmt.Errorf("%s to %s: %w", method, c.addr, ctx.Err())
	}
}

func (c *Conn) forget(id uint32) {
	c.mu.Lock()
	if c.pending != nil {
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// write sends one frame. A failed or partial write leaves the stream in an
// unknown state, so it breaks the connection.
func (c *Conn) write(ctx context.Context, hdr *pb.RequestHeader, param body, cells [][]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var buf []byte
	var err error
	if param.isRaw {
		buf, err = appendRequestRaw(c.wbuf[:0], hdr, param.raw, cells)
	} else {
		var cellBlock []byte
		if len(cells) == 1 {
			cellBlock = cells[0]
		}
		buf, err = AppendRequest(c.wbuf[:0], hdr, param.msg, cellBlock)
	}
	if err != nil {
		return err
	}
	if cap(buf) <= 4<<20 {
		c.wbuf = buf
	} else {
		c.wbuf = nil // do not pin a huge buffer
	}
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetWriteDeadline(dl)
	} else {
		c.nc.SetWriteDeadline(time.Time{})
	}
	if _, err := c.w.Write(buf); err != nil {
		c.fail(fmt.Errorf("writing request: %v", err))
		return c.Err()
	}
	return nil
}
