// Package fulfillmenttest provides a real HTTP server standing in for the
// fulfillment API in tests.
//
//	api := fulfillmenttest.NewServer(t)
//	client := fulfillment.New(api.URL())
//	... // code under test fulfils orders
//	if api.CountByKey(key) == 0 { ... }
//
// With RequireSignature, it verifies every call's Standard Webhooks
// signature as an API holding FULFILLMENT_SECRET would, with two
// implementations: this project's (internal/standardwebhooks) and the
// spec's own Go library.
package fulfillmenttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	refgo "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/standardwebhooks"
)

// Received is one well-formed request to POST /fulfillments (a JSON body
// and an Idempotency-Key; anything else is answered 400 and not recorded).
type Received struct {
	IdempotencyKey string
	Body           fulfillment.Request
	// Header and Raw are the request's headers and body, as received.
	Header http.Header
	Raw    []byte
	// SignatureError, when the server requires a signature
	// (RequireSignature), is why the call's was refused; "" when both
	// verifiers accepted it (or none is required).
	SignatureError string
}

// Server is a running stand-in for the fulfillment API. By default it
// records every POST /fulfillments and answers 201. It is closed by the
// test's Cleanup.
type Server struct {
	srv *httptest.Server

	mu     sync.Mutex
	reqs   []Received
	status int
	hold   chan struct{} // non-nil while held; closed on release
	held   int           // requests currently blocked by hold
	nextID int
	// ours and ref verify signatures once RequireSignature is called.
	ours *standardwebhooks.Verifier
	ref  *refgo.Webhook
}

// RequireSignature makes the server verify every call's Standard Webhooks
// signature by secret (a FULFILLMENT_SECRET, "whsec_…") with this
// project's verifier and with the spec's Go library, and check that its
// webhook-id is its Idempotency-Key. A call that fails any of this is
// recorded with why (Received.SignatureError) and answered 401, a
// permanent failure: the step that made it is not done.
func (s *Server) RequireSignature(tb testing.TB, secret string) {
	tb.Helper()
	ours, err := standardwebhooks.NewVerifier(secret)
	if err != nil {
		tb.Fatalf("fulfillmenttest: %v", err)
	}
	ref, err := refgo.NewWebhook(secret)
	if err != nil {
		tb.Fatalf("fulfillmenttest: the reference library refuses the secret: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ours, s.ref = ours, ref
}

// verify is why the call's signature is refused, or "" (or "" when none
// is required).
func (s *Server) verify(h http.Header, body []byte) string {
	s.mu.Lock()
	ours, ref := s.ours, s.ref
	s.mu.Unlock()
	if ours == nil {
		return ""
	}
	var errs []error
	if m, err := ours.Verify(h, body, time.Now()); err != nil {
		errs = append(errs, fmt.Errorf("internal/standardwebhooks: %w", err))
	} else if m.ID != h.Get("Idempotency-Key") {
		errs = append(errs, fmt.Errorf("webhook-id %q is not the Idempotency-Key %q", m.ID, h.Get("Idempotency-Key")))
	}
	if err := ref.Verify(body, h); err != nil {
		errs = append(errs, fmt.Errorf("the reference library: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return err.Error()
	}
	return ""
}

// NewServer starts the server.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fulfillments", s.handle)
	s.srv = httptest.NewServer(mux)
	tb.Cleanup(func() {
		s.releaseAll()
		s.srv.Close()
	})
	return s
}

// URL returns the base URL to give fulfillment.New.
func (s *Server) URL() string { return s.srv.URL }

// Requests returns a copy of the requests received so far, in order of
// arrival. A request is recorded when it arrives, before any Hold or
// SetStatus takes effect, so it is listed even if it was then failed, held,
// or abandoned by its client.
func (s *Server) Requests() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.reqs...)
}

// CountByKey returns how many requests carried idempotency key key.
func (s *Server) CountByKey(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs {
		if r.IdempotencyKey == key {
			n++
		}
	}
	return n
}

// SetStatus makes the server answer code to every request from now on;
// 0 restores the normal 201.
func (s *Server) SetStatus(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = code
}

// Hold makes requests block in the handler, after being recorded, until
// release is called or their request context ends (the client went away);
// an abandoned request gets no answer. release may be called more than once.
func (s *Server) Hold() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
	ch := s.hold
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.hold == ch {
				close(ch)
				s.hold = nil
			}
		})
	}
}

func (s *Server) releaseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// WaitHeld waits until at least n requests are blocked by Hold, failing the
// test after timeout.
func (s *Server) WaitHeld(tb testing.TB, n int, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		held := s.held
		s.mu.Unlock()
		if held >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("fulfillmenttest: %d requests held after %v, want %d", held, timeout, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	var body fulfillment.Request
	if err != nil || json.Unmarshal(raw, &body) != nil {
		http.Error(w, `{"error":"invalid JSON body"}`, http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		http.Error(w, `{"error":"missing Idempotency-Key"}`, http.StatusBadRequest)
		return
	}
	refused := s.verify(r.Header, raw)

	s.mu.Lock()
	s.reqs = append(s.reqs, Received{IdempotencyKey: key, Body: body, Header: r.Header.Clone(), Raw: raw, SignatureError: refused})
	if refused != "" {
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "signature refused: " + refused})
		return
	}
	s.nextID++
	id, status, hold := s.nextID, s.status, s.hold
	if hold != nil {
		s.held++
	}
	s.mu.Unlock()

	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
		if r.Context().Err() != nil {
			return // the client is gone
		}
		s.mu.Lock()
		status = s.status // the status in force when the request is answered
		s.mu.Unlock()
	}

	w.Header().Set("Content-Type", "application/json")
	if status != 0 {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":"simulated status %d"}`, status)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":       fmt.Sprintf("ful_%d", id),
		"order_id": body.OrderID,
	})
}
