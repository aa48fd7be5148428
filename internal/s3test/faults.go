package s3test

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Protocol tells a FaultProxy, for one store's HTTP API, which requests
// download an object's bytes (the bodies it cuts) and which ask for a
// server-side copy.
type Protocol struct {
	// Read reports whether r downloads object bytes, and the byte range
	// it asks for ("" for the whole object).
	Read func(r *http.Request) (rng string, ok bool)
	// Copy reports whether r asks the server to copy an object.
	Copy func(r *http.Request) bool
}

// S3Protocol: ranged GETs read; a copy names its source in a header.
var S3Protocol = Protocol{
	Read: func(r *http.Request) (string, bool) {
		rng := r.Header.Get("Range")
		return rng, r.Method == http.MethodGet && rng != ""
	},
	Copy: func(r *http.Request) bool { return r.Header.Get("X-Amz-Copy-Source") != "" },
}

// GCSProtocol: the JSON API's media downloads (alt=media) read; a copy is
// a rewrite (or the older copyTo).
var GCSProtocol = Protocol{
	Read: func(r *http.Request) (string, bool) {
		return r.Header.Get("Range"), r.Method == http.MethodGet && r.URL.Query().Get("alt") == "media"
	},
	Copy: func(r *http.Request) bool {
		return strings.Contains(r.URL.Path, "/rewriteTo/") || strings.Contains(r.URL.Path, "/copyTo/")
	},
}

// AzureProtocol: a GET of a blob's URL with no comp= or restype= query
// (those are listings and properties) reads, its range in x-ms-range (or
// Range); a copy names its source in x-ms-copy-source.
var AzureProtocol = Protocol{
	Read: func(r *http.Request) (string, bool) {
		q := r.URL.Query()
		rng := r.Header.Get("X-Ms-Range")
		if rng == "" {
			rng = r.Header.Get("Range")
		}
		return rng, r.Method == http.MethodGet && q.Get("comp") == "" && q.Get("restype") == ""
	},
	Copy: func(r *http.Request) bool { return r.Header.Get("X-Ms-Copy-Source") != "" },
}

// Answer is an error response a FaultProxy gives instead of the server's.
type Answer struct {
	Status int
	Header map[string]string
	Body   string
}

