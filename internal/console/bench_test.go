package console_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/ops"
)

// benchLoadSQL stores $1 events over 30 days, as loadgen's shapes have
// them: 85 % Stripe (half checkouts, with an order and two done steps;
// invoices created and paid), 15 % GitHub marketplace purchases; one event
// in 3 331 has its fulfillment step parked. Keys: evt_b<n> and
// 77:<guid of n>; ids: cs_b<n>, pi_b<n>, buyer<n>@example.com, in_b<n/2>.
const benchLoadSQL = `
INSERT INTO processed_events (event_key, source, status, kind, claimed_at, completed_at, event_id, event_type, api_version, body, outcome, via)
SELECT k, src, 'done', 'event', at, at, eid, typ, '2023-10-16', convert_to(format(
         '{"id":"%s","object":"event","type":"%s","data":{"object":{"id":"%s","amount_total":%s,"currency":"usd","payment_intent":"pi_b%s","customer_details":{"email":"buyer%s@example.com"}}}}',
         eid, typ, CASE WHEN typ LIKE 'invoice%' THEN 'in_b' || g / 2 ELSE 'cs_b' || g END, 1000 + g % 9000, g, g), 'UTF8'),
       'processed', 'delivery'
FROM (SELECT g, CASE WHEN g % 20 < 17 THEN 'stripe' ELSE 'github' END AS src,
             CASE WHEN g % 20 >= 17 THEN 'marketplace_purchase' WHEN g % 4 = 0 THEN 'invoice.created'
                  WHEN g % 4 = 1 THEN 'invoice.paid' ELSE 'checkout.session.completed' END AS typ,
             CASE WHEN g % 20 < 17 THEN 'evt_b' || g ELSE '77:' || lpad(to_hex(g), 8, '0') || '-0000-4000-8000-' || lpad(to_hex(g), 12, '0') END AS k,
             CASE WHEN g % 20 < 17 THEN 'evt_b' || g ELSE lpad(to_hex(g), 8, '0') || '-0000-4000-8000-' || lpad(to_hex(g), 12, '0') END AS eid,
             now() - interval '30 days' + g * interval '30 days' / $1 AS at
      FROM generate_series(1, $1::int) g) s;
INSERT INTO processed_events (event_key, source, status, kind, parent_key, step, step_kind, payload, claim_token, attempts, claimed_at, completed_at, last_error)
SELECT e.event_key || '/' || st.step, e.source, CASE WHEN st.step = 'fulfillment' AND hashtext(e.event_key) % 3331 = 0 THEN 'parked' ELSE 'done' END,
       'step', e.event_key, st.step, st.kind, '{}', 1, 1, e.claimed_at, e.claimed_at,
       CASE WHEN st.step = 'fulfillment' AND hashtext(e.event_key) % 3331 = 0 THEN 'fulfillment: status 422' END
FROM processed_events e, (VALUES ('email.confirmation', 'email'), ('fulfillment', 'fulfillment')) st(step, kind)
WHERE e.kind = 'event' AND e.event_type IN ('checkout.session.completed', 'marketplace_purchase');
INSERT INTO orders (source, provider_event_id, external_id, payment_intent_id, status, amount_cents, currency, customer_email, created_at, updated_at)
SELECT 'stripe', event_key, 'cs_b' || substr(event_key, 6), 'pi_b' || substr(event_key, 6), 'paid', 1000, 'usd',
       'buyer' || substr(event_key, 6) || '@example.com', claimed_at, claimed_at
FROM processed_events WHERE kind = 'event' AND event_type = 'checkout.session.completed';
INSERT INTO invoices (stripe_invoice_id, status, amount_due, amount_paid, currency, customer_email, created_at, updated_at)
SELECT 'in_b' || substr(event_key, 6)::int / 2, 'paid', 900, 900, 'eur', 'payer@example.com', min(claimed_at), max(claimed_at)
FROM processed_events WHERE kind = 'event' AND event_type LIKE 'invoice.%' GROUP BY 1`

