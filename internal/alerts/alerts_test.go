package alerts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paywebhooks/receiver/internal/alerts"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	paddle "github.com/paywebhooks/receiver/internal/providers/paddle"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const alertEmail = "oncall@ops.example"

// sink is a local alert webhook: it keeps what it receives, and answers
// the status it is told to (200 by default).
type sink struct {
	srv *httptest.Server

	mu     sync.Mutex
	got    []map[string]any
	fail   int // answer this many requests 500 first
	status int
}

func newSink(t *testing.T) *sink {
	s := &sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.fail > 0 {
			s.fail--
			http.Error(w, "unavailable", http.StatusInternalServerError)
			return
		}
		if s.status != 0 {
			http.Error(w, "no such hook", s.status)
			return
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		s.got = append(s.got, v)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// texts are the texts received, by cause.
func (s *sink) texts() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for _, v := range s.got {
		cause, _ := v["cause"].(string)
		text, _ := v["text"].(string)
		out[cause] = append(out[cause], text)
	}
	return out
}

// world is a receiver with both alert channels on, and a monitor of its
// own with a clock the test moves.
type world struct {
	*rt.Receiver
	sink *sink
	now  time.Time
	mon  *alerts.Monitor
	reg  *prometheus.Registry
}

func newWorld(t *testing.T, opts ...rt.Option) *world {
	t.Helper()
	// A minute into the hour, so that the test can move within it.
	w := &world{sink: newSink(t), now: time.Now().UTC().Truncate(time.Hour).Add(time.Minute)}
	w.Receiver = rt.New(t, providers.List(), append([]rt.Option{rt.Env("ALERT_WEBHOOK_URL", w.sink.srv.URL+"/hooks/T000/B000/secret-path"),
		rt.Env("ALERT_EMAIL", alertEmail)}, opts...)...)
	w.mon = w.monitor()
	return w
}

// monitor is a Monitor of the receiver, as internal/server builds it: one
// per replica.
func (w *world) monitor() *alerts.Monitor {
	counters := prometheus.NewRegistry()
	m := w.Server.Metrics()
	counters.MustRegister(m.Rejections, m.SignatureMismatches)
	w.reg = prometheus.NewRegistry()
	return &alerts.Monitor{DB: w.Pool, Runner: w.Server.Processor(), Counters: counters,
		Subjects: []alerts.Subject{{Source: "stripe", SecretVar: "STRIPE_WEBHOOK_SECRET", Retries: stripe.Spec.Retries},
			{Source: "github", SecretVar: "GITHUB_WEBHOOK_SECRET", Retries: github.Spec.Retries},
			{Source: "paddle", SecretVar: "PADDLE_WEBHOOK_SECRET", Retries: paddle.Spec.Retries}},
		Channels: alerts.Channels(w.Config.AlertWebhookURL, w.Config.AlertEmail), SilenceAfter: w.Config.SilenceAlertAfter,
		Metrics: alerts.NewMetrics(w.reg), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return w.now }}
}

