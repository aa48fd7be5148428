package digestmd5

import (
	"crypto/hmac"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
)

// ErrIntegrity is matched by the error of a wrapped message that fails
// its integrity check: a MAC that does not match, a sequence number out
// of turn, a message too short to carry them.
var ErrIntegrity = errors.New("digestmd5: integrity check failed")

// overhead is what wrapping adds: a 10-byte MAC, the 2-byte message type
// and the 4-byte sequence number.
const overhead = 10 + 2 + 4

// The magic constants of RFC 2831 2.3 that derive the signing keys.
const (
	clientSignMagic = "Digest session key to client-to-server signing key magic constant"
	serverSignMagic = "Digest session key to server-to-client signing key magic constant"
)

// Integrity is the auth-int security layer of one session: Wrap signs
// outgoing messages and Unwrap checks incoming ones, each direction with
// its own key and sequence number. Wrap and Unwrap may run concurrently
// with each other (one writer, one reader), not with themselves.
type Integrity struct {
	send, recv       hash.Hash
	sendSeq, recvSeq uint32
	// SendMax is the largest message Wrap should be given: the peer's
	// maxbuf less the overhead.
	SendMax int
}

// newIntegrity derives the keys from H(A1): Kic signs what the client
// sends, Kis what the server sends.
func newIntegrity(hA1 [md5.Size]byte, client bool, peerMaxbuf int) *Integrity {
	kic := md5.Sum(append(hA1[:], clientSignMagic...))
	kis := md5.Sum(append(hA1[:], serverSignMagic...))
	if !client {
		kic, kis = kis, kic
	}
	return &Integrity{send: hmac.New(md5.New, kic[:]), recv: hmac.New(md5.New, kis[:]), SendMax: peerMaxbuf - overhead}
}

// Wrap returns msg followed by its MAC, the message type and the sequence
// number. An empty message wraps to nothing and uses no sequence number,
// as in the JDK.
func (in *Integrity) Wrap(msg []byte) []byte {
	if len(msg) == 0 {
		return nil
	}
	out := make([]byte, 0, len(msg)+overhead)
	out = append(out, msg...)
	var seq [4]byte
	binary.BigEndian.PutUint32(seq[:], in.sendSeq)
	in.sendSeq++
	out = append(out, mac(in.send, seq, msg)...)
	out = append(out, 0, 1)
	return append(out, seq[:]...)
}

// Unwrap checks a wrapped message and returns its payload, a sub-slice of
// tok. An empty token is an empty message.
func (in *Integrity) Unwrap(tok []byte) ([]byte, error) {
	if len(tok) == 0 {
		return nil, nil
	}
	if len(tok) < overhead {
		return nil, fmt.Errorf("%w: a wrapped message of %d bytes, shorter than its %d-byte trailer", ErrIntegrity, len(tok), overhead)
	}
	n := len(tok) - overhead
	msg, sum, typ, seq := tok[:n], tok[n:n+10], tok[n+10:n+12], [4]byte(tok[n+12:])
	if !hmac.Equal(sum, mac(in.recv, seq, msg)) {
		return nil, fmt.Errorf("%w: the MAC of message %d does not match its bytes (damaged or altered in transit)", ErrIntegrity, in.recvSeq)
	}
	if got := binary.BigEndian.Uint32(seq[:]); got != in.recvSeq {
		return nil, fmt.Errorf("%w: message numbered %d where %d was due (lost, repeated or reordered)", ErrIntegrity, got, in.recvSeq)
	}
	if typ[0] != 0 || typ[1] != 1 {
		return nil, fmt.Errorf("%w: message type %d, not 1", ErrIntegrity, binary.BigEndian.Uint16(typ))
	}
	in.recvSeq++
	return msg, nil
}

// SendLimit is SendMax.
func (in *Integrity) SendLimit() int { return in.SendMax }

// mac is HMAC-MD5(key, seq || msg), its first 10 bytes.
func mac(h hash.Hash, seq [4]byte, msg []byte) []byte {
	h.Reset()
	h.Write(seq[:])
	h.Write(msg)
	return h.Sum(nil)[:10]
}
