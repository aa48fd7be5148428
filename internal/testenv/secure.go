package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// SecureState is testenv/state-secure.json, written by `SECURE=1
// testenv/bin/up`: the kerberized cluster's addresses (the plain fields,
// same meaning) and its Kerberos facts.
type SecureState struct {
	State
	Secure Kerberos `json:"secure"`
}

// Kerberos is the "secure" block of state-secure.json.
type Kerberos struct {
	// Realm is the KDC's realm, EXAMPLE.COM.
	Realm string `json:"realm"`
	// KDC is host:port of the KDC (TCP).
	KDC string `json:"kdc"`
	// Krb5Conf is a client krb5.conf for the KDC.
	Krb5Conf string `json:"krb5_conf"`
	// Krb5ShortConf is the same asking for ShortLifetimeSeconds tickets,
	// not renewable, for renewal tests.
	Krb5ShortConf string `json:"krb5_short_conf"`
	// ShortLifetimeSeconds is the ticket lifetime Krb5ShortConf asks for.
	ShortLifetimeSeconds int `json:"short_ticket_lifetime_seconds"`
	// HadoopConfDir holds core-site.xml, hdfs-site.xml and hbase-site.xml
	// for clients (server principals in their _HOST form).
	HadoopConfDir string `json:"hadoop_conf_dir"`
	// ClientPrincipal (rekey@EXAMPLE.COM, an ordinary user) and its keytab.
	ClientPrincipal string `json:"client_principal"`
	ClientKeytab    string `json:"client_keytab"`
	// HBasePrincipal is the daemons' principal (user/localhost@EXAMPLE.COM,
	// also the HDFS superuser) and HBaseKeytab its keytab.
	HBasePrincipal string `json:"hbase_principal"`
	HBaseKeytab    string `json:"hbase_keytab"`
	// ServicePattern is the server principal as client configurations
	// write it, user/_HOST@EXAMPLE.COM.
	ServicePattern string `json:"service_principal_pattern"`
	// DataTransferProtection is dfs.data.transfer.protection and
	// RPCProtection hbase.rpc.protection.
	DataTransferProtection string `json:"data_transfer_protection"`
	RPCProtection          string `json:"rpc_protection"`
}

// SecureMarker starts the line RequireSecure logs in every test that found
// the secure cluster (scripts/test_skips.py treats it as IntegrationMarker).
const SecureMarker = IntegrationMarker + " (secure)"

// readJSON decodes the JSON file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// LoadSecure reads testenv/state-secure.json.
func LoadSecure() (*SecureState, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, "testenv", "state-secure.json")
	var s SecureState
	if err := readJSON(path, &s); err != nil {
		return nil, fmt.Errorf("testenv: no running secure cluster (%w); start one with `make testenv-up SECURE=1`", err)
	}
	if s.Secure.Krb5Conf == "" {
		return nil, fmt.Errorf("testenv: %s has no secure block", path)
	}
	return &s, nil
}

// RequireSecure returns the running secure cluster's state. Without one it
// skips the test, loudly (the skip message says how to run it), or fails
// it under REKEY_REQUIRE_SECURE=1, which scripts/test.sh sets for the
// secure pass. The plain pass (REKEY_REQUIRE_CLUSTER=1 alone) skips these
// tests: their cluster starts after it.
func RequireSecure(t testing.TB) *SecureState {
	t.Helper()
	s, err := LoadSecure()
	if err != nil {
		if os.Getenv("REKEY_REQUIRE_SECURE") == "1" {
			t.Fatalf("secure integration test needs the kerberized mini cluster: %v", err)
		}
		t.Skipf("SECURE TEST SKIPPED, Kerberos NOT tested: %v (scripts/test.sh runs it after the plain suites)", err)
	}
	t.Logf("%s at %s, realm %s", SecureMarker, s.ZKQuorum, s.Secure.Realm)
	return s
}

// SecureOracle runs testenv/bin/oracle against the secure cluster (logged
// in as the hbase principal, or as ORACLE_PRINCIPAL from ORACLE_KEYTAB when
// env sets them: "NAME=value" entries) and returns its standard output; it
// fails the test when the oracle fails.
func SecureOracle(t testing.TB, env []string, args ...string) []byte {
	t.Helper()
	out, err := OracleCall{
		Args: args, Env: append([]string{"SECURE=1"}, env...), Label: "SECURE=1 testenv/bin/oracle",
		ClusterState: func() string {
			return "not asked (the secure cluster has no control channel; its log is under testenv/run-secure)"
		},
	}.Run()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}
