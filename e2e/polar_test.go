package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/providers/polar"
	swh "github.com/paywebhooks/receiver/internal/standardwebhooks"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// Polar's secrets in this file: one made since September 2026 (whsec_ and
// the base64 of 32 bytes, keyed with the decoded bytes) and a legacy one
// (keyed with the bytes of the whole string), configured together as
// while one replaces the other.
const (
	polarSecret       = "whsec_ZTJlIHBvbGFyIHNlY3JldCwgMzIgYnl0ZXMgbG9uZy4="
	polarLegacySecret = "polar_whs_e2eLegacy0123456789abcdefghijklmnopq1a2B3c"
)

// polarOrderPaid is an order.paid as Polar writes it (compact JSON).
func polarOrderPaid(orderID, email string, total int) []byte {
	return mustJSON(map[string]any{
		"type": "order.paid", "timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
		"data": map[string]any{
			"id": orderID, "status": "paid", "paid": true, "subtotal_amount": total - total/6, "tax_amount": total / 6,
			"net_amount": total - total/6, "total_amount": total, "refunded_amount": 0, "refunded_tax_amount": 0,
			"currency": "usd", "billing_reason": "purchase", "customer_id": "5b0e7c1a-2d3f-4e5a-8b6c-7d8e9f0a1b2c",
			"subscription_id": nil, "customer": map[string]any{"id": "5b0e7c1a-2d3f-4e5a-8b6c-7d8e9f0a1b2c", "email": email},
		},
	})
}

// polarDelivery is a delivery of body under webhook-id id, signed anew at
// every attempt with secret as Polar keys it, as Polar signs each retry.
func polarDelivery(id string, body []byte, secret string) delivery {
	return delivery{ID: id, Key: id, Path: "/webhooks/polar", Body: body, header: func() http.Header {
		return polar.Spec.Sign(webhooks.SignInput{Body: body, Secret: secret, At: time.Now(), ID: id})
	}}
}

// TestPolarOrderPaid: a Polar order.paid through the built binary makes the
// order, the confirmation email and the fulfillment call once; a retry
// (the same webhook-id, signed anew) is a duplicate; the same event sent
// to a second endpoint (another webhook-id, signed with the legacy secret
// as Polar keys it) is acknowledged and does nothing more; an unsigned
// copy is refused and writes nothing.
func TestPolarOrderPaid(t *testing.T) {
	w := newWorld(t)
	p := startReceiver(t, "receiver", w.env("POLAR_WEBHOOK_SECRET", polarSecret+","+polarLegacySecret))
	const orderID = "a3f1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
	body := polarOrderPaid(orderID, "polar-buyer@example.com", 4900)
	d := polarDelivery("0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e", body, polarSecret)
	d.Object = "order:polar:" + orderID

	for i, want := range []string{`"processed"`, `"duplicate"`} {
		res := mustPost(t, p.URL, d, 200)
		if !strings.Contains(res.Body, want) {
			t.Fatalf("delivery %d: %s, want %s", i+1, res.Body, want)
		}
	}
	w.waitSettled(t, 30*time.Second)
	var status, email string
	var amount int64
	if err := w.DB.QueryRow(context.Background(), `
SELECT status, amount_cents, customer_email FROM orders WHERE source = 'polar' AND external_id = $1 AND provider_event_id = $2`,
		orderID, d.Key).Scan(&status, &amount, &email); err != nil || status != "paid" || amount != 4900 || email != "polar-buyer@example.com" {
		t.Fatalf("order: %s %d %s, %v; want paid 4900 polar-buyer@example.com", status, amount, email, err)
	}
	if n := w.mailsByID()[messageID(d.Ref(polar.StepConfirmationEmail))]; n != 1 || len(w.SMTP.Messages()) != 1 {
		t.Errorf("confirmation emails = %d (%d in all), want 1", n, len(w.SMTP.Messages()))
	}
	if n := w.fulfillmentsByKey()[idemKey(d.Ref(polar.StepFulfillment))]; n != 1 || len(w.API.Requests()) != 1 {
		t.Fatalf("fulfillment calls = %d (%d in all), want 1", n, len(w.API.Requests()))
	}
	if c := w.API.Requests()[0].Body; c.Source != "polar" || c.ExternalID != orderID || c.AmountCents != 4900 || c.Currency != "usd" {
		t.Errorf("fulfillment call %+v", c)
	}

	// The same event to a second endpoint: Polar gives it another
	// webhook-id; the order id makes it a no-op.
	second := polarDelivery("6c7d8e9f-0a1b-4c2d-8e3f-4a5b6c7d8e9f", body, polarLegacySecret)
	if res := mustPost(t, p.URL, second, 200); !strings.Contains(res.Body, `"processed"`) {
		t.Fatalf("the second endpoint's copy: %s, want processed (a new webhook-id) changing nothing", res.Body)
	}
	w.waitSettled(t, 30*time.Second)
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE source = 'polar'`); n != 1 {
		t.Errorf("orders = %d after the second endpoint's copy, want 1", n)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'step' AND starts_with(event_key, $1)`, second.Key+"/"); n != 0 {
		t.Errorf("the second endpoint's copy planned %d steps, want none", n)
	}
	if len(w.SMTP.Messages()) != 1 || len(w.API.Requests()) != 1 {
		t.Errorf("after the copy: %d emails and %d fulfillment calls, want 1 and 1", len(w.SMTP.Messages()), len(w.API.Requests()))
	}

	// Refused, and nothing written: a copy signed with a secret the
	// receiver does not hold, and one whose webhook-id was changed.
	forged := polarDelivery("7d8e9f0a-1b2c-4d3e-9f4a-5b6c7d8e9f0a", polarOrderPaid("forged-order", "x@example.com", 100), "whsec_not_the_receivers_secret_0123")
	if res := mustPost(t, p.URL, forged, 400); !strings.Contains(res.Body, "no_valid_signature") {
		t.Errorf("a forged delivery: %s", res.Body)
	}
	h := d.Header()
	h.Set(swh.HeaderID, "8e9f0a1b-2c3d-4e4f-8a5b-6c7d8e9f0a1b")
	if res, err := postRaw(context.Background(), p.URL+d.Path, h, body); err != nil || res.Status != 400 {
		t.Errorf("a delivery whose webhook-id was changed: %+v, %v; want 400", res, err)
	}
	if n := count(t, w.DB, `SELECT count(*) FROM processed_events WHERE kind = 'event' AND source = 'polar'`); n != 2 {
		t.Errorf("%d Polar events claimed, want 2 (the delivery and the second endpoint's copy)", n)
	}
	if code := p.Term(t, 30*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("order %s: 1 order, 1 email, 1 fulfillment call; a retry duplicate, a second endpoint's copy a no-op, 2 forgeries refused", orderID)
}
