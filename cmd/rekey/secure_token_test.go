package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/hadooptoken"
	"github.com/rekeyhq/rekey/internal/sasl"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// TestSecurePhasesWithTokenFileOnly: the tasks of a staged job run as a
// YARN container runs them on a kerberized cluster: no keytab, no ticket
// cache, only the token storage file its client wrote
// (HADOOP_TOKEN_FILE_LOCATION; here Hadoop's own Credentials, the oracle,
// as the hbase principal, with the HDFS token and the HBase token that
// TableMapReduceUtil.initCredentials adds). A spill task (creating the
// table), a merge task on the secure HDFS, and the load, which hands the
// region servers the file's HDFS token; the oracle's dump of the table is
// the demo rule over the snapshot.
func TestSecurePhasesWithTokenFileOnly(t *testing.T) {
	s := testenv.RequireSecure(t)
	qops, err := sasl.ParseProtection(s.Secure.RPCProtection)
	if err != nil {
		t.Fatal(err)
	}
	secureConfWith(t, s, qops[0])
	tokens := filepath.Join(t.TempDir(), "container_tokens")
	testenv.SecureOracle(t, nil, "write-credentials", tokens, "proto", "yarn", "--hbase")
	t.Setenv(hadooptoken.TokenFileEnv, tokens)

	dir := fmt.Sprintf("/user/user/rekey-token-phases-%d", time.Now().UnixNano())
	staging := "hdfs://" + s.NameNode + dir
	fsys, err := hdfs.DialWith(s.NameNode, hdfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	defer fsys.RemoveAll(dir)

	admin := secureAdmin(t, s)
	table := "secure_token_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		ctx := context.Background()
		admin.DisableTable(ctx, table)
		admin.DeleteTable(ctx, table)
	})
	online := demoJob(t)
	f, err := os.OpenFile(online, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("sink:\n  type: hfiles\n  staging: " + staging + "\n")
	f.Close()
	for _, task := range [][]string{
		{"--phase", "spill", "--shard", "0/1", "--create"},
		{"--phase", "merge", "--part", "0/1"},
		{"--phase", "load"},
	} {
		code, out, errOut := runRekey(t, append([]string{"run", online, "--table", table, "--progress", "none"}, task...)...)
		if code != 0 {
			t.Fatalf("rekey run %v with the token file only: exit %d\n%s\n%s", task, code, errOut, out)
		}
	}
	requireDemoRule(t, table)
}
