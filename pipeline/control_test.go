package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

func demoJob(t *testing.T) *job.Job {
	t.Helper()
	j, err := job.Load("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j.Run.Checkpoint = filepath.Join(dir, "checkpoint.json")
	j.BadKeys.File = filepath.Join(dir, "rejects.tsv")
	return j
}

// TestControlPausesResumesAndChangesLimits drives a dry run of the bundled
// snapshot through the loopback control endpoint.
func TestControlPausesResumesAndChangesLimits(t *testing.T) {
	ctl := pipeline.NewControl(pipeline.Limits{CellsPerSec: 4000})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := ctl.Serve(ctx, "127.0.0.1:0", "t0ken")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	call := func(method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("Authorization", "Bearer t0ken")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	done := make(chan *pipeline.Summary, 1)
	go func() {
		sum, err := pipeline.Execute(ctx, demoJob(t), pipeline.Options{Sink: sink.DryRun{}, Control: ctl, Workers: 2})
		if err != nil {
			t.Error(err)
		}
		done <- sum
	}()
	status := func() pipeline.Status {
		resp := call("GET", "/status")
		defer resp.Body.Close()
		var s pipeline.Status
		json.NewDecoder(resp.Body).Decode(&s)
		return s
	}
	post := func(path string) {
		resp := call("POST", path)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	time.Sleep(time.Second)
	post("/pause")
	time.Sleep(300 * time.Millisecond)
	a := status()
	time.Sleep(time.Second)
	b := status()
	if !b.Paused || b.Written != a.Written {
		t.Errorf("paused: written went %d -> %d, paused %v", a.Written, b.Written, b.Paused)
	}
	if a.Written == 0 || a.Written > 31413/2 {
		t.Errorf("a second at 4000 cells/s wrote %d cells", a.Written)
	}
	post("/resume")
	post("/limits?cells_per_sec=0")
	select {
	case sum := <-done:
		if sum == nil || sum.Written != 31413 || !sum.Finished {
			t.Errorf("summary after resume: %+v", sum)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not finish after resume and lifting the cap")
	}
	resp := call("GET", "/metrics")
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 1<<16)
	n, _ := resp.Body.Read(buf)
	sb.Write(buf[:n])
	if !strings.Contains(sb.String(), "rekey_cells_written_total") {
		t.Errorf("metrics lack rekey_cells_written_total:\n%s", sb.String())
	}
}

// TestInterruptKeepsFinishedSplits: a cancelled run reports ErrInterrupted
// and a resume finishes with exactly the snapshot's cells.
func TestInterruptKeepsFinishedSplits(t *testing.T) {
	j := demoJob(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(1500 * time.Millisecond); cancel() }()
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Sink: sink.DryRun{}, Workers: 1, Limits: pipeline.Limits{CellsPerSec: 10000}})
	if err != pipeline.ErrInterrupted || !sum.Interrupted {
		t.Fatalf("interrupted run: %v, %+v", err, sum)
	}
	if sum.Done == sum.Splits {
		t.Fatalf("every split finished before the interrupt; the test needs a slower run")
	}
	sum2, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Workers: 2, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum2.Read != 31413 || sum2.Skipped != sum.Done || !sum2.Finished {
		t.Errorf("resume: read %d (want 31413 over both runs), skipped %d (want %d), finished %v", sum2.Read, sum2.Skipped, sum.Done, sum2.Finished)
	}
}

// TestControlRefusesStrangers: the endpoint answers only requests that
// carry the run's token and are addressed to its own address. A local
// process without the token (401), a web page's request (a foreign
// Origin) and one through a DNS name rebound to loopback (a foreign Host)
// (403) are refused, and a refused POST /pause leaves the run going.
func TestControlRefusesStrangers(t *testing.T) {
	ctl := pipeline.NewControl(pipeline.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := ctl.Serve(ctx, "127.0.0.1:0", ""); err == nil {
		t.Fatal("Serve without a token: no error")
	}
	addr, err := ctl.Serve(ctx, "127.0.0.1:0", "right")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, c := range []struct {
		name, auth, host, origin string
		want                     int
	}{
		{"no token", "", "", "", http.StatusUnauthorized},
		{"wrong token", "Bearer wrong", "", "", http.StatusUnauthorized},
		{"token with another scheme", "Basic right", "", "", http.StatusUnauthorized},
		{"foreign Origin", "Bearer right", "", "https://evil.example", http.StatusForbidden},
		{"null Origin", "Bearer right", "", "null", http.StatusForbidden},
		{"foreign Host", "Bearer right", "evil.example:" + port, "", http.StatusForbidden},
		{"Host with another port", "Bearer right", "127.0.0.1:1", "", http.StatusForbidden},
		{"right token", "Bearer right", "", "", http.StatusOK},
		{"right token, scheme in capitals", "BEARER right", "", "", http.StatusOK},
		{"right token through localhost", "Bearer right", "localhost:" + port, "http://localhost:" + port, http.StatusOK},
		{"right token, the endpoint's own Origin", "Bearer right", "", "http://" + addr, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctl.Resume()
			req, _ := http.NewRequest("POST", "http://"+addr+"/pause", nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			if c.host != "" {
				req.Host = c.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("status %s, want %d", resp.Status, c.want)
			}
			if paused := ctl.Paused(); paused != (c.want == http.StatusOK) {
				t.Errorf("after the answer %d the run is paused: %v", resp.StatusCode, paused)
			}
		})
	}
}

// TestControlTokenFile: a run's endpoint takes a random token, written
// with mode 0600 beside its checkpoint (replacing a looser file an earlier
// run left) and removed when the run ends; a token the options give is
// used as given, and no file is written.
func TestControlTokenFile(t *testing.T) {
	j := demoJob(t)
	j.Run.ControlAddr = "127.0.0.1:0"
	file := strings.TrimSuffix(j.Run.Checkpoint, ".json") + ".control-token"
	if err := os.WriteFile(file, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	logf := func(f string, a ...any) { fmt.Fprintf(&logs, f+"\n", a...) }
	r, err := pipeline.Prepare(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := os.ReadFile(file)
	if st.Mode().Perm() != 0o600 || len(token) < 32 || string(token) == "old" {
		t.Errorf("token file: mode %v, %d bytes %q", st.Mode().Perm(), len(token), token)
	}
	if !strings.Contains(logs.String(), file) {
		t.Errorf("the run does not say where its token is:\n%s", logs.String())
	}
	status := func(addr, token string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/status", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	addr := r.Outline().ControlAddr
	if got := status(addr, string(token)); got != http.StatusOK {
		t.Errorf("with the file's token: %d", got)
	}
	if got := status(addr, "old"); got != http.StatusUnauthorized {
		t.Errorf("with the old file's token: %d", got)
	}
	r.Close()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("token file after the run: %v", err)
	}

	r, err = pipeline.Prepare(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, ControlToken: "given", Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("a token file with a given token: %v", err)
	}
	if got := status(r.Outline().ControlAddr, "given"); got != http.StatusOK {
		t.Errorf("with the given token: %d", got)
	}
}

// TestMetricsEndpointOnlyReads: --metrics-addr (run.metrics_addr) binds
// any interface and asks no token, so it must serve the metrics and
// nothing else: a stranger who reaches a pod's IP gets the gauges, and
// cannot read the status, pause the run or change its limits. A run
// serves it until it is closed.
func TestMetricsEndpointOnlyReads(t *testing.T) {
	ctl := pipeline.NewControl(pipeline.Limits{CellsPerSec: 100})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := ctl.ServeMetrics(ctx, "no-port"); err == nil {
		t.Error("ServeMetrics on an address without a port: no error")
	}
	addr, err := ctl.ServeMetrics(ctx, ":0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		t.Errorf("bound %s, want every interface (a scraper on another host)", addr)
	}
	do := func(method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, "http://127.0.0.1:"+port+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := do("GET", "/metrics")
	var body strings.Builder
	if _, err := io.Copy(&body, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), "rekey_write_cap_cells_per_second 100") {
		t.Errorf("GET /metrics without a token: %s\n%s", resp.Status, body.String())
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/pause"}, {"POST", "/resume"}, {"POST", "/limits?cells_per_sec=0"}, {"GET", "/status"}, {"POST", "/metrics"},
	} {
		resp := do(c.method, c.path)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s on the metrics endpoint: %s, want 404 or 405", c.method, c.path, resp.Status)
		}
	}
	if ctl.Paused() || ctl.Limits().CellsPerSec != 100 {
		t.Errorf("after the refused requests: paused %v, limits %+v", ctl.Paused(), ctl.Limits())
	}

	j := demoJob(t)
	j.Run.MetricsAddr = "127.0.0.1:0"
	r, err := pipeline.Prepare(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}})
	if err != nil {
		t.Fatal(err)
	}
	m := r.Outline().MetricsAddr
	if m == "" || r.Outline().ControlAddr != "" {
		t.Fatalf("plan: metrics on %q, control on %q; want metrics alone", m, r.Outline().ControlAddr)
	}
	resp, err = http.Get("http://" + m + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the run's metrics: %s", resp.Status)
	}
	r.Close()
	if resp, err := http.Get("http://" + m + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("the run's metrics still answer after Close: %s", resp.Status)
	}
}
