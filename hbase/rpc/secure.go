package rpc

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"

	"github.com/rekeyhq/rekey/internal/digestmd5"
	"github.com/rekeyhq/rekey/internal/hadooptoken"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/sasl"
)

// Kerberos configures SASL GSSAPI authentication of a connection
// (hbase.security.authentication=kerberos).
type Kerberos struct {
	// Login is the Kerberos identity that asks for service tickets.
	Login *krb.Login
	// Principal is the server's principal as hbase-site.xml names it, e.g.
	// "hbase/_HOST@EXAMPLE.COM"; _HOST stands for the server's host name
	// (see ServicePrincipal).
	Principal string
	// Protection lists the acceptable qualities of protection, most
	// preferred first (hbase.rpc.protection); empty means authentication.
	Protection []sasl.QOP
	// Token, when set, authenticates with an HBase authentication token
	// (SASL DIGEST-MD5, HBase's DIGEST method) instead of Login: what a
	// YARN container is handed in place of a Kerberos login.
	Token *hadooptoken.Token
}

// Auth bytes of the connection preamble (HBase's AuthMethod codes).
const (
	authSimple   = 80
	authKerberos = 81
	authDigest   = 82
)

// securityLayer protects a connection's bytes after the SASL exchange:
// GSSAPI's, or DIGEST-MD5's of a token.
type securityLayer interface {
	Wrap(payload []byte) ([]byte, error)
	Unwrap(tok []byte) ([]byte, error)
	// MaxPayload is the most one Wrap may take; 0: no limit; below 0: the
	// peer takes too little for a single token.
	MaxPayload() int
}

// SASL reply statuses and the length HBase sends instead of a token to ask
// for SIMPLE authentication (SaslStatus, SaslUtil.SWITCH_TO_SIMPLE_AUTH).
const (
	saslSuccess      = 0
	saslError        = 1
	saslSwitchSimple = -88
	// maxSASLToken bounds one token of the exchange; Kerberos tokens are
	// a few kilobytes (a ticket with a large PAC stays well under this).
	maxSASLToken = 1 << 20
)

// AuthError is a connection the server refused while setting it up, or
// one this side could not authenticate: Kerberos, the quality of
// protection, or a client without Kerberos against a secure server.
// Retrying the same way cannot help, so Retry says GiveUp.
type AuthError struct {
	// Server is the address, Service the service of the connection.
	Server, Service string
	// Class and Message are the server's exception, when it sent one.
	Class, Message string
	// Hint says what the user can do, when known.
	Hint string
	// Err is the cause on this side, when there is one.
	Err error
}

func (e *AuthError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hbase/rpc: %s (%s): ", e.Server, e.Service)
	switch {
	case e.Class != "":
		fmt.Fprintf(&b, "the server refused the connection: %s: %s", shortClass(e.Class), e.Message)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, " (%s)", e.Hint)
	}
	return b.String()
}

func (e *AuthError) Unwrap() error { return e.Err }

// Retry is GiveUp: the same credentials meet the same refusal.
func (e *AuthError) Retry() Retry { return GiveUp }

// shortClass drops a Java class name's package.
func shortClass(c string) string {
	if i := strings.LastIndexByte(c, '.'); i >= 0 {
		return c[i+1:]
	}
	return c
}

// hintFor returns advice for an exception a server sends while refusing a
// connection.
func hintFor(class, msg string, secure bool) string {
	switch {
	case strings.Contains(msg, "Authentication is required") && !secure:
		return "the cluster is kerberized: set hbase.security.authentication=kerberos in hbase-site.xml ($HBASE_CONF_DIR) and log in with a keytab or kinit"
	case strings.Contains(msg, "No common protection layer"):
		return "the server's hbase.rpc.protection and this client's share no value: set the client's to one the server allows"
	}
	if h := sasl.Explain(msg); h != "" {
		return h
	}
	return ""
}

// ServicePrincipal returns the service principal to ask a ticket for, from
// the configured principal and the server's host: _HOST becomes the host's
// canonical name, lowercased, as HBase's client does (Hadoop's
// SecurityUtil.getServerPrincipal with the address's canonical host name);
// the realm is dropped, gokrb5 takes the name without it.
func ServicePrincipal(principal, host string) (string, error) {
	name, _, _ := strings.Cut(principal, "@")
	svc, inst, ok := strings.Cut(name, "/")
	if name == "" || svc == "" || (ok && inst == "") {
		return "", fmt.Errorf("hbase/rpc: server principal %q is not service/host@REALM", principal)
	}
	if inst != "_HOST" {
		return name, nil
	}
	return svc + "/" + canonicalHost(host), nil
}

