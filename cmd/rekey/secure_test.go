package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
)

// secureSnapshot is one seeded table and snapshot on the secure cluster,
// shared by the tests of this file (seeding costs a JVM and half a minute).
var secureSnapshot struct {
	once sync.Once
	name string
	err  error
}

// seedSecure seeds a small two-region table with a flushed store file per
// region and family, and snapshots it, once per test binary; it returns
// the snapshot's name.
func seedSecure(t *testing.T, s *testenv.SecureState) string {
	t.Helper()
	secureSnapshot.once.Do(func() {
		table := fmt.Sprintf("secure_%d", time.Now().UnixNano())
		spec := map[string]any{
			"table": table, "seed": 7,
			"families": []map[string]any{
				{"name": "a", "encoding": "NONE", "compression": "NONE", "versions": 3, "blocksize": 4096},
				{"name": "b", "encoding": "FAST_DIFF", "compression": "GZ", "versions": 1, "blocksize": 4096},
			},
			"split_keys": []string{"r00100"},
			"steps": []map[string]any{
				{"op": "rows", "rows": 120, "qualifiers": 2, "versions": 2, "value_max": 300},
				{"op": "flush"},
				{"op": "snapshot", "name": table},
			},
		}
		if secureSnapshot.err = seedSpec(t, table, spec); secureSnapshot.err == nil {
			secureSnapshot.name = table
		}
	})
	if secureSnapshot.err != nil {
		t.Fatal(secureSnapshot.err)
	}
	if secureSnapshot.name == "" {
		t.Fatal("seeding the secure snapshot failed in an earlier test")
	}
	return secureSnapshot.name
}

// secureClientEnv points the process at the secure cluster's client
// configuration and krb5.conf, with no ticket cache to fall back on.
func secureClientEnv(t *testing.T, s *testenv.SecureState) {
	t.Helper()
	t.Setenv("HADOOP_CONF_DIR", s.Secure.HadoopConfDir)
	t.Setenv("KRB5_CONFIG", s.Secure.Krb5Conf)
	t.Setenv("KRB5CCNAME", "FILE:"+filepath.Join(t.TempDir(), "no-cache"))
}

// TestSecureInspectSnapshotMatchesOracle: `rekey inspect snapshot --cells`
// over kerberized HDFS, logged in from the hbase principal's keytab,
// prints exactly the oracle's dump (HBase's TableSnapshotScanner, logged
// in the same way) whatever the DataNode's protection: authentication,
// integrity (rekey's own DIGEST-MD5 layer, vfs.digestConn) or privacy
// (AES).
func TestSecureInspectSnapshotMatchesOracle(t *testing.T) {
	s := testenv.RequireSecure(t)
	snap := seedSecure(t, s)
	secureClientEnv(t, s)
	want := string(testenv.SecureOracle(t, nil, "dump-snapshot", s.RootDir, snap))
	if len(want) == 0 {
		t.Fatal("the oracle's dump is empty")
	}
	// Each protection the DataNodes accept, asked for alone by the
	// client (which settles on the first of a list it offers), and
	// privacy also with the AES cipher suite, which rekey's handshake
	// negotiates only when the client configuration names it.
	type asking struct{ name, protection, cipher string }
	var cases []asking
	for _, p := range strings.Split(s.Secure.DataTransferProtection, ",") {
		p = strings.TrimSpace(p)
		cases = append(cases, asking{p, p, ""})
		if p == "privacy" {
			cases = append(cases, asking{"privacy-aes", p, "AES/CTR/NoPadding"})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			props := map[string]string{"dfs.data.transfer.protection": c.protection}
			if c.cipher != "" {
				props["dfs.encrypt.data.transfer.cipher.suites"] = c.cipher
			}
			t.Setenv("HADOOP_CONF_DIR", confWith(t, s.Secure.HadoopConfDir, props))
			code, out, errOut := runRekey(t, "inspect", "snapshot", s.RootDir, snap, "--cells",
				"--keytab", s.Secure.HBaseKeytab, "--principal", s.Secure.HBasePrincipal)
			if code != 0 || out != want {
				t.Fatalf("asking %s (DataNodes: %s): exit %d, %d bytes (want %d identical to the oracle's dump); stderr %s",
					c.name, s.Secure.DataTransferProtection, code, len(out), len(want), errOut)
			}
			t.Logf("asking %s: %d bytes identical to the oracle's dump", c.name, len(out))
		})
	}
}

// TestSecureSnapshotUnreadableByPrincipal: rekey@, an ordinary principal,
// may read the snapshot's manifest but not the store files under
// hbase.rootdir (HBase keeps data/ and archive/ at 700 in secure mode):
// opening the snapshot fails at once (even the description, which reads
// no cells), naming the path, the principal and both ways out.
func TestSecureSnapshotUnreadableByPrincipal(t *testing.T) {
	s := testenv.RequireSecure(t)
	snap := seedSecure(t, s)
	secureClientEnv(t, s)
	code, out, errOut := runRekey(t, "inspect", "snapshot", s.RootDir, snap,
		"--keytab", s.Secure.ClientKeytab, "--principal", s.Secure.ClientPrincipal)
	rootPath := strings.TrimPrefix(s.RootDir, "hdfs://"+s.NameNode)
	for _, want := range []string{"permission denied", s.Secure.ClientPrincipal, rootPath + "/data/", "hbase principal", "setfacl", "user:rekey:r-x"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if code == 0 || out != "" {
		t.Fatalf("exit %d, %d bytes out; want a failure and nothing", code, len(out))
	}
}

// TestSecureSimpleClientIsRefusedClearly: a client whose Hadoop
// configuration does not say Kerberos, against the secure NameNode, fails
// within seconds and says the cluster requires Kerberos, quoting the
// NameNode (the HDFS client alone reports "unexpected sequence number").
func TestSecureSimpleClientIsRefusedClearly(t *testing.T) {
	s := testenv.RequireSecure(t)
	t.Setenv("HADOOP_CONF_DIR", t.TempDir())
	start := time.Now()
	code, _, errOut := runRekey(t, "inspect", "snapshot", s.RootDir, "any", "--cells")
	for _, want := range []string{"requires Kerberos", "SIMPLE authentication is not enabled", "HADOOP_CONF_DIR"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if code == 0 || time.Since(start) > 30*time.Second {
		t.Fatalf("exit %d after %v; want a failure within 30 s", code, time.Since(start))
	}
}

// TestSecureNoTicket: Kerberos configured but neither a keytab nor a
// ticket cache: the error says there is no ticket and how to get one.
func TestSecureNoTicket(t *testing.T) {
	s := testenv.RequireSecure(t)
	secureClientEnv(t, s)
	code, _, errOut := runRekey(t, "inspect", "snapshot", s.RootDir, "any", "--cells")
	for _, want := range []string{"requires Kerberos", "no Kerberos ticket", "kinit", "--keytab"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if code == 0 {
		t.Fatal("exit 0")
	}
}