// BenchmarkEventsPage times GET /events (HTML, with the bearer token) over
// CONSOLE_BENCH_EVENTS stored events (default 100 000; docs/console.md's
// figures are for 1 000 000), on a database of its own, vacuumed and
// analyzed as a running one is. Loading takes about a minute per million.
//
//	go test -run '^$' -bench EventsPage -benchtime 50x ./internal/console
func BenchmarkEventsPage(b *testing.B) {
	c, n := loadedConsole(b)
	ctx := context.Background()
	var deepAt time.Time
	var deepKey string
	if err := c.Pool.QueryRow(ctx, `SELECT claimed_at, event_key FROM processed_events WHERE kind = 'event'
ORDER BY claimed_at DESC, event_key DESC OFFSET $1 LIMIT 1`, n/2).Scan(&deepAt, &deepKey); err != nil {
		b.Fatal(err)
	}
	deep := base64.RawURLEncoding.EncodeToString([]byte(deepAt.UTC().Format(time.RFC3339Nano) + "|" + deepKey))
	g := n/2 - n/2%4 + 2 // a checkout
	for _, bc := range []struct{ name, path string }{
		{"First", "/events"},
		{"Deep", "/events?after=" + deep},
		{"Provider", "/events?source=github"},
		{"Type", "/events?type=invoice.paid"},
		{"Parked", "/events?state=parked"},
		{"Done", "/events?state=done"},
		{"Day", "/events?from=" + time.Now().UTC().Add(-20*24*time.Hour).Format("2006-01-02T15:04") +
			"&to=" + time.Now().UTC().Add(-19*24*time.Hour).Format("2006-01-02T15:04")},
		{"SearchEvent", fmt.Sprintf("/events?q=evt_b%d", g)},
		{"SearchCheckoutSession", fmt.Sprintf("/events?q=cs_b%d", g)},
		{"SearchEmail", fmt.Sprintf("/events?q=buyer%d@example.com", g)},
		{"SearchInvoice", fmt.Sprintf("/events?q=in_b%d", g/2)},
		{"SearchNothing", "/events?q=cs_nope"},
	} {
		b.Run(bc.name, func(b *testing.B) { benchGet(b, c, bc.path) })
	}
}

// loadedConsole is a console on a database of its own holding
// CONSOLE_BENCH_EVENTS events (default 100 000) loaded by benchLoadSQL,
// vacuumed and analyzed as a running one is.
func loadedConsole(b *testing.B) (*console, int) {
	b.Helper()
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("CONSOLE_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	c := newConsole(b)
	ctx := context.Background()
	start := time.Now()
	for i, stmt := range strings.Split(benchLoadSQL, ";\n") {
		args := []any{n}
		if i > 0 {
			args = nil
		}
		if _, err := c.Pool.Exec(ctx, stmt, args...); err != nil {
			b.Fatalf("load: %v", err)
		}
	}
	for _, stmt := range []string{"VACUUM ANALYZE processed_events", "VACUUM ANALYZE orders", "VACUUM ANALYZE invoices"} {
		if _, err := c.Pool.Exec(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("loaded %d events in %s", n, time.Since(start).Round(time.Second))
	return c, n
}

// BenchmarkPrune times `events prune` over CONSOLE_BENCH_EVENTS stored
// events spread over 30 days: first its dry run (the count of what would
// go), then the prune itself, in batches of 1 000, of Stripe's events
// older than 15 days with their steps and bodies (about 42 % of the
// events), then the console's first events page on what is left. Each is
// reported per event pruned and per batch.
//
//	CONSOLE_BENCH_EVENTS=1000000 go test -run '^$' -bench Prune -benchtime 1x ./internal/console
func BenchmarkPrune(b *testing.B) {
	c, n := loadedConsole(b)
	ctx := context.Background()
	const batch = 1000
	window := 15 * 24 * time.Hour
	var want ops.PruneResult
	b.Run("DryRun", func(b *testing.B) {
		for b.Loop() {
			r, err := ops.Prune(ctx, c.Pool, "stripe", window, batch, true, nil)
			if err != nil {
				b.Fatal(err)
			}
			want = r
		}
	})
	if want.Events < int64(n)/3 {
		b.Fatalf("the dry run counts %d events of %d to prune, want about 42 %%", want.Events, n)
	}
	b.Run("Prune", func(b *testing.B) {
		for b.Loop() {
			start := time.Now()
			got, err := ops.Prune(ctx, c.Pool, "stripe", window, batch, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			if got.Events == 0 {
				b.Skip("nothing left to prune: run with -benchtime 1x")
			}
			// The window is counted from now(): events keep ageing past it
			// while the prune runs (1 M over 30 days: one every 2.6 s).
			if got.Events < want.Events || got.Events > want.Events+int64(n)/1000 {
				b.Errorf("pruned %+v, the dry run counted %+v", got, want)
			}
			b.ReportMetric(float64(got.Events)/d.Seconds(), "events/s")
			b.ReportMetric(d.Seconds()*1000/float64((got.Events+batch-1)/batch), "ms/batch")
			b.Logf("pruned %d events (%d claim rows) of %d in %s", got.Events, got.Claims, n, d.Round(time.Millisecond))
		}
	})
	b.Run("EventsPageAfter", func(b *testing.B) { benchGet(b, c, "/events") })
}

// benchGet times GET path with the bearer token, b.N times, each answered
// 200.
func benchGet(b *testing.B, c *console, path string) {
	cl := &http.Client{}
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodGet, c.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := cl.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", path, res.StatusCode)
		}
	}
}
