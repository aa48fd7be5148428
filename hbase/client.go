package hbase

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
	"github.com/rekeyhq/rekey/hbase/rpc"
	"github.com/rekeyhq/rekey/internal/pause"
)

// Config says how to reach a cluster and how hard to retry.
type Config struct {
	// ZKQuorum is the ZooKeeper quorum, "host:port[,host:port...]".
	ZKQuorum string
	// ZNodeParent is zookeeper.znode.parent; "" means /hbase.
	ZNodeParent string
	// User is the effective user sent to servers (simple auth). "" means
	// the OS user running rekey. With Kerberos the servers take the
	// authenticated principal instead.
	User string
	// Kerberos, when not nil, authenticates every connection with SASL
	// GSSAPI (hbase.security.authentication=kerberos).
	Kerberos *Kerberos
	// RPCTimeout bounds one RPC; 0 means 60 s.
	RPCTimeout time.Duration
	// OperationTimeout bounds one operation with all its retries (Get,
	// Mutate, one scanner step, one admin call); 0 means 2 min.
	OperationTimeout time.Duration
	// Pause is the base back-off between retries; 0 means 100 ms. Retries
	// wait Pause times 1, 2, 3, 5, 10, 20, 40, 100... capped at MaxPause.
	Pause time.Duration
	// MaxPause caps one back-off wait; 0 means 10 s.
	MaxPause time.Duration
	// Retries caps the attempts of one operation; 0 means 35 (Java's
	// default retries times its meta-lookup multiplier, about).
	Retries int
	// Logf, when set, hears of retries: which server (or the ZooKeeper
	// quorum), which attempt, what failed and how long until the
	// operation gives up; the first retry at a server at once, then one
	// line per server every 10 s at most while the retries go on.
	Logf func(format string, args ...any)
}

func (c *Config) fill() {
	if c.ZNodeParent == "" {
		c.ZNodeParent = "/hbase"
	}
	if c.User == "" {
		if u, err := user.Current(); err == nil && u.Username != "" {
			c.User = u.Username
		} else {
			c.User = "rekey"
		}
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = 60 * time.Second
	}
	if c.OperationTimeout <= 0 {
		c.OperationTimeout = 2 * time.Minute
	}
	if c.Pause <= 0 {
		c.Pause = 100 * time.Millisecond
	}
	if c.MaxPause <= 0 {
		c.MaxPause = 10 * time.Second
	}
	if c.Retries <= 0 {
		c.Retries = 35
	}
}

// Client is a connection to one HBase cluster: ZooKeeper for bootstrap, a
// cache of region locations, and one RPC connection per server and service.
// It is safe for concurrent use. Close releases it.
type Client struct {
	cfg Config
	zk  *zkClient

	poolMu sync.Mutex
	pool   map[poolKey]*poolEntry

	cache regionCache

	metaMu   sync.Mutex
	metaAddr string

	log *retryLog
}

type poolKey struct{ addr, service string }

type poolEntry struct {
	mu   sync.Mutex
	conn *rpc.Conn
}

// NewClient connects to the cluster's ZooKeeper. Servers are dialled lazily,
// on first use.
func NewClient(cfg Config) (*Client, error) {
	cfg.fill()
	if cfg.ZKQuorum == "" {
		return nil, errors.New("hbase: Config.ZKQuorum is required")
	}
	log := newRetryLog(cfg.Logf)
	z, err := dialZK(cfg.ZKQuorum, cfg.ZNodeParent, 30*time.Second, log)
	if err != nil {
		return nil, err
	}
	if cfg.Kerberos != nil {
		k := *cfg.Kerberos // the caller's value stays as given
		// A token is chosen by the cluster's id, which ZooKeeper holds.
		if err := k.ready(z); err != nil {
			z.close()
			return nil, err
		}
		cfg.Kerberos = &k
	}
	return &Client{cfg: cfg, zk: z, pool: map[poolKey]*poolEntry{}, cache: regionCache{tables: map[string]*tableRegions{}}, log: log}, nil
}

