package sasl

import (
	"fmt"
	"strings"
)

// KerberosError is the server refusing the Kerberos exchange: a KRB-ERROR
// token, or (see Explain) the message of the server's SASL error. Error
// says what the user can do about the common causes; Err is the cause.
type KerberosError struct {
	Op  string
	Err error
}

func (e *KerberosError) Error() string {
	msg := e.Err.Error()
	if hint := Explain(msg); hint != "" {
		return fmt.Sprintf("kerberos: %s: %s (%s)", e.Op, hint, msg)
	}
	return fmt.Sprintf("kerberos: %s: %s", e.Op, msg)
}

func (e *KerberosError) Unwrap() error { return e.Err }

// hints maps what a server's Kerberos code says when it refuses a client's
// AP-REQ to what the user should do. Each key is the RFC 4120 error name
// (gokrb5 prints those) or the text Java's Kerberos code uses for it, as
// HBase's servers send it back in their SASL error.
var hints = []struct{ needle, hint string }{
	{"KRB_AP_ERR_SKEW", "this host's clock and the server's differ by more than the allowed skew (5 minutes by default): synchronise them (NTP)"},
	{"Clock skew too great", "this host's clock and the server's differ by more than the allowed skew (5 minutes by default): synchronise them (NTP)"},
	{"KRB_AP_ERR_TKT_EXPIRED", "the service ticket expired before the server saw it: log in again (kinit, or a keytab, which rekey renews itself)"},
	{"Ticket expired", "the service ticket expired before the server saw it: log in again (kinit, or a keytab, which rekey renews itself)"},
	{"KRB_AP_ERR_MODIFIED", "the server cannot decrypt the ticket: its keytab lacks its principal's current key, or the principal (_HOST expanded) names another host"},
	{"Checksum failed", "the server cannot decrypt the ticket: its keytab lacks its principal's current key, or the principal (_HOST expanded) names another host"},
	// HBase sends only the outer SaslException's message, never its
	// cause: the server's log has that. The usual causes, in order:
	{"GSS initiate failed", "the server did not accept the Kerberos ticket; the usual causes: this host's clock and the server's differ by more than 5 minutes (synchronise them, NTP), the server's keytab lacks its principal's current key, or the server principal (_HOST expanded) names another host; the server's log says which"},
	{"KRB_AP_ERR_REPEAT", "the server saw this authenticator before (a replay, or two connections in the same microsecond): retry"},
	{"Request is a replay", "the server saw this authenticator before (a replay, or two connections in the same microsecond): retry"},
}

// Explain returns advice for a server's Kerberos failure message, or ""
// when it does not recognise one.
func Explain(msg string) string {
	for _, h := range hints {
		if strings.Contains(msg, h.needle) {
			return h.hint
		}
	}
	return ""
}
