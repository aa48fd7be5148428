package hdfs

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// serviceTicket asks l for a ticket to the daemons' principal and opens
// it with their keytab, which only the KDC's ticket does.
func serviceTicket(t *testing.T, l *krb.Login, serviceKeytab string) messages.Ticket {
	t.Helper()
	tkt, _, err := l.Client.GetServiceTicket("user/localhost")
	if err != nil {
		t.Fatal(err)
	}
	kt, err := keytab.Load(serviceKeytab)
	if err != nil {
		t.Fatal(err)
	}
	if err := tkt.DecryptEncPart(kt, nil); err != nil {
		t.Fatal(err)
	}
	return tkt
}

// listRoot dials the NameNode afresh (a new connection, so a new Kerberos
// authentication) and lists hbase.rootdir, which any principal may (its
// data and archive directories are the hbase user's alone).
func listRoot(t *testing.T, s *testenv.SecureState, id *krb.Identity) []string {
	t.Helper()
	h, err := DialWith(s.NameNode, Options{Kerberos: id})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fis, err := h.ReadDir(strings.TrimPrefix(s.RootDir, "hdfs://"+s.NameNode))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range fis {
		names = append(names, fi.Name())
	}
	return names
}

// TestSecureKeytabLoginRenewedAcrossExpiry: with tickets of the short
// lifetime krb5-short.conf asks for (not renewable), a keytab login that
// outlives its first ticket still authenticates a new NameNode connection:
// the NameNode accepts it, and the ticket the KDC issued for it is a new
// one, valid past the first's end.
func TestSecureKeytabLoginRenewedAcrossExpiry(t *testing.T) {
	s := testenv.RequireSecure(t)
	t.Setenv("HADOOP_CONF_DIR", s.Secure.HadoopConfDir)
	id := krb.NewIdentity(krb.Options{Keytab: s.Secure.ClientKeytab, Principal: s.Secure.ClientPrincipal, Krb5Conf: s.Secure.Krb5ShortConf})
	l, err := id.Login()
	if err != nil {
		t.Fatal(err)
	}
	before := listRoot(t, s, id)
	first := serviceTicket(t, l, s.Secure.HBaseKeytab).DecryptedEncPart
	life := first.EndTime.Sub(first.AuthTime)
	if max := time.Duration(s.Secure.ShortLifetimeSeconds)*time.Second + 5*time.Second; life > max {
		t.Fatalf("the KDC issued a %v ticket; krb5-short.conf asks for %ds", life, s.Secure.ShortLifetimeSeconds)
	}
	wait := time.Until(first.EndTime) + 5*time.Second
	t.Logf("ticket lifetime %v; waiting %v for it to expire", life.Round(time.Second), wait.Round(time.Second))
	time.Sleep(wait)
	after := listRoot(t, s, id)
	// Other tests may add to the root dir meanwhile (.hbase-snapshot
	// with the first snapshot): what was there must still be listed.
	for _, name := range before {
		if !slices.Contains(after, name) {
			t.Fatalf("listing after expiry = %v, before %v: %s is gone", after, before, name)
		}
	}
	second := serviceTicket(t, l, s.Secure.HBaseKeytab).DecryptedEncPart
	if !second.EndTime.After(first.EndTime) || !second.AuthTime.After(first.AuthTime) {
		t.Fatalf("after expiry the ticket runs %v..%v, the first %v..%v: no new login", second.AuthTime, second.EndTime, first.AuthTime, first.EndTime)
	}
}
