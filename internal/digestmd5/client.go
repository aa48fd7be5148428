package digestmd5

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// The qop values of RFC 2831.
const (
	QopAuth      = "auth"      // authentication only
	QopIntegrity = "auth-int"  // authentication and integrity
	QopPrivacy   = "auth-conf" // authentication, integrity and encryption
)

// Client holds what a client answers a challenge with.
type Client struct {
	Username string // the authentication id
	Password string
	Service  string // the serv-type of digest-uri ("hdfs")
	Host     string // the host of digest-uri ("0" for DataNodes)
	// Qops lists the qop values the client accepts, best first; the
	// answer takes the first of them the server offers, as the JDK's
	// client does.
	Qops []string
	// Cnonce, when set, is the client nonce (tests); otherwise each
	// answer draws a random one.
	Cnonce string
}

// Session is a handshake after the client's answer: the chosen qop and
// what the server's final message must prove.
type Session struct {
	Qop     string
	Cipher  string // with qop auth-conf: the cipher, rc4
	hA1     [md5.Size]byte
	rspauth string
	maxbuf  int
}

// Respond answers a challenge (RFC 2831 2.1.2) and returns the answer and
// the session it starts. It fails when the server offers none of the
// client's qops.
func (c *Client) Respond(ch *Challenge) ([]byte, *Session, error) {
	qop := chooseQop(c.Qops, ch.Qops)
	if qop == "" {
		return nil, nil, fmt.Errorf("digestmd5: the server offers qop %s, the client accepts only %s",
			strings.Join(ch.Qops, ","), strings.Join(c.Qops, ","))
	}
	cnonce := c.Cnonce
	if cnonce == "" {
		var err error
		if cnonce, err = randomNonce(); err != nil {
			return nil, nil, err
		}
	}
	realm := ""
	if len(ch.Realms) > 0 {
		realm = ch.Realms[0]
	}
	uri := c.Service + "/" + c.Host
	s := &Session{Qop: qop, maxbuf: ch.Maxbuf}
	if qop == QopPrivacy {
		if chooseQop([]string{CipherRC4}, ch.Ciphers) == "" {
			return nil, nil, fmt.Errorf("digestmd5: the server offers the ciphers %q for privacy; only %s is spoken here", strings.Join(ch.Ciphers, ","), CipherRC4)
		}
		s.Cipher = CipherRC4
	}
	s.hA1 = md5.Sum([]byte(a1(c.Username, realm, c.Password, ch.Nonce, cnonce)))
	const nc = "00000001"
	response := digest(s.hA1, ch.Nonce, nc, cnonce, qop, "AUTHENTICATE:"+uri)
	s.rspauth = digest(s.hA1, ch.Nonce, nc, cnonce, qop, ":"+uri)

	var b strings.Builder
	if ch.Charset == "utf-8" {
		b.WriteString("charset=utf-8,")
	}
	fmt.Fprintf(&b, "username=%s,", quote(c.Username))
	if len(ch.Realms) > 0 {
		fmt.Fprintf(&b, "realm=%s,", quote(realm))
	}
	fmt.Fprintf(&b, "nonce=%s,nc=%s,cnonce=%s,digest-uri=%s,maxbuf=%d,response=%s,qop=%s",
		quote(ch.Nonce), nc, quote(cnonce), quote(uri), ReceiveMax, response, qop)
	if s.Cipher != "" {
		b.WriteString(",cipher=" + s.Cipher)
	}
	return []byte(b.String()), s, nil
}

// ReceiveMax is the maxbuf a client announces: the largest wrapped
// message it accepts. A DataNode does not cut its messages to it, so the
// reader takes larger ones too (up to MaxFrame).
const ReceiveMax = 65536

// Verify checks the server's final message, rspauth=..., which proves
// the server knows the password too.
func (s *Session) Verify(final []byte) error {
	dirs, err := parseDirectives(string(final))
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if d.name == "rspauth" {
			if d.value != s.rspauth {
				return fmt.Errorf("digestmd5: the server's rspauth does not match: it does not know the password (a forged or stale server)")
			}
			return nil
		}
	}
	return fmt.Errorf("%w: no rspauth in the server's final message", ErrChallenge)
}

// Layer returns the security layer of a session whose qop is auth-int
// or auth-conf, as the client's side.
func (s *Session) Layer() (Layer, error) {
	switch s.Qop {
	case QopIntegrity:
		return newIntegrity(s.hA1, true, s.maxbuf), nil
	case QopPrivacy:
		return newPrivacy(s.hA1, true, s.maxbuf), nil
	}
	return nil, fmt.Errorf("digestmd5: the session's qop %s has no security layer", s.Qop)
}

// chooseQop returns the first of want that offered lists, or "".
func chooseQop(want, offered []string) string {
	for _, w := range want {
		for _, o := range offered {
			if strings.EqualFold(w, o) {
				return w
			}
		}
	}
	return ""
}

// a1 is RFC 2831's A1 without an authzid: H(username:realm:password),
// then :nonce:cnonce.
func a1(username, realm, password, nonce, cnonce string) string {
	h := md5.Sum([]byte(username + ":" + realm + ":" + password))
	return string(h[:]) + ":" + nonce + ":" + cnonce
}

// digest is the response-value of RFC 2831 2.1.2.1 for a2 (the client's
// response when a2 starts "AUTHENTICATE:", the server's rspauth when it
// starts ":"); qop auth-int and auth-conf add a zero entity-body hash.
func digest(hA1 [md5.Size]byte, nonce, nc, cnonce, qop, a2 string) string {
	if qop != QopAuth {
		a2 += ":00000000000000000000000000000000"
	}
	hA2 := md5.Sum([]byte(a2))
	kd := md5.Sum([]byte(hex.EncodeToString(hA1[:]) + ":" + nonce + ":" + nc + ":" + cnonce + ":" + qop + ":" + hex.EncodeToString(hA2[:])))
	return hex.EncodeToString(kd[:])
}

// randomNonce draws a client nonce of 128 random bits.
func randomNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("digestmd5: drawing a client nonce: %w", err)
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}
