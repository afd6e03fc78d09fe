package fulfillment_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/fulfillment"
	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
)

var sampleReq = fulfillment.Request{
	OrderID:       42,
	Source:        "stripe",
	ExternalID:    "cs_test_1",
	AmountCents:   3000,
	Currency:      "usd",
	CustomerEmail: "buyer@example.org",
}

func isPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

func TestFulfillContract(t *testing.T) {
	type seen struct {
		method, path, contentType, key string
		body                           map[string]any
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("body: %v", err)
		}
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), body})
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	c := fulfillment.New(srv.URL + "/") // trailing slash tolerated
	key := fulfillment.IdempotencyKey("evt_123/fulfil")
	for range 2 { // a retry sends the same thing
		if err := c.Fulfill(context.Background(), key, sampleReq); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 {
		t.Fatalf("got %d requests", len(got))
	}
	for _, s := range got {
		if s.method != http.MethodPost || s.path != "/fulfillments" || s.contentType != "application/json" || s.key != key {
			t.Errorf("request %s %s, Content-Type %q, Idempotency-Key %q", s.method, s.path, s.contentType, s.key)
		}
		want := map[string]any{
			"order_id": 42.0, "source": "stripe", "external_id": "cs_test_1",
			"amount_cents": 3000.0, "currency": "usd", "customer_email": "buyer@example.org",
			"account_id": nil, "livemode": nil, // always sent: null where unknown
		}
		if len(s.body) != len(want) {
			t.Errorf("body = %v, want %v", s.body, want)
		}
		for k, v := range want {
			if w, ok := s.body[k]; !ok || w != v {
				t.Errorf("body[%q] = %v, want %v", k, s.body[k], v)
			}
		}
	}
}

func TestFulfillStatus(t *testing.T) {
	for _, tc := range []struct {
		code      int
		ok        bool
		permanent bool
	}{
		{200, true, false},
		{201, true, false},
		{204, true, false},
		{409, true, false},
		{400, false, true},
		{404, false, true},
		{422, false, true},
		{408, false, false},
		{429, false, false},
		{500, false, false},
		{502, false, false},
		{503, false, false},
	} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.code)
				io.WriteString(w, `{"error":"nope"}`+strings.Repeat("x", 10000))
			}))
			defer srv.Close()
			err := fulfillment.New(srv.URL).Fulfill(context.Background(), "k", sampleReq)
			if tc.ok {
				if err != nil {
					t.Fatalf("status %d: %v", tc.code, err)
				}
				return
			}
			var se *fulfillment.StatusError
			if !errors.As(err, &se) || se.Code != tc.code {
				t.Fatalf("status %d: err = %v, want a *StatusError", tc.code, err)
			}
			if !strings.HasPrefix(se.Body, `{"error":"nope"}`) || len(se.Body) > 1024 {
				t.Errorf("Body = %q (len %d), want a bounded prefix", se.Body[:min(len(se.Body), 40)], len(se.Body))
			}
			if got := isPermanent(err); got != tc.permanent {
				t.Errorf("status %d: permanent = %v, want %v", tc.code, got, tc.permanent)
			}
		})
	}
}

func TestFulfillDeadline(t *testing.T) {
	unblock := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // sleeps far past the caller's deadline
		case <-time.After(time.Minute):
		case <-unblock:
		}
	}))
	defer srv.Close()
	defer close(unblock)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := fulfillment.New(srv.URL).Fulfill(ctx, "k", sampleReq)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Fulfill returned after %v", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) || isPermanent(err) {
		t.Errorf("err = %v, want a transient deadline error", err)
	}
}

func TestFulfillConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	err = fulfillment.New("http://"+addr).Fulfill(context.Background(), "k", sampleReq)
	if err == nil || isPermanent(err) {
		t.Errorf("err = %v, want a transient error", err)
	}
	var se *fulfillment.StatusError
	if errors.As(err, &se) {
		t.Errorf("connection error is a StatusError: %v", err)
	}
}

func TestFulfillInvalid(t *testing.T) {
	err := fulfillment.New("http://127.0.0.1:1").Fulfill(context.Background(), "", sampleReq)
	if !isPermanent(err) {
		t.Errorf("empty key: err = %v, want permanent", err)
	}
}

