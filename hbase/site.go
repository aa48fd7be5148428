package hbase

import (
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ConfigFromSite fills the ZooKeeper quorum and znode parent from
// $HBASE_CONF_DIR/hbase-site.xml, as HBase's own tools find their cluster:
// hbase.zookeeper.quorum (hosts, with or without ports),
// hbase.zookeeper.property.clientPort (default 2181) for hosts given without
// a port, and zookeeper.znode.parent (default /hbase).
func ConfigFromSite() (Config, error) {
	dir := os.Getenv("HBASE_CONF_DIR")
	if dir == "" {
		return Config{}, errors.New("hbase: no ZooKeeper quorum given and HBASE_CONF_DIR is not set (it should hold hbase-site.xml with hbase.zookeeper.quorum)")
	}
	p := filepath.Join(dir, "hbase-site.xml")
	b, err := os.ReadFile(p)
	if err != nil {
		return Config{}, fmt.Errorf("hbase: no ZooKeeper quorum given: %w", err)
	}
	var conf struct {
		Property []struct {
			Name  string `xml:"name"`
			Value string `xml:"value"`
		} `xml:"property"`
	}
	if err := xml.Unmarshal(b, &conf); err != nil {
		return Config{}, fmt.Errorf("hbase: %s: %w", p, err)
	}
	props := map[string]string{}
	for _, pr := range conf.Property {
		props[strings.TrimSpace(pr.Name)] = strings.TrimSpace(pr.Value)
	}
	quorum := props["hbase.zookeeper.quorum"]
	if quorum == "" {
		return Config{}, fmt.Errorf("hbase: %s has no hbase.zookeeper.quorum", p)
	}
	port := props["hbase.zookeeper.property.clientPort"]
	if port == "" {
		port = "2181"
	}
	var hosts []string
	for _, h := range strings.Split(quorum, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if !strings.Contains(h, ":") {
			h += ":" + port
		}
		hosts = append(hosts, h)
	}
	return Config{ZKQuorum: strings.Join(hosts, ","), ZNodeParent: props["zookeeper.znode.parent"]}, nil
}
