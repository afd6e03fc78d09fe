package stripe

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// example is Spec.Example: a paid checkout.session.completed of a new
// Checkout Session (an order, a confirmation email and a fulfillment
// call), in the shape of testdata/checkout.session.completed.paid.json,
// with new ids drawn from r. cmd/loadgen has realistic, larger events of
// its own; this one is what any tool gets from the Spec alone.
func example(r *rand.Rand, at time.Time) webhooks.Example {
	id := func(prefix string, n int) string {
		const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		b := []byte(prefix)
		for range n {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		return string(b)
	}
	evt, cs, pi := id("evt_1", 23), id("cs_test_a1", 56), id("pi_3", 23)
	email := fmt.Sprintf("buyer+%s@example.com", id("", 8))
	body := fmt.Appendf(nil, `{
  "id": %q,
  "object": "event",
  "api_version": %q,
  "created": %d,
  "data": {
    "object": {
      "id": %q,
      "object": "checkout.session",
      "mode": "payment",
      "payment_status": "paid",
      "status": "complete",
      "amount_total": 3000,
      "currency": "usd",
      "payment_intent": %q,
      "customer_details": {
        "email": %q,
        "name": "Test Buyer"
      },
      "customer_email": null
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {
    "id": null,
    "idempotency_key": null
  },
  "type": "checkout.session.completed"
}`, evt, stripego.APIVersion, at.Unix(), cs, pi, email)
	return webhooks.Example{ID: evt, Body: body, Header: http.Header{}}
}
