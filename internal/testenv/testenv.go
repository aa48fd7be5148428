// Package testenv connects Go integration tests to the HBase mini cluster
// that testenv/ starts on loopback. It reads testenv/state.json, which
// `make testenv-up` writes, and skips a test with a clear message when no
// cluster is up, unless REKEY_REQUIRE_CLUSTER=1 (set by `make test`), in
// which case a missing cluster fails the test instead.
package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// State is the content of testenv/state.json.
type State struct {
	// ZKQuorum is host:port of the mini cluster's ZooKeeper.
	ZKQuorum string `json:"zookeeper_quorum"`
	// ZNodeParent is zookeeper.znode.parent, normally /hbase.
	ZNodeParent string `json:"zookeeper_znode_parent"`
	// NameNode is host:port of the HDFS NameNode RPC endpoint.
	NameNode string `json:"hdfs_namenode"`
	// RootDir is hbase.rootdir, an hdfs:// URL.
	RootDir string `json:"hbase_rootdir"`
	// Master is host:port of the active HMaster's RPC endpoint.
	Master string `json:"master"`
	// ControlPort is the loopback port of the cluster process's control
	// channel (stop or start a region server, shut down).
	ControlPort int `json:"control_port"`
	// PID is the cluster JVM's process id.
	PID int `json:"pid"`
	// Log is the path of the cluster's log file.
	Log string `json:"log"`
	// HBaseVersion is the version HBase's jars in the cluster report
	// (testenv/bin/up's HBASE_VERSION, default 2.5.11-hadoop3); empty in
	// a state.json written before testenv named it.
	HBaseVersion string `json:"hbase_version"`
	// S3AClient says whether the region servers have an S3A client
	// configured for the testenv S3 server (testenv/pom.xml's s3a profile,
	// the default HBase version only), so they can bulk load s3a:// paths.
	S3AClient bool `json:"s3a_client"`
}

// RepoRoot returns the directory holding go.mod, found by walking up from
// the working directory (go test runs each package in its own folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Load reads testenv/state.json.
func Load() (*State, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, "testenv", stateFile())
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("testenv: no running test cluster (%v); start one with `make testenv-up`", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", path, err)
	}
	return &s, nil
}

// stateFile names the state file of the cluster the tests use: the plain
// one's, or under TESTENV_ROOTDIR=s3 the S3-root cluster's (testenv/bin/up
// with the same variable starts it; bin/oracle follows the same variable,
// which the oracle's process inherits).
func stateFile() string {
	if S3RootPass() {
		return "state-s3root.json"
	}
	return "state.json"
}

// runDir names the run directory of that cluster (its S3 server's s3.json
// is in it).
func runDir() string {
	if S3RootPass() {
		return "run-s3root"
	}
	return "run"
}

// S3RootPass says whether the tests run against the cluster whose
// hbase.rootdir is on S3 (TESTENV_ROOTDIR=s3): the S3-root pass, which
// runs only the tests named TestS3Root*.
func S3RootPass() bool { return os.Getenv("TESTENV_ROOTDIR") == "s3" }

// RequireS3Root returns the S3-root cluster's state (TESTENV_ROOTDIR=s3),
// or skips the test outside that pass, without claiming the plain cluster
// (so the plain pass does not count the skip as a hidden claim); under
// REKEY_REQUIRE_S3ROOT=1 it fails instead.
func RequireS3Root(t testing.TB) *State {
	t.Helper()
	if !S3RootPass() {
		if os.Getenv("REKEY_REQUIRE_S3ROOT") == "1" {
			t.Fatal("integration test needs the S3-root cluster: set TESTENV_ROOTDIR=s3 (TESTENV_ROOTDIR=s3 testenv/bin/up starts it)")
		}
		t.Skip("runs in the S3-root pass: TESTENV_ROOTDIR=s3 testenv/bin/up, then TESTENV_ROOTDIR=s3 go test -run '^TestS3Root' ./...")
	}
	st := Require(t)
	if !strings.HasPrefix(st.RootDir, "s3a://") {
		t.Fatalf("TESTENV_ROOTDIR=s3, but the cluster's hbase.rootdir is %s", st.RootDir)
	}
	return st
}

// DestructivePass says whether the tests run in the destructive pass
// (TESTENV_DESTRUCTIVE=1): the one that runs, alone and after every other
// package, the tests that stop a region server or the HMaster of the
// shared cluster, or expire its ZooKeeper sessions (TestDestructive*).
func DestructivePass() bool { return os.Getenv("TESTENV_DESTRUCTIVE") == "1" }

// RequireDestructive returns the cluster's state for a test that stops a
// server of the shared cluster (a region server, the HMaster) or expires
// a ZooKeeper session. Beside other packages such a test breaks their
// seeds and snapshots (a FLUSH snapshot waits out the master's timeout
// while a region server is down), so it runs only in the destructive
// pass, which scripts/test.sh runs on the plain cluster once every other
// package is done; outside that pass it skips without claiming the
// cluster (so the skip is not counted as a hidden claim), and under
// REKEY_REQUIRE_DESTRUCTIVE=1 it fails instead. Such a test's name starts
// with TestDestructive, which is how the pass finds it.
func RequireDestructive(t testing.TB) *State {
	t.Helper()
	if !DestructivePass() {
		if os.Getenv("REKEY_REQUIRE_DESTRUCTIVE") == "1" {
			t.Fatal("destructive test outside the destructive pass: set TESTENV_DESTRUCTIVE=1")
		}
		t.Skip("DESTRUCTIVE: stops a server of the shared cluster; runs alone in the destructive pass after every other package (scripts/test.sh), or TESTENV_DESTRUCTIVE=1 go test -run '^TestDestructive' ./hbase ./pipeline")
	}
	return Require(t)
}

// IntegrationMarker starts the line Require logs in every test that found
// the cluster: scripts/test_skips.py fails `make test` when a test that
// logged it was skipped anyway, since a skip while the cluster is up hides
// a claim the cluster could have judged.
const IntegrationMarker = "testenv: integration test on the mini cluster"

// Require returns the running cluster's state, or skips the test (fails it
// under REKEY_REQUIRE_CLUSTER=1) when there is none.
func Require(t testing.TB) *State {
	t.Helper()
	s, err := Load()
	if err != nil {
		if os.Getenv("REKEY_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("integration test needs the mini cluster: %v", err)
		}
		t.Skipf("integration test skipped: %v (or run `make test`, which starts one)", err)
	}
	t.Logf("%s at %s", IntegrationMarker, s.ZKQuorum)
	return s
}
