// Package receivertest runs the whole receiver in a test process: the real
// router and processor from internal/server, on a fresh PostgreSQL database,
// with a real SMTP server and a real HTTP fulfillment API held by the test.
// Every provider of the list it is given (the registry's, providers.List(),
// or one of the test's own) is mounted with test secrets of its own;
// provider packages use it to send signed deliveries and read what happened.
package receivertest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/registry"
	"github.com/paywebhooks/receiver/internal/reqlog"
	"github.com/paywebhooks/receiver/internal/server"
	"github.com/paywebhooks/receiver/internal/webhooks"
	"github.com/paywebhooks/receiver/internal/wiring"
)

// NotifyEmail is the test receiver's NOTIFY_EMAIL.
const NotifyEmail = "owner@example.com"

// FulfillmentSecret is the test receiver's FULFILLMENT_SECRET (the key
// "receivertest fulfillment key 32b"): its fulfillment API verifies every
// call's signature with it (fulfillmenttest.Server.RequireSignature).
const FulfillmentSecret = "whsec_cmVjZWl2ZXJ0ZXN0IGZ1bGZpbGxtZW50IGtleSAzMmI="

// Secret is the secret the test receiver verifies spec's deliveries with
// (the first of its list): a development value of the spec's
// (webhooks.Var.DevValue), which start-up takes without a word.
func Secret(spec webhooks.Spec) string { return devSecret(spec, "") }

// OldSecret is the second secret of spec's list: a secret being rotated
// out, another development value of the spec's.
func OldSecret(spec webhooks.Spec) string { return devSecret(spec, "previous") }

// devSecret is a development value of spec's secret made of its source
// and of what.
func devSecret(spec webhooks.Spec, what string) string {
	if what != "" {
		what += "_"
	}
	if spec.Secret.DevPrefix != "" {
		return spec.Secret.DevValue("receivertest_" + spec.Source + "_" + what + "0123456789abcdef")
	}
	return spec.Secret.DevValue("receivertest-" + spec.Source + "-" + what + "secret-0123456789abcdef")
}

// Receiver is a running receiver and the real components around it.
type Receiver struct {
	URL    string
	Pool   *pgxpool.Pool
	SMTP   *mailtest.Server
	API    *fulfillmenttest.Server
	Server *server.Server
	Config wiring.Setup
	// Providers is the list the receiver was given.
	Providers []registry.Provider
}

// Specs are the Specs of the receiver's providers.
func (r *Receiver) Specs() []webhooks.Spec { return registry.Specs(r.Providers) }

// Option changes the test receiver before it is built.
type Option func(*setup)

type setup struct {
	env       map[string]string
	configure []func(*config.Config)
	server    []server.Option
}

// Env sets an environment variable of the receiver's configuration.
func Env(name, value string) Option { return func(s *setup) { s.env[name] = value } }

// Configure changes the loaded configuration.
func Configure(f func(*config.Config)) Option {
	return func(s *setup) { s.configure = append(s.configure, f) }
}

// WithServer passes options to server.New (a step kind of the test's own).
func WithServer(o server.Option) Option { return func(s *setup) { s.server = append(s.server, o) } }

