package sasl

import (
	"fmt"
	"strings"
)

// KerberosError is a failure of the Kerberos side of the exchange: getting
// the service ticket, or the server refusing it. Error says what the user
// can do about the common causes; Err is the library's error.
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

// hints maps what Kerberos libraries (gokrb5 on this side, Java's on the
// server's) put in their messages to what the user should do. Each key is
// the RFC 4120 error name or the text Java's GSS layer uses for it.
var hints = []struct{ needle, hint string }{
	{"KDC_ERR_S_PRINCIPAL_UNKNOWN", "the KDC does not know the server principal: check hbase.regionserver.kerberos.principal / hbase.master.kerberos.principal in hbase-site.xml, and that _HOST names the server as the KDC does (its lowercased canonical host name)"},
	{"KDC_ERR_C_PRINCIPAL_UNKNOWN", "the KDC does not know the client principal: check --principal (or the ticket cache's principal) and its realm"},
	{"KRB_AP_ERR_SKEW", "the clocks of this machine and the server or KDC differ by more than the allowed skew (usually 5 minutes): synchronize them (NTP)"},
	{"Clock skew too great", "the clocks of this machine and the server differ by more than the allowed skew (usually 5 minutes): synchronize them (NTP)"},
	{"KRB_AP_ERR_TKT_EXPIRED", "the ticket has expired: log in again (kinit, or give a keytab so rekey logs in itself)"},
	{"Ticket expired", "the ticket has expired: log in again (kinit, or give a keytab so rekey logs in itself)"},
	{"TGT session expired", "the ticket-granting ticket has expired: log in again (kinit, or give a keytab so rekey logs in itself)"},
	{"KDC_ERR_TGT_REVOKED", "the ticket-granting ticket is no longer valid: log in again"},
	{"KDC_ERR_PREAUTH_FAILED", "the KDC refused the key: the keytab or password does not match the principal's current key"},
	{"KRB_AP_ERR_MODIFIED", "the server could not decrypt the ticket: its keytab does not hold the current key of its principal, or the principal names another host"},
	{"Checksum failed", "the server could not decrypt the ticket: its keytab does not hold the current key of its principal, or the principal names another host"},
	{"KDC_ERR_ETYPE_NOSUPP", "the KDC and this client share no encryption type: allow aes128-cts-hmac-sha1-96 or aes256-cts-hmac-sha1-96 in krb5.conf"},
	{"Networking_Error", "the KDC did not answer: check the realm's kdc entries in krb5.conf ($KRB5_CONFIG or /etc/krb5.conf)"},
}

// Explain returns advice for a Kerberos failure message, or "" when it
// does not recognise one.
func Explain(msg string) string {
	for _, h := range hints {
		if strings.Contains(msg, h.needle) {
			return h.hint
		}
	}
	return ""
}
