package krb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// The KDC's service principal of every daemon, as gokrb5 takes it (no realm).
const serviceSPN = "user/localhost"

// openServiceTicket asks l for a ticket to the daemons' principal and
// opens it with their keytab: only a ticket the KDC issued opens.
func openServiceTicket(t *testing.T, l *Login, serviceKeytab string) messages.Ticket {
	t.Helper()
	tkt, _, err := l.Client.GetServiceTicket(serviceSPN)
	if err != nil {
		t.Fatal(err)
	}
	kt, err := keytab.Load(serviceKeytab)
	if err != nil {
		t.Fatal(err)
	}
	if err := tkt.DecryptEncPart(kt, nil); err != nil {
		t.Fatalf("the service ticket does not open with %s's key: %v", serviceSPN, err)
	}
	return tkt
}

// TestSecureKeytabLogin: a keytab login as rekey@ gets a ticket for the
// daemons' principal from the KDC, and the ticket opens with that
// principal's key (its keytab): the KDC, not this package, says it is one.
func TestSecureKeytabLogin(t *testing.T) {
	s := testenv.RequireSecure(t)
	l, err := LoginWith(Options{Keytab: s.Secure.ClientKeytab, Principal: s.Secure.ClientPrincipal, Krb5Conf: s.Secure.Krb5Conf})
	if err != nil {
		t.Fatal(err)
	}
	if l.Principal != s.Secure.ClientPrincipal || !l.Renews || l.Note(time.Now()) != "" {
		t.Fatalf("login = %+v, note %q", l, l.Note(time.Now()))
	}
	tkt := openServiceTicket(t, l, s.Secure.HBaseKeytab)
	if got := strings.Join(tkt.DecryptedEncPart.CName.NameString, "/") + "@" + tkt.DecryptedEncPart.CRealm; got != s.Secure.ClientPrincipal {
		t.Fatalf("ticket's client = %s, want %s", got, s.Secure.ClientPrincipal)
	}
}

// TestSecureKeytabWithoutTheKey: rekey's keytab asked for the hbase
// principal fails before any KDC exchange, naming what the keytab holds.
func TestSecureKeytabWithoutTheKey(t *testing.T) {
	s := testenv.RequireSecure(t)
	_, err := LoginWith(Options{Keytab: s.Secure.ClientKeytab, Principal: s.Secure.HBasePrincipal, Krb5Conf: s.Secure.Krb5Conf})
	if err == nil {
		t.Fatal("login succeeded")
	}
	want := "holds no key for " + s.Secure.HBasePrincipal + ", only for " + s.Secure.ClientPrincipal
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to say %q", err, want)
	}
}

