// Package hdfs is the HDFS backend of vfs: hdfs:// URLs name a NameNode
// (host:port) or a nameservice of the Hadoop configuration, and a path.
// It speaks HDFS natively: NameNode RPC, DataNode block transfer with its
// SASL protection, delegation tokens, and Kerberos when the cluster
// requires it (the login is passed in, Options.Kerberos, never looked up;
// with no keytab given, the HDFS delegation token of the token file a
// YARN container is handed, HADOOP_TOKEN_FILE_LOCATION, goes first).
// Importing it registers the scheme with vfs.Open.
package hdfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"net/url"
	"os"
	"os/user"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gohdfs "github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/rekeyhq/rekey/internal/hadooprpc"
	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/vfs"
)

// FS is a file system on an HDFS cluster, spoken to natively.
type FS struct {
	client *gohdfs.Client
	name   string
	stats  hdfsCounters
	nnWait time.Duration
	// login is the Kerberos identity when the cluster requires Kerberos,
	// else nil; spn is then the NameNode's principal, _HOST unexpanded.
	login *krb.Login
	spn   string
	// rpcProtection is hadoop.rpc.protection and tokenService the service
	// Hadoop names this file system's delegation tokens by (DelegationToken).
	rpcProtection, tokenService string
	// addrs are the NameNode addresses as configured.
	addrs []string
	// probe asks the NameNode once whether it refuses clients without
	// Kerberos; probed is its answer (simpleRefusal).
	probe  sync.Once
	probed string
	// dnQops, when set, are the qops of the DataNode SASL handshake rekey
	// runs itself (ownDataNodeQops); dnAES asks for AES after privacy.
	dnQops []string
	dnAES  bool
	// fileToken, when set, is the delegation token of the process's token
	// file (tokenFile) that NameNode connections authenticate with
	// (useTokenFile), in place of a Kerberos login.
	fileToken *hadooprpc.Token
	tokenFile string
}

// Stats counts an HDFS file system's DataNode connections and what
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
type Stats struct {
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
	// FileReaders counts the client FileReaders opened, each at the cost
	// of NameNode round trips (the file's status, then its block
	// locations at its first read). An open file reuses its readers for
	// its positional reads and streams.
	FileReaders int64
	// NameNodeRetries counts the waits for a NameNode that did not answer
	// (unreachable, in safe mode, standby) before an operation was tried
	// again.
	NameNodeRetries int64
}

type hdfsCounters struct {
	conns, failures, retries, readers, nnRetries atomic.Int64
	// nnBreaks counts NameNode connections that broke (a read or write
	// failed); the client redials on the next call by itself.
	nnBreaks atomic.Int64
}

// Stats returns the counters so far.
func (h *FS) Stats() Stats {
	return Stats{
		DatanodeConns:    h.stats.conns.Load(),
		DatanodeFailures: h.stats.failures.Load(),
		Retries:          h.stats.retries.Load(),
		FileReaders:      h.stats.readers.Load(),
		NameNodeRetries:  h.stats.nnRetries.Load(),
	}
}

// Options tune DialWith.
type Options struct {
	// DatanodeDial, when set, opens the connections to DataNodes (tests
	// put a fault-injecting connection here).
	DatanodeDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// NameNodeWait bounds how long an operation waits, retrying with
	// back-off, for a NameNode that does not answer: refused connections
	// while it restarts, safe mode until its DataNodes have reported, a
	// standby while an HA pair fails over. Then the operation fails with
	// ErrNameNodeUnavailable. 0 means DefaultNameNodeWait. The first
	// connection is retried the same way: a NameNode that refuses it may
	// be restarting, so the dial ends, after the wait, in
	// ErrNameNodeUnavailable (a retry for a scheduler), not in an error
	// of the address.
	NameNodeWait time.Duration
	// Logf, when set, is told of the dial's retries: which NameNodes,
	// which attempt, how long until giving up.
	Logf func(format string, args ...any)
	// Kerberos is who to log in as when the Hadoop configuration says
	// hadoop.security.authentication=kerberos; it logs in at the dial. nil
	// means no login was given: such a cluster is refused, naming what is
	// missing.
	Kerberos *krb.Identity
}

// hdfsReadTimeout bounds one read from a DataNode, like HDFS's own
// dfs.client.socket-timeout (60 s): a DataNode that stops sending fails the
// read, which is then retried, rather than hanging the scan.
const hdfsReadTimeout = 60 * time.Second

// hdfsStreamRetries is how many times a stream reopens after a failed read
// (a DataNode connection dropped, a DataNode restarted) before it gives up,
// like dfs.client.max.block.acquire.failures (3).
const hdfsStreamRetries = 3

