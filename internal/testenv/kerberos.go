package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// KerberizedNoKDC makes the test's environment that of a machine whose
// Hadoop configuration requires Kerberos (HADOOP_CONF_DIR: core-site.xml
// and hdfs-site.xml saying so), whose krb5.conf names a KDC nobody
// listens at (127.0.0.1:1), with no ticket cache and no token file: the
// login is tried first and fails, so no server is ever reached. It returns
// the test's folder and the krb5.conf path. The variables are restored
// when the test ends (t.Setenv).
func KerberizedNoKDC(t testing.TB) (dir, krb5 string) {
	t.Helper()
	dir = t.TempDir()
	conf := filepath.Join(dir, "hadoop")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	site := func(name, key, value string) {
		x := "<configuration><property><name>" + key + "</name><value>" + value + "</value></property></configuration>\n"
		if err := os.WriteFile(filepath.Join(conf, name), []byte(x), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	site("core-site.xml", "hadoop.security.authentication", "kerberos")
	site("hdfs-site.xml", "dfs.namenode.kerberos.principal", "nn/_HOST@EXAMPLE.COM")
	t.Setenv("HADOOP_CONF_DIR", conf)
	t.Setenv("HADOOP_TOKEN_FILE_LOCATION", "")
	krb5 = filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(krb5, []byte("[libdefaults]\n default_realm = EXAMPLE.COM\n[realms]\n EXAMPLE.COM = {\n  kdc = 127.0.0.1:1\n }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KRB5_CONFIG", krb5)
	t.Setenv("KRB5CCNAME", filepath.Join(dir, "no-ticket-cache"))
	return dir, krb5
}
