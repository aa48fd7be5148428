package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyhq/rekey/hbase"
)

// writeHBaseSite writes an hbase-site.xml naming the ZooKeeper quorum (and
// the znode parent, when not empty) into a new folder, for HBASE_CONF_DIR.
func writeHBaseSite(t *testing.T, quorum, znodeParent string) string {
	t.Helper()
	props := "<property><name>hbase.zookeeper.quorum</name><value>" + quorum + "</value></property>\n"
	if znodeParent != "" {
		props += "<property><name>zookeeper.znode.parent</name><value>" + znodeParent + "</value></property>\n"
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hbase-site.xml"), []byte("<configuration>\n"+props+"</configuration>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestClusterFlagsLeaveTheSite: with neither --zk nor --znode-parent,
// verify and inspect table pass nothing over hbase-site.xml (a default
// /hbase would hide the site's zookeeper.znode.parent), and inspect table
// takes both from the site $HBASE_CONF_DIR names. verify's own resolution
// is tested in package verify, where it lives.
func TestClusterFlagsLeaveTheSite(t *testing.T) {
	for _, cmd := range []*cobra.Command{newVerifyCmd(), newInspectTableCmd()} {
		for _, name := range []string{"zk", "znode-parent"} {
			if def := cmd.Flags().Lookup(name).DefValue; def != "" {
				t.Errorf("%s --%s defaults to %q, want nothing", cmd.Name(), name, def)
			}
		}
	}
	t.Setenv("REKEY_ZK", "")
	t.Setenv("HBASE_CONF_DIR", writeHBaseSite(t, "site1:2000,site2", "/hbase-unsecure"))
	cfg, from, err := inspectTableOptions{timeout: time.Minute}.cluster()
	want := hbase.Config{ZKQuorum: "site1:2000,site2:2181", ZNodeParent: "/hbase-unsecure", OperationTimeout: time.Minute}
	if err != nil || !reflect.DeepEqual(cfg, want) || !strings.HasSuffix(from, "hbase-site.xml") {
		t.Errorf("inspect table's cluster: %+v from %q (%v), want %+v from hbase-site.xml", cfg, from, err, want)
	}
}

// TestNoClusterNamed: with no --zk, no target.zookeeper, no $REKEY_ZK and
// no $HBASE_CONF_DIR, verify against the live table and inspect table are
// usage errors that name every way to give the cluster.
func TestNoClusterNamed(t *testing.T) {
	t.Setenv("REKEY_ZK", "")
	t.Setenv("HBASE_CONF_DIR", "")
	job := identityJob(t, demoSnapshot(t), "")
	for _, args := range [][]string{
		{"verify", job, "--entity", "user=u00001"},
		{"inspect", "table", "events_copy"},
	} {
		code, _, errOut := runRekey(t, args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d: %s", args[0], code, exitUsage, errOut)
		}
		for _, way := range []string{"--zk", "target.zookeeper", "$REKEY_ZK", "$HBASE_CONF_DIR"} {
			if !strings.Contains(errOut, way) {
				t.Errorf("%s: %q does not name %s", args[0], errOut, way)
			}
		}
	}
}
