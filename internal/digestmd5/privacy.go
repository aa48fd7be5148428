package digestmd5

import (
	"crypto/md5"
	"crypto/rc4"
	"fmt"
)

// Layer is a session's security layer: it protects each message sent and
// checks each one received.
type Layer interface {
	// Wrap protects one message; an empty one wraps to nothing.
	Wrap(msg []byte) []byte
	// Unwrap checks one message and returns its payload.
	Unwrap(tok []byte) ([]byte, error)
	// SendLimit is the largest message Wrap should be given (0: any).
	SendLimit() int
}

// CipherRC4 is the one DIGEST-MD5 privacy cipher this package speaks:
// RC4 with a 128-bit key (RFC 2831's "rc4").
const CipherRC4 = "rc4"

// The magic constants of RFC 2831 2.4 that derive the sealing keys.
const (
	clientSealMagic = "Digest H(A1) to client-to-server sealing key magic constant"
	serverSealMagic = "Digest H(A1) to server-to-client sealing key magic constant"
)

// Privacy is the auth-conf security layer with the rc4 cipher: a message
// is RC4(msg || MAC) followed by the message type and the sequence
// number, the MAC being the integrity layer's, and the RC4 stream running
// on across messages. Like Integrity, Wrap and Unwrap may run
// concurrently with each other.
type Privacy struct {
	mac      *Integrity // keys, sequence numbers and send limit
	enc, dec *rc4.Cipher
}

// newPrivacy derives Kcc and Kcs from all 16 bytes of H(A1) (rc4's n) and
// keys RC4 with them, the client encrypting with Kcc.
func newPrivacy(hA1 [md5.Size]byte, client bool, peerMaxbuf int) *Privacy {
	kcc := md5.Sum(append(hA1[:], clientSealMagic...))
	kcs := md5.Sum(append(hA1[:], serverSealMagic...))
	if !client {
		kcc, kcs = kcs, kcc
	}
	enc, _ := rc4.NewCipher(kcc[:]) // a 16-byte key is always valid
	dec, _ := rc4.NewCipher(kcs[:])
	return &Privacy{mac: newIntegrity(hA1, client, peerMaxbuf), enc: enc, dec: dec}
}

// SendLimit is the peer's maxbuf less the overhead.
func (p *Privacy) SendLimit() int { return p.mac.SendMax }

// Wrap encrypts msg and its MAC and appends the type and number.
func (p *Privacy) Wrap(msg []byte) []byte {
	if len(msg) == 0 {
		return nil
	}
	tok := p.mac.Wrap(msg) // msg, MAC, type, number
	n := len(msg) + 10
	p.enc.XORKeyStream(tok[:n], tok[:n])
	return tok
}

// Unwrap decrypts tok in place, checks its MAC and number, and returns
// the message, a sub-slice of tok.
func (p *Privacy) Unwrap(tok []byte) ([]byte, error) {
	if len(tok) == 0 {
		return nil, nil
	}
	if len(tok) < overhead {
		return nil, fmt.Errorf("%w: a sealed message of %d bytes, shorter than its %d bytes of MAC and trailer", ErrIntegrity, len(tok), overhead)
	}
	n := len(tok) - 6
	p.dec.XORKeyStream(tok[:n], tok[:n])
	// Decrypted, tok is laid out as the integrity layer's message.
	return p.mac.Unwrap(tok)
}

// ErrLayer is a Layer as the other SASL layers rekey holds beside it
// (internal/sasl's GSSAPI layer) are used: a Wrap that may fail, and
// MaxPayload for the most one Wrap takes (0: any).
type ErrLayer struct{ Layer }

// Wrap protects one message; it never fails.
func (e ErrLayer) Wrap(msg []byte) ([]byte, error) { return e.Layer.Wrap(msg), nil }

// MaxPayload is the Layer's SendLimit.
func (e ErrLayer) MaxPayload() int { return e.Layer.SendLimit() }
