package sasl

import (
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/crypto/etype"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/types"
)

// ErrBadToken is wrapped by every error about a wrap token that does not
// decode or verify: damaged, forged, or from a peer using another key.
var ErrBadToken = errors.New("sasl: bad wrap token")

// RFC 4121 section 4.2.6.2 wrap token layout and flags.
const (
	tokenHeaderLen     = 16
	flagFromAcceptor   = 0x01
	flagSealed         = 0x02
	flagAcceptorSubkey = 0x04
	// Key usages of RFC 4121 section 2: wrap tokens, sealed or not, use the
	// sender's SEAL usage.
	usageAcceptorSeal  = 22
	usageInitiatorSeal = 24
)

// Layer is the security layer of an established context: it wraps what
// this side sends and unwraps what the peer sends, with integrity only or
// with privacy (sealing). Wrap may be called by one goroutine at a time and
// Unwrap by one goroutine at a time; the two may run concurrently.
type Layer struct {
	et             etype.EType
	key            types.EncryptionKey
	initiator      bool // this side started the context
	acceptorSubkey bool // key is the acceptor's subkey (flag 0x04 on every token)
	seal           bool
	seq            atomic.Uint64 // next sequence number this side sends
	peerMax        int           // largest token the peer takes; 0: no limit
}

// aesOnly reports whether keyType is one of the AES types whose tokens RFC
// 4121 defines and this package implements.
func aesOnly(keyType int32) bool {
	switch keyType {
	case etypeID.AES128_CTS_HMAC_SHA1_96, etypeID.AES256_CTS_HMAC_SHA1_96,
		etypeID.AES128_CTS_HMAC_SHA256_128, etypeID.AES256_CTS_HMAC_SHA384_192:
		return true
	}
	return false
}

// newLayer returns the layer of one side of a context keyed by key.
func newLayer(key types.EncryptionKey, initiator, acceptorSubkey, seal bool, firstSeq uint64) (*Layer, error) {
	if !aesOnly(key.KeyType) {
		return nil, fmt.Errorf("sasl: the context key has encryption type %d; only AES types (17, 18, 19, 20) are supported", key.KeyType)
	}
	et, err := crypto.GetEtype(key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("sasl: encryption type %d: %v", key.KeyType, err)
	}
	l := &Layer{et: et, key: key, initiator: initiator, acceptorSubkey: acceptorSubkey, seal: seal}
	l.seq.Store(firstSeq)
	return l, nil
}

// Sealed reports whether the layer encrypts (privacy) rather than only
// checksums (integrity).
func (l *Layer) Sealed() bool { return l.seal }

// overhead is how many bytes a token adds to its payload.
func (l *Layer) overhead() int {
	if l.seal {
		// confounder, the encrypted copy of the header, the HMAC
		return tokenHeaderLen + l.et.GetConfounderByteSize() + tokenHeaderLen + l.et.GetHMACBitLength()/8
	}
	return tokenHeaderLen + l.et.GetHMACBitLength()/8
}

// MaxPayload returns the largest payload one token may carry so that the
// token fits the buffer the peer announced, or 0 when the peer set no limit.
func (l *Layer) MaxPayload() int {
	if l.peerMax == 0 {
		return 0
	}
	return l.peerMax - l.overhead()
}

// usages returns the key usage of the tokens this side sends and of those
// it receives.
func (l *Layer) usages() (send, recv uint32) {
	if l.initiator {
		return usageInitiatorSeal, usageAcceptorSeal
	}
	return usageAcceptorSeal, usageInitiatorSeal
}

// sendFlags returns the flags byte of the tokens this side sends.
func (l *Layer) sendFlags() byte {
	var f byte
	if !l.initiator {
		f |= flagFromAcceptor
	}
	if l.seal {
		f |= flagSealed
	}
	if l.acceptorSubkey {
		f |= flagAcceptorSubkey
	}
	return f
}

// header returns a token header.
func header(flags byte, ec, rrc uint16, seq uint64) []byte {
	h := make([]byte, tokenHeaderLen)
	h[0], h[1], h[2], h[3] = 0x05, 0x04, flags, 0xFF
	binary.BigEndian.PutUint16(h[4:], ec)
	binary.BigEndian.PutUint16(h[6:], rrc)
	binary.BigEndian.PutUint64(h[8:], seq)
	return h
}

// Wrap returns the wrap token carrying payload.
func (l *Layer) Wrap(payload []byte) ([]byte, error) {
	return l.wrap(payload, l.seal)
}

// wrap builds one token, sealed or not (the security-layer negotiation
// wraps without sealing whatever the chosen protection).
func (l *Layer) wrap(payload []byte, seal bool) ([]byte, error) {
	send, _ := l.usages()
	flags := l.sendFlags() &^ flagSealed
	seq := l.seq.Add(1) - 1
	if seal {
		flags |= flagSealed
		// EC (filler) is 0: AES-CTS needs no padding. The encrypted copy
		// of the header has RRC 0, like the one sent.
		h := header(flags, 0, 0, seq)
		plain := make([]byte, 0, len(payload)+tokenHeaderLen)
		plain = append(append(plain, payload...), h...)
		_, ct, err := l.et.EncryptMessage(l.key.KeyValue, plain, send)
		if err != nil {
			return nil, fmt.Errorf("sasl: sealing a %d-byte payload: %v", len(payload), err)
		}
		return append(h, ct...), nil
	}
	ec := uint16(l.et.GetHMACBitLength() / 8)
	sum, err := l.checksum(payload, flags, seq, send)
	if err != nil {
		return nil, err
	}
	tok := header(flags, ec, 0, seq)
	tok = append(tok, payload...)
	return append(tok, sum...), nil
}