// Close closes every connection.
func (c *Client) Close() error {
	c.poolMu.Lock()
	pool := c.pool
	c.pool = map[poolKey]*poolEntry{}
	c.poolMu.Unlock()
	for _, e := range pool {
		e.mu.Lock()
		if e.conn != nil {
			e.conn.Close()
		}
		e.mu.Unlock()
	}
	if c.zk != nil {
		c.zk.close()
	}
	return nil
}

// conn returns a working connection to addr for service, dialling one if
// there is none or the last one broke.
func (c *Client) conn(ctx context.Context, addr, service string) (*rpc.Conn, error) {
	k := poolKey{addr, service}
	c.poolMu.Lock()
	e := c.pool[k]
	if e == nil {
		e = &poolEntry{}
		c.pool[k] = e
	}
	c.poolMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil && e.conn.Err() == nil {
		return e.conn, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc := rpc.Config{User: c.cfg.User, Service: service}
	if c.cfg.Kerberos != nil {
		k, err := c.cfg.Kerberos.forService(service)
		if err != nil {
			return nil, err
		}
		rc.Kerberos = k
	}
	conn, err := rpc.Dial(dctx, addr, rc)
	if err != nil {
		return nil, err
	}
	e.conn = conn
	return conn, nil
}

// call makes one RPC with the client's RPC timeout.
func (c *Client) call(ctx context.Context, addr, service, method string, req proto.Message, cellBlock []byte, priority uint32, resp proto.Message) ([]byte, error) {
	conn, err := c.conn(ctx, addr, service)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.RPCTimeout)
	defer cancel()
	return conn.Call(cctx, method, req, cellBlock, priority, resp)
}

// callRaw is call for a request the caller encoded (rpc.Conn.CallRaw).
func (c *Client) callRaw(ctx context.Context, addr, service, method string, req []byte, cells [][]byte, priority uint32) (msg, cellBlock []byte, err error) {
	conn, err := c.conn(ctx, addr, service)
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.RPCTimeout)
	defer cancel()
	return conn.CallRaw(cctx, method, req, cells, priority)
}

var backoffSteps = []int{1, 2, 3, 5, 10, 20, 40, 100, 100, 100, 100, 200, 200}

// pauseFor returns the wait before retry number attempt (0-based) of an
// error of class r.
func (c *Client) pauseFor(attempt int, r rpc.Retry, err error) time.Duration {
	if r == rpc.RetryNow {
		return 0
	}
	if attempt >= len(backoffSteps) {
		attempt = len(backoffSteps) - 1
	}
	d := c.cfg.Pause * time.Duration(backoffSteps[attempt])
	var re *rpc.RemoteError
	if errors.As(err, &re) && (re.Class == rpc.ExcCallQueueTooBig || re.Class == rpc.ExcCallDropped) {
		d *= 3 // overloaded server: Java uses a longer pause here too
	}
	if d > c.cfg.MaxPause {
		d = c.cfg.MaxPause
	}
	return d
}

// RetriesExhaustedError reports an operation that failed after retrying;
// Err is the last error.
type RetriesExhaustedError struct {
	Op       string
	Attempts int
	Elapsed  time.Duration
	Err      error
}

func (e *RetriesExhaustedError) Error() string {
	return fmt.Sprintf("hbase: %s failed after %d attempts in %v: %v", e.Op, e.Attempts, e.Elapsed.Round(time.Millisecond), e.Err)
}

func (e *RetriesExhaustedError) Unwrap() error { return e.Err }