// ErrKerberos is matched by the error of an operation on a NameNode that
// requires Kerberos from a client whose Hadoop configuration does not
// say so (the NameNode refuses SIMPLE authentication), and of a dial to a
// cluster whose configuration requires Kerberos when no login was given
// (Options.Kerberos).
var ErrKerberos = errors.New("vfs: the HDFS cluster requires Kerberos")

// Dial connects to the HDFS named by authority, the host:port or
// nameservice part of an hdfs:// URL. A nameservice (no port) is resolved
// through the Hadoop configuration in HADOOP_CONF_DIR (or
// HADOOP_HOME/conf): dfs.ha.namenodes.<ns> and
// dfs.namenode.rpc-address.<ns>.<nn>. The user is HADOOP_USER_NAME, else
// the OS user. It gives no Kerberos login: a cluster that requires one
// needs DialWith and Options.Kerberos.
func Dial(authority string) (*FS, error) { return DialWith(authority, Options{}) }

// DialWith is Dial with options. With hadoop.security.authentication=
// kerberos the user is the principal o.Kerberos logs in as, the
// NameNode's principal comes from dfs.namenode.kerberos.principal and
// DataNode connections are protected as dfs.data.transfer.protection
// says.
func DialWith(authority string, o Options) (*FS, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("vfs: reading Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	opts := gohdfs.ClientOptionsFromConf(conf)
	addrs, err := namenodeAddrs(conf, authority)
	if err != nil {
		return nil, err
	}
	opts.Addresses = addrs
	h := &FS{name: "hdfs://" + authority, nnWait: o.NameNodeWait, addrs: addrs}
	if opts.KerberosClient != nil {
		tokens := false
		if !o.Kerberos.Explicit() {
			// No keytab given: a YARN container may have been handed its
			// delegation tokens, which go before a ticket cache (Hadoop's
			// clients, too, use a token for the service when they hold
			// one). A keytab, when given, is the login asked for.
			if tokens, err = h.useTokenFile(&opts, conf); err != nil {
				return nil, err
			}
		}
		if !tokens {
			if err := h.kerberize(&opts, conf, o.Kerberos); err != nil {
				return nil, err
			}
		}
		if h.dnQops = ownDataNodeQops(conf); h.dnQops != nil {
			opts.DataTransferProtection = "" // the client's DIGEST-MD5 layers misread; digestConn does it
			h.dnAES = wantAES(conf)
		}
	}
	if h.nnWait <= 0 {
		h.nnWait = DefaultNameNodeWait
	}
	dial := o.DatanodeDial
	if dial == nil {
		dial = opts.DatanodeDialFunc
	}
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	opts.DatanodeDialFunc = h.countingDial(dial)
	opts.NamenodeDialFunc = h.watchingNameNodeDial(opts.NamenodeDialFunc)
	if h.fileToken == nil {
		// Under a token the user is its owner (useTokenFile).
		opts.User = os.Getenv("HADOOP_USER_NAME")
	}
	if opts.User == "" && h.login == nil {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("vfs: no HADOOP_USER_NAME and no OS user: %w", err)
		}
		opts.User = u.Username
	}
	c, err := h.connect(opts, o.Logf)
	if err != nil {
		return nil, fmt.Errorf("vfs: connecting to HDFS %s (%s): %w", authority, strings.Join(addrs, ","), h.explain("connect", "", err))
	}
	h.client = c
	return h, nil
}

// connect makes the client, which dials a NameNode at once, retrying
// while no NameNode answers (refused, a standby, safe mode) for up to the
// NameNode wait, and then fails with ErrNameNodeUnavailable. logf, when
// set, hears of the first retry and then of one every 10 s at most.
func (h *FS) connect(opts gohdfs.ClientOptions, logf func(string, ...any)) (*gohdfs.Client, error) {
	r := nameNodeRetry{h: h}
	var said time.Time
	for attempt := 1; ; attempt++ {
		c, err := gohdfs.NewClient(opts)
		if err == nil {
			if !said.IsZero() && logf != nil {
				logf("HDFS %s answered at attempt %d, after %s", h.name, attempt, time.Since(r.since).Round(time.Second))
			}
			return c, nil
		}
		again, gerr := r.again("connect", "", err, true)
		if !again {
			return nil, gerr
		}
		if logf != nil && time.Since(said) >= 10*time.Second {
			said = time.Now()
			left := max(h.nnWait-time.Since(r.since), 0).Round(time.Second)
			logf("HDFS %s (%s): no NameNode answers (attempt %d: %v); retrying, giving up in %s", h.name, strings.Join(h.addrs, ","), attempt, err, left)
		}
	}
}

