package stripe_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

const benchSecret = "whsec_bench_0123456789abcdef"

func benchFixture(b *testing.B, name string) []byte {
	b.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkVerify is the whole of Provider.Verify on a real signed
// delivery: header parsing, HMAC-SHA256 over the body, the timestamp window
// and the envelope decode.
func BenchmarkVerify(b *testing.B) {
	for _, tc := range []struct {
		name    string
		fixture string
		secrets []string
		age     time.Duration // of the event when it is signed
	}{
		{"invoice", "invoice.created.json", []string{benchSecret}, 0},
		// The size and shape of what Stripe sends: ~5 KB with line items.
		{"invoice/5KB", "", []string{benchSecret}, 0},
		// A retry or a resend (signed an hour after the event was
		// created): its data.object is validated, not decoded.
		{"invoice/5KB/resent", "", []string{benchSecret}, time.Hour},
		{"checkout", "checkout.session.completed.paid.json", []string{benchSecret}, 0},
		// While a secret is rolled the new one may come second.
		{"checkout/second-of-two-secrets", "checkout.session.completed.paid.json", []string{"whsec_old_0123456789", benchSecret}, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			now := time.Now()
			body := invoiceEvent(1, now.Add(-tc.age).Unix())
			if tc.fixture != "" {
				body = benchFixture(b, tc.fixture)
			}
			h := http.Header{}
			h.Set("Content-Type", "application/json; charset=utf-8")
			h.Set("Stripe-Signature", webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
				Payload: body, Secret: benchSecret, Timestamp: now,
			}).Header)
			p := stripe.New(tc.secrets)
			if _, err := p.Verify(h, body, now); err != nil {
				b.Fatalf("fixture does not verify: %v", err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Verify(h, body, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyRejected is a delivery signed with another secret: what an
// attacker's or a misconfigured sender's request costs.
func BenchmarkVerifyRejected(b *testing.B) {
	body := benchFixture(b, "invoice.created.json")
	now := time.Now()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Stripe-Signature", webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: body, Secret: "whsec_someone_else", Timestamp: now,
	}).Header)
	p := stripe.New([]string{benchSecret})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Verify(h, body, now); err == nil {
			b.Fatal("verified with the wrong secret")
		}
	}
}

// BenchmarkDecode is the envelope decode alone, as replays and the
// redriver run it on stored bodies.
func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"invoice.created.json", "checkout.session.completed.paid.json", "charge.refunded.json"} {
		b.Run(name, func(b *testing.B) {
			body := benchFixture(b, name)
			if _, err := stripe.Decode(body); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := stripe.Decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRepeatedName is the processor's check that no object of a body
// repeats a member name (webhooks.RepeatedName), which every event it
// plans passes, on the bodies of BenchmarkDecode and the ~5.7 KB invoice
// of BenchmarkDeliver.
func BenchmarkRepeatedName(b *testing.B) {
	bodies := map[string][]byte{"invoice/5KB": invoiceEvent(1, time.Now().Unix())}
	for _, name := range []string{"invoice.created.json", "checkout.session.completed.paid.json"} {
		bodies[name] = benchFixture(b, name)
	}
	for _, name := range []string{"invoice/5KB", "invoice.created.json", "checkout.session.completed.paid.json"} {
		body := bodies[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := webhooks.RepeatedName(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// invoiceEvent is a new invoice.created event with fresh ids, created at
// the given Unix second, the size and shape of what Stripe sends (an
// invoice with its line items, ~5 KB).
func invoiceEvent(n, created int64) []byte {
	b := fmt.Appendf(nil, `{"id": "evt_bench_%d_%d", "object": "event", "api_version": "2023-10-16", "created": %d,
"data": {"object": {"id": "in_bench_%d_%d", "object": "invoice", "account_country": "US", "account_name": "Bench Shop",
"amount_due": 2000, "amount_paid": 0, "amount_remaining": 2000, "attempt_count": 0, "attempted": false,
"auto_advance": true, "billing_reason": "subscription_cycle", "collection_method": "charge_automatically",
"created": 1764460800, "currency": "usd", "customer": "cus_bench_%d", "customer_email": "payer@example.com",
"customer_name": "Pat Payer", "customer_address": {"city": "Springfield", "country": "US", "line1": "742 Evergreen Terrace",
"line2": null, "postal_code": "49007", "state": "OR"}, "customer_tax_exempt": "none", "default_payment_method": null,
"description": null, "discount": null, "discounts": [], "due_date": null, "ending_balance": 0, "hosted_invoice_url": null,
"invoice_pdf": null, "lines": {"object": "list", "data": [`, benchRun, n, created, benchRun, n, n)
	for i := range 6 {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"id": "il_bench_%d_%d", "object": "line_item", "amount": 333, "currency": "usd",
"description": "1 × Bench plan, line %d (at $3.33 / month)", "discount_amounts": [], "discountable": true, "discounts": [],
"livemode": false, "metadata": {}, "period": {"end": 1767139200, "start": 1764460800}, "plan": {"id": "price_bench_%d",
"object": "plan", "active": true, "amount": 333, "currency": "usd", "interval": "month", "interval_count": 1,
"product": "prod_bench"}, "proration": false, "quantity": 1, "subscription": "sub_bench", "type": "subscription"}`, n, i, i, i)
	}
	return fmt.Appendf(b, `], "has_more": false, "total_count": 6, "url": "/v1/invoices/in_bench_%d/lines"},
"livemode": false, "metadata": {}, "next_payment_attempt": 1764464400, "number": "BENCH-%d", "paid": false,
"period_end": 1764460800, "period_start": 1761868800, "status": "draft", "subscription": "sub_bench", "subtotal": 2000,
"tax": null, "total": 2000, "webhooks_delivered_at": null}}, "livemode": false, "pending_webhooks": 1,
"request": {"id": null, "idempotency_key": null}, "type": "invoice.created"}`, n, n)
}

var benchRun = time.Now().UnixNano()

// BenchmarkDeliver runs whole deliveries through the receiver's HTTP
// handler (echo, verification, the claim transaction, the response) on the
// test database, which runs without fsync: what the Go side costs per
// delivery. Profile it with
//
//	go test -run '^$' -bench Deliver -cpuprofile cpu.out ./internal/providers/stripe
func BenchmarkDeliver(b *testing.B) {
	r := rt.New(b, providers.List())
	h := r.Server.Handler()
	post := func(body []byte) int {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", bytes.NewReader(body))
		req.Header = rt.Signed(stripe.Spec, body, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	var seq atomic.Int64
	b.Run("new-invoice", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if code := post(invoiceEvent(seq.Add(1), time.Now().Unix())); code != http.StatusOK {
					b.Errorf("status %d", code)
					return
				}
			}
		})
	})
	// A replay of a finished event, sent as Stripe retries it (signed anew,
	// an hour after the event was created: looked up first), and as a
	// duplicate sent right away (claimed like a new event, found a copy).
	for _, replay := range []struct {
		name string
		age  time.Duration
	}{{"replay/resent", time.Hour}, {"replay/copy", 0}} {
		b.Run(replay.name, func(b *testing.B) {
			const events = 200
			bodies := make([][]byte, events)
			for i := range bodies {
				bodies[i] = invoiceEvent(seq.Add(1), time.Now().Add(-replay.age).Unix())
				if code := post(bodies[i]); code != http.StatusOK {
					b.Fatalf("status %d", code)
				}
			}
			var i atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if code := post(bodies[i.Add(1)%events]); code != http.StatusOK {
						b.Errorf("status %d", code)
						return
					}
				}
			})
		})
	}
}
