package stripehook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/pgtest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks/stripehook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// deliver posts a fixture and fails the test unless the receiver answers want.
func deliver(t *testing.T, r *rt.Receiver, body []byte, want int) rt.Response {
	t.Helper()
	res := r.Deliver(t, stripehook.Spec, body, nil)
	if res.Status != want {
		t.Fatalf("status %d, want %d; body %s", res.Status, want, res.Body)
	}
	return res
}

type orderRow struct {
	Status        string
	AmountCents   int64
	Currency      string
	CustomerEmail string
	EventID       string
}

func order(t *testing.T, r *rt.Receiver, externalID string) (orderRow, bool) {
	t.Helper()
	var o orderRow
	err := r.Pool.QueryRow(context.Background(), `
SELECT status, amount_cents, currency, coalesce(customer_email, ''), provider_event_id
FROM orders WHERE source = 'stripe' AND external_id = $1`, externalID).
		Scan(&o.Status, &o.AmountCents, &o.Currency, &o.CustomerEmail, &o.EventID)
	if err != nil {
		return orderRow{}, false
	}
	return o, true
}

func invoiceStatus(t *testing.T, r *rt.Receiver, id string) string {
	t.Helper()
	var s string
	_ = r.Pool.QueryRow(context.Background(), `SELECT status FROM invoices WHERE stripe_invoice_id = $1`, id).Scan(&s)
	return s
}

