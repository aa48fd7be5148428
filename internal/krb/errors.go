package krb

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors a caller can match (errors.Is) to tell the user's situations
// apart; the messages wrapping them say what to do.
var (
	// ErrNoTicket: no credentials at all (no ticket cache, no TGT in it).
	ErrNoTicket = errors.New("krb: no Kerberos ticket")
	// ErrTicketExpired: the ticket cache's ticket has expired.
	ErrTicketExpired = errors.New("krb: Kerberos ticket expired")
	// ErrUnknownPrincipal: the KDC does not know the client or the service.
	ErrUnknownPrincipal = errors.New("krb: principal unknown to the KDC")
	// ErrClockSkew: this host's clock and the KDC's (or the server's)
	// differ by more than the allowed skew, 5 minutes by default.
	ErrClockSkew = errors.New("krb: clock skew too great")
	// ErrBadKey: the KDC refused the key (a stale keytab, a wrong password).
	ErrBadKey = errors.New("krb: the KDC refused the key")
	// ErrKDCUnreachable: no KDC of the realm answered.
	ErrKDCUnreachable = errors.New("krb: cannot reach the KDC")
)

// Kerberos error codes (RFC 4120 section 7.5.9) by the names gokrb5
// prints them with: its errors carry the KDC's error only as text.
const (
	codeClientUnknown = "KDC_ERR_C_PRINCIPAL_UNKNOWN"
	codeServerUnknown = "KDC_ERR_S_PRINCIPAL_UNKNOWN"
	codePreauthFailed = "KDC_ERR_PREAUTH_FAILED"
	// Kerby (MiniKdc) answers a wrong preauthentication key with this.
	codeBadIntegrity   = "KRB_AP_ERR_BAD_INTEGRITY"
	codeSkew           = "KRB_AP_ERR_SKEW"
	codeTicketExpired  = "KRB_AP_ERR_TKT_EXPIRED"
	codeKDCTGTExpired  = "KDC_ERR_TGT_REVOKED"
	codeEtypeNoSupport = "KDC_ERR_ETYPE_NOSUPP"
)

// explainLogin turns a failed AS exchange (logging in as principal from
// source) into the user's terms.
func explainLogin(err error, principal, source, confPath string) error {
	m := err.Error()
	switch {
	case strings.Contains(m, codeClientUnknown):
		return fmt.Errorf("%w: the KDC does not know %s (logging in from %s; check the name and realm, principals are case-sensitive)", ErrUnknownPrincipal, principal, source)
	case strings.Contains(m, codePreauthFailed), strings.Contains(m, codeBadIntegrity):
		return fmt.Errorf("%w: the KDC refused the key for %s from %s: the keytab is stale (the principal's key changed after it was exported) or for another KDC", ErrBadKey, principal, source)
	case strings.Contains(m, codeSkew):
		return skew(principal)
	case strings.Contains(m, codeEtypeNoSupport):
		return fmt.Errorf("krb: the KDC and %s share no encryption type for %s (rekey uses AES; set default_tkt_enctypes in %s, or export the keytab with aes256-cts-hmac-sha1-96)", source, principal, confPath)
	case strings.Contains(m, "Networking_Error"):
		return fmt.Errorf("%w for %s (the kdc lines of %s): %v", ErrKDCUnreachable, principal, confPath, err)
	}
	return fmt.Errorf("krb: logging in as %s from %s: %w", principal, source, err)
}

// skewBy is the clock-skew error when the KDC's clock is known to be d
// ahead of this host's (behind when negative).
func skewBy(principal string, d time.Duration) error {
	where := "ahead of"
	if d < 0 {
		where, d = "behind", -d
	}
	return fmt.Errorf("%w: the KDC's clock is %v %s this host's, beyond the allowed skew (krb5.conf clockskew, 5 minutes by default), so it refused the login of %s; synchronise the clocks (NTP)", ErrClockSkew, d.Round(time.Second), where, principal)
}

func skew(principal string) error {
	return fmt.Errorf("%w: this host's clock differs from the KDC's by more than the allowed skew (5 minutes by default) while authenticating %s; synchronise the clock (NTP)", ErrClockSkew, principal)
}

// ExplainService turns an error from asking for a service ticket (for spn,
// the server's principal as the client configuration names it, and what
// it was for, e.g. "the NameNode 127.0.0.1:8020") into the user's terms.
// Other errors come back unchanged.
func ExplainService(err error, l *Login, spn, what string) error {
	if err == nil {
		return nil
	}
	m := err.Error()
	switch {
	case strings.Contains(m, codeServerUnknown):
		return fmt.Errorf("%w: the KDC has no service principal %s for %s (the server principal in the client configuration, _HOST expanded, must match the server's; principals are case-sensitive)", ErrUnknownPrincipal, spn, what)
	case strings.Contains(m, codeSkew):
		return skew(l.Principal)
	case strings.Contains(m, codeTicketExpired), strings.Contains(m, codeKDCTGTExpired):
		if l.Renews {
			return fmt.Errorf("%w: %s's ticket expired while asking for %s's (%s)", ErrTicketExpired, l.Principal, what, spn)
		}
		return fmt.Errorf("%w: the ticket for %s from the %s has expired (run kinit again, or log in from a keytab with --keytab and --principal)", ErrTicketExpired, l.Principal, l.Source)
	}
	return err
}
