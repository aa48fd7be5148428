package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"os"
	"os/user"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
)

// HDFS is a file system on an HDFS cluster, spoken to natively.
type HDFS struct {
	client *hdfs.Client
	name   string
	stats  hdfsCounters
}

// HDFSStats counts an HDFS file system's DataNode connections and what
// went wrong with them.
//
// Failing over to another replica happens inside the HDFS client: the
// NameNode lists each block's replicas sorted by network distance to the
// reader (the DataNode on the reader's host first, so a reader on a
// DataNode reads its local replica), and the client's block reader
// tries them in that order; when a DataNode refuses the connection or the
// connection breaks mid-block, it records the DataNode as failed and goes
// on from the same offset with the next replica. The record is for the
// whole process and never expires: later blocks try that DataNode after
// every replica that has not failed, even once it is back. Only when every
// replica of a block failed does the read fail up to this package, which
// reopens (Retries).
type HDFSStats struct {
	// DatanodeConns is the number of DataNode connections dialled.
	DatanodeConns int64
	// DatanodeFailures counts DataNode connections that failed: a dial
	// refused or timed out, or an error reading from or writing to an open
	// connection (the DataNode went away, a timeout). A read that
	// completed despite a failure went on from another replica, or from
	// the same DataNode after a retry.
	DatanodeFailures int64
	// Retries counts reads this package tried again after the client
	// returned an error (every replica of a block failed): a stream
	// reopened at its offset, or a positional read repeated.
	Retries int64
}

type hdfsCounters struct {
	conns, failures, retries atomic.Int64
}

// Stats returns the counters so far.
func (h *HDFS) Stats() HDFSStats {
	return HDFSStats{
		DatanodeConns:    h.stats.conns.Load(),
		DatanodeFailures: h.stats.failures.Load(),
		Retries:          h.stats.retries.Load(),
	}
}

// HDFSOptions tune DialHDFSWith.
type HDFSOptions struct {
	// DatanodeDial, when set, opens the connections to DataNodes (tests
	// put a fault-injecting connection here).
	DatanodeDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// hdfsReadTimeout bounds one read from a DataNode, like HDFS's own
// dfs.client.socket-timeout (60 s): a DataNode that stops sending fails the
// read, which is then retried, rather than hanging the scan.
const hdfsReadTimeout = 60 * time.Second

// hdfsStreamRetries is how many times a stream reopens after a failed read
// (a DataNode connection dropped, a DataNode restarted) before it gives up,
// like dfs.client.max.block.acquire.failures (3).
const hdfsStreamRetries = 3

// ErrKerberos is returned when the Hadoop configuration demands Kerberos,
// which this build does not configure.
var ErrKerberos = errors.New("vfs: HDFS cluster requires Kerberos (hadoop.security.authentication=kerberos), which rekey does not support yet; read a local export of the snapshot instead")

// DialHDFS connects to the HDFS named by authority, the host:port or
// nameservice part of an hdfs:// URL. A nameservice (no port) is resolved
// through the Hadoop configuration in HADOOP_CONF_DIR (or
// HADOOP_HOME/conf): dfs.ha.namenodes.<ns> and
// dfs.namenode.rpc-address.<ns>.<nn>. The user is HADOOP_USER_NAME, else
// the OS user.
func DialHDFS(authority string) (*HDFS, error) { return DialHDFSWith(authority, HDFSOptions{}) }

// DialHDFSWith is DialHDFS with options.
func DialHDFSWith(authority string, o HDFSOptions) (*HDFS, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("vfs: reading Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	opts := hdfs.ClientOptionsFromConf(conf)
	if opts.KerberosClient != nil {
		return nil, ErrKerberos
	}
	addrs, err := namenodeAddrs(conf, authority)
	if err != nil {
		return nil, err
	}
	opts.Addresses = addrs
	h := &HDFS{name: "hdfs://" + authority}
	dial := o.DatanodeDial
	if dial == nil {
		dial = opts.DatanodeDialFunc
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	opts.DatanodeDialFunc = h.countingDial(dial)
	opts.User = os.Getenv("HADOOP_USER_NAME")
	if opts.User == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("vfs: no HADOOP_USER_NAME and no OS user: %w", err)
		}
		opts.User = u.Username
	}
	c, err := hdfs.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("vfs: connecting to HDFS %s (%s): %w", authority, strings.Join(addrs, ","), err)
	}
	h.client = c
	return h, nil
}

