package hadooprpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"

	"github.com/rekeyhq/rekey/internal/digestmd5"
	"github.com/rekeyhq/rekey/internal/sasl"
)

// maxPacket bounds one packet from the server; the calls here answer with
// a few hundred bytes.
const maxPacket = 64 << 20

// dialTimeout bounds the dial and the whole handshake.
const dialTimeout = 30 * time.Second

// Options say how to reach and authenticate to one NameNode.
type Options struct {
	// Addr is the NameNode's RPC address, host:port.
	Addr string
	// Login is the Kerberos login; Principal its full name, sent as the
	// connection's effective user (any other name would ask the NameNode
	// to treat this client as a proxy).
	Login     *client.Client
	Principal string
	// SPN is the NameNode's service principal without realm and with
	// _HOST expanded ("nn/host.example.com").
	SPN string
	// Protection is hadoop.rpc.protection: the acceptable qualities of
	// protection, comma-separated, most preferred first; empty means
	// authentication, Hadoop's default.
	Protection string
	// Protocol is the connection's protocol; empty means ClientProtocol.
	Protocol string
	// Dial, when set, opens the TCP connection.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Token, when set and Login is not, authenticates the connection with
	// a delegation token of the NameNode (SASL DIGEST-MD5, Hadoop's TOKEN
	// method), as a YARN container does with the tokens its client
	// obtained (TokenFileEnv). The token's owner is who the calls run as.
	Token *Token

	// streamOnly: the handshake ends after authentication; the caller of
	// DialStream sends the connection context.
	streamOnly bool
}

// Conn is an authenticated connection to a NameNode. Calls are made one
// at a time.
type Conn struct {
	addr     string
	protocol string
	nc       net.Conn
	br       *bufio.Reader
	layer    securityLayer // nil: authentication only
	in       io.Reader     // the server's packets, unwrapped
	clientID []byte
	mu       sync.Mutex
	nextID   int32
}

// RemoteError is the server's answer to a call that failed: the Java
// exception's class and message.
type RemoteError struct {
	Class, Message string
	Fatal          bool
}

func (e *RemoteError) Error() string {
	msg, _, _ := strings.Cut(e.Message, "\n") // the rest is a stack trace
	return fmt.Sprintf("%s: %s", e.Class, msg)
}

// securityLayer protects the packets after the SASL exchange: the
// GSSAPI layer of a Kerberos login, or DIGEST-MD5's of a token.
type securityLayer interface {
	Wrap(payload []byte) ([]byte, error)
	Unwrap(tok []byte) ([]byte, error)
	// MaxPayload is the most one Wrap may take; 0 or less: no limit.
	MaxPayload() int
}

// LoginRefused is in the error of a dial the NameNode refused to
// authenticate (a ticket or token it does not accept): a final answer,
// not a NameNode that is away. Callers whose HDFS library keeps only the
// text of the error (DialStream's) look for it there.
const LoginRefused = "refused the login"

// Dial connects to the NameNode, authenticates with Kerberos (or with
// Options.Token) and sends the connection context.
func Dial(ctx context.Context, o Options) (*Conn, error) {
	if o.Login == nil && o.Token == nil {
		return nil, errors.New("hadooprpc: no Kerberos login and no delegation token")
	}
	if o.Protocol == "" {
		o.Protocol = ClientProtocol
	}
	qops, err := sasl.ParseProtection(o.Protection)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: hadoop.rpc.protection is %q: want authentication, integrity or privacy, or a comma-separated list of them", o.Protection)
	}
	dial := o.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	nc, err := dial(dctx, "tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: dialling the NameNode at %s: %w", o.Addr, err)
	}
	deadline, _ := dctx.Deadline()
	nc.SetDeadline(deadline)
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		nc.Close()
		return nil, err
	}
	c := &Conn{addr: o.Addr, protocol: o.Protocol, nc: nc, br: bufio.NewReader(nc), clientID: id}
	c.in = c.br
	if err := c.handshake(o, qops); err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return c, nil
}

