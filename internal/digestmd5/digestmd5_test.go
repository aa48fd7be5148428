package digestmd5

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestRFC2831Example answers the challenge of RFC 2831 4 (the IMAP
// example) and checks the response and rspauth the RFC prints.
func TestRFC2831Example(t *testing.T) {
	ch, err := ParseChallenge([]byte(`realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",qop="auth",algorithm=md5-sess,charset=utf-8`))
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Username: "chris", Password: "secret", Service: "imap", Host: "elwood.innosoft.com", Qops: []string{QopAuth}, Cnonce: "OA6MHXh6VqTrRk"}
	resp, s, err := c.Respond(ch)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseDirectives(string(resp))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"charset": "utf-8", "username": "chris", "realm": "elwood.innosoft.com", "nonce": "OA6MG9tEQGm2hh",
		"nc": "00000001", "cnonce": "OA6MHXh6VqTrRk", "digest-uri": "imap/elwood.innosoft.com",
		"response": "d388dad90d4bbd760a152321f2143af7", "qop": "auth",
	}
	for _, d := range got {
		if w, ok := want[d.name]; ok && w != d.value {
			t.Errorf("%s = %q, want %q", d.name, d.value, w)
		}
		delete(want, d.name)
	}
	if len(want) > 0 {
		t.Errorf("response %s lacks %v", resp, want)
	}
	if err := s.Verify([]byte("rspauth=ea40f60335c427b5527b84dbabcdfffd")); err != nil {
		t.Errorf("the RFC's rspauth: %v", err)
	}
	if err := s.Verify([]byte("rspauth=ea40f60335c427b5527b84dbabcdfffe")); err == nil {
		t.Error("a wrong rspauth passed")
	}
}

// TestChooseQop: the client's order decides among what the server offers,
// and no common qop is an error naming both lists.
func TestChooseQop(t *testing.T) {
	ch, err := ParseChallenge([]byte(`realm="0",nonce="n",qop="auth-conf,auth-int",algorithm=md5-sess`))
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Username: "u", Password: "p", Service: "hdfs", Host: "0", Qops: []string{QopIntegrity, QopAuth}}
	if _, s, err := c.Respond(ch); err != nil || s.Qop != QopIntegrity {
		t.Fatalf("qop %v, %v; want auth-int", s, err)
	}
	c.Qops = []string{QopAuth}
	if _, _, err := c.Respond(ch); err == nil || !strings.Contains(err.Error(), "auth-conf,auth-int") {
		t.Fatalf("no common qop: %v", err)
	}
}

// TestParseChallengeErrors: what a client cannot answer is an error.
func TestParseChallengeErrors(t *testing.T) {
	for _, c := range []string{
		`realm="0",qop="auth",algorithm=md5-sess`,            // no nonce
		`nonce="a",nonce="b",algorithm=md5-sess`,             // two nonces
		`nonce="a"`,                                          // no algorithm
		`nonce="a",algorithm=md5`,                            // not md5-sess
		`nonce="a,algorithm=md5-sess`,                        // unterminated
		`nonce="a",algorithm=md5-sess,maxbuf=12`,             // maxbuf too small
		`nonce="a",algorithm=md5-sess,maxbuf=99999999999999`, // maxbuf too large
		`nonce`, // no value
	} {
		if _, err := ParseChallenge([]byte(c)); !errors.Is(err, ErrChallenge) {
			t.Errorf("%s: %v, want ErrChallenge", c, err)
		}
	}
}

// testHA1 is the H(A1) of the layer tests' session.
var testHA1 = [md5.Size]byte([]byte("0123456789abcdef"))

// pair returns the client's and the server's integrity layers of one
// session.
func pair(t testing.TB) (client, server *Integrity) {
	return newIntegrity(testHA1, true, 65536), newIntegrity(testHA1, false, 65536)
}

// clientMAC is RFC 2831's MAC of the client's message number seq:
// HMAC-MD5(Kic, seq || msg)[:10], Kic = MD5(H(A1) || client signing
// magic); it returns seq's 4 bytes too.
func clientMAC(seq uint32, msg []byte) (mac []byte, seqb [4]byte) {
	kic := md5.Sum([]byte(string(testHA1[:]) + "Digest session key to client-to-server signing key magic constant"))
	binary.BigEndian.PutUint32(seqb[:], seq)
	h := hmac.New(md5.New, kic[:])
	h.Write(seqb[:])
	h.Write(msg)
	return h.Sum(nil)[:10], seqb
}

// TestIntegrityLayout checks a wrapped message against RFC 2831 2.3,
// written out here: msg, the MAC (clientMAC), 0x0001, seq.
func TestIntegrityLayout(t *testing.T) {
	client, server := pair(t)
	for seq := uint32(0); seq < 3; seq++ {
		msg := []byte("message " + string(rune('a'+seq)))
		tok := client.Wrap(msg)
		mac, seqb := clientMAC(seq, msg)
		want := append(append(append(append([]byte{}, msg...), mac...), 0, 1), seqb[:]...)
		if !bytes.Equal(tok, want) {
			t.Fatalf("seq %d: wrapped %x, want %x", seq, tok, want)
		}
		// The server checks with the same key, the peer's.
		got, err := server.Unwrap(tok)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("seq %d: server unwraps %q, %v", seq, got, err)
		}
	}
	if client.Wrap(nil) != nil {
		t.Error("an empty message wrapped to bytes")
	}
}

