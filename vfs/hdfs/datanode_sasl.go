package hdfs

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrDataProtection is matched by the error of a DataNode connection whose
// data transfer protection the HDFS client cannot read correctly.
var ErrDataProtection = errors.New("vfs: unsupported DataNode data transfer protection")

// saslMagic opens a client's SASL handshake on a DataNode connection.
var saslMagic = []byte{0xDE, 0xAD, 0xBE, 0xEF}

// saslGuard watches the DataNode's side of the SASL handshake that the
// HDFS client runs on this connection, and fails the connection before any
// data is read when the client would go on with a protection it reads
// wrongly: github.com/colinmarc/hdfs/v2 v2.4.0 returns too few bytes from
// a read that spans two DIGEST-MD5 integrity or privacy frames, so a block
// read through those loses bytes (a protobuf or checksum error at best).
// Its AES/CTR stream after the handshake (privacy with
// dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding) and plain
// authentication have no frames and read correctly.
//
// The client takes the first QOP the DataNode's challenge lists; the
// guard reads the same challenge, and for privacy the DataNode's answer,
// which names the AES cipher it agreed to.
//
// With Kerberos and a dfs.data.transfer.protection that asks for
// integrity or privacy, rekey runs the handshake itself (digestConn) and
// the client runs none; the guard then watches only the handshakes the
// client still runs: with dfs.encrypt.data.transfer=true (a data
// encryption key instead of the block token), or without Kerberos.
type saslGuard struct {
	net.Conn
	addr    string
	started bool // the client's first write has been seen
	watch   bool // a SASL handshake is under way
	seen    []byte
	msgs    int
	privacy bool
	err     error
}

func (g *saslGuard) Write(p []byte) (int, error) {
	if !g.started {
		g.started = true
		g.watch = bytes.HasPrefix(p, saslMagic)
	}
	return g.Conn.Write(p)
}

func (g *saslGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.Conn.Read(p)
	if g.watch && n > 0 {
		g.seen = append(g.seen, p[:n]...)
		if g.err = g.inspect(); g.err != nil {
			return 0, g.err
		}
	}
	return n, err
}

// inspect reads the DataNode's complete handshake messages seen so far and
// stops watching once the outcome is known.
func (g *saslGuard) inspect() error {
	for g.watch {
		size, k := protowire.ConsumeVarint(g.seen)
		if k < 0 || uint64(len(g.seen)-k) < size {
			return nil // the message is not complete yet
		}
		msg := g.seen[k : k+int(size)]
		g.seen = g.seen[k+int(size):]
		g.msgs++
		if err := g.message(msg); err != nil {
			return err
		}
	}
	g.seen = nil
	return nil
}

// message judges one DataTransferEncryptorMessageProto from the DataNode:
// the first carries the DIGEST-MD5 challenge (field 2), the second the
// negotiated ciphers (field 4) when privacy uses AES.
func (g *saslGuard) message(msg []byte) error {
	switch g.msgs {
	case 1:
		qop := firstQop(string(protoBytes(msg, 2)))
		switch qop {
		case "auth-int":
			g.watch = false
			return fmt.Errorf("%w: the DataNode %s protects data transfer with integrity (dfs.data.transfer.protection=integrity), "+
				"which the HDFS client rekey uses (github.com/colinmarc/hdfs/v2 v2.4.0) reads wrongly (it drops bytes at SASL frame boundaries); "+
				"configure the cluster for privacy with dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding, or authentication, or read a local export of the snapshot",
				ErrDataProtection, g.addr)
		case "auth-conf":
			g.privacy = true
		default:
			g.watch = false
		}
	case 2:
		g.watch = false
		if g.privacy && protoBytes(msg, 4) == nil {
			return fmt.Errorf("%w: the DataNode %s encrypts data transfer with DIGEST-MD5's own ciphers (privacy without an AES cipher suite), "+
				"which the HDFS client rekey uses (github.com/colinmarc/hdfs/v2 v2.4.0) reads wrongly; "+
				"set dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding on the cluster, or read a local export of the snapshot",
				ErrDataProtection, g.addr)
		}
	}
	return nil
}

// protoBytes returns the first length-delimited field num of msg, or nil.
func protoBytes(msg []byte, num protowire.Number) []byte {
	v, k := protowire.ConsumeBytes(protoField(msg, num, protowire.BytesType))
	if k < 0 {
		return nil
	}
	return v
}

// protoVarint returns the first varint field num of msg, or 0.
func protoVarint(msg []byte, num protowire.Number) uint64 {
	v, k := protowire.ConsumeVarint(protoField(msg, num, protowire.VarintType))
	if k < 0 {
		return 0
	}
	return v
}

// protoField returns msg from the value of its first field num of type
// typ on, or nil when it has none (or does not parse before it).
func protoField(msg []byte, num protowire.Number, typ protowire.Type) []byte {
	for len(msg) > 0 {
		n, t, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return nil
		}
		msg = msg[k:]
		if n == num && t == typ {
			return msg
		}
		m := protowire.ConsumeFieldValue(n, t, msg)
		if m < 0 {
			return nil
		}
		msg = msg[m:]
	}
	return nil
}

// firstQop returns the first entry of a DIGEST-MD5 challenge's qop list
// (qop="auth-int,auth-conf"), or "" without one.
func firstQop(challenge string) string {
	_, rest, found := strings.Cut(challenge, `qop="`)
	if !found {
		return ""
	}
	list, _, _ := strings.Cut(rest, `"`)
	first, _, _ := strings.Cut(list, ",")
	return strings.TrimSpace(first)
}
