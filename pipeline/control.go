package pipeline

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rekeyhq/rekey/vfs"
)

// Control changes a running job: its throttle caps, pause and resume. It is
// safe for concurrent use; Serve exposes it over HTTP on loopback.
type Control struct {
	write *limiter // cells handed to the sink
	read  *limiter // bytes read from the snapshot

	mu       sync.Mutex
	limits   Limits  // as asked for
	backoff  float64 // current write cap from push-back, 0 = none
	paused   bool
	status   func() Status
	registry *prometheus.Registry
}

// NewControl returns a Control starting at limits.
func NewControl(limits Limits) *Control {
	return &Control{
		write:  newLimiter(limits.CellsPerSec, time.Now),
		read:   newLimiter(limits.ReadBytesPerSec, time.Now),
		limits: limits,
	}
}

// SetLimits changes the caps of cells written and bytes read per second
// (0 = no cap). A lower write cap from push-back still applies until it
// recovers.
func (c *Control) SetLimits(cellsPerSec, readBytesPerSec float64) {
	c.mu.Lock()
	c.limits.CellsPerSec, c.limits.ReadBytesPerSec = cellsPerSec, readBytesPerSec
	c.mu.Unlock()
	c.read.set(readBytesPerSec)
	c.applyWrite()
}

// Limits returns the caps as asked for.
func (c *Control) Limits() Limits {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limits
}

// Pause stops reading and writing until Resume; splits in progress stay
// open.
func (c *Control) Pause() {
	c.mu.Lock()
	c.paused = true
	c.mu.Unlock()
	c.write.pause(true)
	c.read.pause(true)
}

// Resume undoes Pause.
func (c *Control) Resume() {
	c.mu.Lock()
	c.paused = false
	c.mu.Unlock()
	c.write.pause(false)
	c.read.pause(false)
}

// Paused reports whether the run is paused.
func (c *Control) Paused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused
}

// setBackoff sets the write cap push-back imposes (0 = none).
func (c *Control) setBackoff(rate float64) {
	c.mu.Lock()
	c.backoff = rate
	c.mu.Unlock()
	c.applyWrite()
}

func (c *Control) backoffRate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backoff
}

// applyWrite sets the write limiter to the lower of the asked cap and the
// push-back cap.
func (c *Control) applyWrite() {
	c.mu.Lock()
	r := c.limits.CellsPerSec
	if c.backoff > 0 && (r == 0 || c.backoff < r) {
		r = c.backoff
	}
	c.mu.Unlock()
	c.write.set(r)
}

// Status is a running job's progress, as /status serves it.
type Status struct {
	Splits      int     `json:"splits"`
	SplitsDone  int     `json:"splits_done"`
	Running     int     `json:"splits_running"`
	Read        int64   `json:"cells_read"`
	Written     int64   `json:"cells_written"`
	Rejected    int64   `json:"cells_rejected"`
	Collided    int64   `json:"cells_collided"`
	Failed      int64   `json:"cells_failed"`
	BytesRead   int64   `json:"bytes_read"`
	TotalBytes  int64   `json:"total_bytes"`
	CellsPerSec float64 `json:"cells_per_sec"`
	MBPerSec    float64 `json:"read_mb_per_sec"`
	ETASeconds  float64 `json:"eta_seconds"`
	Elapsed     float64 `json:"elapsed_seconds"`
	Paused      bool    `json:"paused"`
	Limits      Limits  `json:"limits"`
	BackoffCap  float64 `json:"backoff_cells_per_sec,omitempty"`
}

func (c *Control) setStatus(f func() Status) {
	c.mu.Lock()
	c.status = f
	c.mu.Unlock()
}

// Status returns the run's progress now.
func (c *Control) Status() Status {
	c.mu.Lock()
	f := c.status
	c.mu.Unlock()
	if f == nil {
		return Status{Paused: c.Paused(), Limits: c.Limits()}
	}
	return f()
}

// ErrNotLoopback refuses a control address anyone else could reach.
var ErrNotLoopback = errors.New("pipeline: the control address must be on loopback (127.0.0.1, ::1 or localhost)")