// DialStream connects to the NameNode and authenticates as Dial does,
// then hands the connection to another RPC client (the HDFS library's,
// which speaks no token authentication) as a net.Conn: that client writes
// its own connection header, as one without security does ("hrpc",
// version 9, service class 0, auth protocol NONE), which is checked and
// dropped (the real one went before the SASL exchange), then its
// connection context and calls; they go wrapped, and the answers come
// unwrapped, when the exchange agreed on a security layer. The context
// must name the token's owner as its user, or none (ParseDelegationID).
func DialStream(ctx context.Context, o Options) (net.Conn, error) {
	o.streamOnly = true
	c, err := Dial(ctx, o)
	if err != nil {
		return nil, err
	}
	return &streamConn{Conn: c.nc, c: c, header: []byte{'h', 'r', 'p', 'c', 9, 0, 0}}, nil
}

// streamConn is the connection DialStream returns.
type streamConn struct {
	net.Conn
	c *Conn
	// header is what is left to come of the caller's connection header.
	header []byte
	wmu    sync.Mutex
}

// Read reads the server's stream, unwrapped.
func (s *streamConn) Read(p []byte) (int, error) { return s.c.in.Read(p) }

// Write drops the caller's connection header, then sends p, wrapped when
// a security layer is on.
func (s *streamConn) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	n := 0
	if len(s.header) > 0 {
		k := min(len(s.header), len(p))
		if !bytes.Equal(p[:k], s.header[:k]) {
			return 0, fmt.Errorf("hadooprpc: NameNode %s: the client's connection header %q is not the plain one this connection expects", s.c.addr, p[:k])
		}
		s.header = s.header[k:]
		p, n = p[k:], k
	}
	if len(p) == 0 {
		return n, nil
	}
	if s.c.layer == nil {
		m, err := s.Conn.Write(p)
		return n + m, err
	}
	if err := s.c.writeWrapped(p); err != nil {
		return n, err
	}
	return n + len(p), nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// handshake sends the connection header ("hrpc", version 9, service class
// 0, auth protocol SASL), authenticates, then sends the connection
// context, wrapped when a security layer was negotiated.
func (c *Conn) handshake(o Options, qops []sasl.QOP) error {
	if _, err := c.nc.Write([]byte{'h', 'r', 'p', 'c', 9, 0, byte(0x100 + saslCallID)}); err != nil {
		return fmt.Errorf("hadooprpc: NameNode %s: %w", c.addr, err)
	}
	var layer securityLayer
	var err error
	user := o.Principal
	if o.Login != nil {
		layer, err = c.authenticate(o, qops)
	} else {
		// With a token the connection itself says who the caller is (the
		// token's owner): the context names no user, as Hadoop's own
		// client sends it; a name there that is not the owner's would be
		// refused.
		user = ""
		layer, err = c.authenticateToken(o.Token, qops)
	}
	if err != nil {
		return err
	}
	if layer != nil {
		c.layer = layer
		c.in = &unwrapReader{c: c}
	}
	if o.streamOnly {
		return nil
	}
	pkt := appendDelimited(nil, requestHeader(contextCallID, c.clientID, -1))
	pkt = appendDelimited(pkt, connectionContext(user, o.Protocol))
	return c.writePacket(pkt)
}

// negotiate sends NEGOTIATE and returns the server's offer.
func (c *Conn) negotiate() (saslMessage, error) {
	if err := c.sendSasl(&saslMessage{state: saslNegotiate}); err != nil {
		return saslMessage{}, err
	}
	neg, err := c.readSasl()
	if err != nil {
		return saslMessage{}, err
	}
	if neg.state != saslNegotiate {
		return saslMessage{}, fmt.Errorf("hadooprpc: NameNode %s answered SASL state %d to NEGOTIATE; it may not require security (hadoop.security.authentication)", c.addr, neg.state)
	}
	return neg, nil
}

