package hbase

import (
	"os"
	"path/filepath"
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
