package polar

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// polarTime is how Polar writes a time: UTC, microseconds, Z.
const polarTime = "2006-01-02T15:04:05.000000Z07:00"

// example is Spec.Example: an order.paid of a new one-time order whose
// customer has an address (an order, a confirmation email and a
// fulfillment call), in the shape of testdata's, as Polar writes it
// (compact JSON), with new ids drawn from r. Its webhook-id is a new UUID,
// as Polar's are.
func example(r *rand.Rand, at time.Time) webhooks.Example {
	uuid := func() string { // a version 4 UUID
		b := make([]byte, 16)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	}
	ts := at.UTC().Format(polarTime)
	id, customerID, productID := uuid(), uuid(), uuid()
	body := fmt.Appendf(nil, `{"type":"order.paid","timestamp":%q,"data":{"id":%q,"created_at":%q,"modified_at":%q,`+
		`"status":"paid","paid":true,"subtotal_amount":2500,"discount_amount":0,"net_amount":2500,"tax_amount":500,"total_amount":3000,`+
		`"applied_balance_amount":0,"due_amount":0,"refunded_amount":0,"refunded_tax_amount":0,"currency":"usd","billing_reason":"purchase",`+
		`"billing_name":null,"billing_address":null,"customer_id":%q,"product_id":%q,"discount_id":null,"subscription_id":null,"checkout_id":%q,`+
		`"metadata":{},"customer":{"id":%q,"email":"buyer+%s@example.com","name":null},"items":[{"label":"Pro license","amount":2500,"tax_amount":500}]}}`,
		ts, id, ts, ts, customerID, productID, uuid(), customerID, id[:8])
	return webhooks.Example{ID: uuid(), Body: body, Header: http.Header{}}
}
