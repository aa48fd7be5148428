package yarn_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/sasl"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/snapshot"
)

// dayMillis is the demo job's bucket: one UTC day.
const dayMillis = 86_400_000

// demoRule is configs/demo.yaml's re-key, written out here apart from
// package transform: old row = the user (6 bytes), qualifier = the event
// time as 8 big-endian bytes of millis; new row = the user, then the
// event's UTC day as 8 big-endian bytes of the millis it starts at; new
// qualifier = the millis into that day as 4 big-endian bytes. Family,
// timestamp, type and value stay.
func demoRule(t *testing.T, c cell.Cell) cell.Cell {
	if len(c.Row) != 6 || len(c.Qualifier) != 8 {
		t.Fatalf("demo snapshot cell %q/%x: want a 6-byte row and an 8-byte qualifier", c.Row, c.Qualifier)
	}
	ts := int64(binary.BigEndian.Uint64(c.Qualifier))
	day := ts - ts%dayMillis
	c.Row = binary.BigEndian.AppendUint64(append([]byte(nil), c.Row...), uint64(day))
	c.Qualifier = binary.BigEndian.AppendUint32(nil, uint32(ts-day))
	return c
}

// TestSecureYarnPhases: the driver submits a staged job (2 spill tasks, 1
// merge task, the load) to the kerberized cluster's MapReduce on YARN,
// logged in as rekey@EXAMPLE.COM (an ordinary user) from its keytab.
// MapReduce obtains the HDFS delegation token at submission, the driver
// adds an HBase token (TableMapReduceUtil.initCredentials) and ships
// hbase-site.xml; the containers run rekey with no keytab, no ticket cache
// and no security section in the job: the token file YARN gives them
// (HADOOP_TOKEN_FILE_LOCATION) is all they authenticate with, to the
// NameNode and DataNodes (spill and merge write the staging folder on the
// kerberized HDFS) and to HBase (the load, which hands the region servers
// the HDFS token). HBase's dump of the target equals the demo rule over the
// oracle's dump of the snapshot.
//
// With the secure cluster up, YARN that does not start fails the test.
func TestSecureYarnPhases(t *testing.T) {
	s := testenv.RequireSecure(t)
	t0 := time.Now()
	// YARN starts while the binary and the jar build.
	type started struct {
		conf string
		err  error
		took time.Duration
	}
	yarn := make(chan started, 1)
	go func() {
		conf, err := s.Control("yarn-start")
		yarn <- started{conf, err, time.Since(t0)}
	}()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rekey := buildRekey(t, root, dir)
	jar := buildJar(t, root)
	noTicketCache(t, s)

	id := time.Now().UnixNano() % 1_000_000_000
	table := fmt.Sprintf("secure_yarn_%d", id)
	jobPath := secureDemoJob(t, root, dir, table)
	admin := secureHBaseAdmin(t, s)
	t.Cleanup(func() {
		ctx := context.Background()
		admin.DisableTable(ctx, table)
		admin.DeleteTable(ctx, table)
	})
	createDemoTarget(t, admin, jobPath)
	y := <-yarn
	if y.err != nil {
		t.Fatalf("the secure cluster is up but its YARN did not start: %v", y.err)
	}
	yarnConf := y.conf
	t.Logf("secure YARN up in %.1fs; ready to submit after %.1fs", y.took.Seconds(), time.Since(t0).Seconds())

	user := strings.TrimSuffix(s.Secure.ClientPrincipal, "@"+s.Secure.Realm)
	state := fmt.Sprintf("hdfs://%s/user/%s/rekey-yarn-%d", s.NameNode, user, id)
	cmd := secureDriver(t, s, root, jar, yarnConf, jobPath, "--binary", rekey, "--state", state, "--memory", "256",
		"--shards", "2", "--parts", "1", "--principal", s.Secure.ClientPrincipal, "--keytab", s.Secure.ClientKeytab,
		"--", "--workers", "1")
	t1 := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("driver (%.1fs):\n%s", time.Since(t1).Seconds(), out)
	if err != nil {
		for _, f := range containerLogs(filepath.Join(root, "testenv", "run-secure", "yarn"), "stderr") {
			if b, rerr := os.ReadFile(f); rerr == nil && bytes.Contains(b, []byte(state)) {
				t.Logf("%s:\n%s", f, b)
			}
		}
		t.Fatalf("driver: %v", err)
	}
	for _, want := range []string{
		"rekey-yarn: logged in as " + s.Secure.ClientPrincipal,
		"rekey-yarn: the tasks get HBase's client configuration",
		"rekey-yarn: spill: submitted", "rekey-yarn: merge: submitted", "rekey-yarn: load: submitted",
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the driver's output lacks %q", want)
		}
	}

	// One oracle JVM for both dumps (each start costs seconds).
	dumps := secureDumps(t,
		[]string{"dump-snapshot", "file://" + filepath.Join(root, "testdata", "snapshots", "demo_events"), "demo_events"},
		[]string{"dump-table", table})
	old, err := testenv.ParseDump(dumps[0])
	if err != nil {
		t.Fatal(err)
	}
	var want []cell.Cell
	for _, c := range old {
		want = append(want, demoRule(t, c))
	}
	testenv.SortCells(want)
	counter(t, out, "spill", "cells_written", len(want))
	counter(t, out, "load", "regions_loaded", 1)
	got, err := testenv.ParseDump(dumps[1])
	if err != nil {
		t.Fatal(err)
	}
	testenv.SortCells(got)
	testenv.SameCells(t, "target (HBase's dump) vs the demo rule over the snapshot", got, want)
	t.Logf("TestSecureYarnPhases: %d cells; YARN start, build and submission to the end: %.1fs", len(want), time.Since(t0).Seconds())
}

