package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
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
// TableMapReduceUtil.initCredentials adds). Offline, two spill shards and
// two merge parts stage the demo snapshot on the secure HDFS, and HBase's
// own HFile reader (the oracle) finds every cell of the snapshot's dump
// (31413) in the merged HFiles. Then against the cluster: spill, merge
// and the load into a table the first task creates, the load handing the
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
	job := demoJob(t)
	f, err := os.OpenFile(job, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("sink:\n  type: hfiles\n  offline: true\n  staging: " + staging + "\n")
	f.Close()
	for _, task := range [][]string{
		{"--phase", "spill", "--shard", "0/2"},
		{"--phase", "spill", "--shard", "1/2"},
		{"--phase", "merge", "--part", "0/2"},
		{"--phase", "merge", "--part", "1/2"},
	} {
		code, out, errOut := runRekey(t, append([]string{"run", job, "--progress", "none", "--split-bytes", "16KiB"}, task...)...)
		if code != 0 {
			t.Fatalf("rekey run %v with the token file only: exit %d\n%s\n%s", task, code, errOut, out)
		}
	}

	fsys, err := hdfs.DialWith(s.NameNode, hdfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	defer fsys.RemoveAll(dir)
	var files []string
	var walk func(string) error
	walk = func(d string) error {
		fis, err := fsys.ReadDir(d)
		if err != nil {
			return err
		}
		for _, fi := range fis {
			p := path.Join(d, fi.Name())
			if fi.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
			} else if !strings.HasPrefix(fi.Name(), ".") {
				files = append(files, "hdfs://"+s.NameNode+p)
			}
		}
		return nil
	}
	err = walk(dir + "/hfiles")
	if err != nil || len(files) == 0 {
		t.Fatalf("staged HFiles under %s: %v, %v", staging, files, err)
	}
	cells := 0
	for _, file := range files {
		for _, line := range strings.Split(string(testenv.SecureOracle(t, nil, "dump-hfile", file)), "\n") {
			if strings.TrimSpace(line) != "" {
				cells++
			}
		}
	}
	// testdata/snapshots/demo_events.cells, the oracle's dump of the
	// snapshot, has 31413 cells; the demo layout keeps every one.
	if cells != 31413 {
		t.Fatalf("HBase reads %d cells in the %d staged HFiles, want 31413", cells, len(files))
	}
	t.Logf("%d HFiles, %d cells, staged with the token file only", len(files), cells)

	// The same tasks against the cluster, the load included.
	admin := secureAdmin(t, s)
	table := "secure_token_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		ctx := context.Background()
		admin.DisableTable(ctx, table)
		admin.DeleteTable(ctx, table)
	})
	online := demoJob(t)
	f, err = os.OpenFile(online, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("sink:\n  type: hfiles\n  staging: " + staging + "-online\n")
	f.Close()
	defer fsys.RemoveAll(dir + "-online")
	for _, task := range [][]string{
		{"--phase", "spill", "--shard", "0/2", "--create"},
		{"--phase", "spill", "--shard", "1/2"},
		{"--phase", "merge", "--part", "0/2"},
		{"--phase", "merge", "--part", "1/2"},
		{"--phase", "load"},
	} {
		code, out, errOut := runRekey(t, append([]string{"run", online, "--table", table, "--progress", "none", "--split-bytes", "16KiB"}, task...)...)
		if code != 0 {
			t.Fatalf("rekey run %v with the token file only: exit %d\n%s\n%s", task, code, errOut, out)
		}
	}
	requireDemoRule(t, table)
}