// New starts a receiver of the providers of list on its own database: the
// registry's (providers.List()), or a list of the test's own (the
// registry's and a line of a fork's).
func New(tb testing.TB, list []registry.Provider, opts ...Option) *Receiver {
	tb.Helper()
	dbURL := pgtest.NewDB(tb)
	smtp := mailtest.NewServer(tb)
	api := fulfillmenttest.NewServer(tb)
	specs := registry.Specs(list)
	s := setup{env: map[string]string{
		"DATABASE_URL":     dbURL,
		"SMTP_ADDR":        smtp.Addr(),
		"MAIL_FROM":        "Shop <shop@example.test>",
		"NOTIFY_EMAIL":     NotifyEmail,
		"FULFILLMENT_URL":  api.URL(),
		"LEASE_DURATION":   "5m",
		"REDRIVE_INTERVAL": "1s",
		"DB_MAX_CONNS":     "20",
	}}
	s.env["FULFILLMENT_SECRET"] = FulfillmentSecret
	for _, o := range opts {
		o(&s)
	}
	// Every fulfillment call must be signed, or the API refuses it 401.
	if secret := s.env["FULFILLMENT_SECRET"]; secret != "" {
		api.RequireSignature(tb, secret)
	}
	for _, spec := range specs {
		if _, set := s.env[spec.Secret.Name]; !set {
			s.env[spec.Secret.Name] = Secret(spec) + "," + OldSecret(spec)
		}
	}
	cfg, err := wiring.Load(func(k string) string { return s.env[k] }, specs)
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	for _, f := range s.configure {
		f(&cfg.Config)
	}
	log := slog.New(reqlog.NewHandler(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	srv, err := server.New(context.Background(), cfg, list, wiring.StepKinds(cfg, list), log, s.server...)
	if err != nil {
		tb.Fatalf("server.New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		tb.Fatalf("open pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return &Receiver{URL: ts.URL, Pool: pool, SMTP: smtp, API: api, Server: srv, Config: cfg, Providers: list}
}

// testWriter sends the receiver's log lines to the test's log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// noRedirects is the client Post sends with: like the providers, it
// follows no redirect, so that a test sees the receiver's own answer.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// Response is what the receiver answered.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Post sends body to path with the given headers.
func (r *Receiver) Post(tb testing.TB, path string, header http.Header, body []byte) Response {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, r.URL+path, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header = header
	res, err := noRedirects.Do(req)
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

// Get sends GET path (with its query) with the given headers, following no
// redirect: the receiver's own answer (a 303 of the buyer's routes).
func (r *Receiver) Get(tb testing.TB, path string, header http.Header) Response {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, r.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

// Signed is the headers of a delivery of body to spec's route, signed now
// with the test secret as the sender signs it, with extra headers added
// (GitHub's event and delivery headers). A sender that signs its own id of
// the delivery (Standard Webhooks' webhook-id) signs the one made from the
// body (webhooks.SignInput.MessageID): the same body, the same delivery.
func Signed(spec webhooks.Spec, body []byte, extra http.Header) http.Header {
	return With(Sign(spec, webhooks.SignInput{Body: body, Secret: Secret(spec), At: time.Now()}), extra)
}

// Sign is spec.Sign(in) with every header name made canonical
// (http.CanonicalHeaderKey), so that http.Header's methods find them. The
// conformance suite checks that Sign needs none of this.
func Sign(spec webhooks.Spec, in webhooks.SignInput) http.Header {
	h := spec.Sign(in)
	for k, v := range h {
		if ck := http.CanonicalHeaderKey(k); ck != k {
			delete(h, k)
			h[ck] = v
		}
	}
	return h
}

// With adds the headers of extra to h, under canonical names, replacing
// h's values of the same names, and returns h.
func With(h, extra http.Header) http.Header {
	for k, v := range extra {
		h[http.CanonicalHeaderKey(k)] = v
	}
	return h
}

// Deliver posts body to spec's route, signed now, with extra headers.
func (r *Receiver) Deliver(tb testing.TB, spec webhooks.Spec, body []byte, extra http.Header) Response {
	tb.Helper()
	return r.Post(tb, spec.Route(), Signed(spec, body, extra), body)
}

// Count runs a SELECT count(*) … query and returns the count.
func (r *Receiver) Count(tb testing.TB, sql string, args ...any) int {
	tb.Helper()
	var n int
	if err := r.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Snapshot is the business state an outside check reads: every order and
// invoice, as text rows, in a stable order. Two equal snapshots mean the
// same visible effects.
func (r *Receiver) Snapshot(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, q := range []string{
		`SELECT format('order %s %s %s %s %s %s %s %s %s', source, provider_event_id, external_id, payment_intent_id, status, amount_cents, currency, customer_email, plan) FROM orders ORDER BY source, external_id`,
		`SELECT format('invoice %s %s %s %s %s %s', stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email) FROM invoices ORDER BY stripe_invoice_id`,
		`SELECT format('refund %s %s %s', provider_event_id, payment_intent_id, amount_refunded) FROM refunds ORDER BY provider_event_id`,
		`SELECT format('invoice_failure %s %s %s', provider_event_id, stripe_invoice_id, attempt_count) FROM invoice_payment_failures ORDER BY provider_event_id`,
	} {
		rows, err := r.Pool.Query(context.Background(), q)
		if err != nil {
			tb.Fatalf("snapshot: %v", err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				tb.Fatalf("snapshot: %v", err)
			}
			out = append(out, s)
		}
		rows.Close()
	}
	return out
}

// Steps returns "<step>=<status>" for every step of the event with key, in
// key order.
func (r *Receiver) Steps(tb testing.TB, key string) []string {
	tb.Helper()
	rows, err := r.Pool.Query(context.Background(), `
SELECT step || '=' || status FROM processed_events
WHERE kind = 'step' AND starts_with(event_key, $1 || '/') ORDER BY event_key`, key)
	if err != nil {
		tb.Fatalf("steps of %s: %v", key, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			tb.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// Fixture reads testdata/name from the calling package, with each pair of
// replacements applied (old, new, old, new, …).
func Fixture(tb testing.TB, name string, replace ...string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatalf("fixture: %v", err)
	}
	return []byte(strings.NewReplacer(replace...).Replace(string(b)))
}

// SharedSamples returns the folder of the team's shared samples of a
// provider (../shared/samples/<provider> beside the checkout), or skips the
// test with a message when it is absent, as it is in a user's clone.
func SharedSamples(tb testing.TB, provider string) string {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..") // the module root
	dir := filepath.Join(root, "..", "shared", "samples", provider)
	if _, err := os.Stat(dir); err != nil {
		tb.Skipf("shared samples not found at %s: they live beside the team's checkout, not in the project", dir)
	}
	return dir
}
