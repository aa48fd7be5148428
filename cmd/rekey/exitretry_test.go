package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// TestExitCodeRetryable: causes outside the input that a later attempt may
// not meet exit 4, which the YARN driver and the Kubernetes
// podFailurePolicy retry; damaged input stays 1 and usage errors 2 even
// when a retryable cause is wrapped beside them.
func TestExitCodeRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("split 3: %w", pipeline.ErrLeaseLost), exitRetry},
		{fmt.Errorf("open hdfs://nn/x: %w", hdfs.ErrNameNodeUnavailable), exitRetry},
		{fmt.Errorf("region server 127.0.0.1:16020: %w", rpc.ErrDial), exitRetry},
		{fmt.Errorf("multi: %w", rpc.ErrConnBroken), exitRetry},
		{fmt.Errorf("login: %w", krb.ErrKDCUnreachable), exitRetry},
		{fmt.Errorf("read: %w", hfile.ErrCorrupt), exitProblems},
		// Cells staged twice under a one-to-one job: the staging folder is
		// wrong (splits staged more than once), which no retry of the merge
		// cures; the message says to stage again with --fresh.
		{fmt.Errorf("merge part 0/1: %w", hfiles.ErrRepeatedCells), exitProblems},
		{errors.New("something else"), exitProblems},
		{usageError{fmt.Errorf("lease: %w", pipeline.ErrLeased)}, exitUsage},
		{usageError{fmt.Errorf("wrapped: %w", rpc.ErrDial)}, exitUsage},
		{failed{fmt.Errorf("verify: %w", hbase.ErrZooKeeperUnreachable)}, exitRetry},
		{failed{errors.New("verify: the snapshot cannot be read")}, exitUsage},
		{fmt.Errorf("%w: %w", errInterrupted, pipeline.ErrLeaseLost), exitInterrupted},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestUnreachableZooKeeperIsRetry: a target whose ZooKeeper refuses every
// connection is a cause outside the job that a later attempt may not
// meet: exit 4 (retry), not 1 (final), once --timeout runs out. YARN and
// the Kubernetes podFailurePolicy fail a task for good on 1. Meanwhile
// the retries are told on stderr (which server, which attempt, how long
// until rekey gives up), as an HDFS NameNode's are: silence for the whole
// --timeout leaves an operator guessing.
func TestUnreachableZooKeeperIsRetry(t *testing.T) {
	job := demoJob(t)
	// A folder staged offline, for a load that then meets the ZooKeeper.
	staged := demoJob(t)
	if code, out, errOut := runRekey(t, "run", staged, "--sink", "hfiles", "--offline", "--no-load", "--progress", "none"); code != exitOK {
		t.Fatalf("run --offline --no-load: exit %d\n%s%s", code, out, errOut)
	}
	zkRetry := regexp.MustCompile(`(?m)^rekey: ZooKeeper: attempt \d+ at 127\.0\.0\.1:1 failed: .*connection refused; retrying, giving up in \ds$`)
	hdfsRetry := regexp.MustCompile(`(?m)^rekey: HDFS .*127\.0\.0\.1:1.*: no NameNode answers \(attempt \d+: .*\); retrying, giving up in \ds$`)
	for _, tc := range []struct {
		args  []string
		retry *regexp.Regexp
	}{
		{[]string{"run", job, "--zk", "127.0.0.1:1", "--table", "t", "--timeout", "3s", "--progress", "none"}, zkRetry},
		{[]string{"run", job, "--zk", "127.0.0.1:1", "--table", "t", "--timeout", "3s", "--sink", "hfiles", "--progress", "none"}, zkRetry},
		// A source NameNode that refuses the first connection may be
		// restarting: retried for --timeout, then exit 4.
		{[]string{"run", hdfsSourceJob(t, job), "--sink", "dry-run", "--timeout", "3s", "--progress", "none"}, hdfsRetry},
		// verify ends what it cannot decide with 2, but not this.
		{[]string{"verify", job, "--zk", "127.0.0.1:1", "--table", "t", "--timeout", "3s", "--all"}, zkRetry},
		{[]string{"load", staged, "--zk", "127.0.0.1:1", "--timeout", "3s"}, zkRetry},
	} {
		began := time.Now()
		code, _, errOut := runRekey(t, tc.args...)
		if code != exitRetry {
			t.Errorf("rekey %v: exit %d, want %d (retry)\n%s", tc.args[2:], code, exitRetry, errOut)
		}
		if !tc.retry.MatchString(errOut) {
			t.Errorf("rekey %v: no retry line matching %s on stderr:\n%s", tc.args[2:], tc.retry, errOut)
		}
		if took := time.Since(began); took > time.Minute {
			t.Errorf("rekey %v took %s with --timeout 3s", tc.args[2:], took)
		}
	}
}

// hdfsSourceJob is the job at path with its source root on an HDFS whose
// NameNode refuses every connection (nothing listens on port 1).
func hdfsSourceJob(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	y := regexp.MustCompile(`(?m)^  root: .*$`).ReplaceAllString(string(b), "  root: hdfs://127.0.0.1:1/hbase")
	p := filepath.Join(t.TempDir(), "hdfs.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
