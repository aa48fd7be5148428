package rpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
)

// be32 appends a big-endian int32.
func be32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

// writable appends a Hadoop WritableUtils string.
func writable(b []byte, s string) []byte { return append(be32(b, int32(len(s))), s...) }

// refusal is the response frame HBase sends when it refuses a connection
// outright: call id -1 and the exception.
func refusal(t testing.TB, class, msg string) []byte {
	hdr := &pb.ResponseHeader{CallId: proto.Uint32(callIDNone), Exception: &pb.ExceptionResponse{ExceptionClassName: proto.String(class), StackTrace: proto.String(class + ": " + msg + "\n\tat somewhere")}}
	h, err := proto.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	body = binary.AppendUvarint(body, uint64(len(h)))
	body = append(body, h...)
	return append(be32(nil, int32(len(body))), body...)
}

func TestReadSASLReply(t *testing.T) {
	tok, err := ReadSASLReply(bytes.NewReader(append(be32(be32(nil, 0), 3), "abc"...)))
	if err != nil || string(tok) != "abc" {
		t.Fatalf("success reply: %q %v", tok, err)
	}
	tok, err = ReadSASLReply(bytes.NewReader(be32(be32(nil, 0), 0)))
	if err != nil || tok == nil || len(tok) != 0 {
		t.Fatalf("empty token: %q %v", tok, err)
	}
	_, err = ReadSASLReply(bytes.NewReader(writable(writable(be32(nil, 1), "javax.security.sasl.SaslException"), "GSS initiate failed")))
	var se *saslServerError
	if !errors.As(err, &se) || se.class != "javax.security.sasl.SaslException" || se.msg != "GSS initiate failed" {
		t.Fatalf("error reply: %v", err)
	}
	if _, err = ReadSASLReply(bytes.NewReader(be32(be32(nil, 0), saslSwitchSimple))); !errors.Is(err, errSwitchToSimple) {
		t.Fatalf("switch to simple: %v", err)
	}
	_, err = ReadSASLReply(bytes.NewReader(refusal(t, "org.apache.hadoop.hbase.ipc.BadAuthException", "authName=unknown")))
	if !errors.As(err, &se) || se.class != "org.apache.hadoop.hbase.ipc.BadAuthException" || se.msg != "org.apache.hadoop.hbase.ipc.BadAuthException: authName=unknown" {
		t.Fatalf("refusal frame: %v", err)
	}
	for _, bad := range [][]byte{
		be32(be32(nil, 0), -5),
		be32(be32(nil, 0), maxSASLToken+1),
		be32(writable(be32(nil, 1), "x"), -7),
		be32(nil, -2),
	} {
		if _, err := ReadSASLReply(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%x: %v", bad, err)
		}
	}
	if _, err := ReadSASLReply(bytes.NewReader(append(be32(be32(nil, 0), 10), "short"...))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
}

// FuzzReadSASLReply: any bytes give a token no longer than the input, or
// an error; never a panic or an allocation past the limits.
func FuzzReadSASLReply(f *testing.F) {
	f.Add(append(be32(be32(nil, 0), 3), "abc"...))
	f.Add(writable(writable(be32(nil, 1), "javax.security.sasl.SaslException"), "GSS initiate failed"))
	f.Add(be32(be32(nil, 0), saslSwitchSimple))
	f.Add(refusal(f, "org.apache.hadoop.hbase.security.AccessDeniedException", "Authentication is required"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ReadSASLReply(bytes.NewReader(b))
		if err == nil && len(tok) > len(b) {
			t.Fatalf("%d-byte token from %d bytes", len(tok), len(b))
		}
	})
}

func TestServicePrincipal(t *testing.T) {
	for _, c := range []struct{ principal, host, want string }{
		{"user/_HOST@EXAMPLE.COM", "127.0.0.1", "user/localhost"},
		{"hbase/_HOST@EXAMPLE.COM", "LOCALHOST", "hbase/localhost"},
		{"hbase/rs1.example.com@EXAMPLE.COM", "127.0.0.1", "hbase/rs1.example.com"},
		{"hbase@EXAMPLE.COM", "127.0.0.1", "hbase"},
	} {
		got, err := ServicePrincipal(c.principal, c.host)
		if err != nil || got != c.want {
			t.Fatalf("%s at %s: %q %v, want %q", c.principal, c.host, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "@EXAMPLE.COM", "hbase/@EXAMPLE.COM", "/_HOST@R"} {
		if _, err := ServicePrincipal(bad, "h"); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
