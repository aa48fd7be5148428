package main

import (
	"testing"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
)

// TestKerberosFlagsOverJobSecurity: the job's security section is the
// default; a --keytab brings its own --principal, and --krb5-conf or
// --principal alone replace only themselves.
func TestKerberosFlagsOverJobSecurity(t *testing.T) {
	sec := job.Security{Keytab: "/j/k.keytab", Principal: "job@R", Krb5Conf: "/j/krb5.conf"}
	for _, c := range []struct {
		name  string
		flags kerberosFlags
		want  krb.Options
	}{
		{"none", kerberosFlags{}, krb.Options{Keytab: "/j/k.keytab", Principal: "job@R", Krb5Conf: "/j/krb5.conf"}},
		{"keytab", kerberosFlags{keytab: "/f.keytab", principal: "flag@R"}, krb.Options{Keytab: "/f.keytab", Principal: "flag@R", Krb5Conf: "/j/krb5.conf"}},
		{"principal", kerberosFlags{principal: "flag@R"}, krb.Options{Keytab: "/j/k.keytab", Principal: "flag@R", Krb5Conf: "/j/krb5.conf"}},
		{"krb5.conf", kerberosFlags{krb5Conf: "/f/krb5.conf"}, krb.Options{Keytab: "/j/k.keytab", Principal: "job@R", Krb5Conf: "/f/krb5.conf"}},
	} {
		if got := c.flags.options(sec); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestKeytabFlagNeedsPrincipal: --keytab alone is a usage error (exit 2).
func TestKeytabFlagNeedsPrincipal(t *testing.T) {
	code, _, errOut := runRekey(t, "inspect", "snapshot", "/nonexistent", "s", "--keytab", "/k.keytab")
	if code != 2 {
		t.Fatalf("exit %d, stderr %s; want 2", code, errOut)
	}
}