// countingDial wraps the DataNode dialler so Stats sees every connection
// and its failures, which the client handles (fails over) out of sight.
func (h *FS) countingDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.stats.conns.Add(1)
		c, err := dial(ctx, network, addr)
		if err != nil {
			h.stats.failures.Add(1)
			return nil, err
		}
		cc := &countedConn{Conn: c, stats: &h.stats}
		cc.r = bufio.NewReaderSize(rawReader{cc}, dataNodeReadBuffer)
		g := &saslGuard{Conn: cc, addr: addr}
		if h.dnQops == nil {
			return g, nil
		}
		return &digestConn{Conn: cc, guard: g, addr: addr, qops: h.dnQops, aes: h.dnAES}, nil
	}
}

// dataNodeReadBuffer buffers a DataNode connection's small reads. The
// client reads each 64 KiB packet as a 6-byte length, a header, the
// checksums and the data, each with its own read of the socket: buffering
// the first three costs a copy of at most this many data bytes per packet
// and spares two or three system calls; a read at least this large with
// nothing buffered (the packet's data) goes straight to the caller.
const dataNodeReadBuffer = 4 << 10

// countedConn counts its first failed read or write. The client reads a
// block's packets and no further, so in normal operation no read fails,
// not even with io.EOF; an error after the client closed the connection
// itself (net.ErrClosed) is not a failure.
type countedConn struct {
	net.Conn
	r      *bufio.Reader
	stats  *hdfsCounters
	failed atomic.Bool
}

func (c *countedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// rawReader is the connection's unbuffered, counted read side.
type rawReader struct{ c *countedConn }

func (r rawReader) Read(p []byte) (int, error) {
	n, err := r.c.Conn.Read(p)
	r.c.check(err)
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

// watchingNameNodeDial wraps the NameNode dialler so that a broken
// NameNode connection is counted (nnBreaks): a writer's Close fails with a
// bare EOF both when a DataNode and when the NameNode hangs up, and only
// the second may be waited out and retried.
func (h *FS) watchingNameNodeDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &nameNodeConn{Conn: c, breaks: &h.stats.nnBreaks}, nil
	}
}

// nameNodeConn counts its first failed read or write in breaks.
type nameNodeConn struct {
	net.Conn
	breaks *atomic.Int64
	broke  atomic.Bool
}

func (c *nameNodeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.check(err)
	return n, err
}

func (c *nameNodeConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.check(err)
	return n, err
}