// once evaluates the causes and returns the causes of the alerts raised.
func (w *world) once(t *testing.T) []string {
	t.Helper()
	raised, err := w.mon.Once(context.Background())
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	var out []string
	for _, a := range raised {
		c := string(a.Cause)
		if a.Subject != "" {
			c += ":" + a.Subject
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// metric is the value of one of the monitor's series for a cause.
func (w *world) metric(t *testing.T, name, cause string) float64 {
	t.Helper()
	mfs, err := w.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" && l.GetValue() == cause {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{cause=%q}", name, cause)
	return 0
}

// emails are the alert emails received.
func (w *world) emails() []mailtest.Received {
	var out []mailtest.Received
	for _, m := range w.SMTP.Messages() {
		if slices.Contains(m.To, alertEmail) {
			out = append(out, m)
		}
	}
	return out
}

func checkout(id string) []byte {
	return fmt.Appendf(nil, `{"id":"evt_%[1]s","object":"event","api_version":"2023-10-16","type":"checkout.session.completed",
"data":{"object":{"id":"cs_%[1]s","object":"checkout.session","payment_status":"paid","amount_total":2500,"currency":"usd",
"payment_intent":"pi_%[1]s","customer_details":{"email":"%[1]s@example.com","name":"Buyer %[1]s"}}}}`, id)
}

// forge posts n deliveries of spec signed with a secret the receiver does
// not hold, at the time given.
func (w *world) forge(t *testing.T, spec webhooks.Spec, n int, at time.Time, extra http.Header) {
	t.Helper()
	for i := range n {
		body := checkout(fmt.Sprintf("forged_%s_%d_%d", spec.Source, at.Unix(), i))
		h := spec.Sign(webhooks.SignInput{Body: body, Secret: "whsec_not_this_receivers_0123456789", At: at})
		if spec.Source == "paddle" {
			h = spec.Sign(webhooks.SignInput{Body: body, Secret: "pdl_ntfset_not_this_receivers_0123456789", At: at})
		}
		for k, v := range extra {
			h[k] = v
		}
		if res := w.Post(t, spec.Route(), h, body); res.Status != http.StatusBadRequest {
			t.Fatalf("forged %s delivery answered %d, want 400", spec.Source, res.Status)
		}
	}
}

// TestIncident raises each cause once, in one scripted incident, checks
// that none is raised again within the hour, on either channel, and prints
// the texts received.
func TestIncident(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, rt.Env("MAX_INFLIGHT", "1"))

	// (a) A step parked: the fulfillment API refuses an order for good.
	w.API.SetStatus(http.StatusUnprocessableEntity)
	if res := w.Deliver(t, stripe.Spec, checkout("inc_stuck"), nil); res.Status != http.StatusOK {
		t.Fatalf("parked delivery: %d", res.Status)
	}
	w.API.SetStatus(0)

	// (b) Signatures failing with fresh timestamps: Stripe signed with a
	// secret this receiver lacks; GitHub (no timestamp) likewise; Paddle's
	// stale replays do not count.
	w.forge(t, stripe.Spec, alerts.DefaultThreshold, time.Now(), nil)
	w.forge(t, github.Spec, alerts.DefaultThreshold, time.Now(), http.Header{"X-Github-Event": {"ping"},
		"X-Github-Delivery": {"6c1d2f7e-0000-4000-8000-00000000beef"}, "X-Github-Hook-Id": {"77"},
		"Content-Type": {"application/json"}})
	w.forge(t, paddle.Spec, 2*alerts.DefaultThreshold, time.Now().Add(-time.Hour), nil)

	// (c) A provider silent for longer than its usual silence: Paddle
	// delivered every minute until two hours ago.
	if _, err := w.Pool.Exec(ctx, `
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at, event_id, event_type, body, outcome, via)
SELECT 'evt_pdl_' || g, 'paddle', 'done', 'event', $1::timestamptz - g * interval '1 minute', now(), 'evt_pdl_' || g,
       'transaction.completed', '{}', 'processed', 'delivery'
FROM generate_series(1, 40) g`, w.now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}

	// (d) A reconciliation that found events never delivered.
	if _, err := w.Pool.Exec(ctx, `
INSERT INTO reconcile_runs (source, triggered_by, started_at, finished_at, result, found, missed, unresolved)
VALUES ('stripe', 'periodic', now() - interval '1 minute', now(), 'ok', 120, 3, 0)`); err != nil {
		t.Fatal(err)
	}

	// (e) Deliveries refused for load: one in flight (its fulfillment call
	// held), the next ones answered 503 too_many_in_flight.
	release := w.API.Hold()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Deliver(t, stripe.Spec, checkout("inc_slow"), nil)
	}()
	w.API.WaitHeld(t, 1, 10*time.Second)
	for i := range alerts.DefaultThreshold {
		if res := w.Deliver(t, stripe.Spec, checkout(fmt.Sprintf("inc_refused_%d", i)), nil); res.Status != http.StatusServiceUnavailable {
			t.Fatalf("delivery beyond MAX_INFLIGHT answered %d, want 503", res.Status)
		}
	}
	release()
	<-done

	// (f) The database's primary changed under this replica.
	w.mon.NoteFailover(alerts.Failover{At: w.now, From: "system 7 timeline 1", To: "system 7 timeline 2",
		Commands: []string{"server reconcile stripe --since 72h"}, Lookback: 72 * time.Hour})

	got := w.once(t)
	want := []string{"failover", "load:stripe", "parked", "reconcile:stripe", "signature:github", "signature:stripe", "silence:paddle"}
	if !slices.Equal(got, want) {
		t.Fatalf("raised %v, want %v", got, want)
	}
	if again := w.once(t); len(again) != 0 {
		t.Errorf("raised again within the hour: %v", again)
	}
	// Stripe's signatures keep failing: within the hour, no second alert;
	// in the next hour, one.
	w.forge(t, stripe.Spec, alerts.DefaultThreshold, time.Now(), nil)
	w.now = w.now.Add(30 * time.Minute)
	if again := w.once(t); len(again) != 0 {
		t.Errorf("raised again within the hour: %v", again)
	}
	w.forge(t, stripe.Spec, alerts.DefaultThreshold, time.Now(), nil)
	w.now = w.now.Add(time.Hour)
	if next := w.once(t); !slices.Equal(next, []string{"signature:stripe"}) {
		t.Errorf("the next hour raised %v, want signature:stripe alone (the rest is the same episode, or over)", next)
	}

	texts := w.sink.texts()
	for _, c := range alerts.Causes {
		t.Logf("--- %s (%d)\n%s", c, len(texts[string(c)]), strings.Join(texts[string(c)], "\n---\n"))
	}
	wantTexts := map[alerts.Cause][]string{
		alerts.CauseParked:    {"evt_inc_stuck", "step fulfillment", "422", "server events resolve"},
		alerts.CauseSignature: {"stripe: 5 deliveries failed verification", "STRIPE_WEBHOOK_SECRET", "timestamps within tolerance", "github: 5 deliveries", "github never retries"},
		alerts.CauseSilence:   {"paddle has sent nothing for 2h", "95th percentile of the last 39 gaps", "= 1h00m"},
		alerts.CauseReconcile: {"stripe: reconciliation found 3 events", "looked at 120"},
		alerts.CauseLoad:      {"stripe: 5 deliveries refused for load", "too_many_in_flight 5", "stripe retries for up to 3 days"},
		alerts.CauseFailover: {"database fail-over", "(system 7 timeline 1 → system 7 timeline 2): a standby was promoted",
			"acknowledged shortly before it may be lost", "Run the catch-up now: server reconcile stripe --since 72h."},
	}
	for c, parts := range wantTexts {
		all := strings.Join(texts[string(c)], "\n")
		for _, p := range parts {
			if !strings.Contains(all, p) {
				t.Errorf("the %s alert does not say %q:\n%s", c, p, all)
			}
		}
	}
	if n := len(texts[string(alerts.CauseSignature)]); n != 3 {
		t.Errorf("%d signature alerts, want 3 (stripe, github, stripe the next hour; paddle's stale failures do not count)", n)
	}
	for c, ts := range texts {
		if c != string(alerts.CauseSignature) && len(ts) != 1 {
			t.Errorf("%d alerts of cause %s, want 1", len(ts), c)
		}
		for _, text := range ts {
			if strings.Contains(text, "@example.com") || strings.Contains(text, "secret-path") || strings.Contains(text, "whsec_") {
				t.Errorf("an alert text carries an address or a secret:\n%s", text)
			}
		}
	}
	// The same alerts by email, each once.
	if got, want := len(w.emails()), len(w.sink.got); got != want {
		t.Errorf("%d alert emails, want %d (one per webhook alert)", got, want)
	}
	for _, m := range w.emails() {
		if !strings.Contains(string(m.Data), "Subject: [paywebhooks] ") || strings.Contains(string(m.Data), "inc_stuck@example.com") {
			t.Errorf("alert email:\n%s", m.Data)
		}
	}
	if v := w.metric(t, "webhook_alerts_total", "signature"); v != 3 {
		t.Errorf("webhook_alerts_total{cause=signature} = %v, want 3", v)
	}
	if v := w.metric(t, "webhook_alert_conditions", "silence"); v != 1 {
		t.Errorf("webhook_alert_conditions{cause=silence} = %v, want 1", v)
	}
	// Every attempt of an alert is recorded as any step's.
	if n := w.Count(t, `SELECT count(*) FROM step_attempts WHERE step_key LIKE 'alert:%' AND outcome = 'done'`); n != 2*(len(want)+1) {
		t.Errorf("%d alert attempts recorded done, want %d (each alert on both channels)", n, 2*(len(want)+1))
	}
}

