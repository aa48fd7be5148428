package digestmd5

import (
	"bytes"
	"crypto/md5"
	"crypto/rc4"
	"errors"
	"io"
	"testing"
)

// privacyPair returns the client's and the server's privacy layers of
// one session.
func privacyPair(t testing.TB) (client, server *Privacy) {
	return newPrivacy(testHA1, true, 65536), newPrivacy(testHA1, false, 65536)
}

// TestPrivacyLayout checks sealed messages against RFC 2831 2.4 with the
// rc4 cipher, written out here: RC4(Kcc, msg || MAC) with one RC4 stream
// across messages, then 0x0001 and seq; Kcc = MD5(H(A1) || client
// sealing magic), the MAC the integrity layer's (clientMAC).
func TestPrivacyLayout(t *testing.T) {
	client, server := privacyPair(t)
	kcc := md5.Sum([]byte(string(testHA1[:]) + "Digest H(A1) to client-to-server sealing key magic constant"))
	stream, err := rc4.NewCipher(kcc[:])
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint32(0); seq < 3; seq++ {
		msg := bytes.Repeat([]byte{byte('a' + seq)}, 5+int(seq))
		tok := client.Wrap(msg)
		mac, seqb := clientMAC(seq, msg)
		plain := append(append([]byte{}, msg...), mac...)
		sealed := make([]byte, len(plain))
		stream.XORKeyStream(sealed, plain)
		want := append(append(sealed, 0, 1), seqb[:]...)
		if !bytes.Equal(tok, want) {
			t.Fatalf("seq %d: sealed %x, want %x", seq, tok, want)
		}
		got, err := server.Unwrap(tok)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("seq %d: server unseals %q, %v", seq, got, err)
		}
	}
}

// TestPrivacyRejectsDamage: any flipped byte of a sealed message fails
// with ErrIntegrity and no bytes.
func TestPrivacyRejectsDamage(t *testing.T) {
	msg := []byte("a sealed payload")
	for i := 0; i < len(msg)+overhead; i++ {
		client, server := privacyPair(t)
		tok := server.Wrap(msg)
		tok[i] ^= 0x01
		if got, err := client.Unwrap(tok); !errors.Is(err, ErrIntegrity) || got != nil {
			t.Errorf("byte %d flipped: %q, %v", i, got, err)
		}
	}
}

// TestPrivacyStream reads many sealed messages with reads across their
// boundaries.
func TestPrivacyStream(t *testing.T) {
	client, server := privacyPair(t)
	server.mac.SendMax = 9
	want := bytes.Repeat([]byte("0123456789abcdef"), 20)
	var b bytes.Buffer
	NewWriter(&b, server).Write(want)
	got, err := io.ReadAll(NewReader(&b, client))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(want))
	}
}

// FuzzPrivacyReader is FuzzReader for sealed messages.
func FuzzPrivacyReader(f *testing.F) {
	payload := []byte("sealed rows and checksums from a DataNode, cut into messages")
	_, server := privacyPair(f)
	server.mac.SendMax = 16
	var b bytes.Buffer
	NewWriter(&b, server).Write(payload)
	f.Add(b.Bytes())
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		client, _ := privacyPair(t)
		got, _ := io.ReadAll(NewReader(bytes.NewReader(in), client))
		if !bytes.HasPrefix(payload, got) {
			t.Fatalf("passed on %q, not a prefix of the payload", got)
		}
	})
}
