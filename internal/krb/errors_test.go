package krb

import (
	"errors"
	"testing"

	"github.com/jcmturner/gokrb5/v8/iana/errorcode"
	"github.com/jcmturner/gokrb5/v8/krberror"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// kdcError is a KDC's error answer as gokrb5's AS exchange returns it
// (the KRBError wrapped as text in a Krberror).
func kdcError(code int32) error {
	e := messages.NewKRBError(types.PrincipalName{}, "EXAMPLE.COM", code, "")
	return krberror.Errorf(e, krberror.KDCError, "AS Exchange Error: kerberos error response from KDC")
}

// TestExplainLoginClockSkew: the KDC's KRB_AP_ERR_SKEW is ErrClockSkew. A
// real skew needs a clock this test cannot move; the error's shape is
// gokrb5's own.
func TestExplainLoginClockSkew(t *testing.T) {
	err := explainLogin(kdcError(errorcode.KRB_AP_ERR_SKEW), "rekey@EXAMPLE.COM", "keytab k", "/etc/krb5.conf")
	if !errors.Is(err, ErrClockSkew) {
		t.Fatalf("err = %v, want ErrClockSkew", err)
	}
	err = ExplainService(kdcError(errorcode.KRB_AP_ERR_SKEW), &Login{Principal: "rekey@EXAMPLE.COM"}, "nn/h", "the NameNode")
	if !errors.Is(err, ErrClockSkew) {
		t.Fatalf("service err = %v, want ErrClockSkew", err)
	}
}

// TestExplainServiceExpiredCacheTicket: an expired ticket from the cache
// tells the user to kinit again.
func TestExplainServiceExpiredCacheTicket(t *testing.T) {
	l := &Login{Principal: "rekey@EXAMPLE.COM", Source: "ticket cache /tmp/krb5cc_0"}
	err := ExplainService(kdcError(errorcode.KRB_AP_ERR_TKT_EXPIRED), l, "nn/h", "the NameNode")
	if !errors.Is(err, ErrTicketExpired) {
		t.Fatalf("err = %v, want ErrTicketExpired", err)
	}
}
