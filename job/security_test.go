package job

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSecuritySection: the security section's files are taken relative to
// the job file, like the source root; the principal is kept as written.
func TestSecuritySection(t *testing.T) {
	j, err := Parse("/etc/rekey/job.yaml", []byte(good+"security:\n  keytab: keys/rekey.keytab\n  principal: rekey@EXAMPLE.COM\n  krb5_conf: /etc/krb5-prod.conf\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Security{Keytab: filepath.FromSlash("/etc/rekey/keys/rekey.keytab"), Principal: "rekey@EXAMPLE.COM", Krb5Conf: "/etc/krb5-prod.conf"}
	if j.Security != want {
		t.Fatalf("security = %+v, want %+v", j.Security, want)
	}
}

// TestSecurityKeytabNeedsPrincipal: a keytab alone is refused at its line.
func TestSecurityKeytabNeedsPrincipal(t *testing.T) {
	_, err := Parse("job.yaml", []byte(good+"security:\n  keytab: rekey.keytab\n  kerberos: yes\n"))
	if err == nil {
		t.Fatal("parsed")
	}
	for _, want := range []string{"security: keytab needs principal", "security.kerberos"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