func (c *nameNodeConn) check(err error) {
	if err != nil && !errors.Is(err, net.ErrClosed) && c.broke.CompareAndSwap(false, true) {
		c.breaks.Add(1)
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

// String implements vfs.FS.
func (h *FS) String() string { return h.name }

// Close disconnects.
func (h *FS) Close() error { return h.client.Close() }

// Open implements vfs.FS.
func (h *FS) Open(name string) (vfs.File, error) {
	r, err := h.openReader(name)
	if err != nil {
		return nil, err
	}
	if r.Stat().IsDir() {
		r.Close()
		return nil, &iofs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	return &hdfsFile{h: h, idle: []*gohdfs.FileReader{r}, size: r.Stat().Size(), name: name}, nil
}

// openReader opens a client FileReader, counted in Stats.
func (h *FS) openReader(name string) (*gohdfs.FileReader, error) {
	var r *gohdfs.FileReader
	err := h.nn("open", name, func(bool) (err error) {
		r, err = h.client.Open(name)
		return err
	})
	if err == nil {
		h.stats.readers.Add(1)
	}
	return r, err
}

// Stat implements vfs.FS.
func (h *FS) Stat(name string) (iofs.FileInfo, error) {
	var fi iofs.FileInfo
	err := h.nn("stat", name, func(bool) (err error) {
		fi, err = h.client.Stat(name)
		return err
	})
	return fi, err
}

// ReadDir implements vfs.FS.
func (h *FS) ReadDir(name string) ([]iofs.FileInfo, error) {
	var fis []iofs.FileInfo
	err := h.nn("list", name, func(bool) (err error) {
		fis, err = h.client.ReadDir(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(fis, func(i, j int) bool { return fis[i].Name() < fis[j].Name() })
	return fis, nil
}

// hdfsFile keeps the client's FileReaders of one file for reuse: each
// ReadAt and each stream takes one (opening another only when none is
// free) and gives it back. A FileReader knows the file's status and, once
// it has read, its block locations, so reusing one spares the NameNode
// round trips a fresh one costs (two, before its first byte): the stream
// of a store file's scan takes the FileReader that read its trailer.
//
// The client's ReadAt is a Seek then a Read, and its Seek drops the
// DataNode connection unless it can skip forward (a seek to where the
// reader already is cannot), so every ReadAt opens a new block read on the
// DataNode. That is fine for the few positional reads of an HFile (trailer,
// load-on-open section, index blocks, seeks); scans read through Stream.
type hdfsFile struct {
	h    *FS
	size int64
	name string

	mu     sync.Mutex
	idle   []*gohdfs.FileReader // not in use, no DataNode connection open
	closed bool
}

// maxIdleReaders bounds the FileReaders a file keeps for reuse: one
// stream and one positional reader at a time is the common case.
const maxIdleReaders = 2

// take returns a free FileReader of the file, opening one if none is.
func (f *hdfsFile) take() (*gohdfs.FileReader, error) {
	f.mu.Lock()
	if n := len(f.idle); n > 0 && !f.closed {
		r := f.idle[n-1]
		f.idle = f.idle[:n-1]
		f.mu.Unlock()
		return r, nil
	}
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("vfs: %s%s: %w", f.h.name, f.name, iofs.ErrClosed)
	}
	return f.h.openReader(f.name)
}

// give returns a FileReader taken with take. Its DataNode connection, if
// any, is closed first (a Seek to where it is drops it), so an idle reader
// holds no DataNode thread.
func (f *hdfsFile) give(r *gohdfs.FileReader) {
	if _, err := r.Seek(0, io.SeekCurrent); err == nil {
		f.mu.Lock()
		if !f.closed && len(f.idle) < maxIdleReaders {
			f.idle = append(f.idle, r)
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
	}
	r.Close()
}

// Stream implements vfs.Streamer: a FileReader of its own, read front to back,
// keeps one DataNode connection per HDFS block and the DataNode streaming.
//
// The FileReader is taken by the first Read, not here: a read-ahead
// stream's first Read runs on its prefetch goroutine, so when no reader
// is free and a new one must be opened (two NameNode round trips: the
// file's status, then its block locations), the scan that asked for the
// stream goes on meanwhile (opening the other files of a merge, decoding).
func (f *hdfsFile) Stream(off int64) (io.ReadCloser, error) {
	return &hdfsStream{f: f, pos: off, first: true, nn: nameNodeRetry{h: f.h}}, nil
}

// hdfsStream reads a file sequentially from pos, reopening at the same
// offset when a read fails.
type hdfsStream struct {
	f     *hdfsFile
	r     *gohdfs.FileReader
	pos   int64
	fails int
	// nn waits out a NameNode that does not answer (a reader fetches its
	// block locations from the NameNode at its first read).
	nn nameNodeRetry
	// first: no FileReader was taken yet, so taking one is no retry.
	first bool
}

// open positions a FileReader at s.pos: the first one from the file's
// free readers, after a failure a fresh one (its block locations fetched
// again, so the read goes on from a replica the NameNode lists now).
func (s *hdfsStream) open() error {
	var r *gohdfs.FileReader
	var err error
	if s.first {
		r, err = s.f.take()
	} else {
		r, err = s.f.h.openReader(s.f.name)
	}
	if err != nil {
		return err
	}
	if _, err := r.Seek(s.pos, io.SeekStart); err != nil {
		r.Close()
		return fmt.Errorf("vfs: %s: seeking to %d: %w", s.f.name, s.pos, err)
	}
	s.r = r
	return nil
}

// Read reads from the stream. The client fails over between a block's
// replicas by itself (see Stats), so a read fails here only when every
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
				s.f.h.stats.retries.Add(1)
			}
			err := s.open()
			s.first = false
			if err != nil {
				if err := s.fail(err, false); err != nil {
					return 0, err
				}
				continue
			}
		}
		s.r.SetDeadline(time.Now().Add(hdfsReadTimeout))
		breaks := s.f.h.stats.nnBreaks.Load()
		n, err := s.r.Read(p)
		s.pos += int64(n)
		if err == io.EOF && s.pos < s.f.size {
			err = earlyEOF(s.f.name, s.pos, s.f.size)
		}
		if err == nil || err == io.EOF {
			if n > 0 {
				s.fails = 0
				s.nn = nameNodeRetry{h: s.f.h}
			}
			return n, err
		}
		// A reader whose read failed is not reused.
		s.r.Close()
		s.r = nil
		if n > 0 {
			return n, nil // the next call reopens
		}
		if err := s.fail(err, s.f.h.stats.nnBreaks.Load() != breaks); err != nil {
			return 0, err
		}
	}
}

// fail counts a failure; it returns the error to give up with, or nil to
// retry after a short pause. Waiting for the NameNode is not counted: it
// goes on up to the file system's NameNodeWait. nnBroke says a NameNode
// connection broke during the failed read, so a transport error may be
// the NameNode's (see earlyEOF).
func (s *hdfsStream) fail(err error, nnBroke bool) error {
	if again, gerr := s.nn.again("read", s.f.name, err, nnBroke); again {
		return nil
	} else if errors.Is(gerr, ErrNameNodeUnavailable) {
		return gerr
	}
	s.fails++
	if s.fails > hdfsStreamRetries {
		return fmt.Errorf("vfs: %s%s: reading at offset %d, %d attempts: %w", s.f.h.name, s.f.name, s.pos, s.fails, err)
	}
	time.Sleep(time.Duration(s.fails) * 100 * time.Millisecond)
	return nil
}

// Close gives the stream's FileReader back to the file.
func (s *hdfsStream) Close() error {
	if s.r == nil {
		return nil
	}
	s.r.SetDeadline(time.Time{})
	s.f.give(s.r)
	s.r = nil
	return nil
}

// errEarlyEOF is matched by the error of a read that the client ended
// with io.EOF before the end of the file (see earlyEOF).
var errEarlyEOF = errors.New("the HDFS client reported the end of the file before its end")

// earlyEOF is the error for a read the client ended with io.EOF at pos, short of
// the file's size. The client returns the NameNode connection's bare EOF
// as it is: when the NameNode hangs up during the block-locations call of
// a reader's first read (a NameNode that stops), the read ends in io.EOF
// as if the file had, and a caller would take a whole file for a
// truncated one, or a scan for complete. The file's size is known, so such
// an EOF is a failure to retry; a NameNode connection that broke meanwhile
// (nnBreaks) makes it a wait for the NameNode. It wraps errEarlyEOF,
// neither io.EOF nor io.ErrUnexpectedEOF: nobody may take it for the end
// of the file, nor for a file shorter than it says.
func earlyEOF(name string, pos, size int64) error {
	return fmt.Errorf("%w: %s at offset %d of %d bytes", errEarlyEOF, name, pos, size)
}

// ReadAt reads at off, with a free FileReader of the file. A failed read
// (other than at the end of the file) is tried again from the start: the
// client's ReadAt opens a new block read, fetching from the next replica
// or from the same DataNode once it is back, as a stream does
// (hdfsStreamRetries).
func (f *hdfsFile) ReadAt(p []byte, off int64) (int, error) {
	r, err := f.take()
	if err != nil {
		return 0, err
	}
	nn := nameNodeRetry{h: f.h}
	for attempt := 1; ; attempt++ {
		breaks := f.h.stats.nnBreaks.Load()
		n, err := r.ReadAt(p, off)
		if err == nil && n < len(p) {
			err = io.ErrUnexpectedEOF
		}
		if err == io.EOF && off+int64(n) < f.size {
			err = earlyEOF(f.name, off+int64(n), f.size)
		}
		if err == nil || err == io.EOF {
			f.give(r)
			return n, err
		}
		if again, gerr := nn.again("read", f.name, err, f.h.stats.nnBreaks.Load() != breaks); again {
			attempt--
			continue
		} else if errors.Is(gerr, ErrNameNodeUnavailable) {
			r.Close()
			return n, gerr
		}
		if attempt > hdfsStreamRetries {
			r.Close()
			return n, fmt.Errorf("vfs: %s%s: reading %d bytes at offset %d, %d attempts: %w", f.h.name, f.name, len(p), off, attempt, err)
		}
		f.h.stats.retries.Add(1)
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// Close closes the file's free FileReaders; a stream still open closes
// its own when it is closed.
func (f *hdfsFile) Close() error {
	f.mu.Lock()
	idle := f.idle
	f.idle, f.closed = nil, true
	f.mu.Unlock()
	var first error
	for _, r := range idle {
		if err := r.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
func (f *hdfsFile) Size() int64  { return f.size }
func (f *hdfsFile) Name() string { return f.name }

func init() { vfs.Register(dial, "hdfs") }

// dial is DialWith for vfs.Open: the URL's host is the authority, and
// the login is the one vfs.OpenWith was given.
func dial(u *url.URL, o vfs.Options) (vfs.WriteFS, func() error, error) {
	h, err := DialWith(u.Host, Options{Kerberos: o.Kerberos, Logf: o.Logf, NameNodeWait: o.Wait})
	if err != nil {
		return nil, nil, err
	}
	return h, h.Close, nil
}
