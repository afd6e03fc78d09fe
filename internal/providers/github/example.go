package github

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// exampleHookID is the X-GitHub-Hook-ID of Spec.Example's deliveries: one
// hook.
const exampleHookID = "4242"

// example is Spec.Example: a marketplace_purchase purchased by a new
// organization (an order, a welcome email and a fulfillment call), with
// a new delivery GUID, both drawn from r.
func example(r *rand.Rand, at time.Time) webhooks.Example {
	account := r.Int64N(1<<40) + 1
	var b [16]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40 // a version 4 UUID, as GitHub's GUIDs are
	b[8] = b[8]&0x3f | 0x80
	guid := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	body := fmt.Appendf(nil, `{
  "action": "purchased",
  "effective_date": %q,
  "sender": {"login": "example-admin", "id": 501, "type": "User"},
  "marketplace_purchase": {
    "account": {
      "type": "Organization",
      "id": %d,
      "node_id": "O_ex%x",
      "login": "example-%d",
      "organization_billing_email": "billing@example.com"
    },
    "billing_cycle": "monthly",
    "unit_count": 1,
    "on_free_trial": false,
    "free_trial_ends_on": null,
    "next_billing_date": null,
    "plan": {
      "id": 7,
      "name": "Pro",
      "description": "Pro plan",
      "monthly_price_in_cents": 1500,
      "yearly_price_in_cents": 15000,
      "price_model": "FLAT_RATE",
      "has_free_trial": false,
      "unit_name": null,
      "bullets": ["Everything"]
    }
  }
}`, at.UTC().Format(time.RFC3339), account, account, account)
	h := http.Header{}
	h.Set(HeaderEvent, "marketplace_purchase")
	h.Set(HeaderDelivery, guid)
	h.Set(HeaderHookID, exampleHookID)
	return webhooks.Example{ID: guid, Body: body, Header: h}
}
