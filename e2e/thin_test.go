package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// The thin route's secret (a development value of its variable, as long
// as start-up asks) and the API key of the Stripe fake the receiver
// fetches thin events from.
var thinSecret = stripe.ThinSpec.Secret.DevValue("e2e_thin_destination_0123456789abcdef")

const thinAPIKey = "sk_test_e2e_thin"

// thinDelivery is a thin event posted to /webhooks/stripe/thin, signed
// afresh at each attempt with secret.
func thinDelivery(id string, body []byte, secret string) delivery {
	return delivery{ID: id, Key: id, Path: "/webhooks/stripe/thin", Body: body, header: func() http.Header {
		return stripe.ThinSpec.Sign(webhooks.SignInput{Body: body, Secret: secret, At: time.Now()})
	}}
}

// alertSink is an ALERT_WEBHOOK_URL that records what it is posted.
type alertSink struct {
	URL  string
	mu   sync.Mutex
	text []string
}

func newAlertSink(t *testing.T) *alertSink {
	s := &alertSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Text string `json:"text"`
		}
		raw, _ := io.ReadAll(r.Body)
		if json.Unmarshal(raw, &b) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.text = append(s.text, b.Text)
		s.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *alertSink) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.text...)
}

// TestThinEventGenerationFailure runs the built receiver with a thin-event
// destination and a Stripe fake, and recovers a paid Checkout Session
// whose checkout.session.completed Stripe never generated: requests that
// fail verification, and thin events of another mode or an unlisted
// account, write nothing and fetch nothing; while the API answers 500,
// then hangs, the health event is answered 503 with nothing written; once
// it answers, the session becomes one order, one confirmation email (real
// SMTP), one fulfillment call and one operator alert; the health event
// delivered again, and the real checkout.session.completed arriving after
// all, change nothing.
func TestThinEventGenerationFailure(t *testing.T) {
	if externalBin {
		t.Skip("a binary from " + serverBinEnv + " may predate thin events")
	}
	w := newWorld(t)
	api := stripetest.New(t, thinAPIKey)
	sink := newAlertSink(t)
	const session = "cs_test_e2e_never_generated"
	sessionState := map[string]any{"id": session, "object": "checkout.session", "mode": "payment", "status": "complete",
		"payment_status": "paid", "amount_total": 4900, "currency": "eur", "payment_intent": "pi_test_e2e_lost",
		"customer_details": map[string]any{"email": "lost-buyer@example.test"}, "customer_email": nil}
	api.PutObject("/v1/checkout/sessions/"+session, "", sessionState)
	healthID, healthBody := api.AddThin(stripetest.Thin{Type: stripe.TypeGenerationFailure, Data: map[string]any{
		"alert_id": "halert_test_e2e", "grouping_key": "_grouping_e2e", "severity": "critical",
		"summary":     "We have failed to create a notification for your Stripe account.",
		"resolved_at": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"impact": map[string]any{"event_type": "checkout.session.completed", "related_object": map[string]any{
			"id": session, "type": "checkout.session", "url": "/v1/checkout/sessions/" + session}},
	}})
	p := startReceiver(t, "receiver", w.env("STRIPE_THIN_WEBHOOK_SECRET", thinSecret, "STRIPE_API_KEY", thinAPIKey,
		"STRIPE_API_BASE", api.URL, "ALERT_WEBHOOK_URL", sink.URL))
	health := thinDelivery(healthID, healthBody, thinSecret)
	health.Object = "order:stripe:" + session // the sale it recovers
	nothing := func(when string) {
		t.Helper()
		if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE source <> 'alert'`); n != 0 {
			t.Fatalf("%s: %d claims written", when, n)
		}
		if n := count(t, w.DB, `SELECT count(*) FROM orders`) + count(t, w.DB, `SELECT count(*) FROM stripe_health_alerts`); n != 0 {
			t.Fatalf("%s: %d rows written", when, n)
		}
	}
	calls := func() int { return len(api.Requests()) }

	// Refused before anything is fetched or written.
	for _, r := range []struct {
		name   string
		header http.Header
	}{
		{"no signature", http.Header{"Content-Type": {"application/json"}}},
		{"another secret", stripe.ThinSpec.Sign(webhooks.SignInput{Body: healthBody, Secret: stripeSecret, At: time.Now()})},
		{"a stale signature", stripe.ThinSpec.Sign(webhooks.SignInput{Body: healthBody, Secret: thinSecret, At: time.Now().Add(-10 * time.Minute)})},
	} {
		res, err := postRaw(context.Background(), p.URL+health.Path, r.header, healthBody)
		if err != nil || res.Status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s (%v), want 400", r.name, res.Status, res.Body, err)
		}
		t.Logf("refused, %s: %d %s", r.name, res.Status, strings.TrimSpace(res.Body))
	}
	nothing("after the refusals")
	if n := calls(); n != 0 {
		t.Fatalf("refused requests made %d API calls", n)
	}
	calls0 := calls()

	// Another mode, an account not listed: acknowledged, nothing fetched.
	for _, e := range []stripetest.Thin{
		{Type: stripe.TypeGenerationFailure, Live: true, Data: map[string]any{"alert_id": "halert_test_live"}},
		{Type: "v1.checkout.session.completed", Context: "acct_test_e2e_unlisted",
			Related: &stripetest.Related{ID: session, Type: "checkout.session", URL: "/v1/checkout/sessions/" + session}},
	} {
		id, body := api.AddThin(e)
		res := mustPost(t, p.URL, thinDelivery(id, body, thinSecret), http.StatusOK)
		if !strings.Contains(res.Body, `"ignored"`) {
			t.Errorf("%s (live %t, context %q): %s, want ignored", e.Type, e.Live, e.Context, res.Body)
		}
		t.Logf("ignored, live=%t context=%q: %s", e.Live, e.Context, strings.TrimSpace(res.Body))
	}
	if n := calls() - calls0; n != 0 {
		t.Errorf("ignored thin events made %d API calls", n)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM orders`) + count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'step'`); n != 0 {
		t.Errorf("ignored thin events wrote %d rows and steps", n)
	}
	if _, err := w.DB.Exec(context.Background(), `TRUNCATE processed_events`); err != nil {
		t.Fatal(err)
	}

	var compact bytes.Buffer
	_ = json.Compact(&compact, healthBody)
	t.Logf("health event in: POST /webhooks/stripe/thin %s", compact.String())

	// The API fails: 503, nothing written.
	api.FailNext(http.StatusInternalServerError, 3)
	res := mustPost(t, p.URL, health, http.StatusServiceUnavailable)
	t.Logf("fetch while the API answers 500 (three tries): receiver answered %d %s", res.Status, strings.TrimSpace(res.Body))
	nothing("after a fetch answered 500")
	api.HangNext(1)
	start := time.Now()
	res = mustPost(t, p.URL, health, http.StatusServiceUnavailable)
	t.Logf("fetch while the API hangs: receiver answered %d %s after %s", res.Status, strings.TrimSpace(res.Body),
		time.Since(start).Round(100*time.Millisecond))
	nothing("after a fetch hung")

	// The API answers.
	before := calls()
	res = mustPost(t, p.URL, health, http.StatusOK)
	for _, q := range api.Requests()[before:] {
		t.Logf("fetch: GET %s -> %d (Stripe-Version %s)", q.Path, q.Status, q.Version)
	}
	t.Logf("receiver answered %d %s", res.Status, strings.TrimSpace(res.Body))
	w.waitSettled(t, 30*time.Second)
	waitFor(t, 30*time.Second, "the operator alert", func() bool { return len(sink.texts()) > 0 })

	var order string
	if err := w.DB.QueryRow(context.Background(), `SELECT format('%s %s %s %s %s %s (provider_event_id %s)', source, external_id,
		status, amount_cents, currency, customer_email, provider_event_id) FROM orders`).Scan(&order); err != nil {
		t.Fatal(err)
	}
	t.Logf("order: %s", order)
	rows, err := w.DB.Query(context.Background(), `SELECT event_key || ' ' || status || coalesce(' (' || last_error || ')', '')
		FROM processed_events WHERE event_key LIKE $1 || '%' ORDER BY event_key`, healthID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		t.Logf("claim: %s", s)
	}
	rows.Close()
	for _, m := range w.SMTP.Messages() {
		subject := ""
		for _, l := range strings.Split(string(m.Data), "\r\n") {
			if s, ok := strings.CutPrefix(l, "Subject: "); ok {
				subject = s
			}
		}
		t.Logf("email to %s: %q, Message-ID %s", strings.Join(m.To, ","), subject, m.MessageID)
	}
	for _, q := range w.API.Requests() {
		t.Logf("fulfillment call: Idempotency-Key %s, %s %s %d %s", q.IdempotencyKey, q.Body.Source, q.Body.ExternalID,
			q.Body.AmountCents, q.Body.Currency)
	}
	for _, a := range sink.texts() {
		t.Logf("operator alert:\n%s", a)
	}

	// What one recovery leaves.
	check := func(when string) {
		t.Helper()
		if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE external_id = $1 AND status = 'paid' AND amount_cents = 4900`, session); n != 1 {
			t.Errorf("%s: %d paid orders of the session, want 1", when, n)
		}
		if n := count(t, w.DB, `SELECT count(*) FROM orders`); n != 1 {
			t.Errorf("%s: %d orders, want 1", when, n)
		}
		if m := w.mailsByID(); len(m) != 1 || m[messageID(health.Ref(stepConfirmation))] != 1 {
			t.Errorf("%s: emails by Message-ID %v, want one confirmation", when, m)
		}
		if f := w.fulfillmentsByKey(); len(f) != 1 || f[idemKey(health.Ref(stepFulfillment))] != 1 {
			t.Errorf("%s: fulfillment calls by Idempotency-Key %v, want one", when, f)
		}
		if a := sink.texts(); len(a) != 1 || !strings.Contains(a[0], "Recovered: applied as checkout.session.completed") ||
			!strings.Contains(a[0], "severity: critical") || !strings.Contains(a[0], "We have failed to create a notification") {
			t.Errorf("%s: %d alerts, want one with the summary, severity and what was recovered: %q", when, len(a), a)
		}
	}
	check("after the recovery")

	// The health event again: a duplicate, no API call, nothing new.
	before = calls()
	res = mustPost(t, p.URL, health, http.StatusOK)
	t.Logf("health event again: %d %s, %d API calls", res.Status, strings.TrimSpace(res.Body), calls()-before)
	if !strings.Contains(res.Body, `"duplicate"`) || calls() != before {
		t.Errorf("the health event again: %s with %d API calls, want duplicate with none", res.Body, calls()-before)
	}

	// The real checkout.session.completed, arriving after all.
	obj, _ := json.Marshal(sessionState)
	real := fmt.Appendf(nil, `{"id": "evt_test_e2e_real_completed", "object": "event", "api_version": %q, "created": %d,
		"livemode": false, "type": "checkout.session.completed", "data": {"object": %s}}`, stripe.APIVersion, time.Now().Unix(), obj)
	res = mustPost(t, p.URL, stripeDelivery("evt_test_e2e_real_completed", real), http.StatusOK)
	t.Logf("checkout.session.completed arriving after all: %d %s", res.Status, strings.TrimSpace(res.Body))
	w.waitSettled(t, 30*time.Second)
	check("after the real event and the copy")
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'step' AND event_key LIKE 'evt_test_e2e_real_completed%'`); n != 0 {
		t.Errorf("the real event planned %d steps, want none", n)
	}
	if code := p.Term(t, 30*time.Second); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}