// countingDial wraps the DataNode dialler so Stats sees every connection
// and its failures, which the client handles (fails over) out of sight.
func (h *HDFS) countingDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.stats.conns.Add(1)
		c, err := dial(ctx, network, addr)
		if err != nil {
			h.stats.failures.Add(1)
			return nil, err
		}
		return &countedConn{Conn: c, stats: &h.stats}, nil
	}
}

// countedConn counts its first failed read or write. The client reads a
// block's packets and no further, so in normal operation no read fails,
// not even with io.EOF; an error after the client closed the connection
// itself (net.ErrClosed) is not a failure.
type countedConn struct {
	net.Conn
	stats  *hdfsCounters
	failed atomic.Bool
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.check(err)
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.check(err)
	return n, err
}

func (c *countedConn) check(err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) && c.failed.CompareAndSwap(false, true) {
		c.stats.failures.Add(1)
	}
}

// namenodeAddrs turns the authority of an hdfs:// URL into NameNode RPC
// addresses.
func namenodeAddrs(conf hadoopconf.HadoopConf, authority string) ([]string, error) {
	if authority == "" {
		nns := conf.Namenodes()
		if len(nns) == 0 {
			return nil, errors.New("vfs: hdfs:/// URL without a host, and no fs.defaultFS in the Hadoop configuration (set HADOOP_CONF_DIR)")
		}
		return nns, nil
	}
	if strings.Contains(authority, ":") {
		return []string{authority}, nil
	}
	// A logical nameservice.
	if ids, ok := conf["dfs.ha.namenodes."+authority]; ok {
		var addrs []string
		for _, id := range strings.Split(ids, ",") {
			id = strings.TrimSpace(id)
			if a := conf["dfs.namenode.rpc-address."+authority+"."+id]; a != "" {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("vfs: nameservice %s lists namenodes %q but no dfs.namenode.rpc-address.%s.<id> entries", authority, ids, authority)
		}
		sort.Strings(addrs)
		return addrs, nil
	}
	if a := conf["dfs.namenode.rpc-address."+authority]; a != "" {
		return []string{a}, nil
	}
	if conf == nil {
		// A bare host: HDFS's default RPC port.
		return []string{authority + ":8020"}, nil
	}
	return nil, fmt.Errorf("vfs: %s is neither host:port nor a nameservice in the Hadoop configuration (HADOOP_CONF_DIR)", authority)
}

// String implements FS.
func (h *HDFS) String() string { return h.name }

// Close disconnects.
func (h *HDFS) Close() error { return h.client.Close() }

// Open implements FS.
func (h *HDFS) Open(name string) (File, error) {
	r, err := h.client.Open(name)
	if err != nil {
		return nil, err
	}
	if r.Stat().IsDir() {
		r.Close()
		return nil, &iofs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	return &hdfsFile{h: h, r: r, size: r.Stat().Size(), name: name}, nil
}

// Stat implements FS.
func (h *HDFS) Stat(name string) (iofs.FileInfo, error) { return h.client.Stat(name) }

// ReadDir implements FS.
func (h *HDFS) ReadDir(name string) ([]iofs.FileInfo, error) {
	fis, err := h.client.ReadDir(name)
	if err != nil {
		return nil, err
	}
	sort.Slice(fis, func(i, j int) bool { return fis[i].Name() < fis[j].Name() })
	return fis, nil
}

// hdfsFile serialises ReadAt: the client's ReadAt seeks a shared stream.
//
// The client's ReadAt is a Seek then a Read, and its Seek drops the
// DataNode connection unless it can skip forward (a seek to where the
// stream already is cannot), so every ReadAt opens a new block read on the
// DataNode. That is fine for the few positional reads of an HFile (trailer,
// load-on-open section, index blocks, seeks); scans read through Stream.
type hdfsFile struct {
	h    *HDFS
	mu   sync.Mutex
	r    *hdfs.FileReader
	size int64
	name string
}

// Stream implements Streamer: a FileReader of its own, read front to back,
// keeps one DataNode connection per HDFS block and the DataNode streaming.
//
// The FileReader is opened by the first Read, not here: opening it costs
// two NameNode round trips (the file's status, then its block locations),
// and a read-ahead stream's first Read runs on its prefetch goroutine, so
// the scan that asked for the stream goes on meanwhile (opening the other
// files of a merge, decoding) instead of waiting for them.
func (f *hdfsFile) Stream(off int64) (io.ReadCloser, error) {
	return &hdfsStream{h: f.h, name: f.name, pos: off, first: true}, nil
}

// hdfsStream reads a file sequentially from pos, reopening at the same
// offset when a read fails.
type hdfsStream struct {
	h     *HDFS
	name  string
	r     *hdfs.FileReader
	pos   int64
	fails int
	// first: the FileReader was never opened, so opening it is no retry.
	first bool
}

func (s *hdfsStream) open() error {
	r, err := s.h.client.Open(s.name)
	if err != nil {
		return err
	}
	if s.pos > 0 {
		if _, err := r.Seek(s.pos, io.SeekStart); err != nil {
			r.Close()
			return fmt.Errorf("vfs: %s: seeking to %d: %w", s.name, s.pos, err)
		}
	}
	s.r = r
	return nil
}

// Read reads from the stream. The client fails over between a block's
// replicas by itself (see HDFSStats), so a read fails here only when every
// replica failed (the DataNode connection dropped, a timeout, a DataNode
// that went away). It then reopens the file at the same offset, which
// also fetches the block locations again, so the read goes on from a
// replica the NameNode lists now or from the same DataNode once it is
// back; after hdfsStreamRetries failures in a row the error is returned.
func (s *hdfsStream) Read(p []byte) (int, error) {
	for {
		if s.r == nil {
			// The first read, or a read failed: (re)open at s.pos.
			if !s.first {
				s.h.stats.retries.Add(1)
			}
			s.first = false
			if err := s.open(); err != nil {
				if err := s.fail(err); err != nil {
					return 0, err
				}
				continue
			}
		}
		s.r.SetDeadline(time.Now().Add(hdfsReadTimeout))
		n, err := s.r.Read(p)
		s.pos += int64(n)
		if err == nil || err == io.EOF {
			if n > 0 {
				s.fails = 0
			}
			return n, err
		}
		s.r.Close()
		s.r = nil
		if n > 0 {
			return n, nil // the next call reopens
		}
		if err := s.fail(err); err != nil {
			return 0, err
		}
	}
}

// fail counts a failure; it returns the error to give up with, or nil to
// retry after a short pause.
func (s *hdfsStream) fail(err error) error {
	s.fails++
	if s.fails > hdfsStreamRetries {
		return fmt.Errorf("vfs: %s%s: reading at offset %d, %d attempts: %w", s.h.name, s.name, s.pos, s.fails, err)
	}
	time.Sleep(time.Duration(s.fails) * 100 * time.Millisecond)
	return nil
}

func (s *hdfsStream) Close() error {
	if s.r == nil {
		return nil
	}
	err := s.r.Close()
	s.r = nil
	return err
}

// ReadAt reads at off. A failed read (other than at the end of the file)
// is tried again from the start: the client's ReadAt opens a new block
// read, fetching from the next replica or from the same DataNode once it
// is back, as a stream does (hdfsStreamRetries).
func (f *hdfsFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for attempt := 1; ; attempt++ {
		n, err := f.r.ReadAt(p, off)
		if err == nil && n < len(p) {
			err = io.ErrUnexpectedEOF
		}
		if err == nil || err == io.EOF {
			return n, err
		}
		if attempt > hdfsStreamRetries {
			return n, fmt.Errorf("vfs: %s%s: reading %d bytes at offset %d, %d attempts: %w", f.h.name, f.name, len(p), off, attempt, err)
		}
		f.h.stats.retries.Add(1)
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}
func (f *hdfsFile) Close() error { return f.r.Close() }
func (f *hdfsFile) Size() int64  { return f.size }
func (f *hdfsFile) Name() string { return f.name }