// TestHandledEvents sends each handled event type and checks the contract's
// effect: the database write and the steps that leave the database.
func TestHandledEvents(t *testing.T) {
	t.Run("CheckoutPaid", func(t *testing.T) {
		r := rt.New(t)
		deliver(t, r, rt.Fixture(t, "checkout.session.completed.paid.json"), 200)
		o, ok := order(t, r, "cs_test_paid")
		want := orderRow{"paid", 3000, "usd", "buyer@example.com", "evt_test_checkout_paid"}
		if !ok || o != want {
			t.Fatalf("order = %+v, want %+v", o, want)
		}
		msgs := r.SMTP.WaitFor(t, 1, 5*time.Second)
		if msgs[0].To[0] != "buyer@example.com" {
			t.Errorf("confirmation to %v", msgs[0].To)
		}
		reqs := r.API.Requests()
		if len(reqs) != 1 || reqs[0].Body.ExternalID != "cs_test_paid" || reqs[0].Body.AmountCents != 3000 {
			t.Fatalf("fulfillment requests = %+v", reqs)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key LIKE 'evt_test_checkout_paid%' AND status = 'done'`); n != 3 {
			t.Errorf("done claims = %d, want 3 (event, email, fulfillment)", n)
		}
	})
	t.Run("CheckoutUnpaid", func(t *testing.T) {
		r := rt.New(t)
		deliver(t, r, rt.Fixture(t, "checkout.session.completed.unpaid.json"), 200)
		if o, _ := order(t, r, "cs_test_async"); o.Status != "pending_payment" {
			t.Fatalf("order status %q, want pending_payment", o.Status)
		}
		if n := len(r.SMTP.Messages()) + len(r.API.Requests()); n != 0 {
			t.Errorf("%d steps ran for an unpaid checkout", n)
		}
	})
	t.Run("AsyncPaymentSucceeded", func(t *testing.T) {
		r := rt.New(t)
		deliver(t, r, rt.Fixture(t, "checkout.session.completed.unpaid.json"), 200)
		deliver(t, r, rt.Fixture(t, "checkout.session.async_payment_succeeded.json"), 200)
		if o, _ := order(t, r, "cs_test_async"); o.Status != "paid" {
			t.Fatalf("order status %q, want paid", o.Status)
		}
		r.SMTP.WaitFor(t, 1, 5*time.Second)
		if len(r.API.Requests()) != 1 {
			t.Errorf("fulfillment requests = %d, want 1", len(r.API.Requests()))
		}
	})
	t.Run("AsyncPaymentFailed", func(t *testing.T) {
		r := rt.New(t)
		deliver(t, r, rt.Fixture(t, "checkout.session.completed.unpaid.json"), 200)
		deliver(t, r, rt.Fixture(t, "checkout.session.async_payment_failed.json"), 200)
		if o, _ := order(t, r, "cs_test_async"); o.Status != "payment_failed" {
			t.Fatalf("order status %q, want payment_failed", o.Status)
		}
		msgs := r.SMTP.WaitFor(t, 1, 5*time.Second)
		if !strings.Contains(string(msgs[0].Data), "sepa@example.com") {
			t.Errorf("payment-failed email not to the customer")
		}
		if len(r.API.Requests()) != 0 {
			t.Errorf("a failed payment was fulfilled")
		}
	})
	t.Run("InvoiceLifecycle", func(t *testing.T) {
		r := rt.New(t)
		deliver(t, r, rt.Fixture(t, "invoice.created.json"), 200)
		if s := invoiceStatus(t, r, "in_test_1"); s != "pending" {
			t.Fatalf("after invoice.created: %q", s)
		}
		deliver(t, r, rt.Fixture(t, "invoice.finalized.json"), 200)
		deliver(t, r, rt.Fixture(t, "invoice.payment_failed.json"), 200)
		if n := r.Count(t, `SELECT count(*) FROM invoice_payment_failures WHERE stripe_invoice_id = 'in_test_1'`); n != 1 {
			t.Errorf("failed attempts recorded = %d, want 1", n)
		}
		deliver(t, r, rt.Fixture(t, "invoice.paid.json"), 200)
		if s := invoiceStatus(t, r, "in_test_1"); s != "paid" {
			t.Fatalf("after invoice.paid: %q", s)
		}
		msgs := r.SMTP.WaitFor(t, 2, 5*time.Second) // dunning, receipt
		if len(msgs) != 2 {
			t.Errorf("emails = %d, want 2 (dunning, receipt)", len(msgs))
		}
	})
	t.Run("ChargeRefunded", func(t *testing.T) {
		r := rt.New(t)
		deliver(t, r, rt.Fixture(t, "checkout.session.completed.paid.json"), 200)
		deliver(t, r, rt.Fixture(t, "charge.refunded.json"), 200)
		if o, _ := order(t, r, "cs_test_paid"); o.Status != "refunded" {
			t.Fatalf("order status %q, want refunded", o.Status)
		}
		r.SMTP.WaitFor(t, 2, 5*time.Second) // confirmation, refund
	})
	t.Run("RefundBeforeOrder", func(t *testing.T) {
		r := rt.New(t)
		deliver(t, r, rt.Fixture(t, "charge.refunded.json"), 200)
		deliver(t, r, rt.Fixture(t, "checkout.session.completed.paid.json"), 200)
		if o, _ := order(t, r, "cs_test_paid"); o.Status != "refunded" {
			t.Fatalf("order status %q, want refunded (its refund came first)", o.Status)
		}
		if len(r.API.Requests()) != 0 {
			t.Errorf("a refunded order was fulfilled")
		}
	})
	t.Run("UnhandledType", func(t *testing.T) {
		r := rt.New(t)
		res := deliver(t, r, rt.Fixture(t, "product.created.json"), 200)
		if !strings.Contains(res.Body, `"ignored"`) {
			t.Errorf("body %s, want outcome ignored", res.Body)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND outcome = 'ignored'`); n != 1 {
			t.Errorf("ignored events stored = %d, want 1", n)
		}
	})
	t.Run("OldAPIVersionWithStringRequest", func(t *testing.T) {
		r := rt.New(t)
		deliver(t, r, rt.Fixture(t, "checkout.session.completed.old_api.json"), 200)
		if o, ok := order(t, r, "cs_test_old"); !ok || o.Status != "paid" {
			t.Fatalf("order = %+v, %v", o, ok)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE api_version = '2015-10-16'`); n != 1 {
			t.Errorf("api_version not recorded")
		}
	})
	t.Run("UnreadableFieldsParked", func(t *testing.T) {
		r := rt.New(t)
		body := rt.Fixture(t, "checkout.session.completed.paid.json", `"amount_total": 3000`, `"amount_total": "thirty"`)
		res := deliver(t, r, body, 200)
		if !strings.Contains(res.Body, `"parked"`) {
			t.Fatalf("body %s, want outcome parked", res.Body)
		}
		var status, lastErr string
		var stored []byte
		err := r.Pool.QueryRow(context.Background(), `
SELECT p.status, p.last_error, p.body FROM processed_events p
WHERE event_key = 'evt_test_checkout_paid'`).Scan(&status, &lastErr, &stored)
		if err != nil || status != "parked" || !strings.Contains(lastErr, "amount_total") || string(stored) != string(body) {
			t.Fatalf("parked row: %v %q %q stored=%d bytes", err, status, lastErr, len(stored))
		}
		if n := r.Count(t, `SELECT count(*) FROM orders`); n != 0 {
			t.Errorf("a parked event wrote %d orders", n)
		}
		deliver(t, r, body, 200) // the retry is acknowledged too, not retried for ever
	})
}

// allFixtures are the handled events of one coherent history, in order.
var allFixtures = []string{
	"checkout.session.completed.paid.json",
	"checkout.session.completed.unpaid.json",
	"checkout.session.async_payment_succeeded.json",
	"invoice.created.json",
	"invoice.finalized.json",
	"invoice.payment_failed.json",
	"invoice.paid.json",
	"charge.refunded.json",
}

// TestDuplicateDelivery is the seed's first test: the same delivery sent
// twice, and five times, in sequence leaves the database as one did, and
// every side effect happened once.
func TestDuplicateDelivery(t *testing.T) {
	for _, times := range []int{2, 5} {
		t.Run(fmt.Sprintf("Times%d", times), func(t *testing.T) {
			once := rt.New(t)
			many := rt.New(t)
			for _, f := range allFixtures {
				body := rt.Fixture(t, f)
				deliver(t, once, body, 200)
				for range times {
					deliver(t, many, body, 200)
				}
			}
			if diff := cmp.Diff(once.Snapshot(t), many.Snapshot(t)); diff != "" {
				t.Fatalf("state after %d deliveries differs from one (-once +many):\n%s", times, diff)
			}
			if a, b := len(once.SMTP.Messages()), len(many.SMTP.Messages()); a != b || a == 0 {
				t.Errorf("emails: once %d, %d times %d", a, times, b)
			}
			if a, b := len(once.API.Requests()), len(many.API.Requests()); a != b || a == 0 {
				t.Errorf("fulfillment calls: once %d, %d times %d", a, times, b)
			}
		})
	}
}

// TestConcurrentDelivery sends one new event by 50 concurrent requests.
func TestConcurrentDelivery(t *testing.T) {
	for _, f := range []string{"checkout.session.completed.unpaid.json", "invoice.created.json"} {
		t.Run(f, func(t *testing.T) {
			r := rt.New(t)
			body := rt.Fixture(t, f)
			var wg sync.WaitGroup
			statuses := make([]int, 50)
			start := make(chan struct{})
			for i := range statuses {
				wg.Go(func() {
					<-start
					statuses[i] = r.Deliver(t, stripehook.Spec, body, nil).Status
				})
			}
			close(start)
			wg.Wait()
			for i, s := range statuses {
				if s != 200 {
					t.Errorf("request %d answered %d", i, s)
				}
			}
			if n := r.Count(t, `SELECT count(*) FROM orders`) + r.Count(t, `SELECT count(*) FROM invoices`); n != 1 {
				t.Fatalf("rows written = %d, want exactly 1", n)
			}
		})
	}
}

// TestReplayWithEmptiedClaims: processed_events (and the stored bodies)
// truncated by a migration gone wrong; replaying every event changes no
// order and no invoice, thanks to the constraints and conditional updates.
func TestReplayWithEmptiedClaims(t *testing.T) {
	r := rt.New(t)
	for _, f := range allFixtures {
		deliver(t, r, rt.Fixture(t, f), 200)
	}
	before := r.Snapshot(t)
	emails := len(r.SMTP.Messages())
	if _, err := r.Pool.Exec(context.Background(), `TRUNCATE processed_events`); err != nil {
		t.Fatal(err)
	}
	for _, f := range allFixtures {
		deliver(t, r, rt.Fixture(t, f), 200)
	}
	if diff := cmp.Diff(before, r.Snapshot(t)); diff != "" {
		t.Fatalf("replay after truncation changed the state (-before +after):\n%s", diff)
	}
	if got := len(r.SMTP.Messages()); got != emails {
		t.Errorf("replay sent %d more emails", got-emails)
	}
}

// TestCrashBetweenClaimAndCommit kills the receiver's transaction after its
// claim and before its commit: the test holds the orders table locked, so
// the order insert blocks inside the transaction, then terminates that
// backend. Nothing of the event may remain, and the next delivery claims
// and writes.
func TestCrashBetweenClaimAndCommit(t *testing.T) {
	r := rt.New(t)
	ctx := context.Background()
	lock, err := r.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	body := rt.Fixture(t, "checkout.session.completed.paid.json")
	done := make(chan rt.Response, 1)
	go func() { done <- r.Deliver(t, stripehook.Spec, body, nil) }()

	// Wait until the delivery's transaction has claimed and blocks on the lock.
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		_ = r.Pool.QueryRow(ctx, `
SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO orders%'`).Scan(&pid)
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("the delivery never blocked inside its transaction")
	}
	if _, err := r.Pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Status < 500 {
		t.Fatalf("a delivery whose transaction died answered %d", res.Status)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key LIKE 'evt_test_checkout_paid%'`); n != 0 {
		t.Fatalf("%d claims survived the crash: the hole", n)
	}
	deliver(t, r, body, 200)
	if o, ok := order(t, r, "cs_test_paid"); !ok || o.Status != "paid" {
		t.Fatalf("order after retry = %+v, %v", o, ok)
	}
}

// TestOutOfOrder: every permutation of a history converges to the state of
// the in-order history.
func TestOutOfOrder(t *testing.T) {
	histories := map[string][]string{
		"Invoice":       {"invoice.created.json", "invoice.finalized.json", "invoice.paid.json"},
		"AsyncCheckout": {"checkout.session.completed.unpaid.json", "checkout.session.async_payment_succeeded.json"},
		"AsyncFailed":   {"checkout.session.completed.unpaid.json", "checkout.session.async_payment_failed.json"},
		"Refund":        {"checkout.session.completed.paid.json", "charge.refunded.json"},
	}
	for name, h := range histories {
		t.Run(name, func(t *testing.T) {
			inOrder := rt.New(t)
			for _, f := range h {
				deliver(t, inOrder, rt.Fixture(t, f), 200)
			}
			want := inOrder.Snapshot(t)
			for _, perm := range permutations(h)[1:] {
				r := rt.New(t)
				for _, f := range perm {
					deliver(t, r, rt.Fixture(t, f), 200)
				}
				got := r.Snapshot(t)
				// The order row remembers which event created it; compare the rest.
				if diff := cmp.Diff(stripEventIDs(want), stripEventIDs(got)); diff != "" {
					t.Errorf("order %v diverges (-in order +this order):\n%s", perm, diff)
				}
			}
		})
	}
}

func stripEventIDs(rows []string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		f := strings.Fields(r)
		if f[0] == "order" {
			f[2] = "-"
		}
		out[i] = strings.Join(f, " ")
	}
	return out
}

func permutations(s []string) [][]string {
	if len(s) <= 1 {
		return [][]string{slices.Clone(s)}
	}
	var out [][]string
	for i := range s {
		rest := append(slices.Clone(s[:i]), s[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{s[i]}, p...))
		}
	}
	return out
}

// TestBadInput: every malformed or forged delivery is refused with 400 (or
// 413), and nothing is written.
func TestBadInput(t *testing.T) {
	r := rt.New(t)
	good := rt.Fixture(t, "checkout.session.completed.paid.json")
	now := time.Now()
	sig := stripehook.SignatureHeader(good, rt.Secret(stripehook.Spec), now)
	h := func(kv ...string) http.Header {
		hd := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i < len(kv); i += 2 {
			hd.Set(kv[i], kv[i+1])
		}
		return hd
	}
	signed := func(body []byte, ts time.Time) http.Header {
		return h("Stripe-Signature", stripehook.SignatureHeader(body, rt.Secret(stripehook.Spec), ts))
	}
	noData := []byte(`{"id":"evt_nodata","object":"event","type":"checkout.session.completed","api_version":"2023-10-16"}`)
	notJSON := []byte(`this is not json`)
	big := []byte(`{"id":"evt_big","object":"event","type":"x","data":{"object":{"pad":"` + strings.Repeat("a", 1<<20) + `"}}}`)
	cases := []struct {
		name   string
		header http.Header
		body   []byte
		status int
	}{
		{"NoHeader", h(), good, 400},
		{"GarbageHeader", h("Stripe-Signature", "garbage"), good, 400},
		{"HeaderWithSpaces", h("Stripe-Signature", strings.ReplaceAll(sig, ",", ", ")), good, 400},
		{"WrongSecret", h("Stripe-Signature", stripehook.SignatureHeader(good, "whsec_wrong", now)), good, 400},
		{"StaleTimestamp", signed(good, now.Add(-6*time.Minute)), good, 400},
		{"FutureTimestamp", signed(good, now.Add(6*time.Minute)), good, 400},
		{"TamperedBody", h("Stripe-Signature", sig), []byte(strings.Replace(string(good), "3000", "1", 1)), 400},
		{"NotJSON", signed(notJSON, now), notJSON, 400},
		{"NoData", signed(noData, now), noData, 400},
		{"WrongContentType", http.Header{"Content-Type": {"text/plain"}, "Stripe-Signature": {sig}}, good, 400},
		{"OverLimit", signed(big, now), big, 413},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := r.Post(t, "/webhooks/stripe", c.header, c.body)
			if res.Status != c.status {
				t.Fatalf("status %d, want %d (%s)", res.Status, c.status, res.Body)
			}
		})
	}
	for _, table := range []string{"processed_events", "orders"} {
		if n := r.Count(t, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%s has %d rows after rejected deliveries", table, n)
		}
	}
	t.Run("PreviousSecretStillAccepted", func(t *testing.T) {
		res := r.Post(t, "/webhooks/stripe", h("Stripe-Signature", stripehook.SignatureHeader(good, rt.OldSecret(stripehook.Spec), now)), good)
		if res.Status != 200 {
			t.Fatalf("status %d with the rotated-out secret", res.Status)
		}
	})
	t.Run("ValidSignatureAmongSeveral", func(t *testing.T) {
		other := rt.Fixture(t, "invoice.created.json")
		real := stripehook.SignatureHeader(other, rt.Secret(stripehook.Spec), now)
		_, v1, _ := strings.Cut(real, ",")
		header := fmt.Sprintf("t=%d,v1=%064x,%s,v0=deadbeef", now.Unix(), 1, v1)
		if res := r.Post(t, "/webhooks/stripe", h("Stripe-Signature", header), other); res.Status != 200 {
			t.Fatalf("status %d", res.Status)
		}
	})
}

// TestSharedSamples sends every real event captured by other projects (in
// other API versions) and checks its contract effect.
func TestSharedSamples(t *testing.T) {
	dir := rt.SharedSamples(t, "stripe")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Skipf("no samples in %s", dir)
	}
	r := rt.New(t)
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				Object struct {
					ID            string `json:"id"`
					PaymentIntent any    `json:"payment_intent"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			res := deliver(t, r, body, 200)
			var effect string
			switch ev.Type {
			case "checkout.session.completed":
				o, ok := order(t, r, ev.Data.Object.ID)
				if !ok || o.Status != "paid" {
					t.Fatalf("order = %+v, %v; want paid", o, ok)
				}
				effect = fmt.Sprintf("order %s paid, %d %s", ev.Data.Object.ID, o.AmountCents, o.Currency)
			case "invoice.paid":
				if s := invoiceStatus(t, r, ev.Data.Object.ID); s != "paid" {
					t.Fatalf("invoice %s status %q, want paid", ev.Data.Object.ID, s)
				}
				effect = fmt.Sprintf("invoice %s paid", ev.Data.Object.ID)
			case "charge.refunded":
				if n := r.Count(t, `SELECT count(*) FROM refunds WHERE provider_event_id = $1`, ev.ID); n != 1 {
					t.Fatalf("refund not recorded")
				}
				effect = fmt.Sprintf("refund of %v recorded", ev.Data.Object.PaymentIntent)
			default:
				t.Fatalf("sample of unexpected type %s", ev.Type)
			}
			var steps []string
			rows, _ := r.Pool.Query(context.Background(), `SELECT step || '=' || status FROM processed_events WHERE parent_key = $1 ORDER BY step`, ev.ID)
			for rows.Next() {
				var s string
				_ = rows.Scan(&s)
				steps = append(steps, s)
			}
			rows.Close()
			t.Logf("%s: %s %s -> %s; %s; steps %v", filepath.Base(f), ev.Type, ev.ID, strings.TrimSpace(res.Body), effect, steps)
		})
	}
}

