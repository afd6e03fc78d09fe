package sendername

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// example is Spec.Example: an order.paid of a new order whose customer has
// an address (an order, a confirmation and a fulfillment call), in the
// shape of testdata/order.paid.json, with new ids drawn from r, for the
// conformance suite and cmd/loadgen.
func example(r *rand.Rand, at time.Time) webhooks.Example {
	id := func(prefix string) string { return fmt.Sprintf("%s_%016x%08x", prefix, r.Uint64(), r.Uint32()) }
	order := id("ord")
	body := fmt.Appendf(nil, `{"type":"order.paid","timestamp":%q,"data":{"id":%q,"amount":3000,"currency":"usd",`+
		`"customer":{"email":"buyer+%s@example.com"}}}`, at.UTC().Format(time.RFC3339), order, order[4:12])
	return webhooks.Example{ID: id("msg"), Body: body, Header: http.Header{}}
}