// withRegion runs fn against the region holding row, relocating and
// retrying as the errors say, until fn succeeds, an error says give up, the
// retries run out or ctx ends.
func (c *Client) withRegion(ctx context.Context, op string, table, row []byte, fn func(ctx context.Context, r *Region) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OperationTimeout)
	defer cancel()
	start := time.Now()
	var last error
	for attempt := 0; ; attempt++ {
		r, err := c.Locate(ctx, table, row)
		server := "hbase:meta (locating the region)"
		if err == nil {
			server = r.Server
			err = fn(ctx, r)
			if err == nil {
				return nil
			}
			c.onError(r, err)
		}
		last = err
		class := rpc.RetryOf(err)
		if ctx.Err() != nil {
			return &RetriesExhaustedError{Op: op, Attempts: attempt + 1, Elapsed: time.Since(start), Err: last}
		}
		if class == rpc.GiveUp || class == rpc.RestartScanner {
			return fmt.Errorf("hbase: %s: %w", op, err)
		}
		if attempt+1 >= c.cfg.Retries {
			return &RetriesExhaustedError{Op: op, Attempts: attempt + 1, Elapsed: time.Since(start), Err: last}
		}
		c.log.retry(ctx, "HBase "+op, server, attempt+1, err)
		if err := pause.For(ctx, c.pauseFor(attempt, class, err)); err != nil {
			return &RetriesExhaustedError{Op: op, Attempts: attempt + 1, Elapsed: time.Since(start), Err: last}
		}
	}
}

// onError updates the location cache after an error on region r: a moved
// region goes to its new server, a region that is not served or whose
// server is unreachable is forgotten.
func (c *Client) onError(r *Region, err error) {
	var re *rpc.RemoteError
	if errors.As(err, &re) && re.Class == rpc.ExcRegionMoved && re.Host != "" && re.Port > 0 {
		if r.isMeta() {
			// hbase:meta's location is not in the region cache: follow the
			// move there, or every lookup would go on asking the old server,
			// which answers RegionMovedException for minutes.
			c.metaMoved(r.Server, fmtAddr(re.Host, re.Port))
			return
		}
		c.cache.moved(r, fmtAddr(re.Host, re.Port))
		return
	}
	switch rpc.RetryOf(err) {
	case rpc.Relocate:
		if errors.Is(err, rpc.ErrConnBroken) || errors.Is(err, rpc.ErrDial) {
			c.cache.forgetServer(r.Server)
			if r.isMeta() {
				c.forgetMeta()
			}
			return
		}
		c.cache.forget(r)
		if r.isMeta() {
			c.forgetMeta()
		}
	}
}

// resultsOf decodes the results of a Scan (or the single result of a Get),
// whose cells come either inline or in the cell block.
func resultsOf(inline []*pb.Result, cellsPerResult []uint32, partial []bool, cellBlock []byte) ([]result, error) {
	var out []result
	if len(cellsPerResult) > 0 || (len(inline) == 0 && len(cellBlock) > 0) {
		rd := rpc.NewCellBlock(cellBlock)
		for i, n := range cellsPerResult {
			cells, err := rpc.DecodeCells(rd, int(n), nil)
			if err != nil {
				return nil, fmt.Errorf("result %d: %w", i, err)
			}
			out = append(out, result{cells: cells, partial: i < len(partial) && partial[i]})
		}
		if rd.Remaining() {
			return nil, fmt.Errorf("%w: cell block has cells beyond the %d results announced", rpc.ErrCorrupt, len(cellsPerResult))
		}
		return out, nil
	}
	rd := rpc.NewCellBlock(cellBlock)
	for i, r := range inline {
		var cells []cellT
		for _, pc := range r.GetCell() {
			cells = append(cells, fromPB(pc))
		}
		if n := r.GetAssociatedCellCount(); n > 0 {
			var err error
			if cells, err = rpc.DecodeCells(rd, int(n), cells); err != nil {
				return nil, fmt.Errorf("result %d: %w", i, err)
			}
		}
		p := r.GetPartial() || (i < len(partial) && partial[i])
		out = append(out, result{cells: cells, partial: p})
	}
	return out, nil
}