// The throttling and timeout answers each store documents, as its servers
// send them.
var (
	// S3SlowDown is S3's request-rate throttling.
	S3SlowDown = Answer{Status: http.StatusServiceUnavailable, Header: map[string]string{"Content-Type": "application/xml"},
		Body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`}
	// GCSTooManyRequests is GCS's rate limit (429 rateLimitExceeded).
	GCSTooManyRequests = Answer{Status: http.StatusTooManyRequests, Header: map[string]string{"Content-Type": "application/json"},
		Body: `{"error":{"code":429,"message":"The rate of requests is too high","errors":[{"reason":"rateLimitExceeded","message":"The rate of requests is too high"}]}}`}
	// GCSBackendError is GCS's 503 (backendError).
	GCSBackendError = Answer{Status: http.StatusServiceUnavailable, Header: map[string]string{"Content-Type": "application/json"},
		Body: `{"error":{"code":503,"message":"Backend Error","errors":[{"reason":"backendError","message":"Backend Error"}]}}`}
	// AzureServerBusy is Azure storage's throttling (503 ServerBusy).
	AzureServerBusy = Answer{Status: http.StatusServiceUnavailable, Header: map[string]string{"Content-Type": "application/xml", "x-ms-error-code": "ServerBusy"},
		Body: `<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>The server is currently unable to receive requests. Please retry your request.</Message></Error>`}
	// AzureOperationTimedOut is Azure storage's 500 OperationTimedOut.
	AzureOperationTimedOut = Answer{Status: http.StatusInternalServerError, Header: map[string]string{"Content-Type": "application/xml", "x-ms-error-code": "OperationTimedOut"},
		Body: `<?xml version="1.0" encoding="utf-8"?><Error><Code>OperationTimedOut</Code><Message>The operation could not be completed within the permitted time.</Message></Error>`}
)

// FaultProxy is a loopback HTTP proxy in front of a real store's server
// (versitygw, fake-gcs-server, Azurite): the server answers every request
// it passes on, and the proxy adds the faults a network and a busy service
// add: download bodies cut after some bytes (as a connection reset
// mid-body: the client reads fewer bytes than the Content-Length), and
// error answers (throttling) instead of the server's. It forwards the Host
// header as received, so signatures made for the proxy's address verify.
type FaultProxy struct {
	srv   *httptest.Server
	proto Protocol

	mu sync.Mutex
	// cutAfter, cuts: the next cuts download bodies end after cutAfter
	// bytes.
	cutAfter, cuts int
	// refuse requests are answered with answer.
	refuse  int
	answer  Answer
	refused int
	// afterCopy runs once a server-side copy was answered.
	afterCopy func()
	ranges    []string
	// copies counts the server-side copies asked for.
	copies int
}

// StartFaultProxy starts a proxy in front of the server at endpoint (its
// scheme and host; the path of each request is passed on as it came),
// and stops it when the test ends.
func StartFaultProxy(t testing.TB, endpoint string, proto Protocol) *FaultProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{proto: proto}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.ModifyResponse = func(resp *http.Response) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.afterCopy != nil && proto.Copy(resp.Request) {
			f := p.afterCopy
			p.afterCopy = nil
			f()
		}
		ok := resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent
		if _, read := proto.Read(resp.Request); read && ok && p.cuts > 0 {
			p.cuts--
			resp.Body = &cutBody{r: resp.Body, left: p.cutAfter}
		}
		return nil
	}
	rp.ErrorLog = log.New(io.Discard, "", 0) // the cuts are meant
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		if rng, read := proto.Read(r); read {
			p.ranges = append(p.ranges, rng)
		}
		if proto.Copy(r) {
			p.copies++
		}
		refuse := p.refuse > 0
		a := p.answer
		if refuse {
			p.refuse--
			p.refused++
		}
		p.mu.Unlock()
		if refuse {
			for k, v := range a.Header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(a.Status)
			io.WriteString(w, a.Body)
			return
		}
		rp.ServeHTTP(headersFirst{w}, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// Endpoint is endpoint (a URL of the proxied server) with the proxy's
// address in place of the server's.
func (p *FaultProxy) Endpoint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		panic(err)
	}
	pu, _ := url.Parse(p.srv.URL)
	u.Scheme, u.Host = pu.Scheme, pu.Host
	return u.String()
}

// CutReads cuts the next n download bodies after after bytes each, and
// forgets the ranges seen so far.
func (p *FaultProxy) CutReads(after, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutAfter, p.cuts, p.ranges = after, n, nil
}

// Refuse answers the next n requests with a instead of passing them on.
func (p *FaultProxy) Refuse(n int, a Answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse, p.answer = n, a
}

// AfterCopy runs f (once) when the next server-side copy was answered,
// before the client sees the answer.
func (p *FaultProxy) AfterCopy(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.afterCopy = f
}

// Ranges are the byte ranges of the downloads seen since CutReads.
func (p *FaultProxy) Ranges() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ranges...)
}

// Copies is how many server-side copies (a rename's first half) the
// proxy passed on since it started.
func (p *FaultProxy) Copies() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.copies
}

// Refused is how many requests were answered by Refuse's answer.
func (p *FaultProxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// headersFirst sends a response's status and headers as soon as they are
// written, so that a body cut before its first byte still reaches the
// client as an answer whose body broke (not as no answer at all, which a
// client retries as a failed request).
type headersFirst struct{ http.ResponseWriter }

func (h headersFirst) WriteHeader(code int) {
	h.ResponseWriter.WriteHeader(code)
	if f, ok := h.ResponseWriter.(http.Flusher); ok && code >= 200 { // a flush after a 1xx would send a 200
		f.Flush()
	}
}

// Flush passes the reverse proxy's flushes on.
func (h headersFirst) Flush() {
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// cutBody passes left bytes, then fails, as a connection reset mid-body
// does: the proxy then aborts the response, and the client reads a body
// shorter than its Content-Length.
type cutBody struct {
	r    io.ReadCloser
	left int
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("cut by the test")
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= n
	return n, err
}

func (c *cutBody) Close() error { return c.r.Close() }
