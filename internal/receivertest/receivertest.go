// Package receivertest runs the whole receiver in a test process: the real
// router and processor from internal/server, on a fresh PostgreSQL database,
// with a real SMTP server and a real HTTP fulfillment API held by the test.
// Provider packages use it to send signed deliveries and read what happened.
package receivertest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/fulfillment/fulfillmenttest"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/server"
)

// Secrets the test receiver is configured with.
const (
	StripeSecret    = "whsec_test_receiver_secret"
	OldStripeSecret = "whsec_test_previous_secret"
	GitHubSecret    = "github-test-secret"
	NotifyEmail     = "owner@example.com"
)

// Receiver is a running receiver and the real components around it.
type Receiver struct {
	URL    string
	Pool   *pgxpool.Pool
	SMTP   *mailtest.Server
	API    *fulfillmenttest.Server
	Server *server.Server
	Config config.Config
}

// New starts a receiver on its own database. Options change the
// configuration before it is built.
func New(tb testing.TB, opts ...func(*config.Config)) *Receiver {
	tb.Helper()
	dbURL := pgtest.NewDB(tb)
	smtp := mailtest.NewServer(tb)
	api := fulfillmenttest.NewServer(tb)
	env := map[string]string{
		"DATABASE_URL":          dbURL,
		"STRIPE_WEBHOOK_SECRET": StripeSecret + "," + OldStripeSecret,
		"GITHUB_WEBHOOK_SECRET": GitHubSecret,
		"SMTP_ADDR":             smtp.Addr(),
		"MAIL_FROM":             "Shop <shop@example.test>",
		"NOTIFY_EMAIL":          NotifyEmail,
		"FULFILLMENT_URL":       api.URL(),
		"LEASE_DURATION":        "5m",
		"REDRIVE_INTERVAL":      "1s",
		"DB_MAX_CONNS":          "20",
	}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	for _, o := range opts {
		o(&cfg)
	}
	log := slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(context.Background(), cfg, log)
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
	return &Receiver{URL: ts.URL, Pool: pool, SMTP: smtp, API: api, Server: srv, Config: cfg}
}

// testWriter sends the receiver's log lines to the test's log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

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
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

// SignStripe returns a Stripe-Signature header for body signed at ts with
// secret, as Stripe computes it.
func SignStripe(body []byte, secret string, ts time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: body, Secret: secret, Timestamp: ts,
	}).Header
}

// StripeHeader is the headers of a Stripe delivery of body signed now.
func StripeHeader(body []byte) http.Header {
	return http.Header{
		"Content-Type":     {"application/json; charset=utf-8"},
		"User-Agent":       {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
		"Stripe-Signature": {SignStripe(body, StripeSecret, time.Now())},
	}
}

// PostStripe delivers body to /webhooks/stripe, signed now.
func (r *Receiver) PostStripe(tb testing.TB, body []byte) Response {
	tb.Helper()
	return r.Post(tb, "/webhooks/stripe", StripeHeader(body), body)
}

// SignGitHub returns an X-Hub-Signature-256 value for body.
func SignGitHub(body []byte, secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
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
		`SELECT format('order %s %s %s %s %s %s %s %s', source, provider_event_id, external_id, payment_intent_id, status, amount_cents, currency, customer_email) FROM orders ORDER BY source, external_id`,
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