// TestParkedOncePerHour: newly parked claims are named in the next hour's
// alert, those named before are not named again; a resolved event is not
// parked.
func TestParkedOncePerHour(t *testing.T) {
	w := newWorld(t)
	park := func(id string) {
		t.Helper()
		w.API.SetStatus(http.StatusUnprocessableEntity)
		defer w.API.SetStatus(0)
		if res := w.Deliver(t, stripe.Spec, checkout(id), nil); res.Status != http.StatusOK {
			t.Fatalf("delivery: %d", res.Status)
		}
	}
	park("first")
	if got := w.once(t); !slices.Equal(got, []string{"parked"}) {
		t.Fatalf("raised %v, want parked", got)
	}
	park("second")
	if got := w.once(t); len(got) != 0 {
		t.Errorf("raised %v in the same hour, want nothing", got)
	}
	w.now = w.now.Add(time.Hour)
	if got := w.once(t); !slices.Equal(got, []string{"parked"}) {
		t.Fatalf("the next hour raised %v, want parked", got)
	}
	texts := w.sink.texts()["parked"]
	if len(texts) != 2 || !strings.Contains(texts[0], "evt_first") || !strings.Contains(texts[1], "evt_second") ||
		strings.Contains(texts[1], "evt_first") {
		t.Errorf("parked alerts:\n%s\nwant evt_first, then evt_second alone", strings.Join(texts, "\n---\n"))
	}
	w.now = w.now.Add(time.Hour)
	if got := w.once(t); len(got) != 0 {
		t.Errorf("nothing new was parked, yet raised %v", got)
	}
}

