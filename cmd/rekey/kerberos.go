package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/vfs"
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
// --krb5-conf, and builds this run's Kerberos identity from them before
// the command runs. Without --keytab the login uses the ticket cache
// (KRB5CCNAME). The identity logs in only when a cluster requires it.
func addKerberosFlags(root *cobra.Command) {
	f := &loginFlags
	*f = kerberosFlags{}
	pf := root.PersistentFlags()
	pf.StringVar(&f.keytab, "keytab", "", "log in to Kerberos from this keytab `FILE` (with --principal); default: the ticket cache (KRB5CCNAME)")
	pf.StringVar(&f.principal, "principal", "", "the Kerberos `PRINCIPAL` to log in as (name@REALM)")
	pf.StringVar(&f.krb5Conf, "krb5-conf", "", "krb5.conf `FILE` (default: KRB5_CONFIG, else /etc/krb5.conf)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if f.keytab != "" && f.principal == "" {
			return usageError{errKeytabWithoutPrincipal}
		}
		runIdentity = krb.NewIdentity(f.options(job.Security{}))
		return nil
	}
}

// loginFlags holds this run's Kerberos flags for useJobSecurity (one
// command runs per process, and each run's tree resets it).
var loginFlags kerberosFlags

// runIdentity is who this run logs in to Kerberos as: the flags', then,
// once a command loaded its job, the flags' over the job's security
// section. The command passes it to everything it opens (vfs.OpenWith,
// hbase.Kerberos.Identity, pipeline.Options.Kerberos, verify.Options.
// Kerberos); no package reads it behind the command's back.
var runIdentity *krb.Identity

// options merges the flags over a job's security section: a keytab given
// on the command line brings its own principal, and any flag given wins.
func (f kerberosFlags) options(s job.Security) krb.Options {
	o := krb.Options{Keytab: s.Keytab, Principal: s.Principal, Krb5Conf: s.Krb5Conf}
	if f.keytab != "" {
		o.Keytab, o.Principal = f.keytab, f.principal
	} else if f.principal != "" {
		o.Principal = f.principal
	}
	if f.krb5Conf != "" {
		o.Krb5Conf = f.krb5Conf
	}
	return o
}

// useJobSecurity makes the run's Kerberos identity the job's security
// section under the command line's flags, and writes the merged settings
// back into the job, so what derives its login from the job (pipeline's
// status readers) logs in as the command does; commands that load a job
// call it before reading anything.
func useJobSecurity(j *job.Job) *krb.Identity {
	o := loginFlags.options(j.Security)
	j.Security = job.Security{Keytab: o.Keytab, Principal: o.Principal, Krb5Conf: o.Krb5Conf}
	runIdentity = krb.NewIdentity(o)
	return runIdentity
}

// locOptions opens a location with the run's Kerberos identity.
func locOptions() vfs.Options { return vfs.Options{Kerberos: runIdentity} }
