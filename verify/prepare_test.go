package verify

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/job"
)

// TestClusterOfTheLiveTable: the live table's cluster is the options'
// quorum, else the job's target.zookeeper, else hbase-site.xml's under
// $HBASE_CONF_DIR; a znode parent not given leaves the site's, and nothing
// named at all is hbase.ErrNoCluster.
func TestClusterOfTheLiveTable(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hbase-site.xml"), []byte(`<configuration>
  <property><name>hbase.zookeeper.quorum</name><value>site1,site2:2182</value></property>
  <property><name>hbase.zookeeper.property.clientPort</name><value>2000</value></property>
  <property><name>zookeeper.znode.parent</name><value>/hbase-unsecure</value></property>
</configuration>`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REKEY_ZK", "")
	t.Setenv("HBASE_CONF_DIR", dir)
	jobAt := func(quorum, parent string) *job.Job {
		return &job.Job{Target: job.Target{Table: "t", ZKQuorum: quorum, ZNodeParent: parent}}
	}
	for _, tc := range []struct {
		name     string
		j        *job.Job
		o        Options
		want     hbase.Config
		wantFrom string
	}{
		{"only hbase-site.xml", jobAt("", ""), Options{Timeout: time.Minute},
			hbase.Config{ZKQuorum: "site1:2000,site2:2182", ZNodeParent: "/hbase-unsecure", OperationTimeout: time.Minute}, "hbase-site.xml"},
		{"a znode parent given over the site's", jobAt("", ""), Options{ZNodeParent: "/other"},
			hbase.Config{ZKQuorum: "site1:2000,site2:2182", ZNodeParent: "/other"}, "hbase-site.xml"},
		{"the job's target cluster over the site", jobAt("job:1", "/job"), Options{},
			hbase.Config{ZKQuorum: "job:1", ZNodeParent: "/job"}, "given"},
		{"--zk over the job's", jobAt("job:1", "/job"), Options{ZKQuorum: "flag:2", ZNodeParent: "/flag"},
			hbase.Config{ZKQuorum: "flag:2", ZNodeParent: "/flag"}, "given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from, err := tc.o.cluster(tc.j)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || !strings.Contains(from, tc.wantFrom) {
				t.Errorf("got %+v from %q, want %+v from %q", got, from, tc.want, tc.wantFrom)
			}
		})
	}
	t.Setenv("HBASE_CONF_DIR", "")
	if _, _, err := (Options{}).cluster(jobAt("", "")); !errors.Is(err, hbase.ErrNoCluster) {
		t.Errorf("nothing names a cluster: %v, want hbase.ErrNoCluster", err)
	}
}

// TestSettingsMergeTheJobAndOptions: options given win over the job's
// verify section, whose zero counts take job's defaults; naming entities
// drops the job's routine choice (the heaviest and the sample, find_worst
// and all) unless an option of the same pair is given.
func TestSettingsMergeTheJobAndOptions(t *testing.T) {
	three, seven := 3, 7
	yes := true
	retries := 2
	for _, tc := range []struct {
		name string
		v    job.Verify
		o    Options
		want settings
	}{
		{"defaults", job.Verify{}, Options{},
			settings{heaviest: job.DefaultHeavyHitters, sample: job.DefaultSampleEntities, retries: -1}},
		{"the job's", job.Verify{Heaviest: 5, Sample: 9, FindWorst: true, Retries: &retries, Workers: 2}, Options{},
			settings{heaviest: 5, sample: 9, findWorst: true, retries: 2, workers: 2}},
		{"options over the job's", job.Verify{Heaviest: 5, Sample: 9}, Options{Heaviest: &three, Sample: &seven, Workers: &three},
			settings{heaviest: 3, sample: 7, retries: -1, workers: 3}},
		{"named entities alone", job.Verify{Heaviest: 5, FindWorst: true, All: true}, Options{Entities: []string{"user=u1"}},
			settings{retries: -1}},
		{"named entities and what an option asks", job.Verify{FindWorst: true}, Options{Only: "r.json", All: &yes, Sample: &seven},
			settings{heaviest: job.DefaultHeavyHitters, sample: 7, findWorst: true, all: true, retries: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.o.settings(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			got.ttl = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	minus := -1
	if _, err := (Options{Workers: &minus}).settings(job.Verify{}); err == nil {
		t.Error("negative workers accepted")
	}
	if _, err := (Options{Table: "t", Staging: "/s"}).settings(job.Verify{}); err == nil || !strings.Contains(err.Error(), "give one of") {
		t.Errorf("two new sides: %v", err)
	}
	for given, want := range map[int]int{-1: 0, 0: -1, 4: 4} {
		if got := (settings{retries: given}).configRetries(); got != want {
			t.Errorf("retries %d: Config.Retries %d, want %d", given, got, want)
		}
	}
	s, err := (Options{TargetTTL: map[string]time.Duration{"d": time.Hour}}).settings(job.Verify{TargetTTL: map[string]time.Duration{"d": time.Minute, "e": time.Second}})
	if err != nil || s.ttl["d"] != time.Hour || s.ttl["e"] != time.Second {
		t.Errorf("TTLs %v (%v), want d=1h from the options and e=1s from the job", s.ttl, err)
	}
}