// TestReplicas: two replicas evaluate the same causes at once; each alert
// is sent once.
func TestReplicas(t *testing.T) {
	w := newWorld(t)
	if _, err := w.Pool.Exec(context.Background(), `
INSERT INTO reconcile_runs (source, triggered_by, started_at, finished_at, result, found, missed, unresolved)
VALUES ('stripe', 'cli', now(), now(), 'ok', 10, 1, 0)`); err != nil {
		t.Fatal(err)
	}
	other := w.monitor()
	var wg sync.WaitGroup
	for _, m := range []*alerts.Monitor{w.mon, other} {
		wg.Go(func() {
			if _, err := m.Once(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(w.sink.texts()["reconcile"]); n != 1 {
		t.Errorf("%d reconcile alerts from two replicas, want 1", n)
	}
	if n := len(w.emails()); n != 1 {
		t.Errorf("%d alert emails from two replicas, want 1", n)
	}
}

// TestRedriven: an alert the webhook fails to take is given back and sent
// by the redriver, once; one it refuses for good (404) is parked, and
// counts in no parked figure.
func TestRedriven(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.sink.fail = 1
	if _, err := w.Pool.Exec(ctx, `
INSERT INTO reconcile_runs (source, triggered_by, started_at, finished_at, result, found, missed, unresolved)
VALUES ('stripe', 'cli', now(), now(), 'ok', 10, 1, 0)`); err != nil {
		t.Fatal(err)
	}
	if got := w.once(t); !slices.Equal(got, []string{"reconcile:stripe"}) {
		t.Fatalf("raised %v", got)
	}
	if n := len(w.sink.texts()["reconcile"]); n != 0 {
		t.Fatalf("the failed attempt was received %d times", n)
	}
	key := "alert:reconcile:stripe:" + alerts.Hour(w.now) + "/" + alerts.StepWebhook
	if _, err := w.Pool.Exec(ctx, `UPDATE processed_events SET next_attempt_at = now() WHERE event_key = $1`, key); err != nil {
		t.Fatal(err)
	}
	ran, failed, err := w.Server.Processor().RedriveOnce(ctx, 10)
	if err != nil || ran != 1 || failed != 0 {
		t.Fatalf("redrive: ran %d, failed %d, %v", ran, failed, err)
	}
	if n := len(w.sink.texts()["reconcile"]); n != 1 {
		t.Errorf("after the redriver: %d reconcile alerts received, want 1", n)
	}
	var outcomes []string
	rows, _ := w.Pool.Query(ctx, `SELECT outcome FROM step_attempts WHERE step_key = $1 ORDER BY attempt`, key)
	for rows.Next() {
		var o string
		_ = rows.Scan(&o)
		outcomes = append(outcomes, o)
	}
	if !slices.Equal(outcomes, []string{"failed", "done"}) {
		t.Errorf("the alert's attempts %v, want failed then done", outcomes)
	}

	// Refused for good: parked, and no event's.
	w.sink.status = http.StatusNotFound
	w.now = w.now.Add(time.Hour)
	if _, err := w.Pool.Exec(ctx, `
INSERT INTO reconcile_runs (source, triggered_by, started_at, finished_at, result, found, missed, unresolved)
VALUES ('stripe', 'cli', now(), now(), 'ok', 10, 2, 0)`); err != nil {
		t.Fatal(err)
	}
	w.once(t)
	var claims, events int
	if err := w.Pool.QueryRow(ctx, webhooks.ParkedCountsSQL).Scan(&claims, &events); err != nil {
		t.Fatal(err)
	}
	if n := w.Count(t, `SELECT count(*) FROM processed_events WHERE status = 'parked' AND event_key LIKE 'alert:%'`); n != 1 || claims != 0 {
		t.Errorf("%d parked alerts, %d parked claims of events; want the refused alert parked, and no event's", n, claims)
	}
	sent, err := alerts.Recent(ctx, w.Pool, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 4 || sent[0].Hour != alerts.Hour(w.now) || sent[1].Hour != alerts.Hour(w.now) {
		t.Fatalf("recent alerts %+v: want the newest hour's two first", sent)
	}
	for _, s := range sent[:2] {
		if s.Channel == alerts.StepWebhook && (s.Status != "parked" || !strings.Contains(s.LastError, "status 404") ||
			strings.Contains(s.LastError, "secret-path")) {
			t.Errorf("the refused alert %+v: want it parked, its error naming 404 and not the URL's path", s)
		}
	}
}

func TestCheckWebhookURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.slack.com/services/T0/B0/xyz", true},
		{"http://127.0.0.1:9000/hook", true},
		{"http://localhost/hook", true},
		{"http://[::1]:8080/x", true},
		{"http://hooks.slack.com/services/T0/B0/xyz", true}, // off this machine: config's to refuse (ALLOW_INSECURE_HTTP)
		{"ftp://example.com/x", false},
		{"hooks.slack.com/services", false},
		{"https://user:pass@example.com/x", false},
		{"https:///path", false},
	} {
		if err := alerts.CheckWebhookURL(tc.url); (err == nil) != tc.ok {
			t.Errorf("CheckWebhookURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
	}
	if got := alerts.MaskURL("https://hooks.slack.com/services/T0/B0/xyz"); got != "https://hooks.slack.com/****" {
		t.Errorf("MaskURL = %q", got)
	}
}

// TestFailoverOnceAcrossReplicas: every replica notices a fail-over; one
// alert tells of it, even when another replica notices it in the next
// hour; the next fail-over is told again; with RECONCILE_INTERVAL the text
// says the receiver catches up itself.
func TestFailoverOnceAcrossReplicas(t *testing.T) {
	w := newWorld(t)
	f := alerts.Failover{At: w.now, From: "system 7 timeline 1", To: "system 7 timeline 2",
		Commands: []string{"server reconcile paddle --since 72h", "server reconcile stripe --since 72h"}, Reconciles: true, Lookback: 72 * time.Hour}
	w.mon.NoteFailover(f)
	if got := w.once(t); !slices.Equal(got, []string{"failover"}) {
		t.Fatalf("raised %v, want the fail-over", got)
	}
	w.now = w.now.Add(time.Hour)
	other := w.monitor()
	f.At = w.now
	other.NoteFailover(f)
	if raised, err := other.Once(context.Background()); err != nil || len(raised) != 0 {
		t.Errorf("another replica, the next hour: raised %v (%v); want nothing: the same fail-over", raised, err)
	}
	w.now = w.now.Add(time.Hour)
	f.From, f.To, f.At = "system 7 timeline 2", "system 7 timeline 3", w.now
	w.mon.NoteFailover(f)
	if got := w.once(t); !slices.Equal(got, []string{"failover"}) {
		t.Errorf("the next fail-over raised %v, want it told", got)
	}
	texts := w.sink.texts()[string(alerts.CauseFailover)]
	if len(texts) != 2 || !strings.Contains(texts[1], "timeline 2 → system 7 timeline 3") ||
		!strings.Contains(texts[1], "The receiver runs the catch-up itself (RECONCILE_INTERVAL) over the last 72h") ||
		!strings.Contains(texts[1], "server reconcile paddle --since 72h; server reconcile stripe --since 72h") {
		t.Errorf("fail-over alerts:\n%s", strings.Join(texts, "\n---\n"))
	}
	// Past FailoverHolds, a fail-over noticed long ago is no longer a cause.
	w.now = w.now.Add(alerts.FailoverHolds)
	if got := w.once(t); len(got) != 0 {
		t.Errorf("raised %v after the fail-over stopped holding", got)
	}
}

// TestSilenceQueryUsesAnIndex: the silence's query, which every replica
// runs every minute for every provider, reads its rows from an index
// however many events are stored, never the whole table.
func TestSilenceQueryUsesAnIndex(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, `
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at, event_id, event_type, body, outcome, via)
SELECT 'evt_' || g, CASE WHEN g % 10 = 0 THEN 'github' ELSE 'stripe' END, 'done', 'event', now() - g * interval '1 second', now(),
       'evt_' || g, 'invoice.created', '{}', 'processed', CASE WHEN g % 100 = 0 THEN 'reconcile' ELSE 'delivery' END
FROM generate_series(1, 20000) g;
ANALYZE processed_events`); err != nil {
		t.Fatal(err)
	}
	for _, source := range []string{"stripe", "github"} {
		rows, err := pool.Query(ctx, "EXPLAIN "+alerts.DeliveriesSQL, source, alerts.SilenceSample+1)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(lines, "\n")
		if strings.Contains(all, "Seq Scan") || !strings.Contains(all, "Index Scan") {
			t.Errorf("the silence's query of %s does not read an index:\n%s", source, all)
		}
	}
}