// secureDumps runs the oracle's dumps (dump-snapshot or dump-table
// argument lists) against the secure cluster in one JVM, through its
// dump-batch command, and returns their outputs in order.
func secureDumps(t *testing.T, dumps ...[]string) [][]byte {
	t.Helper()
	dir := t.TempDir()
	var list strings.Builder
	for i, args := range dumps {
		fmt.Fprintf(&list, "%s\t%s\n", filepath.Join(dir, strconv.Itoa(i)), strings.Join(args, "\t"))
	}
	listFile := filepath.Join(dir, "list")
	if err := os.WriteFile(listFile, []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.SecureOracle(t, nil, "dump-batch", listFile)
	out := make([][]byte, len(dumps))
	for i := range dumps {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// noTicketCache fails the test when the containers could find a Kerberos
// ticket cache: they inherit the cluster process's environment (the
// NodeManager runs in it), so neither KRB5CCNAME there nor the default
// cache file of this user may exist, or the test would not show that the
// token file alone suffices.
func noTicketCache(t *testing.T, s *testenv.SecureState) {
	t.Helper()
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", s.PID))
	if err != nil {
		t.Fatalf("the cluster process's environment: %v", err)
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.HasPrefix(kv, []byte("KRB5CCNAME=")) || bytes.HasPrefix(kv, []byte("HADOOP_TOKEN_FILE_LOCATION=")) {
			t.Fatalf("the cluster process (whose environment the containers inherit) has %s", kv)
		}
	}
	if _, err := os.Stat(fmt.Sprintf("/tmp/krb5cc_%d", os.Getuid())); err == nil {
		t.Fatalf("/tmp/krb5cc_%d exists: a container's rekey could use that ticket cache", os.Getuid())
	}
}

// secureDemoJob writes configs/demo.yaml for the YARN tasks: the bundled
// snapshot by its absolute path (the one node sees it), the given target
// table, the rejects beside it, no security section and no quorum: the
// tasks find the cluster and its Kerberos settings in the hbase-site.xml
// the driver ships.
func secureDemoJob(t *testing.T, root, dir, table string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "configs", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, r := range [][2]string{
		{"../testdata/snapshots/demo_events", filepath.Join(root, "testdata", "snapshots", "demo_events")},
		{"../bin/demo-rejects.tsv", filepath.Join(dir, "rejects.tsv")},
		{"table: events_by_day", "table: " + table},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("configs/demo.yaml no longer holds %q", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	p := filepath.Join(dir, "demo.yaml")
	if err := os.WriteFile(p, []byte(text+"sink:\n  type: hfiles\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// secureHBaseAdmin is a client of the secure cluster as the daemons'
// principal, for creating and dropping the target.
func secureHBaseAdmin(t *testing.T, s *testenv.SecureState) *hbase.Client {
	t.Helper()
	qops, err := sasl.ParseProtection(s.Secure.RPCProtection)
	if err != nil {
		t.Fatal(err)
	}
	l, err := krb.LoginWith(krb.Options{Keytab: s.Secure.HBaseKeytab, Principal: s.Secure.HBasePrincipal, Krb5Conf: s.Secure.Krb5Conf})
	if err != nil {
		t.Fatal(err)
	}
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: s.ZKQuorum, ZNodeParent: s.ZNodeParent, OperationTimeout: time.Minute,
		Kerberos: &hbase.Kerberos{Login: l, MasterPrincipal: s.Secure.ServicePattern, RegionServerPrincipal: s.Secure.ServicePattern, Protection: qops}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// createDemoTarget creates the job's target table (one region) before the
// tasks start, so the two spill shards do not race to create it.
func createDemoTarget(t *testing.T, c *hbase.Client, jobPath string) {
	t.Helper()
	ctx := context.Background()
	j, err := job.Load(jobPath)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Open(ctx, j.Source.Root, j.Source.Name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	j.Target.Create.Enabled = true
	if _, err := pipeline.PrepareTarget(ctx, c, j, snap, nil); err != nil {
		t.Fatal(err)
	}
}

// secureDriver returns the driver's command as `hadoop jar` runs it on an
// edge node of a kerberized cluster with HBase:
// HADOOP_CLASSPATH=$(hbase mapredcp):/etc/hbase/conf, here the secure
// cluster's client configuration folder ahead of testenv's classpath (the
// MiniMRYarnCluster puts the submitting JVM's classpath on the
// containers), its krb5.conf, and no ticket cache: the driver logs in from
// the keytab it is given.
func secureDriver(t *testing.T, s *testenv.SecureState, root, jar, yarnConf string, args ...string) *exec.Cmd {
	t.Helper()
	cp, err := os.ReadFile(filepath.Join(root, "testenv", "target", "classpath.txt"))
	if err != nil {
		t.Fatal(err)
	}
	classpath := strings.Join([]string{s.Secure.HadoopConfDir, jar, filepath.Join(root, "testenv", "target", "testenv.jar"), strings.TrimSpace(string(cp))}, ":")
	jargs := []string{"-Xmx256m", "-Djava.net.preferIPv4Stack=true", "-Djava.security.krb5.conf=" + s.Secure.Krb5Conf,
		"-cp", classpath, "dev.rekey.yarn.Driver", "-conf", yarnConf}
	cmd := exec.Command("java", append(jargs, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KRB5CCNAME=") && !strings.HasPrefix(kv, "HBASE_CONF_DIR=") && !strings.HasPrefix(kv, "HADOOP_TOKEN_FILE_LOCATION=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "no-cache"), "HADOOP_CONF_DIR="+s.Secure.HadoopConfDir)
	return cmd
}