// canonicalHost is Java's InetAddress.getCanonicalHostName, lowercased:
// the first name the host's address maps back to, or the address itself
// when it maps to none.
func canonicalHost(host string) string {
	ip := host
	if net.ParseIP(host) == nil {
		addrs, err := net.LookupHost(host)
		if err != nil || len(addrs) == 0 {
			return strings.ToLower(host)
		}
		ip = addrs[0]
	}
	names, err := net.LookupAddr(ip)
	if err != nil || len(names) == 0 {
		return strings.ToLower(ip)
	}
	return strings.ToLower(strings.TrimSuffix(names[0], "."))
}

// explainingLogin asks the login for tickets and turns its errors into
// the user's terms.
type explainingLogin struct {
	l    *krb.Login
	what string
}

func (e explainingLogin) GetServiceTicket(spn string) (messages.Ticket, types.EncryptionKey, error) {
	t, k, err := e.l.Client.GetServiceTicket(spn)
	return t, k, krb.ExplainService(err, e.l, spn, e.what)
}

// saslHandshake runs the SASL GSSAPI exchange on a fresh connection: the
// preamble with auth byte 81 and the initial token, then each server
// reply and the answer to it until the mechanism is done. It returns the
// security layer for the rest of the connection (nil for authentication
// only). Errors refusing the connection are *AuthError.
func saslHandshake(nc net.Conn, br *bufio.Reader, addr, service string, k *Kerberos, deadline time.Time) (securityLayer, error) {
	authErr := func(err error) error { return &AuthError{Server: addr, Service: service, Err: err} }
	if k.Token != nil {
		return digestHandshake(nc, br, addr, service, k, deadline)
	}
	if k.Login == nil || k.Login.Client == nil {
		return nil, authErr(errors.New("Kerberos is configured but there is no login"))
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	spn, err := ServicePrincipal(k.Principal, host)
	if err != nil {
		return nil, authErr(err)
	}
	want := k.Protection
	if len(want) == 0 {
		want = []sasl.QOP{sasl.Authentication}
	}
	cname := k.Login.Client.Credentials.CName()
	mech, err := sasl.New(explainingLogin{k.Login, "the HBase server " + addr}, cname, k.Login.Client.Credentials.Domain(), spn, want)
	if err != nil {
		return nil, authErr(err)
	}
	tok, err := mech.Start()
	if err != nil {
		return nil, authErr(err)
	}
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	out := append([]byte("HBas"), 0, authKerberos)
	if err := writeToken(nc, out, tok); err != nil {
		return nil, fmt.Errorf("%w: %s (%s): SASL: %v", ErrDial, addr, service, err)
	}
	for {
		challenge, err := ReadSASLReply(br)
		if err != nil {
			var se *saslServerError
			if errors.As(err, &se) {
				return nil, &AuthError{Server: addr, Service: service, Class: se.class, Message: se.msg, Hint: hintFor(se.class, se.msg, true)}
			}
			if errors.Is(err, errSwitchToSimple) {
				return nil, authErr(errors.New("the server does not use Kerberos (hbase.security.authentication=simple there) and asks for SIMPLE authentication: set hbase.security.authentication=simple in this client's hbase-site.xml"))
			}
			if errors.Is(err, ErrCorrupt) {
				return nil, authErr(err)
			}
			return nil, fmt.Errorf("%w: %s (%s): SASL exchange as %s for %s: %v", ErrDial, addr, service, k.Login.Principal, spn, err)
		}
		resp, done, err := mech.Step(challenge)
		if err != nil {
			return nil, authErr(fmt.Errorf("SASL exchange as %s with %s: %w", k.Login.Principal, spn, err))
		}
		if err := writeToken(nc, nil, resp); err != nil {
			return nil, fmt.Errorf("%w: %s (%s): SASL: %v", ErrDial, addr, service, err)
		}
		if done {
			// HBase sends nothing on success: the next thing the server
			// says answers the connection header or a call (or is a SASL
			// error, which readLoop recognises).
			if l := mech.Layer(); l != nil {
				return l, nil
			}
			return nil, nil
		}
	}
}

// tokenDigestURI is the digest-uri of HBase's DIGEST method: the client
// and server both name no protocol (Java prints the missing one as
// "null") and the default realm as the server.
const tokenDigestURIService, tokenDigestURIHost = "null", "default"

// digestHandshake runs the SASL DIGEST-MD5 exchange of an HBase
// authentication token: the preamble with auth byte 82 and an empty
// initial response, the server's challenge, the answer (user name and
// password: the token's identifier and password, base64), then the
// server's proof that it knows the password too. It returns the security
// layer, nil for authentication only.
func digestHandshake(nc net.Conn, br *bufio.Reader, addr, service string, k *Kerberos, deadline time.Time) (securityLayer, error) {
	authErr := func(err error) error { return &AuthError{Server: addr, Service: service, Err: err} }
	refused := func(err error) error {
		var se *saslServerError
		if errors.As(err, &se) {
			return &AuthError{Server: addr, Service: service, Class: se.class, Message: se.msg,
				Hint: "the server refused the HBase token of the token file (cancelled, expired, or another cluster's); a resubmitted job gets fresh tokens"}
		}
		if errors.Is(err, errSwitchToSimple) {
			return authErr(errors.New("the server does not use security (hbase.security.authentication=simple there) and asks for SIMPLE authentication"))
		}
		if errors.Is(err, ErrCorrupt) {
			return authErr(err)
		}
		return fmt.Errorf("%w: %s (%s): SASL exchange with a token: %v", ErrDial, addr, service, err)
	}
	want := k.Protection
	if len(want) == 0 {
		want = []sasl.QOP{sasl.Authentication}
	}
	cl := &digestmd5.Client{
		Username: base64.StdEncoding.EncodeToString(k.Token.Identifier),
		Password: base64.StdEncoding.EncodeToString(k.Token.Password),
		Service:  tokenDigestURIService,
		Host:     tokenDigestURIHost,
	}
	for _, q := range want {
		cl.Qops = append(cl.Qops, q.SASLName())
	}
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	if err := writeToken(nc, append([]byte("HBas"), 0, authDigest), nil); err != nil {
		return nil, fmt.Errorf("%w: %s (%s): SASL: %v", ErrDial, addr, service, err)
	}
	challenge, err := ReadSASLReply(br)
	if err != nil {
		return nil, refused(err)
	}
	ch, err := digestmd5.ParseChallenge(challenge)
	if err != nil {
		return nil, authErr(fmt.Errorf("the server's DIGEST-MD5 challenge: %w", err))
	}
	answer, session, err := cl.Respond(ch)
	if err != nil {
		return nil, authErr(fmt.Errorf("%w (hbase.rpc.protection)", err))
	}
	if err := writeToken(nc, nil, answer); err != nil {
		return nil, fmt.Errorf("%w: %s (%s): SASL: %v", ErrDial, addr, service, err)
	}
	final, err := ReadSASLReply(br)
	if err != nil {
		return nil, refused(err)
	}
	if err := session.Verify(final); err != nil {
		return nil, authErr(err)
	}
	if session.Qop == digestmd5.QopAuth {
		return nil, nil
	}
	l, err := session.Layer()
	if err != nil {
		return nil, authErr(err)
	}
	return digestmd5.ErrLayer{Layer: l}, nil
}

// writeToken writes prefix, then tok as an int32 length and its bytes, in
// one write.
func writeToken(w io.Writer, prefix, tok []byte) error {
	b := binary.BigEndian.AppendUint32(prefix, uint32(len(tok)))
	_, err := w.Write(append(b, tok...))
	return err
}

// errSwitchToSimple: the server is not secure and asks for SIMPLE.
var errSwitchToSimple = errors.New("server asks to switch to SIMPLE authentication")

// saslServerError is a SASL reply with the error status: the server's
// exception class and message.
type saslServerError struct{ class, msg string }

func (e *saslServerError) Error() string { return e.class + ": " + e.msg }

// ReadSASLReply reads one reply of the SASL exchange: an int32 status;
// on success an int32 length and that many bytes of token; on error two
// strings (int32 length and UTF-8 bytes each), the exception class and
// message. A status that is neither means the server did not take the
// exchange at all; the bytes are read as the response frame they then are
// (the first int32 its length), so the server's exception can be named.
func ReadSASLReply(r io.Reader) ([]byte, error) {
	status, err := readInt32(r)
	if err != nil {
		return nil, err
	}
	switch status {
	case saslSuccess:
		n, err := readInt32(r)
		if err != nil {
			return nil, err
		}
		if n == saslSwitchSimple {
			return nil, errSwitchToSimple
		}
		return readBytes(r, n, maxSASLToken, "SASL token")
	case saslError:
		return nil, readSASLError(r)
	}
	return nil, readRefusal(r, status)
}

// readSASLError reads the two strings of an error reply.
func readSASLError(r io.Reader) error {
	class, err := readString(r)
	if err != nil {
		return err
	}
	msg, err := readString(r)
	if err != nil {
		return err
	}
	return &saslServerError{class: class, msg: msg}
}

// readRefusal reads a response frame of n bytes where a SASL reply was
// expected: a server that refuses the preamble answers with an exception.
func readRefusal(r io.Reader, n int32) error {
	frame, err := readBytes(r, n, maxSASLToken, "response in place of a SASL reply")
	if err != nil {
		return err
	}
	resp, err := ParseResponse(frame)
	if err != nil {
		return fmt.Errorf("%w: SASL reply status %d: %v", ErrCorrupt, n, err)
	}
	if e := resp.Header.Exception; e != nil {
		return &saslServerError{class: e.GetExceptionClassName(), msg: firstLine(e.GetStackTrace())}
	}
	return fmt.Errorf("%w: SASL reply status %d", ErrCorrupt, n)
}

// readInt32 reads a big-endian int32.
func readInt32(r io.Reader) (int32, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b[:])), nil
}