// writeKeytab writes a keytab with a key derived from password for
// principal (name@REALM): the KDC may not know the principal, or know
// it with another key.
func writeKeytab(t *testing.T, principal, password string) string {
	t.Helper()
	name, realm, _ := strings.Cut(principal, "@")
	kt := keytab.New()
	for _, e := range []int32{etypeID.AES128_CTS_HMAC_SHA1_96, etypeID.AES256_CTS_HMAC_SHA1_96} {
		if err := kt.AddEntry(name, realm, password, time.Now(), 1, e); err != nil {
			t.Fatal(err)
		}
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "test.keytab")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSecureUnknownPrincipal: the KDC answers that it does not know the
// principal, and the error says so by name.
func TestSecureUnknownPrincipal(t *testing.T) {
	s := testenv.RequireSecure(t)
	ghost := "ghost@" + s.Secure.Realm
	_, err := LoginWith(Options{Keytab: writeKeytab(t, ghost, "pw"), Principal: ghost, Krb5Conf: s.Secure.Krb5Conf})
	if !errors.Is(err, ErrUnknownPrincipal) || !strings.Contains(err.Error(), ghost) {
		t.Fatalf("err = %v, want ErrUnknownPrincipal naming %s", err, ghost)
	}
}

// TestSecureStaleKeytab: a keytab whose key is not the KDC's for the
// principal (exported before a password change) is refused by the KDC.
func TestSecureStaleKeytab(t *testing.T) {
	s := testenv.RequireSecure(t)
	const secret = "not-the-password-9f2c"
	_, err := LoginWith(Options{Keytab: writeKeytab(t, s.Secure.ClientPrincipal, secret), Principal: s.Secure.ClientPrincipal, Krb5Conf: s.Secure.Krb5Conf})
	if !errors.Is(err, ErrBadKey) {
		t.Fatalf("err = %v, want ErrBadKey", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error shows the secret: %v", err)
	}
}

// TestSecureNoTicketCache: no keytab and no ticket cache is "no ticket".
func TestSecureNoTicketCache(t *testing.T) {
	s := testenv.RequireSecure(t)
	missing := filepath.Join(t.TempDir(), "krb5cc_none")
	_, err := LoginWith(Options{CCache: "FILE:" + missing, Krb5Conf: s.Secure.Krb5Conf})
	if !errors.Is(err, ErrNoTicket) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "kinit") {
		t.Fatalf("err = %v, want ErrNoTicket naming %s and kinit", err, missing)
	}
}

// kinit writes a ticket cache for principal from keytab with the KDC's own
// client (the oracle's kinit), asking for tickets of lifetime seconds.
func kinit(t *testing.T, s *testenv.SecureState, principal, keytabPath string, lifetime int) string {
	t.Helper()
	// Kerby's client reads a plain krb5.conf: its enctype lines (which
	// the cluster's client krb5.conf has for gokrb5) leave it no key.
	conf := fmt.Sprintf("[libdefaults]\n  default_realm = %s\n  udp_preference_limit = 1\n  ticket_lifetime = %d\n[realms]\n  %s = {\n    kdc = %s\n  }\n",
		s.Secure.Realm, lifetime, s.Secure.Realm, s.Secure.KDC)
	dir := t.TempDir()
	confPath := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cc := filepath.Join(dir, "krb5cc")
	testenv.SecureOracle(t, nil, "kinit", confPath, principal, keytabPath, cc)
	return cc
}

// TestSecureTicketCacheLogin: a ticket cache the KDC's client wrote logs
// in (no keytab: no renewal, so the login warns when its ticket ends), and
// gets a ticket the daemons' key opens; once the cached ticket has
// expired, logging in from the cache says so and how to get a new one.
func TestSecureTicketCacheLogin(t *testing.T) {
	s := testenv.RequireSecure(t)
	const lifetime = 60
	cc := kinit(t, s, s.Secure.ClientPrincipal, s.Secure.ClientKeytab, lifetime)
	// The ticket was issued before kinit returned (kinit is a JVM, which
	// on a loaded machine takes seconds to get there): counted from here,
	// it has surely ended at start + lifetime.
	start := time.Now()
	l, err := LoginWith(Options{CCache: "FILE:" + cc, Krb5Conf: s.Secure.Krb5Conf})
	if err != nil {
		t.Fatal(err)
	}
	note := l.Note(time.Now())
	if l.Renews || l.Principal != s.Secure.ClientPrincipal || !strings.Contains(note, "expires at") || !strings.Contains(note, "--keytab") {
		t.Fatalf("login %+v, note %q", l, note)
	}
	// Kerby makes the ticket renewable: Expires is the end of its renewals.
	if !l.Expires.After(time.Now()) {
		t.Fatalf("the cache's ticket expires at %v", l.Expires)
	}
	openServiceTicket(t, l, s.Secure.HBaseKeytab)
	// A ticket that has expired cannot be renewed any more.
	time.Sleep(time.Until(start.Add((lifetime + 3) * time.Second)))
	_, err = LoginWith(Options{CCache: "FILE:" + cc, Krb5Conf: s.Secure.Krb5Conf})
	if !errors.Is(err, ErrTicketExpired) || !strings.Contains(err.Error(), "kinit") {
		t.Fatalf("err = %v, want ErrTicketExpired saying kinit", err)
	}
}
