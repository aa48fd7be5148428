package pipeline_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

// kerberizedJob is the demo job reading its snapshot from an HDFS that
// requires Kerberos (a Hadoop configuration saying so, written for the
// test; no NameNode runs at the address, and none is reached: the login
// comes first), with a security section naming a keytab that does not
// exist, or no section at all without withSecurity. It returns the job
// and the keytab.
func kerberizedJob(t *testing.T, withSecurity bool) (*job.Job, string) {
	t.Helper()
	dir, krb5 := testenv.KerberizedNoKDC(t)
	j, err := job.Load(filepath.Join("..", "configs", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j.Source.Root = "hdfs://127.0.0.1:1/hbase"
	j.Sink.Kind = job.SinkDryRun
	j.Run.Checkpoint = filepath.Join(dir, "checkpoint.json")
	keytab := filepath.Join(dir, "missing.keytab")
	if withSecurity {
		j.Security = job.Security{Keytab: keytab, Principal: "rekey@EXAMPLE.COM", Krb5Conf: krb5}
	}
	return j, keytab
}

// TestPrepareLogsInAsTheJobSays: a Go program that calls pipeline.Prepare
// with a job whose security section names a keytab gets the login from
// that keytab, without the CLI: here the keytab is missing, and the error
// names it. The same job without the section logs in from the ticket
// cache instead, and its error does not name the keytab.
func TestPrepareLogsInAsTheJobSays(t *testing.T) {
	j, keytab := kerberizedJob(t, true)
	r, err := pipeline.Prepare(context.Background(), j, pipeline.Options{Workers: 1})
	if err == nil {
		r.Close()
		t.Fatal("Prepare read an HDFS that requires Kerberos with a keytab that does not exist")
	}
	if !strings.Contains(err.Error(), "keytab "+keytab) {
		t.Errorf("Prepare: %v; want the login error naming the job's keytab %s", err, keytab)
	}
	t.Logf("with the job's keytab: %v", err)

	j, keytab = kerberizedJob(t, false)
	r, err = pipeline.Prepare(context.Background(), j, pipeline.Options{Workers: 1})
	if err == nil {
		r.Close()
		t.Fatal("Prepare read an HDFS that requires Kerberos with no login")
	}
	if strings.Contains(err.Error(), keytab) {
		t.Errorf("Prepare without a security section: %v names the keytab", err)
	}
	t.Logf("without a security section: %v", err)
}