// readBytes reads n bytes, refusing a length that is negative or over max
// as a corrupt stream (what names the thing, for the message).
func readBytes(r io.Reader, n int32, max int, what string) ([]byte, error) {
	if n < 0 || int64(n) > int64(max) {
		return nil, fmt.Errorf("%w: %s of %d bytes", ErrCorrupt, what, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// maxSASLString bounds a string of a SASL error reply (a Java class name,
// an exception message).
const maxSASLString = 64 << 10

// readString reads Hadoop's WritableUtils string: an int32 length (-1 for
// null) and that many bytes of UTF-8.
func readString(r io.Reader) (string, error) {
	n, err := readInt32(r)
	if err != nil {
		return "", err
	}
	if n == -1 {
		return "", nil
	}
	b, err := readBytes(r, n, maxSASLString, "SASL error string")
	return string(b), err
}

// wrapWriter sends a byte stream as wrap tokens, each an int32 length and
// the token, none larger than the peer announced.
type wrapWriter struct {
	w     io.Writer
	layer securityLayer
	buf   []byte
}

// Write wraps p, in pieces when the peer's buffer is smaller, and writes
// the tokens in one write.
func (ww *wrapWriter) Write(p []byte) (int, error) {
	max := ww.layer.MaxPayload()
	if max < 0 {
		return 0, errors.New("hbase/rpc: the server's SASL buffer is too small for one wrap token")
	}
	out := ww.buf[:0]
	for rest := p; len(rest) > 0; {
		n := len(rest)
		if max > 0 && n > max {
			n = max
		}
		tok, err := ww.layer.Wrap(rest[:n])
		if err != nil {
			return 0, err
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(tok)))
		out = append(out, tok...)
		rest = rest[n:]
	}
	if cap(out) <= 4<<20 {
		ww.buf = out // do not pin a huge buffer
	}
	if _, err := ww.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// unwrapReader reads a stream the server sends as wrap tokens.
type unwrapReader struct {
	r     io.Reader
	layer securityLayer
	plain []byte
}

// Read returns unwrapped bytes, reading the next token when the last is
// used up.
func (ur *unwrapReader) Read(p []byte) (int, error) {
	for len(ur.plain) == 0 {
		n, err := readInt32(ur.r)
		if err != nil {
			return 0, err
		}
		tok, err := readBytes(ur.r, n, MaxFrame, "wrap token")
		if err != nil {
			return 0, err
		}
		if ur.plain, err = ur.layer.Unwrap(tok); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	n := copy(p, ur.plain)
	ur.plain = ur.plain[n:]
	return n, nil
}