// authenticateToken runs the SASL exchange of Hadoop's TOKEN method:
// the NameNode's NEGOTIATE carries a DIGEST-MD5 challenge beside its
// offer; the answer (user name and password: the token's identifier and
// password, base64) goes in the INITIATE, and the SUCCESS carries the
// server's proof that it knows the password too. It returns the security
// layer, nil for authentication only.
func (c *Conn) authenticateToken(tok *Token, qops []sasl.QOP) (securityLayer, error) {
	neg, err := c.negotiate()
	if err != nil {
		return nil, err
	}
	var auth saslAuth
	var offered []string
	for _, a := range neg.auths {
		offered = append(offered, a.method)
		if a.method == "TOKEN" && a.mechanism == "DIGEST-MD5" {
			auth = a
		}
	}
	if auth.method == "" {
		return nil, fmt.Errorf("hadooprpc: NameNode %s offers no token authentication (offered: %s)", c.addr, strings.Join(offered, ", "))
	}
	ch, err := digestmd5.ParseChallenge(auth.challenge)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: NameNode %s: its DIGEST-MD5 challenge: %w", c.addr, err)
	}
	cl := &digestmd5.Client{
		Username: base64.StdEncoding.EncodeToString(tok.Identifier),
		Password: base64.StdEncoding.EncodeToString(tok.Password),
		Service:  auth.protocol,
		Host:     auth.serverID,
	}
	for _, q := range qops {
		cl.Qops = append(cl.Qops, q.SASLName())
	}
	answer, session, err := cl.Respond(ch)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: NameNode %s: %w (hadoop.rpc.protection)", c.addr, err)
	}
	auth.challenge = nil
	if err := c.sendSasl(&saslMessage{state: saslInitiate, token: answer, hasToken: true, auths: []saslAuth{auth}}); err != nil {
		return nil, err
	}
	reply, err := c.readSasl()
	if err != nil {
		return nil, err
	}
	if reply.state != saslSuccess {
		return nil, fmt.Errorf("%w: SASL state %d after the DIGEST-MD5 answer, want SUCCESS", ErrMalformed, reply.state)
	}
	if err := session.Verify(reply.token); err != nil {
		return nil, fmt.Errorf("hadooprpc: NameNode %s: %w", c.addr, err)
	}
	if session.Qop == digestmd5.QopAuth {
		return nil, nil
	}
	l, err := session.Layer()
	if err != nil {
		return nil, err
	}
	return digestmd5.ErrLayer{Layer: l}, nil
}

// authenticate runs the SASL exchange and returns the security layer, nil
// for authentication only.
func (c *Conn) authenticate(o Options, qops []sasl.QOP) (securityLayer, error) {
	neg, err := c.negotiate()
	if err != nil {
		return nil, err
	}
	auth, err := pickKerberos(neg.auths, o.SPN)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: NameNode %s: %w", c.addr, err)
	}
	mech, err := sasl.ForClient(o.Login, o.SPN, qops)
	if err != nil {
		return nil, err
	}
	mech.Setting("hadoop.rpc.protection")
	tok, err := mech.Start()
	if err != nil {
		return nil, err
	}
	auth.challenge = nil
	msg := &saslMessage{state: saslInitiate, token: tok, hasToken: true, auths: []saslAuth{auth}}
	done := false
	for {
		if err := c.sendSasl(msg); err != nil {
			return nil, err
		}
		reply, err := c.readSasl()
		if err != nil {
			return nil, err
		}
		switch reply.state {
		case saslSuccess:
			if !done {
				return nil, fmt.Errorf("hadooprpc: NameNode %s ended SASL before the security layer was agreed", c.addr)
			}
			if l := mech.Layer(); l != nil {
				return l, nil
			}
			return nil, nil
		case saslChallenge:
			if done {
				return nil, fmt.Errorf("hadooprpc: NameNode %s sent a challenge after the exchange was done", c.addr)
			}
			resp, fin, err := mech.Step(reply.token)
			if err != nil {
				return nil, fmt.Errorf("hadooprpc: NameNode %s: %w", c.addr, err)
			}
			done = fin
			msg = &saslMessage{state: saslResponse, token: resp, hasToken: true}
		default:
			return nil, fmt.Errorf("%w: SASL state %d during the exchange", ErrMalformed, reply.state)
		}
	}
}

