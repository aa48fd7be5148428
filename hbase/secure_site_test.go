package hbase

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/sasl"
)

// writeSite writes an hbase-site.xml with props into a fresh
// $HBASE_CONF_DIR.
func writeSite(t *testing.T, props map[string]string) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("<configuration>\n")
	for k, v := range props {
		b.WriteString("<property><name>" + k + "</name><value>" + v + "</value></property>\n")
	}
	b.WriteString("</configuration>\n")
	if err := os.WriteFile(filepath.Join(dir, "hbase-site.xml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HBASE_CONF_DIR", dir)
}

func TestKerberosFromSite(t *testing.T) {
	writeSite(t, map[string]string{
		"hbase.zookeeper.quorum":                "zk1",
		"hbase.security.authentication":         "Kerberos",
		"hbase.master.kerberos.principal":       "hbase/_HOST@EXAMPLE.COM",
		"hbase.regionserver.kerberos.principal": "hbase/_HOST@EXAMPLE.COM",
		"hbase.rpc.protection":                  "privacy, integrity",
	})
	// The quorum comes from the flag; the security settings still from
	// hbase-site.xml.
	cfg, _, err := Locate("zk9:2181", "")
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Kerberos
	if cfg.ZKQuorum != "zk9:2181" || k == nil || k.MasterPrincipal != "hbase/_HOST@EXAMPLE.COM" || k.RegionServerPrincipal != "hbase/_HOST@EXAMPLE.COM" ||
		len(k.Protection) != 2 || k.Protection[0] != sasl.Privacy || k.Protection[1] != sasl.Integrity {
		t.Fatalf("cfg = %+v, kerberos %+v", cfg, k)
	}

	writeSite(t, map[string]string{"hbase.zookeeper.quorum": "zk1", "hbase.security.authentication": "simple"})
	if cfg, _, err := Locate("", ""); err != nil || cfg.Kerberos != nil {
		t.Fatalf("simple: %+v %v", cfg.Kerberos, err)
	}
	for _, bad := range []map[string]string{
		{"hbase.zookeeper.quorum": "zk1", "hbase.security.authentication": "digest"},
		{"hbase.zookeeper.quorum": "zk1", "hbase.security.authentication": "kerberos", "hbase.rpc.protection": "secret"},
	} {
		writeSite(t, bad)
		if _, _, err := Locate("", ""); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}

func TestKerberosNeedsTheRegionServerPrincipal(t *testing.T) {
	_, err := NewClient(Config{ZKQuorum: "127.0.0.1:1", Kerberos: &Kerberos{MasterPrincipal: "hbase/_HOST@R"}})
	if err == nil || !strings.Contains(err.Error(), "hbase.regionserver.kerberos.principal") {
		t.Fatalf("err = %v", err)
	}
}
