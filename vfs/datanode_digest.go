package vfs

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/colinmarc/hdfs/v2/hadoopconf"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rekeyhq/rekey/internal/digestmd5"
)

// ownDataNodeQops returns the DIGEST-MD5 qops, best first, of the DataNode
// handshake rekey runs itself, or nil to leave the handshake to the HDFS
// client. rekey runs it when the configured dfs.data.transfer.protection
// can settle on integrity: the client's integrity layer loses bytes at
// frame boundaries (saslGuard), while its privacy with AES and its plain
// authentication are correct. Like Hadoop's client, which takes the first
// qop of its own list that the DataNode offers, a list led by privacy is
// privacy, and so the client's; dfs.encrypt.data.transfer=true is privacy
// too. Privacy later in the list is not offered by rekey's handshake: a
// DataNode that offers only privacy then fails the handshake with a
// message naming both lists.
func ownDataNodeQops(conf hadoopconf.HadoopConf) []string {
	if strings.EqualFold(strings.TrimSpace(conf["dfs.encrypt.data.transfer"]), "true") {
		return nil
	}
	var qops []string
	integrity := false
	for _, v := range strings.Split(strings.ToLower(conf["dfs.data.transfer.protection"]), ",") {
		switch strings.TrimSpace(v) {
		case "privacy":
			if len(qops) == 0 {
				return nil
			}
		case "integrity":
			qops = append(qops, digestmd5.QopIntegrity)
			integrity = true
		case "authentication":
			qops = append(qops, digestmd5.QopAuth)
		}
	}
	if !integrity {
		return nil
	}
	return qops
}

// The SASL parameters of Hadoop's DataNode handshake
// (SaslDataTransferClient): service hdfs, server name 0.
const (
	dnSaslService = "hdfs"
	dnSaslHost    = "0"
)

// maxHandshakeMessage bounds one handshake message from a DataNode (a
// challenge is a few hundred bytes).
const maxHandshakeMessage = 64 << 10

// digestConn runs the DataNode SASL handshake itself, in place of the
// HDFS client, and then protects the connection with DIGEST-MD5
// integrity. The client, built without data transfer protection, writes
// its request (version, op code, the op with its block token) as its
// first write; the conn holds it, authenticates with the token as
// Hadoop's client does (user base64(identifier), password
// base64(password)), and sends the request and all that follows wrapped,
// unwrapping and checking everything the DataNode sends.
//
// A connection on which the client starts a handshake itself
// (dfs.encrypt.data.transfer from the NameNode's defaults) is left to it
// and watched by the guard.
type digestConn struct {
	net.Conn
	guard *saslGuard
	addr  string
	qops  []string

	mode    connMode
	request []byte
	r       io.Reader
	w       io.Writer
	err     error
}

// connMode is what a digestConn does with its traffic.
type connMode int

const (
	modeUndecided connMode = iota
	modeClient             // the HDFS client's own handshake, watched
	modeOwn                // rekey's handshake done: r and w carry the traffic
)

func (c *digestConn) Write(p []byte) (int, error) {
	switch {
	case c.err != nil:
		return 0, c.err
	case c.mode == modeClient:
		return c.guard.Write(p)
	case c.mode == modeOwn:
		return c.w.Write(p)
	}
	if len(c.request) == 0 && bytes.HasPrefix(p, saslMagic) {
		c.mode = modeClient
		return c.guard.Write(p)
	}
	if privilegedPort(c.Conn) {
		// Hadoop's client skips SASL with a DataNode on a root port
		// (it authenticated by binding it).
		c.mode, c.r, c.w = modeOwn, c.Conn, c.Conn
		return c.w.Write(p)
	}
	c.request = append(c.request, p...)
	id, password, complete, err := blockToken(c.request)
	if err == nil && complete {
		err = c.handshake(id, password)
	}
	if err != nil {
		c.err = fmt.Errorf("%w: DataNode %s: %v", ErrDataProtection, c.addr, err)
		return 0, c.err
	}
	if !complete {
		return len(p), nil
	}
	c.mode = modeOwn
	req := c.request
	c.request = nil
	if _, err := c.w.Write(req); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *digestConn) Read(p []byte) (int, error) {
	switch c.mode {
	case modeClient:
		return c.guard.Read(p)
	case modeOwn:
		n, err := c.r.Read(p)
		if errors.Is(err, digestmd5.ErrIntegrity) {
			err = fmt.Errorf("vfs: data from DataNode %s fails its integrity check (dfs.data.transfer.protection=integrity): %w", c.addr, err)
		}
		return n, err
	}
	return 0, fmt.Errorf("vfs: DataNode %s: read before the request was sent", c.addr)
}

