package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/internal/sasl"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// secureConfWith copies the secure cluster's client configuration into a
// fresh folder with hbase.rpc.protection set to q, and points
// HBASE_CONF_DIR, HADOOP_CONF_DIR and KRB5_CONFIG at it (no ticket cache:
// the commands log in from the keytab they are given).
func secureConfWith(t *testing.T, s *testenv.SecureState, q sasl.QOP) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"core-site.xml", "hdfs-site.xml", "hbase-site.xml"} {
		b, err := os.ReadFile(filepath.Join(s.Secure.HadoopConfDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "hbase-site.xml" {
			re := regexp.MustCompile(`(<name>hbase\.rpc\.protection</name>\s*<value>)[^<]*(</value>)`)
			if !re.Match(b) {
				t.Fatalf("%s has no hbase.rpc.protection", name)
			}
			b = re.ReplaceAll(b, []byte("${1}"+q.String()+"${2}"))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HBASE_CONF_DIR", dir)
	t.Setenv("HADOOP_CONF_DIR", dir)
	t.Setenv("KRB5_CONFIG", s.Secure.Krb5Conf)
	t.Setenv("KRB5CCNAME", "FILE:"+filepath.Join(t.TempDir(), "no-cache"))
}

// secureAdmin is a client of the secure cluster as the hbase principal,
// for the tests' own cleanup.
func secureAdmin(t *testing.T, s *testenv.SecureState) *hbase.Client {
	t.Helper()
	l, err := krb.LoginWith(krb.Options{Keytab: s.Secure.HBaseKeytab, Principal: s.Secure.HBasePrincipal, Krb5Conf: s.Secure.Krb5Conf})
	if err != nil {
		t.Fatal(err)
	}
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: s.ZKQuorum, ZNodeParent: s.ZNodeParent, OperationTimeout: time.Minute,
		Kerberos: &hbase.Kerberos{Login: l, MasterPrincipal: s.Secure.ServicePattern, RegionServerPrincipal: s.Secure.ServicePattern}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSecureRunThenVerify: against the secure cluster, found through
// hbase-site.xml alone, with each protection its servers allow: `rekey
// run` of the bundled demo snapshot through puts, and through HFiles
// staged on the kerberized HDFS (written under the DataNode's protection,
// integrity included) and bulk loaded, whose table the oracle dumps as
// the demo rule says (requireDemoRule), then `rekey verify --all`
// of each table, which compares every cell of both sides (the oracle's
// dump of the bundled snapshot has 31413) and finds none differing.
func TestSecureRunThenVerify(t *testing.T) {
	s := testenv.RequireSecure(t)
	qops, err := sasl.ParseProtection(s.Secure.RPCProtection)
	if err != nil {
		t.Fatal(err)
	}
	admin := secureAdmin(t, s)
	login := []string{"--keytab", s.Secure.HBaseKeytab, "--principal", s.Secure.HBasePrincipal}
	for _, q := range qops {
		for _, sink := range []string{"puts", "hfiles"} {
			t.Run(q.String()+"/"+sink, func(t *testing.T) {
				secureConfWith(t, s, q)
				table := "secure_run_" + sink + "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
				t.Cleanup(func() {
					ctx := context.Background()
					admin.DisableTable(ctx, table)
					admin.DeleteTable(ctx, table)
				})
				job := demoJob(t)
				args := append([]string{"run", job, "--table", table, "--create", "--progress", "none", "--sink", sink}, login...)
				if sink == "hfiles" {
					args = append(args, "--staging", fmt.Sprintf("hdfs://%s/user/user/rekey-secure-stage-%d", s.NameNode, time.Now().UnixNano()))
				}
				if code, out, errOut := runRekey(t, args...); code != 0 {
					t.Fatalf("run: exit %d: %s\n%s", code, errOut, out)
				}
				if sink == "hfiles" {
					requireDemoRule(t, table)
				}
				code, out, errOut := runRekey(t, append([]string{"verify", job, "--table", table, "--all", "--json"}, login...)...)
				if code != exitOK {
					t.Fatalf("verify --all: exit %d: %s\n%.3000s", code, errOut, out)
				}
				if r := decodeReport(t, out); r.Summary.CellsCompared != 2*31413 || r.Summary.Mismatched != 0 {
					t.Fatalf("verify --all summary %+v", r.Summary)
				}
			})
		}
	}
}

// TestSecureStagedRunOutlivesItsTickets: a staged run on the secure
// cluster, logged in from a keytab with tickets of krb5-short.conf's
// short lifetime (not renewable), throttled so that its spill lasts
// longer than a ticket lives; the load then opens new Kerberos
// connections (the NameNode's, for the delegation token the bulk load
// sends), which a login that did not log in again by itself would fail.
// The target is the demo rule on the oracle's dump.
func TestSecureStagedRunOutlivesItsTickets(t *testing.T) {
	s := testenv.RequireSecure(t)
	qops, err := sasl.ParseProtection(s.Secure.RPCProtection)
	if err != nil {
		t.Fatal(err)
	}
	secureConfWith(t, s, qops[0])
	admin := secureAdmin(t, s)
	table := "secure_outlive_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		ctx := context.Background()
		admin.DisableTable(ctx, table)
		admin.DeleteTable(ctx, table)
	})
	life := time.Duration(s.Secure.ShortLifetimeSeconds) * time.Second
	// The demo snapshot's 31413 cells over a lifetime and a half.
	rate := int(31413 / (1.5 * life.Seconds()))
	staging := fmt.Sprintf("hdfs://%s/user/user/rekey-outlive-%d", s.NameNode, time.Now().UnixNano())
	began := time.Now()
	code, out, errOut := runRekey(t, "run", demoJob(t), "--table", table, "--create", "--progress", "none",
		"--sink", "hfiles", "--staging", staging, "--max-cells-per-sec", strconv.Itoa(rate),
		"--keytab", s.Secure.HBaseKeytab, "--principal", s.Secure.HBasePrincipal, "--krb5-conf", s.Secure.Krb5ShortConf)
	took := time.Since(began)
	if code != 0 {
		t.Fatalf("run after %v (tickets live %v): exit %d: %s\n%s", took.Round(time.Second), life, code, errOut, out)
	}
	if took < life+10*time.Second {
		t.Fatalf("the run took %v, tickets live %v: it did not outlive its first ticket, nothing was tested", took.Round(time.Second), life)
	}
	t.Logf("the run took %v with %v tickets", took.Round(time.Second), life)
	requireDemoRule(t, table)
}