// pickKerberos returns the server's KERBEROS/GSSAPI offer, checking that
// the principal it names (protocol/serverId) is the one configured.
func pickKerberos(auths []saslAuth, spn string) (saslAuth, error) {
	var offered []string
	for _, a := range auths {
		offered = append(offered, a.method)
		if a.method != "KERBEROS" || a.mechanism != "GSSAPI" {
			continue
		}
		if got := a.protocol + "/" + a.serverID; got != spn {
			return a, fmt.Errorf("it authenticates as %s, but the configuration names %s (dfs.namenode.kerberos.principal, _HOST expanded)", got, spn)
		}
		return a, nil
	}
	return saslAuth{}, fmt.Errorf("it offers no Kerberos authentication (offered: %s)", strings.Join(offered, ", "))
}

// sendSasl sends one SASL message under the SASL call id.
func (c *Conn) sendSasl(m *saslMessage) error {
	pkt := appendDelimited(nil, requestHeader(saslCallID, nil, -1))
	pkt = appendDelimited(pkt, m.encode())
	return c.writeRaw(pkt)
}

// readSasl reads one SASL message; a server error (for example a refused
// Kerberos ticket) comes back in the user's terms.
func (c *Conn) readSasl() (saslMessage, error) {
	pkt, err := readPacket(c.br)
	if err != nil {
		return saslMessage{}, c.connErr(err)
	}
	h, body, err := splitResponse(pkt)
	if err != nil {
		return saslMessage{}, err
	}
	if h.status != statusSuccess {
		re := &RemoteError{Class: h.class, Message: h.msg, Fatal: h.status == statusFatal}
		if hint := sasl.Explain(h.msg); hint != "" {
			return saslMessage{}, fmt.Errorf("hadooprpc: NameNode %s refused the Kerberos login: %s: %w", c.addr, hint, re)
		}
		return saslMessage{}, fmt.Errorf("hadooprpc: NameNode %s %s: %w", c.addr, LoginRefused, re)
	}
	if h.callID != saslCallID {
		return saslMessage{}, fmt.Errorf("%w: call id %d during SASL", ErrMalformed, h.callID)
	}
	m, rest, err := nextDelimited(body)
	if err != nil {
		return saslMessage{}, err
	}
	if len(rest) != 0 {
		return saslMessage{}, fmt.Errorf("%w: %d bytes after the SASL message", ErrMalformed, len(rest))
	}
	return decodeSasl(m)
}

// Call makes one call of the connection's protocol and returns the
// response message (its encoded bytes).
func (c *Conn) Call(ctx context.Context, method string, req []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(d)
		defer c.nc.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	id := c.nextID
	c.nextID++
	pkt := appendDelimited(nil, requestHeader(id, c.clientID, 0))
	pkt = appendDelimited(pkt, methodHeader(method, c.protocol, clientProtocolVersion))
	pkt = appendDelimited(pkt, req)
	if err := c.writePacket(pkt); err != nil {
		return nil, err
	}
	resp, err := readPacket(c.in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.connErr(err)
	}
	h, body, err := splitResponse(resp)
	if err != nil {
		return nil, err
	}
	if h.callID != id {
		return nil, fmt.Errorf("%w: answer to call %d, want %d", ErrMalformed, h.callID, id)
	}
	if h.status != statusSuccess {
		return nil, &RemoteError{Class: h.class, Message: h.msg, Fatal: h.status == statusFatal}
	}
	msg, _, err := nextDelimited(body)
	return msg, err
}