// TestUnwrapRejectsDamage: any flipped byte, a replayed or skipped
// message and a short one fail with ErrIntegrity and pass no bytes on.
func TestUnwrapRejectsDamage(t *testing.T) {
	msg := []byte("the payload of one message")
	for i := 0; i < len(msg)+overhead; i++ {
		client, server := pair(t)
		tok := server.Wrap(msg)
		tok[i] ^= 0x01
		if got, err := client.Unwrap(tok); !errors.Is(err, ErrIntegrity) || got != nil {
			t.Errorf("byte %d flipped: %q, %v", i, got, err)
		}
	}
	client, server := pair(t)
	first := server.Wrap(msg)
	second := server.Wrap(msg)
	if _, err := client.Unwrap(second); !errors.Is(err, ErrIntegrity) {
		t.Errorf("skipped message: %v", err)
	}
	if _, err := client.Unwrap(first); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Unwrap(first); !errors.Is(err, ErrIntegrity) {
		t.Errorf("replayed message: %v", err)
	}
	if _, err := client.Unwrap(make([]byte, overhead-1)); !errors.Is(err, ErrIntegrity) {
		t.Errorf("short message: %v", err)
	}
}

// stream returns the server's messages for payloads as a byte stream.
func stream(server *Integrity, payloads ...[]byte) []byte {
	var b bytes.Buffer
	w := NewWriter(&b, server)
	for _, p := range payloads {
		w.Write(p)
	}
	return b.Bytes()
}

// TestReaderAcrossMessages reads a stream of messages with reads that
// span message boundaries (the case the HDFS client gets wrong): every
// byte arrives, in order.
func TestReaderAcrossMessages(t *testing.T) {
	client, server := pair(t)
	server.SendMax = 7 // many small messages
	var want []byte
	for i := 0; i < 200; i++ {
		want = append(want, byte(i))
	}
	r := NewReader(bytes.NewReader(stream(server, want[:50], want[50:51], want[51:])), client)
	got, err := io.ReadAll(io.LimitReader(r, 1000))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(want))
	}
	fresh, _ := pair(t)
	buf := make([]byte, 10)
	if _, err := io.ReadFull(NewReader(bytes.NewReader(stream(server, want)), fresh), buf); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("a stream whose numbers continue another's: %v", err)
	}
}

// TestReaderDamage: a flipped byte anywhere in a stream, a cut stream or
// an absurd length fail the read; no damaged message's bytes come out.
func TestReaderDamage(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 5)
	_, server := pair(t)
	server.SendMax = 20
	good := stream(server, payload)
	for i := range good {
		client, _ := pair(t)
		bad := append([]byte{}, good...)
		bad[i] ^= 0x80
		got, err := io.ReadAll(NewReader(bytes.NewReader(bad), client))
		if err == nil {
			t.Fatalf("byte %d flipped: no error", i)
		}
		if !bytes.HasPrefix(payload, got) || len(got)%20 != 0 {
			t.Fatalf("byte %d flipped: passed on %q", i, got)
		}
	}
	client, _ := pair(t)
	if _, err := io.ReadAll(NewReader(bytes.NewReader(good[:len(good)-1]), client)); !errors.Is(err, ErrIntegrity) {
		t.Errorf("cut stream: %v", err)
	}
	client, _ = pair(t)
	if _, err := io.ReadAll(NewReader(bytes.NewReader([]byte{0x7f, 0, 0, 0}), client)); !errors.Is(err, ErrIntegrity) {
		t.Errorf("absurd length: %v", err)
	}
}

// FuzzReader feeds damaged copies of a valid stream to a Reader: it must
// never pass on a byte that is not the sender's, in order (a prefix of
// the payload), whatever the damage.
func FuzzReader(f *testing.F) {
	payload := []byte("rows, cells and checksums from a DataNode, cut into messages")
	_, server := pair(f)
	server.SendMax = 16
	f.Add(stream(server, payload))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 16, 1, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		client, _ := pair(t)
		got, _ := io.ReadAll(NewReader(bytes.NewReader(in), client))
		if !bytes.HasPrefix(payload, got) {
			t.Fatalf("passed on %q, not a prefix of the payload", got)
		}
	})
}

// FuzzParseChallenge: any challenge parses or fails without a panic, and
// one that parses can be answered or refused.
func FuzzParseChallenge(f *testing.F) {
	f.Add([]byte(`realm="0",nonce="x1y2",qop="auth-int",charset=utf-8,algorithm=md5-sess`))
	f.Add([]byte(`nonce="a\"b",qop="auth,auth-int,auth-conf",maxbuf=65536,cipher="rc4,3des",algorithm=md5-sess`))
	f.Fuzz(func(t *testing.T, in []byte) {
		ch, err := ParseChallenge(in)
		if err != nil {
			return
		}
		c := &Client{Username: "u", Password: "p", Service: "hdfs", Host: "0", Qops: []string{QopIntegrity}}
		if _, s, err := c.Respond(ch); err == nil && s.Qop != QopIntegrity {
			t.Fatalf("qop %s", s.Qop)
		}
	})
}
