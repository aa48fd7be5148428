package hbase

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/sasl"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// secureLogin logs in as the daemons' principal: the cluster's superuser,
// who may create tables and read hbase.rootdir.
func secureLogin(t *testing.T, s *testenv.SecureState) *krb.Login {
	t.Helper()
	l, err := krb.LoginWith(krb.Options{Keytab: s.Secure.HBaseKeytab, Principal: s.Secure.HBasePrincipal, Krb5Conf: s.Secure.Krb5Conf})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// secureClient is a client of the secure cluster with one protection.
func secureClient(t *testing.T, s *testenv.SecureState, l *krb.Login, q sasl.QOP) *Client {
	t.Helper()
	c, err := NewClient(Config{ZKQuorum: s.ZKQuorum, ZNodeParent: s.ZNodeParent, OperationTimeout: time.Minute,
		Kerberos: &Kerberos{Login: l, MasterPrincipal: s.Secure.ServicePattern, RegionServerPrincipal: s.Secure.ServicePattern, Protection: []sasl.QOP{q}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// secureHDFS is an HDFS client of the secure cluster as login.
func secureHDFS(t *testing.T, s *testenv.SecureState, l *krb.Login) *hdfs.Client {
	t.Helper()
	// colinmarc/hdfs puts the address, not its host name, for _HOST.
	host, _, _ := strings.Cut(s.NameNode, ":")
	spn, err := rpc.ServicePrincipal(s.Secure.ServicePattern, host)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{s.NameNode}, KerberosClient: l.Client,
		KerberosServicePrincipleName: spn, DataTransferProtection: s.Secure.DataTransferProtection})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

// allowedQOPs lists the protections the secure cluster's servers allow.
func allowedQOPs(t *testing.T, s *testenv.SecureState) []sasl.QOP {
	t.Helper()
	qs, err := sasl.ParseProtection(s.Secure.RPCProtection)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// oracleCells is the secure oracle's dump of a table.
func oracleCells(t *testing.T, table string) []cell.Cell {
	t.Helper()
	cells, err := testenv.ParseDump(testenv.SecureOracle(t, nil, "dump-table", table))
	if err != nil {
		t.Fatal(err)
	}
	return cells
}

// TestSecureClientEachQOP: over SASL with each protection the servers
// allow, admin calls (create, flush, disable, delete: the master), puts
// and scans (two region servers' regions) and a bulk load work; HBase's
// own client (the oracle) then reads exactly the cells written, and so
// does this client.
func TestSecureClientEachQOP(t *testing.T) {
	s := testenv.RequireSecure(t)
	l := secureLogin(t, s)
	u, err := url.Parse(s.RootDir)
	if err != nil {
		t.Fatal(err)
	}
	fs := secureHDFS(t, s, l)
	for _, q := range allowedQOPs(t, s) {
		t.Run(q.String(), func(t *testing.T) {
			ctx := context.Background()
			c := secureClient(t, s, l, q)
			table := tempTable(t, c, "secure_"+q.String(), nil, []byte("m"))
			var want []cell.Cell
			for i := 0; i < 300; i++ {
				// Rows on both sides of the split; values up to 40 KB so
				// that batches span several wrap tokens.
				v := strings.Repeat(fmt.Sprint(i%10), 1+(i*137)%40000)
				want = append(want, put(fmt.Sprintf("%c%03d", 'a'+i%26, i), "q", int64(1000+i), v))
			}
			w := c.NewWriter([]byte(table), WriterConfig{})
			if err := w.Write(ctx, want...); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			testenv.SortCells(want)
			testenv.SameCells(t, "oracle dump after puts over "+q.String(), oracleCells(t, table), want)
			testenv.SameCells(t, "scan over "+q.String(), scanAll(t, c, table, &Scan{MaxVersions: 10}), want)

			// Bulk load the table's store files (one per region, moved out of
			// the table: a NameNode rename, no DataNode traffic) into a fresh
			// table. Each file's bounds are the first and last row written
			// to its region.
			if err := c.Flush(ctx, table); err != nil {
				t.Fatal(err)
			}
			dst := tempTable(t, c, "secure_bulk_"+q.String(), nil, []byte("m"))
			staging := fmt.Sprintf("/user/%s/rekey-bulk-%d/f", strings.Split(s.Secure.HBasePrincipal, "/")[0], time.Now().UnixNano())
			if err := fs.MkdirAll(staging, 0o777); err != nil {
				t.Fatal(err)
			}
			defer fs.RemoveAll(path.Dir(staging))
			srcs := storeFiles(t, fs, u.Path, c, table)
			if len(srcs) != 2 {
				t.Fatalf("%d store files, want one per region: %v", len(srcs), srcs)
			}
			var files []BulkFile
			for i, src := range srcs {
				first, last := rowBounds(want, i == 0)
				p := path.Join(staging, fmt.Sprint("part", i))
				if err := fs.Rename(src, p); err != nil {
					t.Fatal(err)
				}
				files = append(files, BulkFile{Family: []byte("f"), Path: p, FirstRow: first, LastRow: last})
			}
			if err := c.BulkLoad(ctx, dst, files); err != nil {
				t.Fatal(err)
			}
			testenv.SameCells(t, "oracle dump of the bulk-loaded table over "+q.String(), oracleCells(t, dst), want)
		})
	}
}

// rowBounds returns the first and last row of the sorted cells below "m"
// (low) or from "m" on.
func rowBounds(cells []cell.Cell, low bool) (first, last []byte) {
	for _, c := range cells {
		if (string(c.Row) < "m") != low {
			continue
		}
		if first == nil {
			first = c.Row
		}
		last = c.Row
	}
	return first, last
}

// TestSecureSimpleClientFailsFast: a client configured without Kerberos
// against the secure cluster fails its first operation within seconds,
// saying the cluster wants Kerberos, instead of retrying for minutes.
func TestSecureSimpleClientFailsFast(t *testing.T) {
	s := testenv.RequireSecure(t)
	c, err := NewClient(Config{ZKQuorum: s.ZKQuorum, ZNodeParent: s.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.TableExists(context.Background(), "hbase:meta")
	var ae *rpc.AuthError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "Authentication is required") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to fail", d)
	}
	t.Logf("%v, after %v", err, time.Since(start).Round(time.Millisecond))
}

// TestSecureSiteConfig: hbase-site.xml of the secure cluster's client
// configuration gives the Kerberos settings, and with a login given
// (Kerberos.Identity) a client from it works.
func TestSecureSiteConfig(t *testing.T) {
	s := testenv.RequireSecure(t)
	t.Setenv("HBASE_CONF_DIR", s.Secure.HadoopConfDir)
	cfg, _, err := Locate(s.ZKQuorum, s.ZNodeParent)
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Kerberos
	if k == nil || k.RegionServerPrincipal != s.Secure.ServicePattern || k.MasterPrincipal != s.Secure.ServicePattern {
		t.Fatalf("Kerberos from hbase-site.xml = %+v", k)
	}
	want, _ := sasl.ParseProtection(s.Secure.RPCProtection)
	if fmt.Sprint(k.Protection) != fmt.Sprint(want) {
		t.Fatalf("protection %v, want %v", k.Protection, want)
	}
	cfg.Kerberos.Identity = krb.NewIdentity(krb.Options{Keytab: s.Secure.ClientKeytab, Principal: s.Secure.ClientPrincipal, Krb5Conf: s.Secure.Krb5Conf})
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// rekey@ is an ordinary user: it may ask whether a table exists.
	if ok, err := c.TableExists(context.Background(), "hbase:meta"); err != nil || !ok {
		t.Fatalf("TableExists(hbase:meta) = %v, %v", ok, err)
	}
}

// TestSecureNoTicket: Kerberos on, no keytab given and an empty ticket
// cache: NewClient fails at once with the login's "no ticket" error.
func TestSecureNoTicket(t *testing.T) {
	s := testenv.RequireSecure(t)
	id := krb.NewIdentity(krb.Options{CCache: path.Join(t.TempDir(), "no-such-cache"), Krb5Conf: s.Secure.Krb5Conf})
	_, err := NewClient(Config{ZKQuorum: s.ZKQuorum, ZNodeParent: s.ZNodeParent,
		Kerberos: &Kerberos{Identity: id, MasterPrincipal: s.Secure.ServicePattern, RegionServerPrincipal: s.Secure.ServicePattern}})
	if !errors.Is(err, krb.ErrNoTicket) {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}