// connErr words a broken connection.
func (c *Conn) connErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("hadooprpc: NameNode %s closed the connection: %w", c.addr, err)
	}
	return fmt.Errorf("hadooprpc: NameNode %s: %w", c.addr, err)
}

// splitResponse splits a response packet into its header and the rest.
func splitResponse(pkt []byte) (responseHeader, []byte, error) {
	hb, rest, err := nextDelimited(pkt)
	if err != nil {
		return responseHeader{}, nil, err
	}
	h, err := decodeResponseHeader(hb)
	return h, rest, err
}

// writePacket sends one packet of the RPC stream, wrapped when a security
// layer is on.
func (c *Conn) writePacket(pkt []byte) error {
	if c.layer == nil {
		return c.writeRaw(pkt)
	}
	stream := binary.BigEndian.AppendUint32(nil, uint32(len(pkt)))
	return c.writeWrapped(append(stream, pkt...))
}

// writeWrapped sends bytes of the RPC stream (length-prefixed packets)
// in WRAP messages. The server unwraps them into one stream, so bytes
// more than the layer takes at once go in several messages.
func (c *Conn) writeWrapped(stream []byte) error {
	for len(stream) > 0 {
		n := len(stream)
		if max := c.layer.MaxPayload(); max > 0 && n > max {
			n = max
		}
		tok, err := c.layer.Wrap(stream[:n])
		if err != nil {
			return fmt.Errorf("hadooprpc: NameNode %s: %w", c.addr, err)
		}
		if err := c.sendSasl(&saslMessage{state: saslWrap, token: tok, hasToken: true}); err != nil {
			return err
		}
		stream = stream[n:]
	}
	return nil
}

// writeRaw sends pkt with its int32 length on the connection.
func (c *Conn) writeRaw(pkt []byte) error {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(pkt)), uint32(len(pkt)))
	if _, err := c.nc.Write(append(b, pkt...)); err != nil {
		return c.connErr(err)
	}
	return nil
}

// readPacket reads one int32-length-prefixed packet.
func readPacket(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxPacket {
		return nil, fmt.Errorf("%w: packet of %d bytes", ErrMalformed, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// unwrapReader is the server's stream under a security layer: each
// packet on the wire is an RpcSaslProto WRAP message whose token unwraps
// to the next bytes of the stream.
type unwrapReader struct {
	c   *Conn
	buf bytes.Buffer
}

func (u *unwrapReader) Read(p []byte) (int, error) {
	for u.buf.Len() == 0 {
		plain, err := u.next()
		if err != nil {
			return 0, err
		}
		u.buf.Write(plain)
	}
	return u.buf.Read(p)
}

// next reads and unwraps one WRAP packet.
func (u *unwrapReader) next() ([]byte, error) {
	pkt, err := readPacket(u.c.br)
	if err != nil {
		return nil, err
	}
	return unwrapPacket(u.c.layer, pkt)
}

// unwrapPacket checks that pkt is a WRAP message under the SASL call id
// and returns its token unwrapped. A server error in its place (status
// not SUCCESS) comes back as a *RemoteError.
func unwrapPacket(l securityLayer, pkt []byte) ([]byte, error) {
	h, body, err := splitResponse(pkt)
	if err != nil {
		return nil, err
	}
	if h.status != statusSuccess {
		return nil, &RemoteError{Class: h.class, Message: h.msg, Fatal: h.status == statusFatal}
	}
	if h.callID != saslCallID {
		return nil, fmt.Errorf("%w: unwrapped packet for call %d under a security layer", ErrMalformed, h.callID)
	}
	mb, _, err := nextDelimited(body)
	if err != nil {
		return nil, err
	}
	m, err := decodeSasl(mb)
	if err != nil {
		return nil, err
	}
	if m.state != saslWrap {
		return nil, fmt.Errorf("%w: SASL state %d, want WRAP", ErrMalformed, m.state)
	}
	return l.Unwrap(m.token)
}
