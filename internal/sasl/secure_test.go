package sasl

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// TestSecureClockSkewIsExplained: an authenticator 10 minutes off (the
// servers allow 5) is refused by the HBase master. HBase sends only "GSS
// initiate failed" (the cause, Java's "Clock skew too great", stays in its
// log), so Explain names the clock first among the usual causes.
// The exchange is spoken by hand here (preamble with auth byte 81, the
// token, the status reply) to keep this package free of hbase/rpc.
func TestSecureClockSkewIsExplained(t *testing.T) {
	s := testenv.RequireSecure(t)
	l, err := krb.LoginWith(krb.Options{Keytab: s.Secure.ClientKeytab, Principal: s.Secure.ClientPrincipal, Krb5Conf: s.Secure.Krb5Conf})
	if err != nil {
		t.Fatal(err)
	}
	// The same exchange with the clock right is accepted: status 0.
	if st, c := firstReply(t, s.Master, l, 0); st != 0 {
		t.Fatalf("without skew: status %d", st)
	} else {
		c.Close()
	}
	st, c := firstReply(t, s.Master, l, 10*time.Minute)
	defer c.Close()
	if st != 1 {
		t.Fatalf("status %d, want the error status 1", st)
	}
	class, msg := readTestString(t, c), readTestString(t, c)
	if !strings.Contains(msg, "GSS initiate failed") || !strings.Contains(Explain(msg), "clock") {
		t.Fatalf("server said %s: %s", class, msg)
	}
	t.Logf("%s: %s", class, msg)
}

// firstReply sends the preamble and an initial token whose authenticator
// is off by d, and returns the status of the server's reply and the
// connection, positioned after it.
func firstReply(t *testing.T, addr string, l *krb.Login, d time.Duration) (uint32, net.Conn) {
	t.Helper()
	m, err := ForClient(l.Client, "user/localhost", []QOP{Authentication})
	if err != nil {
		t.Fatal(err)
	}
	skew = d
	tok, err := m.Start()
	skew = 0
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	out := binary.BigEndian.AppendUint32([]byte{'H', 'B', 'a', 's', 0, 81}, uint32(len(tok)))
	if _, err := c.Write(append(out, tok...)); err != nil {
		t.Fatal(err)
	}
	var status [4]byte
	if _, err := io.ReadFull(c, status[:]); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(status[:]), c
}

func readTestString(t *testing.T, r io.Reader) string {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}
