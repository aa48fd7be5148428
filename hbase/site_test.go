package hbase

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestConfigFromSite(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hbase-site.xml"), []byte(`<?xml version="1.0"?>
<configuration>
  <property><name>hbase.zookeeper.quorum</name><value>zk1, zk2:2182,zk3</value></property>
  <property><name>hbase.zookeeper.property.clientPort</name><value>2191</value></property>
  <property><name>zookeeper.znode.parent</name><value>/hbase-unsecure</value></property>
</configuration>`), 0o644)
	t.Setenv("HBASE_CONF_DIR", dir)
	cfg, err := ConfigFromSite()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ZKQuorum != "zk1:2191,zk2:2182,zk3:2191" || cfg.ZNodeParent != "/hbase-unsecure" {
		t.Errorf("got %+v", cfg)
	}
	t.Setenv("HBASE_CONF_DIR", "")
	if _, err := ConfigFromSite(); err == nil || !strings.Contains(err.Error(), "HBASE_CONF_DIR") {
		t.Errorf("no conf dir: %v", err)
	}
}

func TestLocate(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hbase-site.xml"), []byte(`<configuration>
  <property><name>hbase.zookeeper.quorum</name><value>site1</value></property>
  <property><name>zookeeper.znode.parent</name><value>/hbase-site</value></property>
</configuration>`), 0o644)
	for _, tc := range []struct {
		name, quorum, znode, rekeyZK, confDir string
		want                                  Config
		from                                  string
	}{
		{"the quorum given wins", "given:1", "", "env:2", dir, Config{ZKQuorum: "given:1"}, "given"},
		{"then REKEY_ZK", "", "", "env:2", dir, Config{ZKQuorum: "env:2"}, "REKEY_ZK"},
		{"then hbase-site.xml", "", "", "", dir, Config{ZKQuorum: "site1:2181", ZNodeParent: "/hbase-site"}, "hbase-site.xml"},
		{"a znode parent given overrides the site's", "", "/other", "", dir, Config{ZKQuorum: "site1:2181", ZNodeParent: "/other"}, "hbase-site.xml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("REKEY_ZK", tc.rekeyZK)
			t.Setenv("HBASE_CONF_DIR", tc.confDir)
			got, from, err := Locate(tc.quorum, tc.znode)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || !strings.Contains(from, tc.from) {
				t.Errorf("got %+v from %q, want %+v from %q", got, from, tc.want, tc.from)
			}
		})
	}
	t.Setenv("REKEY_ZK", "")
	t.Setenv("HBASE_CONF_DIR", "")
	if _, _, err := Locate("", ""); !errors.Is(err, ErrNoCluster) {
		t.Errorf("nothing named: %v, want ErrNoCluster", err)
	}
}
