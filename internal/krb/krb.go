// Package krb logs rekey in to Kerberos, for HDFS (vfs) and HBase RPC
// (hbase/rpc): from a keytab, or from the ticket cache a kinit left. The
// login returns a gokrb5 client that the HDFS client and the SASL layer
// ask for service tickets.
//
// A keytab login stays valid for as long as the process runs: the client
// holds the key, renews its ticket-granting ticket before it expires and
// logs in again once it can no longer be renewed, so a run longer than
// the ticket lifetime keeps working. A ticket-cache login cannot log in
// again; Login.Note says when its ticket runs out.
//
// The identity is passed, not global: a command builds an Identity from
// its flags and the job's security section (pipeline and verify build one
// from the job's), and hands it to every HDFS or HBase connection it
// opens, which share its login.
//
// Errors speak in the user's terms (no ticket, expired ticket, unknown
// principal, a keytab without the principal's key, clock skew) and never
// carry key material or tickets.
package krb

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/types"
)

// Options says how to log in. The zero value logs in from the ticket
// cache with the default krb5.conf.
type Options struct {
	// Keytab is the path of a keytab holding Principal's key. With it the
	// login renews itself; without it the ticket cache is used.
	Keytab string
	// Principal is who to log in as: name@REALM, or a name in krb5.conf's
	// default realm. Required with Keytab; with the ticket cache it must
	// match the cache's principal when given.
	Principal string
	// Krb5Conf is the krb5.conf path; empty means KRB5_CONFIG, else
	// /etc/krb5.conf.
	Krb5Conf string
	// CCache is the ticket cache path; empty means KRB5CCNAME (FILE:
	// caches only), else /tmp/krb5cc_UID.
	CCache string
}

// Login is a logged-in Kerberos identity.
type Login struct {
	// Client asks the KDC for service tickets (gokrb5's GetServiceTicket).
	Client *client.Client
	// Principal is the full name logged in as, name@REALM.
	Principal string
	// Source is where the credentials came from: "keytab PATH" or
	// "ticket cache PATH", for messages.
	Source string
	// Renews is true for a keytab login, which logs in again by itself.
	Renews bool
	// Expires is, for a ticket-cache login, when its ticket-granting
	// ticket stops working (after its last renewal, when renewable): the
	// login fails its next new connection after this. Zero for a keytab
	// login, which gets new tickets as it needs them.
	Expires time.Time
}

// Note returns a warning for a login that cannot outlive its ticket (one
// from the ticket cache), saying when the ticket runs out; "" for a
// keytab login. Commands print it at start.
func (l *Login) Note(now time.Time) string {
	if l.Renews {
		return ""
	}
	return fmt.Sprintf("krb: logged in as %s from the %s; the ticket expires at %s (in %s) and rekey cannot get a new one: "+
		"a run still going then fails at its next connection; for long runs log in from a keytab (--keytab and --principal)",
		l.Principal, l.Source, l.Expires.UTC().Format(time.RFC3339), l.Expires.Sub(now).Round(time.Second))
}

// LoginWith logs in as o says and returns the login. A keytab login asks
// the KDC for a ticket at once, so a wrong principal, a missing key or a
// KDC that cannot be reached fails here rather than at the first read.
func LoginWith(o Options) (*Login, error) {
	conf, path, err := loadConf(o.Krb5Conf)
	if err != nil {
		return nil, err
	}
	if o.Keytab != "" {
		return keytabLogin(o, conf, path)
	}
	return cacheLogin(o, conf)
}

// loadConf reads krb5.conf from path, KRB5_CONFIG or /etc/krb5.conf.
func loadConf(path string) (*config.Config, string, error) {
	if path == "" {
		path = os.Getenv("KRB5_CONFIG")
	}
	if path == "" {
		path = "/etc/krb5.conf"
	}
	// KRB5_CONFIG may list several files; the first is the one that counts
	// for a client like this (MIT merges them, which gokrb5 cannot).
	path = strings.Split(path, ":")[0]
	if _, err := os.Stat(path); err != nil {
		return nil, path, fmt.Errorf("krb: no krb5.conf at %s (set KRB5_CONFIG, --krb5-conf or the job's security.krb5_conf): %w", path, err)
	}
	conf, err := config.Load(path)
	if err != nil {
		return nil, path, fmt.Errorf("krb: reading krb5.conf %s: %w", path, err)
	}
	return conf, path, nil
}

