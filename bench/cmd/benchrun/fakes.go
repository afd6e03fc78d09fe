package main

import (
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

// fulfillmentAPI answers POST /fulfillments with 201 after a fixed delay,
// like a slow third-party API, and keeps count of the Idempotency-Keys it
// has seen, so that a drain can tell when every step has been called once.
type fulfillmentAPI struct {
	addr  string
	srv   *http.Server
	delay time.Duration

	tcp      atomic.Int64 // connections accepted
	inflight atomic.Int64
	peak     atomic.Int64 // most calls in flight at once

	mu          sync.Mutex
	calls       int64
	keys        map[string]int
	first, last time.Time // first call received, last call answered
}

func startFulfillmentAPI(delay time.Duration) (*fulfillmentAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &fulfillmentAPI{addr: ln.Addr().String(), delay: delay, keys: map[string]int{}}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve), ReadHeaderTimeout: 5 * time.Second}
	a.srv.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			a.tcp.Add(1)
		}
	}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *fulfillmentAPI) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/fulfillments" {
		http.NotFound(w, r)
		return
	}
	n := a.inflight.Add(1)
	for {
		p := a.peak.Load()
		if n <= p || a.peak.CompareAndSwap(p, n) {
			break
		}
	}
	a.mu.Lock()
	if a.first.IsZero() {
		a.first = time.Now()
	}
	a.mu.Unlock()
	time.Sleep(a.delay)
	a.inflight.Add(-1)
	a.mu.Lock()
	a.calls++
	a.keys[r.Header.Get("Idempotency-Key")]++
	a.last = time.Now()
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"status":"accepted"}`)
}

// apiStats is what the API has seen since its last reset.
type apiStats struct {
	calls, distinct, repeated int64 // calls; distinct keys; calls beyond the first of a key
	first, last               time.Time
	peak, conns               int64
}

func (a *fulfillmentAPI) stats() apiStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := apiStats{calls: a.calls, distinct: int64(len(a.keys)), first: a.first, last: a.last,
		peak: a.peak.Load(), conns: a.tcp.Load()}
	s.repeated = s.calls - s.distinct
	return s
}

func (a *fulfillmentAPI) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls, a.keys, a.first, a.last = 0, map[string]int{}, time.Time{}, time.Time{}
	a.peak.Store(0) // connections are not reset: the receiver keeps those of the warm-up
}

func (a *fulfillmentAPI) url() string { return "http://" + a.addr }
func (a *fulfillmentAPI) close()      { _ = a.srv.Close() }

// smtpSink accepts every message and throws it away, counting it.
type smtpSink struct {
	addr string
	srv  *smtp.Server
	n    atomic.Int64
}

func startSMTPSink() (*smtpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &smtpSink{addr: ln.Addr().String()}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return sinkSession{s}, nil }))
	s.srv.Domain = "localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.ReadTimeout, s.srv.WriteTimeout = 30*time.Second, 30*time.Second
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *smtpSink) count() int64 { return s.n.Load() }
func (s *smtpSink) close()       { _ = s.srv.Close() }

type sinkSession struct{ s *smtpSink }

func (sinkSession) Mail(string, *smtp.MailOptions) error { return nil }
func (sinkSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (ss sinkSession) Data(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	ss.s.n.Add(1)
	return err
}
func (sinkSession) Reset()        {}
func (sinkSession) Logout() error { return nil }