// handshake authenticates with the block token (Hadoop's
// SaslDataTransferClient.doSaslHandshake, without cipher options) and
// sets r and w to the protected stream.
func (c *digestConn) handshake(id, password []byte) error {
	client := &digestmd5.Client{
		Username: base64.StdEncoding.EncodeToString(id),
		Password: base64.StdEncoding.EncodeToString(password),
		Service:  dnSaslService,
		Host:     dnSaslHost,
		Qops:     c.qops,
	}
	first := append(append([]byte{}, saslMagic...), saslMessage([]byte{})...)
	if _, err := c.Conn.Write(first); err != nil {
		return err
	}
	challenge, err := readSaslMessage(c.Conn)
	if err != nil {
		return fmt.Errorf("reading the SASL challenge: %w", err)
	}
	ch, err := digestmd5.ParseChallenge(challenge)
	if err != nil {
		return err
	}
	answer, session, err := client.Respond(ch)
	if err != nil {
		return fmt.Errorf("%w (dfs.data.transfer.protection on the DataNode and in %s differ)", err, confDir())
	}
	if _, err := c.Conn.Write(saslMessage(answer)); err != nil {
		return err
	}
	final, err := readSaslMessage(c.Conn)
	if err != nil {
		return fmt.Errorf("reading the SASL outcome: %w", err)
	}
	if err := session.Verify(final); err != nil {
		return err
	}
	if session.Qop == digestmd5.QopAuth {
		c.r, c.w = c.Conn, c.Conn
		return nil
	}
	in, err := session.Integrity()
	if err != nil {
		return err
	}
	c.r, c.w = digestmd5.NewReader(c.Conn, in), digestmd5.NewWriter(c.Conn, in)
	return nil
}

// privilegedPort reports whether c's remote port is below 1024.
func privilegedPort(c net.Conn) bool {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	return ok && a.Port < 1024
}

// blockToken finds the block token in a request: two bytes of version,
// the op code, then the op as a varint-delimited message. It reports
// whether the request is complete yet.
func blockToken(req []byte) (id, password []byte, complete bool, err error) {
	if len(req) < 4 {
		return nil, nil, false, nil
	}
	op := req[2]
	size, k := protowire.ConsumeVarint(req[3:])
	if k < 0 {
		if len(req) < 3+binary.MaxVarintLen64 {
			return nil, nil, false, nil
		}
		return nil, nil, false, fmt.Errorf("a request whose length does not parse")
	}
	if uint64(len(req)-3-k) < size {
		return nil, nil, false, nil
	}
	body := req[3+k : 3+k+int(size)]
	var base []byte
	switch op {
	case 0x50, 0x51: // write block, read block: ClientOperationHeaderProto, then BaseHeaderProto
		base = protoBytes(protoBytes(body, 1), 1)
	case 0x55: // block checksum: BaseHeaderProto
		base = protoBytes(body, 1)
	default:
		return nil, nil, false, fmt.Errorf("the HDFS client sent op 0x%02x, which rekey's SASL handshake does not know", op)
	}
	token := protoBytes(base, 2)
	if token == nil {
		return nil, nil, false, fmt.Errorf("the request carries no block token (dfs.block.access.token.enable off on the NameNode?), which the SASL handshake needs")
	}
	return protoBytes(token, 1), protoBytes(token, 2), true, nil
}

// saslMessage is a DataTransferEncryptorMessageProto with status SUCCESS
// and payload, varint-delimited.
func saslMessage(payload []byte) []byte {
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.VarintType)
	m = protowire.AppendVarint(m, 0)
	m = protowire.AppendTag(m, 2, protowire.BytesType)
	m = protowire.AppendBytes(m, payload)
	return protowire.AppendBytes(nil, m)
}

// readSaslMessage reads one varint-delimited
// DataTransferEncryptorMessageProto and returns its payload, or the
// DataNode's error (status 1 unknown key, 2 error; message in field 3,
// accessTokenError in field 6).
func readSaslMessage(r io.Reader) ([]byte, error) {
	size, err := readVarint(r)
	if err != nil {
		return nil, err
	}
	if size > maxHandshakeMessage {
		return nil, fmt.Errorf("a handshake message of %d bytes", size)
	}
	msg := make([]byte, size)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	status := protoVarint(msg, 1)
	if status != 0 {
		what := "an error"
		if protoVarint(msg, 6) != 0 {
			what = "an invalid or expired block token"
		}
		return nil, fmt.Errorf("the DataNode answers %s (status %d): %s", what, status, protoBytes(msg, 3))
	}
	return protoBytes(msg, 2), nil
}

// readVarint reads a varint a byte at a time, so nothing after it is
// consumed.
func readVarint(r io.Reader) (uint64, error) {
	var b [binary.MaxVarintLen64]byte
	for i := range b {
		if _, err := io.ReadFull(r, b[i:i+1]); err != nil {
			return 0, err
		}
		if b[i] < 0x80 {
			v, k := protowire.ConsumeVarint(b[:i+1])
			if k < 0 {
				return 0, fmt.Errorf("a malformed length")
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("a malformed length")
}

// protoVarint returns the first varint field num of msg, or 0.
func protoVarint(msg []byte, num protowire.Number) uint64 {
	for len(msg) > 0 {
		n, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return 0
		}
		msg = msg[k:]
		if n == num && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(msg)
			if m < 0 {
				return 0
			}
			return v
		}
		m := protowire.ConsumeFieldValue(n, typ, msg)
		if m < 0 {
			return 0
		}
		msg = msg[m:]
	}
	return 0
}
