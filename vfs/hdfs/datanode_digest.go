package hdfs

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
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
// client. rekey runs it whenever the configured
// dfs.data.transfer.protection asks for integrity or privacy: the
// client's DIGEST-MD5 layers lose bytes at frame boundaries (saslGuard),
// and which layer a handshake ends in is the DataNode's choice too, so
// the handshake is rekey's whenever one of them can come out of it. Its
// qops are the list's, in the list's order: like Hadoop's client, rekey
// takes the first of them that the DataNode offers. With
// dfs.encrypt.data.transfer=true the handshake authenticates with a data
// encryption key, not the block token, and stays the client's.
func ownDataNodeQops(conf hadoopconf.HadoopConf) []string {
	if strings.EqualFold(strings.TrimSpace(conf["dfs.encrypt.data.transfer"]), "true") {
		return nil
	}
	var qops []string
	layered := false
	for _, v := range strings.Split(strings.ToLower(conf["dfs.data.transfer.protection"]), ",") {
		switch strings.TrimSpace(v) {
		case "privacy":
			qops = append(qops, digestmd5.QopPrivacy)
			layered = true
		case "integrity":
			qops = append(qops, digestmd5.QopIntegrity)
			layered = true
		case "authentication":
			qops = append(qops, digestmd5.QopAuth)
		}
	}
	if !layered {
		return nil
	}
	return qops
}

// wantAES reports whether the client asks the DataNode to encrypt with
// AES/CTR after a privacy handshake: as in Hadoop's client, when
// dfs.encrypt.data.transfer.cipher.suites says AES/CTR/NoPadding.
// Without it, or when the DataNode does not agree, the handshake's own
// rc4 layer encrypts.
func wantAES(conf hadoopconf.HadoopConf) bool {
	return strings.TrimSpace(conf["dfs.encrypt.data.transfer.cipher.suites"]) == "AES/CTR/NoPadding"
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
// integrity or privacy (rc4, or AES/CTR when both sides ask for it). The client, built without data transfer protection, writes
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
	aes   bool   // ask for AES/CTR after a privacy handshake
	qop   string // the handshake's outcome

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
		c.err = fmt.Errorf("vfs: SASL handshake with DataNode %s (dfs.data.transfer.protection): %w", c.addr, err)
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
			err = fmt.Errorf("vfs: data from DataNode %s fails its integrity check (SASL qop %s): %w", c.addr, c.qop, err)
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
	first := append(append([]byte{}, saslMagic...), saslMessage([]byte{}, nil)...)
	if _, err := c.Conn.Write(first); err != nil {
		return err
	}
	challenge, err := readSaslMessage(c.Conn)
	if err != nil {
		return fmt.Errorf("reading the SASL challenge: %w", err)
	}
	ch, err := digestmd5.ParseChallenge(protoBytes(challenge, 2))
	if err != nil {
		return err
	}
	answer, session, err := client.Respond(ch)
	if err != nil {
		return fmt.Errorf("%w (dfs.data.transfer.protection on the DataNode and in %s differ)", err, confDir())
	}
	var cipher []byte
	if session.Qop == digestmd5.QopPrivacy && c.aes {
		cipher = protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), cipherAES)
	}
	if _, err := c.Conn.Write(saslMessage(answer, cipher)); err != nil {
		return err
	}
	final, err := readSaslMessage(c.Conn)
	if err != nil {
		return fmt.Errorf("reading the SASL outcome: %w", err)
	}
	if err := session.Verify(protoBytes(final, 2)); err != nil {
		return err
	}
	c.qop = session.Qop
	if session.Qop == digestmd5.QopAuth {
		c.r, c.w = c.Conn, c.Conn
		return nil
	}
	layer, err := session.Layer()
	if err != nil {
		return err
	}
	if option := protoBytes(final, 4); session.Qop == digestmd5.QopPrivacy && option != nil {
		return c.useAES(option, layer)
	}
	c.r, c.w = digestmd5.NewReader(c.Conn, layer), digestmd5.NewWriter(c.Conn, layer)
	return nil
}

// cipherAES is CipherSuiteProto AES_CTR_NOPADDING.
const cipherAES = 2

// useAES sets r and w to the AES/CTR streams of the CipherOptionProto the
// DataNode agreed to (suite 1, inKey 2, inIv 3, outKey 4, outIv 5), its
// keys sealed by the handshake's layer, inKey first (Hadoop's
// DataTransferSaslUtil.wrap): the client encrypts with inKey and inIv
// and decrypts with outKey and outIv.
func (c *digestConn) useAES(option []byte, layer digestmd5.Layer) error {
	if suite := protoVarint(option, 1); suite != cipherAES {
		return fmt.Errorf("the DataNode chose cipher suite %d, not AES/CTR/NoPadding", suite)
	}
	inKey, err := layer.Unwrap(append([]byte{}, protoBytes(option, 2)...))
	if err != nil {
		return fmt.Errorf("unsealing the AES key: %w", err)
	}
	inKey = append([]byte{}, inKey...)
	outKey, err := layer.Unwrap(append([]byte{}, protoBytes(option, 4)...))
	if err != nil {
		return fmt.Errorf("unsealing the AES key: %w", err)
	}
	enc, err := aesCTR(inKey, protoBytes(option, 3))
	if err != nil {
		return err
	}
	dec, err := aesCTR(outKey, protoBytes(option, 5))
	if err != nil {
		return err
	}
	c.r = cipher.StreamReader{S: dec, R: c.Conn}
	c.w = cipher.StreamWriter{S: enc, W: c.Conn}
	return nil
}

// aesCTR is AES in counter mode from key and iv.
func aesCTR(key, iv []byte) (cipher.Stream, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("the DataNode's AES key: %w", err)
	}
	if len(iv) != aes.BlockSize {
		return nil, fmt.Errorf("the DataNode's AES IV has %d bytes, not %d", len(iv), aes.BlockSize)
	}
	return cipher.NewCTR(b, iv), nil
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

// saslMessage is a DataTransferEncryptorMessageProto with status SUCCESS,
// payload and, when set, one cipher option, varint-delimited.
func saslMessage(payload, cipherOption []byte) []byte {
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.VarintType)
	m = protowire.AppendVarint(m, 0)
	m = protowire.AppendTag(m, 2, protowire.BytesType)
	m = protowire.AppendBytes(m, payload)
	if cipherOption != nil {
		m = protowire.AppendTag(m, 4, protowire.BytesType)
		m = protowire.AppendBytes(m, cipherOption)
	}
	return protowire.AppendBytes(nil, m)
}

// readSaslMessage reads one varint-delimited
// DataTransferEncryptorMessageProto (payload in field 2, cipher option
// in 4), or returns the DataNode's error (status 1 unknown key, 2 error;
// message in field 3, accessTokenError in field 6).
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
	return msg, nil
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
