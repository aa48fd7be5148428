package hbase

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRetryLogPace: the first retry at a server is told at once, with the
// attempt and the time left until the operation gives up; more retries at
// it within retryLogEvery are not (a ZooKeeper client reconnects every
// second), while another server's are; an answer after told retries is
// told, and the next outage starts with a line again.
func TestRetryLogPace(t *testing.T) {
	var lines []string
	l := newRetryLog(func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	refused := errors.New("connection refused")
	l.retry(ctx, "HBase get", "rs1:16020", 1, refused)
	l.retry(ctx, "HBase get", "rs1:16020", 2, refused)
	l.retry(ctx, "HBase get", "rs2:16020", 1, refused)
	l.answered("HBase get", "rs1:16020", 3)
	l.answered("HBase get", "rs3:16020", 1) // never retried: nothing to tell
	l.retryLeft("HBase put", "rs1:16020", 1, refused, -1)
	want := []string{
		"HBase get: attempt 1 at rs1:16020 failed: connection refused; retrying, giving up in 1m30s",
		"HBase get: attempt 1 at rs2:16020 failed: connection refused; retrying, giving up in 1m30s",
		"HBase get: rs1:16020 answered at attempt 3",
		"HBase put: attempt 1 at rs1:16020 failed: connection refused; retrying, no deadline",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("retry lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	var none *retryLog // a client without Logf
	none.retry(ctx, "HBase get", "rs1:16020", 1, refused)
}
