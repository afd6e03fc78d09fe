package main

import (
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

// fulfillmentAPI answers POST /fulfillments with 201 after a fixed delay,
// like a slow third-party API.
type fulfillmentAPI struct {
	addr string
	srv  *http.Server
	n    atomic.Int64
	tcp  atomic.Int64 // connections accepted
}

func startFulfillmentAPI(delay time.Duration) (*fulfillmentAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &fulfillmentAPI{addr: ln.Addr().String()}
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/fulfillments" {
			http.NotFound(w, r)
			return
		}
		time.Sleep(delay)
		a.n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}), ReadHeaderTimeout: 5 * time.Second}
	a.srv.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			a.tcp.Add(1)
		}
	}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *fulfillmentAPI) calls() int64 { return a.n.Load() }
func (a *fulfillmentAPI) conns() int64 { return a.tcp.Load() }
func (a *fulfillmentAPI) close()       { _ = a.srv.Close() }

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
