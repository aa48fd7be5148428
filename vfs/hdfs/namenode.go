package hdfs

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"strings"
	"syscall"
	"time"

	gohdfs "github.com/colinmarc/hdfs/v2"

	"github.com/rekeyhq/rekey/internal/hadooprpc"
)

// ErrNameNodeUnavailable is matched by the error of an HDFS operation that
// gave up waiting for the NameNode: unreachable, in safe mode or standby
// for longer than Options.NameNodeWait.
var ErrNameNodeUnavailable = errors.New("vfs: HDFS NameNode unavailable")

// DefaultNameNodeWait is how long an HDFS operation waits for a NameNode
// that does not answer (a restart, a failover) when Options gives no
// NameNodeWait: long enough for a NameNode to restart and leave safe mode
// on a small cluster.
const DefaultNameNodeWait = 2 * time.Minute

// Remote exceptions that mean "this NameNode cannot answer now": it has
// just started and waits for block reports (safe mode, sometimes wrapped
// as RetriableException), or it is the standby of an HA pair. The HDFS
// client fails over to another NameNode on a standby answer by itself and
// reports "no available namenodes" once every one refused.
const (
	excSafeMode  = "org.apache.hadoop.hdfs.server.namenode.SafeModeException"
	excRetriable = "org.apache.hadoop.ipc.RetriableException"
	excStandby   = "org.apache.hadoop.ipc.StandbyException"
)

// nameNodeDown reports whether err says the NameNode could not answer,
// rather than answered no. transport also counts a connection that broke
// during the call: an operation that talks only to the NameNode (a stat, a
// rename) has nobody else to blame for it; on the read path the same
// error may come from a DataNode, whose failures have their own retries.
func nameNodeDown(err error, transport bool) bool {
	if err == nil || errors.Is(err, ErrNameNodeUnavailable) ||
		errors.Is(err, iofs.ErrNotExist) || errors.Is(err, iofs.ErrExist) || errors.Is(err, iofs.ErrPermission) {
		return false
	}
	var he gohdfs.Error
	if errors.As(err, &he) {
		switch he.Exception() {
		case excSafeMode, excRetriable, excStandby:
			return true
		}
		return false
	}
	// A NameNode that refused this client's token (DialStream) answered:
	// waiting would not change its mind.
	if strings.Contains(err.Error(), hadooprpc.LoginRefused) {
		return false
	}
	// The client's own words when it could dial no NameNode (connection
	// refused, or a standby), for 5 s after each failed dial.
	if strings.Contains(err.Error(), "no available namenodes") {
		return true
	}
	if !transport {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errEarlyEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED)
}

// nameNodeRetry waits for a NameNode that does not answer: it sleeps with
// back-off between attempts, up to the file system's NameNodeWait since
// the first failure.
type nameNodeRetry struct {
	h       *FS
	since   time.Time
	pause   time.Duration
	retried bool
}

// again reports whether to try once more after err, sleeping first; it
// returns the error to give up with otherwise (err itself when it is not
// the NameNode's absence).
func (r *nameNodeRetry) again(op, name string, err error, transport bool) (bool, error) {
	if !nameNodeDown(err, transport) {
		return false, err
	}
	now := time.Now()
	if r.since.IsZero() {
		r.since, r.pause = now, 100*time.Millisecond
	}
	if now.Sub(r.since) >= r.h.nnWait {
		return false, fmt.Errorf("%w: %s: %s %s: no answer for %v: %w", ErrNameNodeUnavailable, r.h.name, op, name, now.Sub(r.since).Round(time.Second), err)
	}
	r.h.stats.nnRetries.Add(1)
	r.retried = true
	time.Sleep(r.pause)
	r.pause = min(2*r.pause, 2*time.Second)
	return true, nil
}

// nn runs one NameNode operation, retrying it while the NameNode does not
// answer. fn is told whether it runs again after an attempt whose outcome
// is unknown (the call may have reached the NameNode).
func (h *FS) nn(op, name string, fn func(retry bool) error) error {
	r := nameNodeRetry{h: h}
	for {
		err := fn(r.retried)
		if err == nil {
			return nil
		}
		if e := h.simpleRefusal(op, name, err); e != nil {
			return e
		}
		again, err := r.again(op, name, err, true)
		if !again {
			return h.explain(op, name, err)
		}
	}
}