// splitPrincipal splits name@REALM; a name without a realm takes
// krb5.conf's default realm.
func splitPrincipal(p string, conf *config.Config) (name, realm string, err error) {
	name, realm, _ = strings.Cut(p, "@")
	if realm == "" {
		realm = conf.LibDefaults.DefaultRealm
	}
	if name == "" || realm == "" {
		return "", "", fmt.Errorf("krb: principal %q: want name@REALM (krb5.conf names no default_realm)", p)
	}
	return name, realm, nil
}

func keytabLogin(o Options, conf *config.Config, confPath string) (*Login, error) {
	if o.Principal == "" {
		return nil, fmt.Errorf("krb: --keytab %s needs --principal (who to log in as)", o.Keytab)
	}
	name, realm, err := splitPrincipal(o.Principal, conf)
	if err != nil {
		return nil, err
	}
	full := name + "@" + realm
	kt, err := keytab.Load(o.Keytab)
	if err != nil {
		return nil, fmt.Errorf("krb: reading keytab %s: %w", o.Keytab, err)
	}
	if err := hasKey(kt, full); err != nil {
		return nil, fmt.Errorf("krb: keytab %s: %w", o.Keytab, err)
	}
	cl := client.NewWithKeytab(name, realm, kt, conf, client.DisablePAFXFAST(true))
	if err := cl.Login(); err != nil {
		err = explainLogin(err, full, "keytab "+o.Keytab, confPath)
		if errors.Is(err, ErrBadKey) {
			// A refused key and a clock out of the KDC's skew look alike
			// from some KDCs: ask the KDC its time.
			if d, far := skewOf(conf, realm, name); far {
				return nil, skewBy(full, d)
			}
		}
		return nil, err
	}
	return &Login{Client: cl, Principal: full, Source: "keytab " + o.Keytab, Renews: true}, nil
}

// hasKey checks that kt holds a key for principal: gokrb5 would only say
// "matching key not found" once the KDC asked for preauthentication. The
// error lists the principals the keytab does hold (never their keys).
func hasKey(kt *keytab.Keytab, principal string) error {
	var held []string
	for _, e := range kt.Entries {
		p := e.Principal.String()
		if p == principal {
			return nil
		}
		if len(held) == 0 || held[len(held)-1] != p {
			held = append(held, p)
		}
	}
	if len(held) == 0 {
		return fmt.Errorf("it holds no keys (want one for %s)", principal)
	}
	return fmt.Errorf("it holds no key for %s, only for %s (principals are case-sensitive)", principal, strings.Join(held, ", "))
}

func cacheLogin(o Options, conf *config.Config) (*Login, error) {
	path, err := cachePath(o.CCache)
	if err != nil {
		return nil, err
	}
	cc, err := credentials.LoadCCache(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: the ticket cache %s does not exist (run kinit, or log in from a keytab with --keytab and --principal)", ErrNoTicket, path)
		}
		return nil, fmt.Errorf("krb: reading the ticket cache %s: %w", path, err)
	}
	cp := cc.DefaultPrincipal
	full := strings.Join(cp.PrincipalName.NameString, "/") + "@" + cp.Realm
	if o.Principal != "" {
		name, realm, err := splitPrincipal(o.Principal, conf)
		if err != nil {
			return nil, err
		}
		if name+"@"+realm != full {
			return nil, fmt.Errorf("krb: the ticket cache %s holds tickets for %s, not %s (kinit as %s, or pass --keytab)", path, full, o.Principal, o.Principal)
		}
	}
	cl, err := client.NewFromCCache(cc, conf, client.DisablePAFXFAST(true))
	if err != nil {
		return nil, fmt.Errorf("%w: the ticket cache %s holds no ticket-granting ticket for %s (run kinit)", ErrNoTicket, path, full)
	}
	end, renewTill := tgtTimes(cc, cp.Realm)
	if !end.After(time.Now()) {
		// An expired ticket cannot be renewed any more, renewable or not.
		return nil, fmt.Errorf("%w: the ticket for %s in %s expired at %s (run kinit again, or log in from a keytab with --keytab and --principal)",
			ErrTicketExpired, full, path, end.UTC().Format(time.RFC3339))
	}
	l := &Login{Client: cl, Principal: full, Source: "ticket cache " + path, Expires: end}
	if renewTill.After(end) {
		l.Expires = renewTill
	}
	return l, nil
}

