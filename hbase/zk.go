package hbase

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
)

// pbMagic prefixes protobuf blobs HBase stores in znodes and meta cells.
var pbMagic = []byte("PBUF")

// stripZNodeData removes the metadata prefix HBase's RecoverableZooKeeper
// adds to znode data (0xFF, u32 BE id length, id) and the PBUF magic,
// leaving the protobuf message.
func stripZNodeData(b []byte, where string) ([]byte, error) {
	if len(b) > 0 && b[0] == 0xFF {
		if len(b) < 5 {
			return nil, fmt.Errorf("hbase: znode %s: metadata prefix cut short (%d bytes)", where, len(b))
		}
		n := binary.BigEndian.Uint32(b[1:])
		if uint64(n) > uint64(len(b)-5) {
			return nil, fmt.Errorf("hbase: znode %s: metadata id length %d overruns %d bytes", where, n, len(b))
		}
		b = b[5+n:]
	}
	if !bytes.HasPrefix(b, pbMagic) {
		return nil, fmt.Errorf("hbase: znode %s: no PBUF magic (not an HBase 2.x znode?)", where)
	}
	return b[len(pbMagic):], nil
}

// serverAddr renders a ServerName as host:port.
func serverAddr(sn *pb.ServerName) string {
	return fmtAddr(sn.GetHostName(), int(sn.GetPort()))
}

func fmtAddr(host string, port int) string {
	if strings.IndexByte(host, ':') >= 0 {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// zkClient reads the two znodes a client needs.
type zkClient struct {
	conn   *zk.Conn
	parent string
	quorum string
	closed atomic.Bool
	lib    *zkLibLog
	log    *retryLog
}

// zkLibLog takes the ZooKeeper library's log lines, which come one per
// connection attempt or broken packet loop, too many for stderr: it keeps
// the count of failed connection attempts and the last line, which the
// reads that wait for a session tell of (zkClient.get), with the time
// left, at the pace of retryLog.
type zkLibLog struct {
	mu       sync.Mutex
	attempts int
	last     string
}

// Printf records one line of the library's.
func (l *zkLibLog) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if strings.HasPrefix(format, "failed to connect") {
		l.attempts++
	}
	l.last = fmt.Sprintf(format, args...)
}

// state returns the failed connection attempts so far and the last line.
func (l *zkLibLog) state() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts, l.last
}

func dialZK(quorum string, parent string, sessionTimeout time.Duration, log *retryLog) (*zkClient, error) {
	var servers []string
	for _, s := range strings.Split(quorum, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if !strings.Contains(s, ":") {
				s += ":2181"
			}
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		return nil, errors.New("hbase: empty ZooKeeper quorum")
	}
	lib := &zkLibLog{}
	conn, events, err := zk.Connect(servers, sessionTimeout, zk.WithLogger(lib))
	if err != nil {
		return nil, fmt.Errorf("hbase: ZooKeeper %s: %w", quorum, err)
	}
	go func() {
		for range events { // the library drops events nobody reads; drain anyway
		}
	}()
	return &zkClient{conn: conn, parent: parent, quorum: strings.Join(servers, ","), lib: lib, log: log}, nil
}

func (z *zkClient) close() {
	z.closed.Store(true)
	z.conn.Close()
}

// get reads one znode under the parent, honoring ctx. While ZooKeeper is
// unreachable or the session is being replaced it waits for the client to
// reconnect and reads again, up to zkWait, and tells the client's log of
// the wait (which server, how many attempts, how long until the operation
// gives up); its errors carry the retry class failed gives them.
func (z *zkClient) get(ctx context.Context, name string) ([]byte, error) {
	p := path.Join(z.parent, name)
	wctx, cancel := context.WithTimeout(ctx, zkWait)
	defer cancel()
	retried := false
	for {
		b, err := z.getOnce(ctx, p)
		var ze *zkError
		if err == nil || !errors.As(err, &ze) || !ze.reconnecting {
			if err == nil && retried {
				attempts, _ := z.lib.state()
				z.log.answered("ZooKeeper", z.quorum, attempts+1)
			}
			return b, err
		}
		attempts, last := z.lib.state()
		cause := error(ze)
		if last != "" {
			cause = fmt.Errorf("znode %s: %s", p, last)
		}
		z.log.retry(ctx, "ZooKeeper", z.quorum, max(attempts, 1), cause)
		retried = true
		if !z.awaitSession(wctx) {
			return b, err
		}
	}
}

// zkWait bounds how long one read waits for ZooKeeper to come back before
// it returns a retriable error to the operation's own retry loop.
const zkWait = 30 * time.Second

