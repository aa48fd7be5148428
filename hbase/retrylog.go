package hbase

import (
	"context"
	"sync"
	"time"
)

// retryLogEvery is the least time between two retry lines about one
// server: the first retry is told at once, so that an operator sees at
// the start of an outage what rekey is waiting for, and then one line
// every so often while it lasts, not one per attempt (a ZooKeeper client
// reconnects every second, a writer retries every mutation).
const retryLogEvery = 10 * time.Second

// retryLog tells Config.Logf of retries, at most one line per server per
// retryLogEvery. It is safe for concurrent use.
type retryLog struct {
	logf func(format string, args ...any)

	mu   sync.Mutex
	said map[string]time.Time
}

func newRetryLog(logf func(format string, args ...any)) *retryLog {
	return &retryLog{logf: logf, said: map[string]time.Time{}}
}

// retry tells that attempt number attempt (1-based) of what (an
// operation) at server failed with err and will be made again, and the
// time left until the operation gives up (ctx's deadline), unless a line
// about server went out less than retryLogEvery ago.
func (l *retryLog) retry(ctx context.Context, what, server string, attempt int, err error) {
	left := time.Duration(-1)
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	l.retryLeft(what, server, attempt, err, left)
}

// retryLeft is retry with the time left given: negative for none.
func (l *retryLog) retryLeft(what, server string, attempt int, err error, left time.Duration) {
	if l == nil || l.logf == nil {
		return
	}
	l.mu.Lock()
	last, ok := l.said[server]
	now := time.Now()
	if ok && now.Sub(last) < retryLogEvery {
		l.mu.Unlock()
		return
	}
	l.said[server] = now
	l.mu.Unlock()
	until := "no deadline"
	if left >= 0 {
		until = "giving up in " + max(left, 0).Round(time.Second).String()
	}
	l.logf("%s: attempt %d at %s failed: %v; retrying, %s", what, attempt, server, err, until)
}

// answered tells that server answered what at attempt number attempt,
// after retries that were told of, and forgets them.
func (l *retryLog) answered(what, server string, attempt int) {
	if l == nil || l.logf == nil {
		return
	}
	l.mu.Lock()
	_, ok := l.said[server]
	delete(l.said, server)
	l.mu.Unlock()
	if ok {
		l.logf("%s: %s answered at attempt %d", what, server, attempt)
	}
}