// TestRefundRacingOrder: a refund and the checkout of its payment intent,
// delivered at the same moment, always leave the order refunded and never
// fulfilled, whichever transaction commits first.
func TestRefundRacingOrder(t *testing.T) {
	r := rt.New(t)
	const pairs = 20
	var wg sync.WaitGroup
	for i := range pairs {
		suffix := fmt.Sprintf("_race%02d", i)
		checkout := rt.Fixture(t, "checkout.session.completed.paid.json",
			"evt_test_checkout_paid", "evt_co"+suffix, "cs_test_paid", "cs"+suffix, "pi_test_paid", "pi"+suffix)
		refund := rt.Fixture(t, "charge.refunded.json",
			"evt_test_charge_refunded", "evt_re"+suffix, "ch_test_1", "ch"+suffix, "pi_test_paid", "pi"+suffix)
		for _, body := range [][]byte{checkout, refund} {
			wg.Go(func() {
				if res := r.Deliver(t, stripehook.Spec, body, nil); res.Status != 200 {
					t.Errorf("status %d: %s", res.Status, res.Body)
				}
			})
		}
	}
	wg.Wait()
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE status = 'refunded'`); n != pairs {
		t.Errorf("refunded orders = %d of %d", n, pairs)
	}
	// A fulfillment may only have been called for an order paid before its
	// refund arrived; it is then refunded, and its confirmation was true at
	// the time. What must never happen is a paid order left behind.
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE status = 'paid'`); n != 0 {
		t.Errorf("%d orders left paid after their refund", n)
	}
}
