package hadooprpc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/sasl"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// secureOptions are the options of a connection to the secure cluster's
// NameNode as rekey's own principal (an ordinary user), with the
// protection of the cluster's client core-site.xml.
func secureOptions(t *testing.T, s *testenv.SecureState) Options {
	t.Helper()
	l, err := krb.LoginWith(krb.Options{Keytab: s.Secure.ClientKeytab, Principal: s.Secure.ClientPrincipal, Krb5Conf: s.Secure.Krb5Conf})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := hadoopconf.Load(s.Secure.HadoopConfDir)
	if err != nil {
		t.Fatal(err)
	}
	// The daemons' principal with _HOST as Hadoop expands it for 127.0.0.1.
	spn, _, _ := strings.Cut(strings.ReplaceAll(s.Secure.ServicePattern, "_HOST", "localhost"), "@")
	return Options{Addr: s.NameNode, Login: l.Client, Principal: l.Principal, SPN: spn, Protection: conf["hadoop.rpc.protection"]}
}

// secureConn is a connection with secureOptions.
func secureConn(t *testing.T, s *testenv.SecureState) *Conn {
	t.Helper()
	o := secureOptions(t, s)
	t.Logf("hadoop.rpc.protection %q", o.Protection)
	c, err := Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSecureNameNodeNoCommonProtection: a client that accepts only a
// protection the NameNode does not offer fails its dial with an error
// saying so in hadoop.rpc.protection's terms.
func TestSecureNameNodeNoCommonProtection(t *testing.T) {
	s := testenv.RequireSecure(t)
	o := secureOptions(t, s)
	other := "privacy"
	if strings.Contains(o.Protection, "privacy") {
		other = "authentication"
	}
	o.Protection = other
	_, err := Dial(context.Background(), o)
	if !errors.Is(err, sasl.ErrNoCommonQOP) || !strings.Contains(err.Error(), "hadoop.rpc.protection") || strings.Contains(err.Error(), "hbase.rpc.protection") {
		t.Fatalf("dial asking for %s only: %v", other, err)
	}
	t.Log(err)
}

// TestSecureDelegationTokenRoundTrip: the secure NameNode issues rekey's
// principal an HDFS delegation token over this client (every packet
// wrapped, and sealed, when the cluster's hadoop.rpc.protection is
// integrity or privacy), cancels it when
// asked, and then no longer knows it (a second cancel is refused): the
// token was the NameNode's own.
func TestSecureDelegationTokenRoundTrip(t *testing.T) {
	s := testenv.RequireSecure(t)
	ctx := context.Background()
	c := secureConn(t, s)
	// The NameNode's protection (testenv's TESTENV_HADOOP_RPC_PROTECTION)
	// decides whether every packet went wrapped, and sealed.
	conf, err := hadoopconf.Load(s.Secure.HadoopConfDir)
	if err != nil {
		t.Fatal(err)
	}
	gss, _ := c.layer.(*sasl.Layer)
	switch p := conf["hadoop.rpc.protection"]; {
	case p == "privacy" && (gss == nil || !gss.Sealed()),
		p == "integrity" && (gss == nil || gss.Sealed()),
		(p == "" || p == "authentication") && c.layer != nil:
		t.Fatalf("hadoop.rpc.protection %q, but layer on: %v, sealed: %v", p, gss != nil, gss != nil && gss.Sealed())
	}
	tok, err := c.GetDelegationToken(ctx, "rekey")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Kind != HDFSTokenKind || len(tok.Identifier) == 0 || len(tok.Password) == 0 {
		t.Fatalf("token %v: kind %q, identifier %d bytes, password %d bytes", tok, tok.Kind, len(tok.Identifier), len(tok.Password))
	}
	tok.Service = s.NameNode
	// Renewing moves the expiry into the future (a renew interval from
	// now, a day by default), and again on a second renewal: a load that
	// renews its token outlives the interval.
	exp1, err := c.RenewDelegationToken(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if !exp1.After(time.Now()) {
		t.Fatalf("renewed token expires at %v, in the past", exp1)
	}
	time.Sleep(20 * time.Millisecond)
	exp2, err := c.RenewDelegationToken(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if exp2.Before(exp1) {
		t.Fatalf("second renewal moved the expiry back, %v to %v", exp1, exp2)
	}
	t.Logf("renewed: expires %v, then %v", exp1, exp2)
	if err := c.CancelDelegationToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	err = c.CancelDelegationToken(ctx, tok)
	if err == nil {
		t.Fatal("a cancelled token was cancelled again")
	}
	t.Logf("second cancel: %v", err)
	if _, err := c.RenewDelegationToken(ctx, tok); err == nil {
		t.Error("a cancelled token was renewed")
	}
	if strings.Contains(err.Error(), string(tok.Password)) || errors.Is(err, ErrMalformed) {
		t.Fatalf("second cancel: %v", err)
	}
}