// Serve answers on addr (loopback only) until ctx ends:
//
//	GET  /status                      progress as JSON
//	POST /pause, POST /resume         stop and restart reading and writing
//	POST /limits?cells_per_sec=N&read_mb_per_sec=M   change the caps (0 = none)
//	GET  /metrics                     Prometheus metrics
//
// Loopback alone lets in every local process and every web page a local
// browser opens, so each request must also carry token as
// "Authorization: Bearer TOKEN" (else 401), and is refused (403) when its
// Host header names anything but the listening address or localhost on
// its port (a DNS name rebound to 127.0.0.1 by a web page), or when it
// carries an Origin header other than that address's (a page's script or
// form). It returns the address it listens on (useful with port 0).
func (c *Control) Serve(ctx context.Context, addr, token string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("control address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("%w: %q", ErrNotLoopback, addr)
	}
	if token == "" {
		return "", fmt.Errorf("control address %q: no token: the endpoint answers only requests that carry one", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("control address %q: %w", addr, err)
	}
	bound := ln.Addr().String()
	srv := &http.Server{Handler: guard(c.routes(), bound, token), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return bound, nil
}

// ServeMetrics answers GET /metrics, and nothing else, on addr until ctx
// ends. Unlike Serve it binds any interface and asks no token: a
// Prometheus scrapes a pod's IP and carries no secret, and the metrics
// only read gauges, while /status, /pause, /resume and /limits stay on
// the loopback endpoint behind its token. It returns the address it
// listens on (useful with port 0).
func (c *Control) ServeMetrics(ctx context.Context, addr string) (string, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("metrics address %q: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(c.metrics(), promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return ln.Addr().String(), nil
}

// routes are the endpoint's requests.
func (c *Control) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(c.Status())
	})
	mux.HandleFunc("POST /pause", func(w http.ResponseWriter, _ *http.Request) { c.Pause(); fmt.Fprintln(w, "paused") })
	mux.HandleFunc("POST /resume", func(w http.ResponseWriter, _ *http.Request) { c.Resume(); fmt.Fprintln(w, "resumed") })
	mux.HandleFunc("POST /limits", func(w http.ResponseWriter, r *http.Request) {
		l := c.Limits()
		cells, read := l.CellsPerSec, l.ReadBytesPerSec
		if v := r.URL.Query().Get("cells_per_sec"); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				http.Error(w, "cells_per_sec: want a number >= 0", http.StatusBadRequest)
				return
			}
			cells = f
		}
		if v := r.URL.Query().Get("read_mb_per_sec"); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				http.Error(w, "read_mb_per_sec: want a number >= 0", http.StatusBadRequest)
				return
			}
			read = f * 1e6
		}
		c.SetLimits(cells, read)
		json.NewEncoder(w).Encode(c.Limits())
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(c.metrics(), promhttp.HandlerOpts{}))
	return mux
}

// guard passes on a request only when it is addressed to bound (Host, and
// Origin if any) and carries token; see Serve.
func guard(next http.Handler, bound, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sameEndpoint(r.Host, bound) {
			http.Error(w, fmt.Sprintf("control endpoint: Host %q is not this endpoint's address %s", r.Host, bound), http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, bound) {
			http.Error(w, fmt.Sprintf("control endpoint: requests from %q are refused (Origin)", o), http.StatusForbidden)
			return
		}
		if !bearer(r.Header.Get("Authorization"), token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rekey run"`)
			http.Error(w, "control endpoint: missing or wrong token (Authorization: Bearer TOKEN; the run logs where its token is)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameEndpoint reports whether a Host header names bound: its IP, or
// localhost, with its port.
func sameEndpoint(hostHeader, bound string) bool {
	h, p, err := net.SplitHostPort(hostHeader)
	if err != nil {
		return false
	}
	bh, bp, err := net.SplitHostPort(bound)
	if err != nil || p != bp {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, bip := net.ParseIP(h), net.ParseIP(bh)
	return ip != nil && ip.Equal(bip)
}

// sameOrigin reports whether an Origin header is the endpoint's own.
func sameOrigin(origin, bound string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.Path == "" && sameEndpoint(u.Host, bound)
}

// bearer reports whether an Authorization header carries token, compared
// in constant time.
func bearer(header, token string) bool {
	const scheme = "bearer "
	if len(header) < len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return false
	}
	got := strings.TrimSpace(header[len(scheme):])
	return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// metrics registers gauges that read Status when scraped.
func (c *Control) metrics() *prometheus.Registry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.registry != nil {
		return c.registry
	}
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, f func(Status) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "rekey", Name: name, Help: help},
			func() float64 { return f(c.Status()) }))
	}
	gauge("splits_total", "Splits of the run.", func(s Status) float64 { return float64(s.Splits) })
	gauge("splits_done", "Splits finished (also by earlier runs).", func(s Status) float64 { return float64(s.SplitsDone) })
	gauge("cells_read_total", "Cells read from the snapshot.", func(s Status) float64 { return float64(s.Read) })
	gauge("cells_written_total", "Cells handed to the sink.", func(s Status) float64 { return float64(s.Written) })
	gauge("cells_rejected_total", "Cells whose key did not fit the layout.", func(s Status) float64 { return float64(s.Rejected) })
	gauge("cells_collided_total", "New cells produced twice.", func(s Status) float64 { return float64(s.Collided) })
	gauge("cells_failed_total", "Cells the sink gave up on.", func(s Status) float64 { return float64(s.Failed) })
	gauge("bytes_read_total", "Bytes read from the snapshot's file system.", func(s Status) float64 { return float64(s.BytesRead) })
	gauge("paused", "1 while paused.", func(s Status) float64 {
		if s.Paused {
			return 1
		}
		return 0
	})
	gauge("write_cap_cells_per_second", "The write cap in force (0 = none).", func(s Status) float64 {
		if s.BackoffCap > 0 && (s.Limits.CellsPerSec == 0 || s.BackoffCap < s.Limits.CellsPerSec) {
			return s.BackoffCap
		}
		return s.Limits.CellsPerSec
	})
	c.registry = reg
	return reg
}

