package hfiles

import (
	"context"
	"fmt"
	iofs "io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/sasl"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs"
)

// secureClient is an HBase client of the secure cluster as principal.
func secureClient(t *testing.T, s *testenv.SecureState, keytab, principal string) *hbase.Client {
	t.Helper()
	l, err := krb.LoginWith(krb.Options{Keytab: keytab, Principal: principal, Krb5Conf: s.Secure.Krb5Conf})
	if err != nil {
		t.Fatal(err)
	}
	// The protections the cluster was started with (hbase.rpc.protection).
	qops, err := sasl.ParseProtection(s.Secure.RPCProtection)
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

// superHDFS is an HDFS client of the secure cluster as the daemons'
// principal, the HDFS superuser: the test's own setup and checks.
func superHDFS(t *testing.T, s *testenv.SecureState) *hdfs.Client {
	t.Helper()
	l, err := krb.LoginWith(krb.Options{Keytab: s.Secure.HBaseKeytab, Principal: s.Secure.HBasePrincipal, Krb5Conf: s.Secure.Krb5Conf})
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(s.NameNode, ":")
	if host == "127.0.0.1" {
		host = "localhost" // what the NameNode's principal names
	}
	spn, _, _ := strings.Cut(strings.ReplaceAll(s.Secure.ServicePattern, "_HOST", host), "@")
	fs, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{host + ":" + port}, KerberosClient: l.Client,
		KerberosServicePrincipleName: spn, DataTransferProtection: s.Secure.DataTransferProtection})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

