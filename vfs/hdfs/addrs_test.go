package hdfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/rekeyhq/rekey/internal/krb"
)

func TestNamenodeAddrs(t *testing.T) {
	conf := hadoopconf.HadoopConf{
		"fs.defaultFS":                      "hdfs://prod",
		"dfs.nameservices":                  "prod",
		"dfs.ha.namenodes.prod":             "nn1, nn2",
		"dfs.namenode.rpc-address.prod.nn1": "nn-a:8020",
		"dfs.namenode.rpc-address.prod.nn2": "nn-b:8020",
		"dfs.namenode.rpc-address.single":   "nn-s:9000",
		"hadoop.security.authentication":    "simple",
	}
	cases := []struct {
		authority, want string
	}{
		{"prod", "nn-a:8020,nn-b:8020"},
		{"host:1234", "host:1234"},
		{"single", "nn-s:9000"},
	}
	for _, tc := range cases {
		got, err := namenodeAddrs(conf, tc.authority)
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.authority, got, err, tc.want)
		}
	}
	if _, err := namenodeAddrs(conf, "unknown"); err == nil {
		t.Error("unknown nameservice: want an error")
	}
	if got, _ := namenodeAddrs(nil, "bare"); strings.Join(got, ",") != "bare:8020" {
		t.Errorf("bare host without configuration: %v", got)
	}
}

// TestDialHDFSKerberosWithoutKrb5Conf: a Kerberos configuration with no
// krb5.conf to log in with fails at the dial, naming the file and the
// ways to name another.
func TestDialHDFSKerberosWithoutKrb5Conf(t *testing.T) {
	dir := t.TempDir()
	core := `<?xml version="1.0"?><configuration>
<property><name>fs.defaultFS</name><value>hdfs://127.0.0.1:1</value></property>
<property><name>hadoop.security.authentication</name><value>kerberos</value></property>
</configuration>`
	if err := os.WriteFile(filepath.Join(dir, "core-site.xml"), []byte(core), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADOOP_CONF_DIR", dir)
	missing := filepath.Join(dir, "no-krb5.conf")
	t.Setenv("KRB5_CONFIG", missing)
	_, err := DialWith("127.0.0.1:1", Options{Kerberos: krb.NewIdentity(krb.Options{})})
	if err == nil || !strings.Contains(err.Error(), "requires Kerberos") || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "KRB5_CONFIG") {
		t.Fatalf("err = %v, want it to say Kerberos is required and no krb5.conf is at %s", err, missing)
	}
}
