package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestJobCommandsLogInAsTheJobSays: every command that loads a job file
// (run, load, status, verify, plan) takes the Kerberos login from its
// security section, so a pod whose job file names a mounted keytab needs
// no flags for any of them. The keytab named here does not exist: the
// login each command set up fails naming it.
func TestJobCommandsLogInAsTheJobSays(t *testing.T) {
	p := demoJob(t)
	dir := t.TempDir()
	keytab, conf := filepath.Join(dir, "missing.keytab"), filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(conf, []byte("[libdefaults]\n default_realm = EXAMPLE.COM\n[realms]\n EXAMPLE.COM = {\n  kdc = 127.0.0.1:1\n }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sec := fmt.Sprintf("security: {keytab: %s, principal: rekey@EXAMPLE.COM, krb5_conf: %s}\n", keytab, conf)
	if err := os.WriteFile(p, append(b, sec...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", p, "--sink", "dry-run", "--progress", "none"},
		{"load", p},
		{"status", p},
		{"verify", p, "--entity", "user=u00042"},
		{"plan", p},
	} {
		runIdentity = nil
		runRekey(t, args...)
		if runIdentity == nil {
			t.Errorf("rekey %s set up no Kerberos login", args[0])
			continue
		}
		if _, err := runIdentity.Login(); err == nil || !strings.Contains(err.Error(), keytab) {
			t.Errorf("rekey %s: the login %v, want one from %s", args[0], err, keytab)
		}
	}
	runIdentity = nil
}