// awaitSession waits until the client has a session again, or a second
// passed, and reports whether reading again is worth it (ctx not done).
func (z *zkClient) awaitSession(ctx context.Context) bool {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(time.Second)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-limit:
			return true
		case <-tick.C:
			if z.conn.State() == zk.StateHasSession {
				return true
			}
		}
	}
}

func (z *zkClient) getOnce(ctx context.Context, p string) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, _, err := z.conn.Get(p)
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, z.failed(p, r.err)
		}
		return stripZNodeData(r.b, p)
	case <-ctx.Done():
		err := fmt.Errorf("hbase: reading znode %s: %w", p, ctx.Err())
		if z.conn.State() != zk.StateHasSession {
			// The read waited on a client that never had a session (or
			// lost it): ZooKeeper out of reach, whichever gave up first.
			err = fmt.Errorf("%w (%w: the client has no session)", err, ErrZooKeeperUnreachable)
		}
		return nil, err
	}
}

// failed classifies a failed read of znode p.
func (z *zkClient) failed(p string, err error) error {
	switch {
	case z.closed.Load():
		return &zkError{path: p, err: err, retry: rpc.GiveUp, what: "not read: the client is closed"}
	case errors.Is(err, zk.ErrNoNode):
		// Under an existing parent, a missing znode is a moment of the
		// cluster's life: no active master between one master's end and
		// the next one's start, meta being assigned. Without the parent,
		// nothing will appear: wrong parent, or HBase is not running.
		if ok, _, perr := z.conn.Exists(z.parent); perr == nil && ok {
			return &zkError{path: p, err: err, retry: rpc.Backoff, what: "does not exist yet (no active master, or hbase:meta not assigned: a failover in progress?)"}
		}
		return &zkError{path: p, err: err, retry: rpc.GiveUp, what: "does not exist (is HBase running, is zookeeper.znode.parent right?)"}
	case errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrSessionMoved):
		// The library reconnects by itself, and after an expiry opens a
		// new session; rekey holds no ephemeral znodes or watches that the
		// old session took with it, so waiting and reading again is all
		// there is to do.
		return &zkError{path: p, err: err, retry: rpc.Backoff, reconnecting: true, what: "failed: ZooKeeper unreachable or the session lost; retrying while the client reconnects"}
	}
	return &zkError{path: p, err: err, retry: rpc.GiveUp, what: "failed"}
}

// zkError is a failed znode read with the retry class its cause calls
// for (see failed).
type zkError struct {
	path  string
	err   error
	retry rpc.Retry
	what  string
	// reconnecting: the client is without a session and reconnecting.
	reconnecting bool
}

func (e *zkError) Error() string {
	return fmt.Sprintf("hbase: znode %s %s: %v", e.path, e.what, e.err)
}

// Unwrap gives the ZooKeeper library's error, and ErrZooKeeperUnreachable
// for a read that failed while the client had no session.
func (e *zkError) Unwrap() []error {
	if e.reconnecting {
		return []error{e.err, ErrZooKeeperUnreachable}
	}
	return []error{e.err}
}

// Retry gives the error's retry class to rpc.RetryOf.
func (e *zkError) Retry() rpc.Retry { return e.retry }

// metaServer returns host:port of the server holding hbase:meta.
func (z *zkClient) metaServer(ctx context.Context) (string, error) {
	b, err := z.get(ctx, "meta-region-server")
	if err != nil {
		return "", err
	}
	var m pb.MetaRegionServer
	if err := proto.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("hbase: znode %s/meta-region-server: %w", z.parent, err)
	}
	return serverAddr(m.GetServer()), nil
}

// clusterID returns the cluster's id, the hbaseid znode's ClusterId
// (cluster_id 1): the service of the cluster's HBase tokens.
func (z *zkClient) clusterID(ctx context.Context) (string, error) {
	b, err := z.get(ctx, "hbaseid")
	if err != nil {
		return "", err
	}
	id := ""
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeString(b)
			if m < 0 {
				break
			}
			id, b = v, b[m:]
			continue
		}
		if m := protowire.ConsumeFieldValue(num, typ, b); m >= 0 {
			b = b[m:]
			continue
		}
		break
	}
	if id == "" || len(b) != 0 {
		return "", fmt.Errorf("hbase: znode %s/hbaseid holds no cluster id", z.parent)
	}
	return id, nil
}

// master returns host:port of the active master.
func (z *zkClient) master(ctx context.Context) (string, error) {
	b, err := z.get(ctx, "master")
	if err != nil {
		return "", err
	}
	var m pb.Master
	if err := proto.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("hbase: znode %s/master: %w", z.parent, err)
	}
	return serverAddr(m.GetMaster()), nil
}