// serveControl serves the control endpoint the job asks for, until the
// run is closed, behind the run's token, and the read-only metrics
// endpoint if the job asks for one.
func (r *Run) serveControl(ctx context.Context) error {
	if err := r.serveMetrics(ctx); err != nil {
		return err
	}
	addr := r.j.Run.ControlAddr
	if addr == "" {
		return nil
	}
	token, file, err := r.controlToken()
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	bound, err := r.ctl.Serve(sctx, addr, token)
	if err != nil {
		stop()
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	r.closers = append(r.closers, func() error { stop(); return nil })
	r.controlAddr = bound
	where := "the token given (--control-token or run.control_token)"
	if file != "" {
		if err := writeToken(file, token); err != nil {
			return fmt.Errorf("control endpoint: writing its token: %w", err)
		}
		r.closers = append(r.closers, func() error { return os.Remove(file) })
		where = "the token in " + file
	}
	r.logf("control endpoint on http://%s (status, pause, resume, limits, metrics); send Authorization: Bearer with %s", bound, where)
	return nil
}

// serveMetrics serves GET /metrics on run.metrics_addr, until the run is
// closed.
func (r *Run) serveMetrics(ctx context.Context) error {
	addr := r.j.Run.MetricsAddr
	if addr == "" {
		return nil
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	bound, err := r.ctl.ServeMetrics(sctx, addr)
	if err != nil {
		stop()
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	r.closers = append(r.closers, func() error { stop(); return nil })
	r.metricsAddr = bound
	r.logf("metrics on http://%s/metrics (read only, no token)", bound)
	return nil
}

// controlToken is the endpoint's token: the one the options or the job
// give, else a random one for this run, to be written to file, beside a
// local checkpoint and named after it. A checkpoint on HDFS has no local
// folder to hold the file, so there the token must be given.
func (r *Run) controlToken() (token, file string, err error) {
	if t := r.o.ControlToken; t != "" {
		return t, "", nil
	}
	if t := r.j.Run.ControlToken; t != "" {
		return t, "", nil
	}
	ck, ok := localPath(r.o.Checkpoint)
	if !ok {
		return "", "", fmt.Errorf("%w: the control endpoint of a run whose checkpoint is not local (%s) needs its token given: --control-token or run.control_token", ErrInvalid, r.o.Checkpoint)
	}
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b), strings.TrimSuffix(ck, ".json") + ".control-token", nil
}

// localPath returns where names on the local file system, if it does.
func localPath(where string) (string, bool) {
	if strings.HasPrefix(where, "hdfs:") {
		return "", false
	}
	loc, err := vfs.Open(where)
	if err != nil {
		return "", false
	}
	defer loc.Close()
	if _, ok := loc.FS.(vfs.Local); !ok {
		return "", false
	}
	return filepath.FromSlash(loc.Path), true
}

// writeToken writes token to a new file only its owner can read; a file
// left by an earlier run is replaced, not reused, so its mode cannot be
// looser.
func writeToken(file, token string) error {
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(token); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
