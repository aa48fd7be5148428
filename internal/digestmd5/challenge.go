// Package digestmd5 is the client side of SASL DIGEST-MD5 (RFC 2831) as
// HDFS DataNodes speak it for data transfer protection: the challenge and
// response of the handshake, and the integrity layer (qop auth-int) that
// wraps every message after it.
//
// The integrity layer follows the JDK's implementation, which is what a
// DataNode runs: keys Kic and Kis from H(A1), a MAC of the first 10 bytes
// of HMAC-MD5 over the 4-byte sequence number and the message, then the
// 2-byte message type 1 and the sequence number. Unlike the JDK, which
// drops a message whose MAC does not match and reads on, Unwrap fails.
package digestmd5

import (
	"errors"
	"fmt"
	"strings"
)

// ErrChallenge is matched by the error of a challenge or server answer
// that cannot be parsed.
var ErrChallenge = errors.New("digestmd5: malformed server message")

// Challenge is a server's digest-challenge (RFC 2831 2.1.1): the fields a
// client needs to answer it.
type Challenge struct {
	Realms  []string // realm directives, in order
	Nonce   string
	Qops    []string // qop-options; auth when the server names none
	Charset string   // "utf-8" or ""
	Maxbuf  int      // the server's receive buffer; 65536 when absent
	Ciphers []string
}

// ParseChallenge parses a digest-challenge: comma-separated name=value
// directives, values optionally quoted with backslash escapes.
func ParseChallenge(b []byte) (*Challenge, error) {
	dirs, err := parseDirectives(string(b))
	if err != nil {
		return nil, err
	}
	c := &Challenge{Maxbuf: 65536}
	seenAlgorithm := false
	for _, d := range dirs {
		switch d.name {
		case "realm":
			c.Realms = append(c.Realms, d.value)
		case "nonce":
			if c.Nonce != "" {
				return nil, fmt.Errorf("%w: more than one nonce", ErrChallenge)
			}
			c.Nonce = d.value
		case "qop":
			c.Qops = append(c.Qops, splitList(d.value)...)
		case "charset":
			c.Charset = strings.ToLower(d.value)
		case "maxbuf":
			n, err := parseMaxbuf(d.value)
			if err != nil {
				return nil, err
			}
			c.Maxbuf = n
		case "cipher":
			c.Ciphers = append(c.Ciphers, splitList(d.value)...)
		case "algorithm":
			if !strings.EqualFold(d.value, "md5-sess") {
				return nil, fmt.Errorf("%w: algorithm %q, not md5-sess", ErrChallenge, d.value)
			}
			seenAlgorithm = true
		}
	}
	if c.Nonce == "" {
		return nil, fmt.Errorf("%w: no nonce", ErrChallenge)
	}
	if !seenAlgorithm {
		return nil, fmt.Errorf("%w: no algorithm=md5-sess", ErrChallenge)
	}
	if len(c.Qops) == 0 {
		c.Qops = []string{QopAuth}
	}
	return c, nil
}

// parseMaxbuf reads a maxbuf directive: a decimal number greater than 16
// (a wrapped message carries 16 bytes of MAC and numbering).
func parseMaxbuf(v string) (int, error) {
	n := 0
	for _, r := range v {
		if r < '0' || r > '9' || n > 1<<24 {
			return 0, fmt.Errorf("%w: maxbuf %q", ErrChallenge, v)
		}
		n = n*10 + int(r-'0')
	}
	if n <= overhead {
		return 0, fmt.Errorf("%w: maxbuf %q", ErrChallenge, v)
	}
	return n, nil
}

// directive is one name=value pair, the name lowercased.
type directive struct{ name, value string }

// parseDirectives splits s into its directives. Empty list elements
// (",,") are allowed, as RFC 2831's #rule says.
func parseDirectives(s string) ([]directive, error) {
	var out []directive
	for {
		s = strings.TrimLeft(s, " \t\r\n,")
		if s == "" {
			return out, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("%w: directive without a value at %q", ErrChallenge, s)
		}
		name := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = strings.TrimLeft(s[eq+1:], " \t")
		value, rest, err := parseValue(s)
		if err != nil {
			return nil, err
		}
		out = append(out, directive{name, value})
		s = strings.TrimLeft(rest, " \t\r\n")
		if s != "" && s[0] != ',' {
			return nil, fmt.Errorf("%w: expected a comma at %q", ErrChallenge, s)
		}
	}
}

// parseValue reads a token or a quoted string from the start of s and
// returns it and what follows.
func parseValue(s string) (value, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		end := strings.IndexAny(s, ", \t\r\n")
		if end < 0 {
			end = len(s)
		}
		return s[:end], s[end:], nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
			if i == len(s) {
				return "", "", fmt.Errorf("%w: unterminated quoted string", ErrChallenge)
			}
			b.WriteByte(s[i])
		case '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", fmt.Errorf("%w: unterminated quoted string", ErrChallenge)
}

// splitList splits a comma-separated list value into its trimmed,
// non-empty elements.
func splitList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// quote writes v as a quoted string, escaping quotes and backslashes.
func quote(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}
