package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// faultProxy is a reverse proxy in front of the test API server that injects faults into the
// requests it is told to: the webhook's rest.Config (faultProxy.rc) points at it over plain HTTP
// on loopback with no credentials, and it forwards everything else with the real config's
// transport (TLS to the server, the bearer token). Faults match a method and a path suffix
// ("/scale"); each is applied a given number of times, or forever.
type faultProxy struct {
	// rc is the rest.Config the webhook under test uses.
	rc  *rest.Config
	srv *http.Server
	rp  *httputil.ReverseProxy

	mu     sync.Mutex
	faults []*fault
	// log has one line per request that matched a fault: "PUT …/scale 409 (injected)", or
	// "PUT …/scale forwarded" when the fault let it through (latency) or was used up.
	log []string
	// forwarded counts the requests sent to the API server, by method and matched suffix
	// ("PUT /scale"); only suffixes some fault names are counted.
	forwarded map[string]int
}

// fault is one injection rule.
type fault struct {
	method, suffix string
	// times left; negative: forever.
	times int
	// inject answers the request itself (true) or lets it go on to the API server (false).
	inject func(w http.ResponseWriter, r *http.Request) bool
	// matched counts the requests it was applied to.
	matched int
}

// newFaultProxy serves on 127.0.0.1:0 in front of upstream until the test ends.
func newFaultProxy(t testing.TB, upstream *rest.Config) *faultProxy {
	t.Helper()
	tr, err := rest.TransportFor(upstream)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(upstream.Host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{forwarded: map[string]int{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Header.Del("Authorization") // the transport sets the real credentials
		},
		Transport:     tr,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := p.match(r)
		if f != nil && f.inject(w, r) {
			return
		}
		if f != nil {
			if r.Context().Err() != nil { // the client gave up while the fault held the request
				p.record("%s %s dropped: the client gave up (%v)", r.Method, r.URL.Path, r.Context().Err())
				return
			}
			p.countForwarded(r, f.suffix)
		}
		p.rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	p.rc = &rest.Config{Host: "http://" + ln.Addr().String(), QPS: upstream.QPS, Burst: upstream.Burst}
	return p
}

// inject adds a fault for times requests (negative: every request) with this method whose
// path ends in suffix.
func (p *faultProxy) inject(method, suffix string, times int, f func(w http.ResponseWriter, r *http.Request) bool) *fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	ft := &fault{method: method, suffix: suffix, times: times, inject: f}
	p.faults = append(p.faults, ft)
	return ft
}

// clear removes every fault.
func (p *faultProxy) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

// match returns the first fault that applies to r and uses one of its times; a request that
// matches a used-up fault is still counted (forwarded) under its suffix.
func (p *faultProxy) match(r *http.Request) *fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	var spent *fault
	for _, f := range p.faults {
		if r.Method != f.method || !strings.HasSuffix(r.URL.Path, f.suffix) {
			continue
		}
		if f.times == 0 {
			spent = f
			continue
		}
		if f.times > 0 {
			f.times--
		}
		f.matched++
		return f
	}
	if spent != nil {
		return &fault{method: spent.method, suffix: spent.suffix, inject: func(http.ResponseWriter, *http.Request) bool { return false }}
	}
	return nil
}

func (p *faultProxy) countForwarded(r *http.Request, suffix string) {
	p.mu.Lock()
	p.forwarded[r.Method+" "+suffix]++
	p.mu.Unlock()
	p.record("%s %s forwarded", r.Method, r.URL.Path)
}

func (p *faultProxy) record(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, fmt.Sprintf(format, a...))
}

// forwardedCount is the number of requests with method and a faulted suffix that reached the
// API server.
func (p *faultProxy) forwardedCount(method, suffix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarded[method+" "+suffix]
}

func (p *faultProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// writeStatus answers with a metav1.Status as the API server does.
func writeStatus(w http.ResponseWriter, st metav1.Status) {
	st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(b)
}

// scaleTarget is the resource and name of a …/<resource>/<name>/scale path.
func scaleTarget(p string) (schema.GroupResource, string) {
	name := path.Base(path.Dir(p))
	res := path.Base(path.Dir(path.Dir(p)))
	gr := schema.GroupResource{Resource: res}
	if parts := strings.Split(strings.TrimPrefix(p, "/"), "/"); len(parts) > 2 && parts[0] == "apis" {
		gr.Group = parts[1]
	}
	return gr, name
}

// conflictFault answers 409 Conflict with the API server's own Status, after before (nil: none)
// ran: a test makes a real change to the object there, as another writer would between the
// webhook's read and its write.
func conflictFault(p *faultProxy, before func(r *http.Request)) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if before != nil {
			before(r)
		}
		gr, name := scaleTarget(r.URL.Path)
		writeStatus(w, apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again")).ErrStatus)
		p.record("%s %s 409 (injected)", r.Method, r.URL.Path)
		return true
	}
}

// tooManyRequestsFault answers 429 with Retry-After: 1, as API Priority and Fairness does.
func tooManyRequestsFault(p *faultProxy) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Retry-After", "1")
		writeStatus(w, apierrors.NewTooManyRequests("too many requests, please try again later", 1).ErrStatus)
		p.record("%s %s 429 (injected)", r.Method, r.URL.Path)
		return true
	}
}

// internalErrorFault answers 500 with an InternalError Status (no Retry-After).
func internalErrorFault(p *faultProxy) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		writeStatus(w, apierrors.NewInternalError(errors.New("injected: etcdserver: leader changed")).ErrStatus)
		p.record("%s %s 500 (injected)", r.Method, r.URL.Path)
		return true
	}
}

// latencyFault holds the request for d before forwarding it; a client that gives up meanwhile
// cancels it (the request never reaches the API server).
func latencyFault(p *faultProxy, d time.Duration) func(http.ResponseWriter, *http.Request) bool {
	return func(_ http.ResponseWriter, r *http.Request) bool {
		p.record("%s %s held %v (injected)", r.Method, r.URL.Path, d)
		// net/http notices a client that hangs up only once the body has been read.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
		return false
	}
}

// slowResponseFault (for a fault on suffix) forwards the request at once, so that it takes effect, and holds the
// API server's answer for d: the client may give up on a write that has landed.
func slowResponseFault(p *faultProxy, suffix string, d time.Duration) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		p.countForwarded(r, suffix)
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
		p.record("%s %s answered %d by the API server, answer held %v (injected)", r.Method, r.URL.Path, rec.Code, d)
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return true
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return true
	}
}
