package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
// It returns the address it listens on (useful with port 0).
func (c *Control) Serve(ctx context.Context, addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("control address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("%w: %q", ErrNotLoopback, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("control address %q: %w", addr, err)
	}
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return ln.Addr().String(), nil
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
