package hadooprpc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The testdata packets are a secure Hadoop 3.4 NameNode's (the testenv
// cluster's, principal user/localhost) answers, as they came off the wire
// after the int32 length: to a SASL NEGOTIATE (negotiate.bin), and to a
// client that offered no SASL (simple-refused.bin).
func packet(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeNegotiate: the NameNode's NEGOTIATE answer decodes to its two
// offers, TOKEN/DIGEST-MD5 with a challenge and KERBEROS/GSSAPI as
// user/localhost, and pickKerberos takes the latter for that principal.
func TestDecodeNegotiate(t *testing.T) {
	h, body, err := splitResponse(packet(t, "negotiate.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if h.callID != saslCallID || h.status != statusSuccess {
		t.Fatalf("header: call id %d, status %d; want %d, %d", h.callID, h.status, saslCallID, statusSuccess)
	}
	mb, rest, err := nextDelimited(body)
	if err != nil || len(rest) != 0 {
		t.Fatalf("body: %v, %d bytes after", err, len(rest))
	}
	m, err := decodeSasl(mb)
	if err != nil {
		t.Fatal(err)
	}
	if m.state != saslNegotiate || len(m.auths) != 2 {
		t.Fatalf("state %d, %d auths; want NEGOTIATE, 2", m.state, len(m.auths))
	}
	tok, krb := m.auths[0], m.auths[1]
	if tok.method != "TOKEN" || tok.mechanism != "DIGEST-MD5" || !bytes.Contains(tok.challenge, []byte("nonce=")) {
		t.Errorf("first auth %s/%s, challenge %q", tok.method, tok.mechanism, tok.challenge)
	}
	if krb.method != "KERBEROS" || krb.mechanism != "GSSAPI" || krb.protocol != "user" || krb.serverID != "localhost" {
		t.Errorf("second auth %+v", krb)
	}
	got, err := pickKerberos(m.auths, "user/localhost")
	if err != nil || got.serverID != "localhost" {
		t.Fatalf("pickKerberos = %+v, %v", got, err)
	}
	if _, err := pickKerberos(m.auths, "nn/namenode.example.com"); err == nil || !strings.Contains(err.Error(), "user/localhost") || !strings.Contains(err.Error(), "nn/namenode.example.com") {
		t.Errorf("another principal: %v", err)
	}
	if _, err := pickKerberos(m.auths[:1], "user/localhost"); err == nil || !strings.Contains(err.Error(), "offered: TOKEN") {
		t.Errorf("no Kerberos offer: %v", err)
	}
}

// TestDecodeSimpleRefused: the fatal answer to a client without SASL
// decodes to its exception class and message.
func TestDecodeSimpleRefused(t *testing.T) {
	h, _, err := splitResponse(packet(t, "simple-refused.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if h.status != statusFatal || h.class != "org.apache.hadoop.security.AccessControlException" || !strings.Contains(h.msg, "SIMPLE authentication is not enabled") {
		t.Fatalf("header %+v", h)
	}
	// A WRAP reader meeting it instead of a WRAP message says so.
	_, err = unwrapPacket(nil, packet(t, "simple-refused.bin"))
	var re *RemoteError
	if !errors.As(err, &re) || !re.Fatal || re.Class != h.class {
		t.Fatalf("unwrapPacket = %v", err)
	}
}

// TestSaslMessageRoundTrip: what encode writes decodes to the same state,
// token and auths, without the challenge (never sent back).
func TestSaslMessageRoundTrip(t *testing.T) {
	in := saslMessage{state: saslInitiate, token: []byte{1, 2, 3}, hasToken: true,
		auths: []saslAuth{{method: "KERBEROS", mechanism: "GSSAPI", protocol: "nn", serverID: "host", challenge: []byte("x")}}}
	out, err := decodeSasl(in.encode())
	if err != nil {
		t.Fatal(err)
	}
	if out.state != in.state || !bytes.Equal(out.token, in.token) || len(out.auths) != 1 || out.auths[0].serverID != "host" || out.auths[0].challenge != nil {
		t.Fatalf("round trip %+v", out)
	}
	// An empty token is still sent (the GSSAPI step after the AP-REP).
	empty := saslMessage{state: saslResponse, token: []byte{}, hasToken: true}
	if out, err := decodeSasl(empty.encode()); err != nil || !out.hasToken || len(out.token) != 0 {
		t.Fatalf("empty token: %+v, %v", out, err)
	}
}

// TestTokenNeverPrintsSecrets: String, %v, %+v and %#v of a token name
// its kind and service, never its identifier or password.
func TestTokenNeverPrintsSecrets(t *testing.T) {
	tok := &Token{Identifier: []byte("IDENTSECRET"), Password: []byte("PASSSECRET"), Kind: HDFSTokenKind, Service: "127.0.0.1:8020"}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		s := fmt.Sprintf(f, tok)
		// Exactly String's words: no verb shows the fields in any form.
		if s != tok.String() || strings.Contains(s, "SECRET") || !strings.Contains(s, "127.0.0.1:8020") {
			t.Errorf("%s: %s", f, s)
		}
	}
	back, err := decodeToken(tok.EncodeProto())
	if err != nil || !bytes.Equal(back.Password, tok.Password) || back.Service != tok.Service {
		t.Fatalf("round trip: %v", err)
	}
}

// TestDecodeTokenResponse: a response without a token, or a token
// without its password, is an error, never a token with holes.
func TestDecodeTokenResponse(t *testing.T) {
	if _, err := decodeTokenResponse(nil); err == nil || !strings.Contains(err.Error(), "no delegation token") {
		t.Errorf("empty response: %v", err)
	}
	partial := appendString(nil, 3, HDFSTokenKind)
	resp := appendDelimitedField(1, partial)
	if _, err := decodeTokenResponse(resp); !errors.Is(err, ErrMalformed) {
		t.Errorf("token without identifier and password: %v", err)
	}
}

// appendDelimitedField is a length-delimited field num holding msg.
func appendDelimitedField(num int, msg []byte) []byte {
	return append([]byte{byte(num<<3 | 2)}, appendDelimited(nil, msg)...)
}

// FuzzDecoders: no input makes the response decoders panic, and every
// error they return about a bad message wraps ErrMalformed (or is the
// server's own RemoteError).
func FuzzDecoders(f *testing.F) {
	f.Add(packet(f, "negotiate.bin"))
	f.Add(packet(f, "simple-refused.bin"))
	f.Add((&Token{Identifier: []byte{1}, Password: []byte{2}, Kind: "k", Service: "s"}).EncodeProto())
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, body, err := splitResponse(b); err == nil {
			if mb, _, err := nextDelimited(body); err == nil {
				if _, err := decodeSasl(mb); err != nil && !errors.Is(err, ErrMalformed) {
					t.Fatalf("decodeSasl: %v", err)
				}
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("splitResponse: %v", err)
		}
		if _, err := decodeToken(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("decodeToken: %v", err)
		}
		if _, err := decodeTokenResponse(b); err != nil && !errors.Is(err, ErrMalformed) && !strings.Contains(err.Error(), "no delegation token") {
			t.Fatalf("decodeTokenResponse: %v", err)
		}
	})
}

// TestDecodeRenewResponse: the new expiry is field 1 in milliseconds; a
// response without it is an error, never the zero time.
func TestDecodeRenewResponse(t *testing.T) {
	want := time.UnixMilli(1_796_700_000_123)
	resp := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(want.UnixMilli()))
	if got, err := decodeRenewResponse(resp); err != nil || !got.Equal(want) {
		t.Errorf("decodeRenewResponse = %v, %v; want %v", got, err, want)
	}
	if _, err := decodeRenewResponse(nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("empty response: %v, want ErrMalformed", err)
	}
}