// cachePath resolves the ticket cache's file: KRB5CCNAME (FILE:path or a
// bare path; other cache types are refused by name), else /tmp/krb5cc_UID.
func cachePath(p string) (string, error) {
	if p == "" {
		p = os.Getenv("KRB5CCNAME")
	}
	if p == "" {
		return fmt.Sprintf("/tmp/krb5cc_%d", os.Getuid()), nil
	}
	kind, rest, found := strings.Cut(p, ":")
	if !found {
		return p, nil
	}
	if kind == "FILE" {
		return rest, nil
	}
	return "", fmt.Errorf("krb: KRB5CCNAME=%s: only FILE: ticket caches can be read (kinit -c FILE:/path, or log in from a keytab)", p)
}

// tgtTimes returns when the cache's ticket-granting ticket for realm
// expires and until when it can be renewed (zero when it cannot).
func tgtTimes(cc *credentials.CCache, realm string) (end, renewTill time.Time) {
	c, ok := cc.GetEntry(types.PrincipalName{NameType: nametype.KRB_NT_SRV_INST, NameString: []string{"krbtgt", realm}})
	if !ok {
		return time.Time{}, time.Time{}
	}
	return c.EndTime, c.RenewTill
}

// Warnings receives Identity.Login's note about a login that cannot
// renew itself (Login.Note), once per login: the command's standard
// error, never its standard output, which may be JSON.
var Warnings io.Writer = os.Stderr

// ErrNoIdentity is matched by the error of a connection to a cluster that
// requires Kerberos when the caller gave no identity to log in as.
var ErrNoIdentity = errors.New("krb: no Kerberos identity was given")

// Identity is who to log in as, and the login once made. Callers pass one
// down to every HDFS and HBase connection of a run (a command builds it
// from its flags and the job's security section; pipeline and verify from
// the job's), and it logs in at the first connection that needs Kerberos,
// so a run against clusters without Kerberos never logs in. Connections
// given one Identity share its login, as Hadoop's share the login user.
// It is safe for concurrent use.
type Identity struct {
	opts  Options
	mu    sync.Mutex
	login *Login
	made  bool // the login was the caller's (Of)
}

// NewIdentity returns an identity that logs in as o says (the ticket
// cache and the default krb5.conf for the zero Options) when first asked.
func NewIdentity(o Options) *Identity { return &Identity{opts: o} }

// Of returns an identity already logged in as l (a caller that made its
// own login, a test).
func Of(l *Login) *Identity { return &Identity{login: l, made: true} }

// Explicit reports whether the identity is a login asked for: from a
// keytab, or made by the caller (Of), rather than whatever the ticket
// cache holds; false for nil.
func (id *Identity) Explicit() bool { return id != nil && (id.opts.Keytab != "" || id.made) }

// Login returns the identity's login, logging in at the first call. A
// failed login is tried again at the next call. A nil Identity fails
// with ErrNoIdentity.
func (id *Identity) Login() (*Login, error) {
	if id == nil {
		return nil, ErrNoIdentity
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.login != nil {
		return id.login, nil
	}
	l, err := LoginWith(id.opts)
	if err != nil {
		return nil, err
	}
	if n := l.Note(time.Now()); n != "" && Warnings != nil {
		fmt.Fprintln(Warnings, n)
	}
	id.login = l
	return l, nil
}