// checksum is the RFC 4121 checksum of an unsealed token: over the payload
// then the header with EC and RRC zero.
func (l *Layer) checksum(payload []byte, flags byte, seq uint64, usage uint32) ([]byte, error) {
	data := make([]byte, 0, len(payload)+tokenHeaderLen)
	data = append(append(data, payload...), header(flags, 0, 0, seq)...)
	sum, err := l.et.GetChecksumHash(l.key.KeyValue, data, usage)
	if err != nil {
		return nil, fmt.Errorf("sasl: checksum: %v", err)
	}
	return sum[:l.et.GetHMACBitLength()/8], nil
}

// Unwrap checks one token from the peer and returns its payload. It
// accepts only tokens from the other side of the context, keyed as this
// side is, sealed exactly when the layer seals.
func (l *Layer) Unwrap(tok []byte) ([]byte, error) {
	return l.unwrap(tok, l.seal)
}

// unwrap is Unwrap with the expected sealing given.
func (l *Layer) unwrap(tok []byte, seal bool) ([]byte, error) {
	flags, ec, rrc, err := l.parseHeader(tok, seal)
	if err != nil {
		return nil, err
	}
	body := rotateLeft(tok[tokenHeaderLen:], int(rrc))
	_, recv := l.usages()
	if seal {
		return l.openSealed(tok[:tokenHeaderLen], body, ec, recv)
	}
	n := l.et.GetHMACBitLength() / 8
	if int(ec) != n || len(body) < n {
		return nil, fmt.Errorf("%w: checksum length %d in a %d-byte body, want %d", ErrBadToken, ec, len(body), n)
	}
	payload, got := body[:len(body)-n], body[len(body)-n:]
	want, err := l.checksum(payload, flags, binary.BigEndian.Uint64(tok[8:16]), recv)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal(got, want) {
		return nil, fmt.Errorf("%w: checksum does not verify", ErrBadToken)
	}
	return payload, nil
}

// parseHeader checks a token's fixed fields and returns flags, EC and RRC.
func (l *Layer) parseHeader(tok []byte, seal bool) (flags byte, ec, rrc uint16, err error) {
	if len(tok) < tokenHeaderLen {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrBadToken, len(tok), tokenHeaderLen)
	}
	if tok[0] != 0x05 || tok[1] != 0x04 {
		return 0, 0, 0, fmt.Errorf("%w: token id %#02x%02x, want 0x0504", ErrBadToken, tok[0], tok[1])
	}
	if tok[3] != 0xFF {
		return 0, 0, 0, fmt.Errorf("%w: filler byte %#02x, want 0xff", ErrBadToken, tok[3])
	}
	flags = tok[2]
	if flags&^(flagFromAcceptor|flagSealed|flagAcceptorSubkey) != 0 {
		return 0, 0, 0, fmt.Errorf("%w: unknown flags %#02x", ErrBadToken, flags)
	}
	if fromAcceptor := flags&flagFromAcceptor != 0; fromAcceptor != l.initiator {
		return 0, 0, 0, fmt.Errorf("%w: token comes from this side of the context (a reflected token)", ErrBadToken)
	}
	if sub := flags&flagAcceptorSubkey != 0; sub != l.acceptorSubkey {
		return 0, 0, 0, fmt.Errorf("%w: acceptor-subkey flag is %v, the context says %v", ErrBadToken, sub, l.acceptorSubkey)
	}
	if sealed := flags&flagSealed != 0; sealed != seal {
		if seal {
			return 0, 0, 0, fmt.Errorf("%w: token is not sealed, privacy was agreed", ErrBadToken)
		}
		return 0, 0, 0, fmt.Errorf("%w: token is sealed, only integrity was agreed", ErrBadToken)
	}
	return flags, binary.BigEndian.Uint16(tok[4:6]), binary.BigEndian.Uint16(tok[6:8]), nil
}

// openSealed decrypts a sealed token's body (already rotated back) and
// checks the encrypted copy of the header against the clear one.
func (l *Layer) openSealed(hdr, body []byte, ec uint16, usage uint32) ([]byte, error) {
	if len(body) < l.et.GetConfounderByteSize()+l.et.GetHMACBitLength()/8+tokenHeaderLen {
		return nil, fmt.Errorf("%w: sealed body of %d bytes is too short", ErrBadToken, len(body))
	}
	plain, err := l.et.DecryptMessage(l.key.KeyValue, body, usage)
	if err != nil {
		return nil, fmt.Errorf("%w: does not decrypt: %v", ErrBadToken, err)
	}
	if len(plain) < tokenHeaderLen+int(ec) {
		return nil, fmt.Errorf("%w: %d decrypted bytes cannot hold %d filler bytes and the header", ErrBadToken, len(plain), ec)
	}
	inner := plain[len(plain)-tokenHeaderLen:]
	want := append([]byte(nil), hdr...)
	want[6], want[7] = 0, 0 // the encrypted copy has RRC 0
	if !hmac.Equal(inner, want) {
		return nil, fmt.Errorf("%w: the encrypted header does not match the clear one", ErrBadToken)
	}
	return plain[:len(plain)-tokenHeaderLen-int(ec)], nil
}

// rotateLeft undoes the sender's right rotation of a token body by rrc
// bytes (RFC 4121 section 4.2.5): b itself when there is none (what Java
// sends), else a new slice.
func rotateLeft(b []byte, rrc int) []byte {
	if len(b) == 0 || rrc%len(b) == 0 {
		return b
	}
	out := make([]byte, len(b))
	r := rrc % len(b)
	copy(out, b[r:])
	copy(out[len(b)-r:], b[:r])
	return out
}
