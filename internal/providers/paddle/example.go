package paddle

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// paddleTime is how Paddle writes a time: UTC, microseconds, Z.
const paddleTime = "2006-01-02T15:04:05.000000Z07:00"

// example is Spec.Example: a transaction.completed of a new transaction
// whose checkout set custom_data.email (an order, a confirmation email
// and a fulfillment call), in the shape of testdata's, with new ids drawn
// from r.
func example(r *rand.Rand, at time.Time) webhooks.Example {
	id := func(prefix string) string { // Paddle's ids: a prefix and 26 lower-case letters and digits
		const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
		b := []byte(prefix + "01")
		for range 24 {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		return string(b)
	}
	evt, txn := id("evt_"), id("txn_")
	body := fmt.Appendf(nil, `{
  "event_id": %q,
  "event_type": "transaction.completed",
  "occurred_at": %q,
  "notification_id": %q,
  "data": {
    "id": %q,
    "status": "completed",
    "customer_id": %q,
    "custom_data": {"email": "buyer+%s@example.com"},
    "currency_code": "USD",
    "origin": "web",
    "collection_mode": "automatic",
    "details": {
      "totals": {"subtotal": "2500", "tax": "500", "discount": "0", "total": "3000", "grand_total": "3000", "currency_code": "USD"}
    },
    "payments": [{"status": "captured", "error_code": null}],
    "billed_at": %q,
    "created_at": %q,
    "updated_at": %q
  }
}`, evt, at.UTC().Format(paddleTime), id("ntf_"), txn, id("ctm_"), txn[len(txn)-8:],
		at.UTC().Format(paddleTime), at.UTC().Format(paddleTime), at.UTC().Format(paddleTime))
	return webhooks.Example{ID: evt, Body: body, Header: http.Header{}}
}