// TestSecureStageLoadWithDelegationToken: on the secure cluster, rekey's
// own principal (an ordinary user) stages HFiles in a folder only it may
// enter (mode 700) and bulk loads them with its HDFS delegation token.
// First the token is cancelled before the load uses it: the region server
// refuses the load (loaded=false), the table stays empty and the files
// stay in the private folder; so the server moved nothing with its own
// superuser token, and used ours. Then a resumed load, with a fresh token,
// loads them: HBase's own scan (the oracle) returns exactly the cells
// written, the folder is still rekey's and private, and the sink has
// cancelled the token it obtained (cancelling it again is refused).
func TestSecureStageLoadWithDelegationToken(t *testing.T) {
	s := testenv.RequireSecure(t)
	ctx := context.Background()
	t.Setenv("HADOOP_CONF_DIR", s.Secure.HadoopConfDir)
	t.Setenv("KRB5_CONFIG", s.Secure.Krb5Conf)
	id := krb.NewIdentity(krb.Options{Keytab: s.Secure.ClientKeytab, Principal: s.Secure.ClientPrincipal, Krb5Conf: s.Secure.Krb5Conf})
	user, _, _ := strings.Cut(s.Secure.ClientPrincipal, "@")

	admin := secureClient(t, s, s.Secure.HBaseKeytab, s.Secure.HBasePrincipal)
	table := fmt.Sprintf("stage_dtoken_%d", time.Now().UnixNano())
	if err := admin.CreateTable(ctx, hbase.TableSpec{Name: table, Families: []hbase.Family{{Name: "f1"}, {Name: "f2"}}, SplitKeys: [][]byte{[]byte("n")}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.DisableTable(ctx, table)
		admin.DeleteTable(ctx, table)
	})

	// The private staging folder, made by the superuser for rekey.
	super := superHDFS(t, s)
	home := "/user/" + user
	dir := path.Join(home, table)
	if err := super.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, dir} {
		if err := super.Chown(p, user, "supergroup"); err != nil {
			t.Fatal(err)
		}
		if err := super.Chmod(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { super.RemoveAll(dir) })
	staging := "hdfs://" + s.NameNode + dir

	c := secureClient(t, s, s.Secure.ClientKeytab, s.Secure.ClientPrincipal)
	sk, err := New(ctx, Options{Kerberos: id, Staging: staging, Table: table, Client: c, Memory: 512 << 10, Workers: 2, HFileSize: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	cells := genCells(11, 5000)
	writeSplit(t, sk, "one", cells)

	var sent *vfs.DelegationToken
	testFSToken = func(ctx context.Context, dt *vfs.DelegationToken) *vfs.DelegationToken {
		if err := dt.Cancel(ctx); err != nil {
			t.Errorf("cancelling the token before the load: %v", err)
		}
		return dt
	}
	t.Cleanup(func() { testFSToken = nil })
	err = sk.Finish(ctx, logRep{t})
	if err == nil {
		t.Fatal("the load with a cancelled delegation token succeeded: the region server did not use the token")
	}
	t.Logf("with a cancelled token: %v", err)
	if !strings.Contains(err.Error(), "delegation token") {
		t.Errorf("error does not name the delegation token: %v", err)
	}
	if got := oracleDumpSecure(t, table); len(got) != 0 {
		t.Fatalf("the refused load left %d cells in the table", len(got))
	}
	if n := countFiles(t, super, path.Join(dir, hfilesDir)); n == 0 {
		t.Fatal("the refused load took the staged files")
	}

	testFSToken = func(_ context.Context, dt *vfs.DelegationToken) *vfs.DelegationToken {
		sent = dt
		return dt
	}
	if err := sk.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	equalLines(t, oracleDumpSecure(t, table), dump(sorted(cells)))
	if n := countFiles(t, super, path.Join(dir, hfilesDir)); n != 0 {
		t.Errorf("%d HFiles left in the staging folder after the load", n)
	}
	fi, err := super.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if owner := fi.Sys().(*hdfs.FileStatus).GetOwner(); owner != user || fi.Mode().Perm() != 0o700 {
		t.Errorf("staging folder is %s's, mode %v; want %s's, 0700", owner, fi.Mode().Perm(), user)
	}
	if sent == nil {
		t.Fatal("the load obtained no delegation token")
	}
	if err := sent.Cancel(ctx); err == nil {
		t.Error("the sink left its delegation token uncancelled")
	}
	for _, v := range []string{fmt.Sprint(sent), fmt.Sprintf("%#v", sent), fmt.Sprintf("%+v", sent)} {
		if v != sent.String() || strings.Contains(v, string(sent.Password)) {
			t.Errorf("the token prints more than its kind and service: %s", v)
		}
	}
}

// oracleDumpSecure is the secure oracle's scan of table in dump lines.
func oracleDumpSecure(t *testing.T, table string) []string {
	return dumpLines(testenv.SecureOracle(t, nil, "dump-table", table))
}

// countFiles counts the regular files under dir.
func countFiles(t *testing.T, fs *hdfs.Client, dir string) int {
	n := 0
	err := fs.Walk(dir, func(_ string, fi iofs.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSecureLoadReplacesLapsedToken: on the secure cluster, a load whose
// delegation token lapses while it runs (here: cancelled right after the
// load renewed it, its first renewal set due at once, testRenewAt) gets a
// new token before its next region and loads every region with it:
// HBase's own scan holds every cell. Without the replacement every region
// is refused, as TestSecureStageLoadWithDelegationToken's cancelled token
// shows. Both tokens are cancelled when the load ends.
func TestSecureLoadReplacesLapsedToken(t *testing.T) {
	s := testenv.RequireSecure(t)
	ctx := context.Background()
	t.Setenv("HADOOP_CONF_DIR", s.Secure.HadoopConfDir)
	t.Setenv("KRB5_CONFIG", s.Secure.Krb5Conf)
	id := krb.NewIdentity(krb.Options{Keytab: s.Secure.ClientKeytab, Principal: s.Secure.ClientPrincipal, Krb5Conf: s.Secure.Krb5Conf})
	user, _, _ := strings.Cut(s.Secure.ClientPrincipal, "@")

	admin := secureClient(t, s, s.Secure.HBaseKeytab, s.Secure.HBasePrincipal)
	table := fmt.Sprintf("stage_renew_%d", time.Now().UnixNano())
	if err := admin.CreateTable(ctx, hbase.TableSpec{Name: table, Families: []hbase.Family{{Name: "f1"}, {Name: "f2"}}, SplitKeys: [][]byte{[]byte("g"), []byte("n"), []byte("t")}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.DisableTable(ctx, table)
		admin.DeleteTable(ctx, table)
	})
	super := superHDFS(t, s)
	home := "/user/" + user
	dir := path.Join(home, table)
	if err := super.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, dir} {
		if err := super.Chown(p, user, "supergroup"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { super.RemoveAll(dir) })
	staging := "hdfs://" + s.NameNode + dir

	c := secureClient(t, s, s.Secure.ClientKeytab, s.Secure.ClientPrincipal)
	sk, err := New(ctx, Options{Kerberos: id, Staging: staging, Table: table, Client: c, Memory: 512 << 10, Workers: 2, HFileSize: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	cells := genCells(31, 6000)
	writeSplit(t, sk, "one", cells)

	var tokens []*vfs.DelegationToken
	testRenewAt = func(dt *vfs.DelegationToken, exp time.Time) time.Time {
		tokens = append(tokens, dt)
		if len(tokens) == 1 {
			// Renewed at the start of the load: now it lapses.
			if err := dt.Cancel(ctx); err != nil {
				t.Errorf("cancelling the load's token: %v", err)
			}
			return time.Now()
		}
		return exp
	}
	t.Cleanup(func() { testRenewAt = nil })
	if err := sk.Finish(ctx, logRep{t}); err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0] == tokens[1] {
		t.Fatalf("the load renewed %d tokens, want the first and then its replacement", len(tokens))
	}
	equalLines(t, oracleDumpSecure(t, table), dump(sorted(cells)))
	if err := tokens[1].Cancel(ctx); err == nil {
		t.Error("the sink left the replacement token uncancelled")
	}
}
