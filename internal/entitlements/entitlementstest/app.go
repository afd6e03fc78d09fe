// Package entitlementstest is a real HTTP server standing in for the app
// behind the receiver in tests: it verifies every POST /entitlements the
// way an app holding FULFILLMENT_SECRET would (Standard Webhooks, with
// this project's verifier and the spec's own library), keeps the highest
// version it accepted per subject, as docs/example-app does, and records
// every call and its answer. It also answers POST /fulfillments 201, so
// that it can be a receiver's whole FULFILLMENT_URL.
package entitlementstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	refgo "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/paywebhooks/receiver/internal/entitlements"
	"github.com/paywebhooks/receiver/internal/standardwebhooks"
)

// Call is one POST /entitlements and how the app answered it.
type Call struct {
	IdempotencyKey string
	Body           entitlements.Body
	Status         int    // what the app answered
	SignatureError string // why the signature was refused; ""
	At             time.Time
}

// App is the running fake app.
type App struct {
	srv *httptest.Server

	mu       sync.Mutex
	calls    []Call
	accepted map[string]entitlements.Body // the highest version accepted, per subject
	fail     map[string][]int             // statuses to answer next, per subject ("" for any)
	ours     *standardwebhooks.Verifier
	ref      *refgo.Webhook
}

// New starts an app that verifies calls with secret (a FULFILLMENT_SECRET).
func New(tb testing.TB, secret string) *App {
	tb.Helper()
	a := &App{accepted: map[string]entitlements.Body{}, fail: map[string][]int{}}
	if secret != "" {
		var err error
		if a.ours, err = standardwebhooks.NewVerifier(secret); err != nil {
			tb.Fatal(err)
		}
		if a.ref, err = refgo.NewWebhook(secret); err != nil {
			tb.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /entitlements", a.entitlements)
	mux.HandleFunc("POST /fulfillments", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	})
	a.srv = httptest.NewServer(mux)
	tb.Cleanup(a.srv.Close)
	return a
}

// URL is the app's base URL: the receiver's FULFILLMENT_URL.
func (a *App) URL() string { return a.srv.URL }

// Fail makes the app answer the next calls for subject ("" for any) with
// these statuses, one each, before it accepts again.
func (a *App) Fail(subject string, statuses ...int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail[subject] = append(a.fail[subject], statuses...)
}

// Calls returns every call so far, in order of arrival.
func (a *App) Calls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Call(nil), a.calls...)
}

// CallsOf returns the calls for one subject.
func (a *App) CallsOf(subject string) []Call {
	var out []Call
	for _, c := range a.Calls() {
		if c.Body.Subject == subject {
			out = append(out, c)
		}
	}
	return out
}

// Accepted is the highest version the app accepted for subject (version 0
// and no entitlements when none).
func (a *App) Accepted(subject string) entitlements.Body {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b, ok := a.accepted[subject]; ok {
		return b
	}
	return entitlements.Body{Subject: subject, Entitlements: []entitlements.Entitlement{}}
}

func (a *App) verify(h http.Header, body []byte) string {
	if a.ours == nil {
		return ""
	}
	if m, err := a.ours.Verify(h, body, time.Now()); err != nil {
		return "internal/standardwebhooks: " + err.Error()
	} else if m.ID != h.Get("Idempotency-Key") {
		return fmt.Sprintf("webhook-id %q is not the Idempotency-Key %q", m.ID, h.Get("Idempotency-Key"))
	}
	if err := a.ref.Verify(body, h); err != nil {
		return "the reference library: " + err.Error()
	}
	return ""
}

func (a *App) entitlements(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	var b entitlements.Body
	if err != nil || json.Unmarshal(raw, &b) != nil || b.Subject == "" {
		http.Error(w, `{"error":"not an entitlements body"}`, http.StatusBadRequest)
		return
	}
	call := Call{IdempotencyKey: r.Header.Get("Idempotency-Key"), Body: b, At: time.Now()}
	call.SignatureError = a.verify(r.Header, raw)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case call.SignatureError != "":
		call.Status = http.StatusUnauthorized
	case len(a.fail[b.Subject]) > 0:
		call.Status, a.fail[b.Subject] = a.fail[b.Subject][0], a.fail[b.Subject][1:]
	case len(a.fail[""]) > 0:
		call.Status, a.fail[""] = a.fail[""][0], a.fail[""][1:]
	default:
		call.Status = http.StatusOK
		// The app keeps the highest version it has seen.
		if b.Version > a.accepted[b.Subject].Version {
			a.accepted[b.Subject] = b
		}
	}
	a.calls = append(a.calls, call)
	w.WriteHeader(call.Status)
}
