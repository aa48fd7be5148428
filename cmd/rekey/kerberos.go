package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/internal/krb"
)

// errKeytabWithoutPrincipal: a keytab may hold several principals' keys.
var errKeytabWithoutPrincipal = errors.New("--keytab needs --principal: the principal to log in as")

// kerberosFlags are the Kerberos login flags every command has: they
// matter only when HDFS (or HBase) requires Kerberos, and override the
// job's security section.
type kerberosFlags struct {
	keytab, principal, krb5Conf string
}

// addKerberosFlags gives every subcommand --keytab, --principal and
// --krb5-conf, and sets the process's Kerberos identity from them before
// the command runs. Without --keytab the login uses the ticket cache
// (KRB5CCNAME).
func addKerberosFlags(root *cobra.Command) {
	var f kerberosFlags
	pf := root.PersistentFlags()
	pf.StringVar(&f.keytab, "keytab", "", "log in to Kerberos from this keytab `FILE` (with --principal); default: the ticket cache (KRB5CCNAME)")
	pf.StringVar(&f.principal, "principal", "", "the Kerberos `PRINCIPAL` to log in as (name@REALM)")
	pf.StringVar(&f.krb5Conf, "krb5-conf", "", "krb5.conf `FILE` (default: KRB5_CONFIG, else /etc/krb5.conf)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if f.keytab != "" && f.principal == "" {
			return usageError{errKeytabWithoutPrincipal}
		}
		krb.Configure(krb.Options{Keytab: f.keytab, Principal: f.principal, Krb5Conf: f.krb5Conf})
		return nil
	}
}