func TestIdempotencyKey(t *testing.T) {
	a := fulfillment.IdempotencyKey("evt_123/fulfil")
	if a != fulfillment.IdempotencyKey("evt_123/fulfil") {
		t.Error("IdempotencyKey is not deterministic")
	}
	if !strings.HasPrefix(a, "fulfil-") || len(a) != len("fulfil-")+40 {
		t.Errorf("IdempotencyKey = %q", a)
	}
	seen := map[string]string{a: "evt_123/fulfil"}
	for _, k := range []string{"evt_124/fulfil", "evt_123/email.confirmation", "evt_123/fulfil ", ""} {
		key := fulfillment.IdempotencyKey(k)
		if prev, dup := seen[key]; dup {
			t.Errorf("IdempotencyKey(%q) == IdempotencyKey(%q)", k, prev)
		}
		seen[key] = k
	}
}

func TestFulfillmentTestServer(t *testing.T) {
	api := fulfillmenttest.NewServer(t)
	c := fulfillment.New(api.URL())
	key := fulfillment.IdempotencyKey("evt_1/fulfil")

	if err := c.Fulfill(context.Background(), key, sampleReq); err != nil {
		t.Fatal(err)
	}
	if reqs := api.Requests(); len(reqs) != 1 || reqs[0].IdempotencyKey != key || reqs[0].Body != sampleReq {
		t.Fatalf("Requests = %+v", reqs)
	}

	// An outage: transient errors, but the attempts are recorded.
	api.SetStatus(http.StatusServiceUnavailable)
	if err := c.Fulfill(context.Background(), key, sampleReq); err == nil || isPermanent(err) {
		t.Errorf("during outage: err = %v, want transient", err)
	}
	api.SetStatus(0)
	if n := api.CountByKey(key); n != 2 {
		t.Errorf("CountByKey = %d, want 2", n)
	}
	if n := api.CountByKey("other"); n != 0 {
		t.Errorf("CountByKey(other) = %d", n)
	}

	// Held: the request blocks until released.
	release := api.Hold()
	done := make(chan error, 1)
	go func() { done <- c.Fulfill(context.Background(), key, sampleReq) }()
	api.WaitHeld(t, 1, 5*time.Second)
	select {
	case err := <-done:
		t.Fatalf("Fulfill returned while held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	release() // idempotent
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Held: a caller whose deadline passes gives up, and the API notices.
	release = api.Hold()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := c.Fulfill(ctx, key, sampleReq); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("held past deadline: err = %v", err)
	}
	release()
	if n := api.CountByKey(key); n != 4 {
		t.Errorf("CountByKey = %d, want 4", n)
	}

	// The server's Cleanup releases requests still held (else it would hang).
	api.Hold()
	go c.Fulfill(context.Background(), key, sampleReq)
	api.WaitHeld(t, 1, 5*time.Second)
}

// TestFulfillNeverFollowsARedirect: a fulfillment API that redirects (to
// another host, or within its own) gets the redirect back as a transient
// failure; the Location is never called, so the body and its
// Idempotency-Key never reach another host, and a POST turned into a GET
// never counts as done; a client given a redirect policy of its own follows
// none either.
func TestFulfillNeverFollowsARedirect(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []string // what the redirect's target received
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Method+" "+r.URL.Path+" key="+r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer other.Close()
	for _, c := range []struct {
		name   string
		status int
		to     string
	}{
		{"TemporaryToAnotherHost", http.StatusTemporaryRedirect, other.URL + "/fulfillments"},
		{"PermanentToAnotherHost", http.StatusPermanentRedirect, other.URL + "/fulfillments"},
		{"FoundToAnotherHost", http.StatusFound, other.URL + "/fulfillments"},
		{"SeeOtherWithinTheHost", http.StatusSeeOther, "/done"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			elsewhere = nil
			mu.Unlock()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/fulfillments" {
					mu.Lock()
					elsewhere = append(elsewhere, r.Method+" "+r.URL.Path+" key="+r.Header.Get("Idempotency-Key"))
					mu.Unlock()
					w.WriteHeader(http.StatusOK)
					return
				}
				http.Redirect(w, r, c.to, c.status)
			}))
			defer srv.Close()
			follow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
			for _, client := range []*fulfillment.Client{fulfillment.New(srv.URL), {BaseURL: srv.URL}, {BaseURL: srv.URL, HTTP: follow}} {
				err := client.Fulfill(context.Background(), fulfillment.IdempotencyKey("evt_redirect/fulfil"), sampleReq)
				var se *fulfillment.StatusError
				if !errors.As(err, &se) || se.Code != c.status || isPermanent(err) {
					t.Errorf("Fulfill: %v; want a transient StatusError %d", err, c.status)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(elsewhere) > 0 {
				t.Errorf("the redirect was followed: %q", elsewhere)
			}
		})
	}
}
