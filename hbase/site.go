package hbase

import (
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoCluster: nothing names the cluster to talk to (no quorum given, no
// $REKEY_ZK, no $HBASE_CONF_DIR); the user must say which one.
var ErrNoCluster = errors.New("hbase: no cluster named")

// Locate finds the cluster a command talks to, the one way every rekey
// subcommand does it, first match wins:
//
//  1. quorum, when not empty: a --zk flag, else the job's target.zookeeper;
//  2. $REKEY_ZK, a ZooKeeper quorum host:port[,host:port...];
//  3. $HBASE_CONF_DIR/hbase-site.xml, as HBase's own tools find it
//     (see ConfigFromSite).
//
// znodeParent, when not empty, overrides zookeeper.znode.parent from
// hbase-site.xml. from says which of the three it was, for messages. An
// error wraps ErrNoCluster when none of them names a cluster. Whichever
// names the cluster, the Kerberos settings come from
// $HBASE_CONF_DIR/hbase-site.xml when there is one (see Kerberos).
func Locate(quorum, znodeParent string) (cfg Config, from string, err error) {
	switch {
	case quorum != "":
		cfg, from = Config{ZKQuorum: quorum}, "the given ZooKeeper quorum"
	case os.Getenv("REKEY_ZK") != "":
		cfg, from = Config{ZKQuorum: os.Getenv("REKEY_ZK")}, "$REKEY_ZK"
	case os.Getenv("HBASE_CONF_DIR") != "":
		if cfg, err = ConfigFromSite(); err != nil {
			return cfg, "", err
		}
		from = filepath.Join(os.Getenv("HBASE_CONF_DIR"), "hbase-site.xml")
	default:
		return Config{}, "", fmt.Errorf("%w: give --zk host:port (or target.zookeeper in the job), set $REKEY_ZK, or set $HBASE_CONF_DIR to the folder of the cluster's hbase-site.xml", ErrNoCluster)
	}
	if znodeParent != "" {
		cfg.ZNodeParent = znodeParent
	}
	if cfg.Kerberos == nil {
		if cfg.Kerberos, err = securityFromSite(); err != nil {
			return Config{}, "", err
		}
	}
	return cfg, from, nil
}

// ConfigFromSite fills the ZooKeeper quorum and znode parent from
// $HBASE_CONF_DIR/hbase-site.xml, as HBase's own tools find their cluster:
// hbase.zookeeper.quorum (hosts, with or without ports),
// hbase.zookeeper.property.clientPort (default 2181) for hosts given without
// a port, and zookeeper.znode.parent (default /hbase); with
// hbase.security.authentication=kerberos also the Kerberos settings.
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
	props, err := siteProps(b, p)
	if err != nil {
		return Config{}, err
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
	k, err := kerberosFromSite(props, p)
	if err != nil {
		return Config{}, err
	}
	return Config{ZKQuorum: strings.Join(hosts, ","), ZNodeParent: props["zookeeper.znode.parent"], Kerberos: k}, nil
}

// siteProps returns the properties of a Hadoop-style XML configuration
// file's content b (read from path, for messages).
func siteProps(b []byte, path string) (map[string]string, error) {
	var conf struct {
		Property []struct {
			Name  string `xml:"name"`
			Value string `xml:"value"`
		} `xml:"property"`
	}
	if err := xml.Unmarshal(b, &conf); err != nil {
		return nil, fmt.Errorf("hbase: %s: %w", path, err)
	}
	props := map[string]string{}
	for _, pr := range conf.Property {
		props[strings.TrimSpace(pr.Name)] = strings.TrimSpace(pr.Value)
	}
	return props, nil
}

// securityFromSite returns the Kerberos settings of
// $HBASE_CONF_DIR/hbase-site.xml, when that names a file: a cluster found
// through --zk or $REKEY_ZK still takes its security settings from there,
// as HBase's own clients do. No file means no settings.
func securityFromSite() (*Kerberos, error) {
	dir := os.Getenv("HBASE_CONF_DIR")
	if dir == "" {
		return nil, nil
	}
	p := filepath.Join(dir, "hbase-site.xml")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hbase: %w", err)
	}
	props, err := siteProps(b, p)
	if err != nil {
		return nil, err
	}
	return kerberosFromSite(props, p)
}

// SiteRootDir returns hbase.rootdir of $HBASE_CONF_DIR/hbase-site.xml and
// that file's path, or "" and why not: the region servers' root dir is
// in their configuration, which no RPC reports, so this file (when it is
// the cluster's) is what a client can know of it.
func SiteRootDir() (rootDir, from string) {
	dir := os.Getenv("HBASE_CONF_DIR")
	if dir == "" {
		return "", "HBASE_CONF_DIR is not set"
	}
	p := filepath.Join(dir, "hbase-site.xml")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err.Error()
	}
	props, err := siteProps(b, p)
	if err != nil {
		return "", err.Error()
	}
	if props["hbase.rootdir"] == "" {
		return "", p + " has no hbase.rootdir"
	}
	return props["hbase.rootdir"], p
}
