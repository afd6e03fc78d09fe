package sendername_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	cf "github.com/paywebhooks/receiver/internal/providers/conformance"
	"github.com/paywebhooks/receiver/internal/providers/sendername"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	swh "github.com/paywebhooks/receiver/internal/standardwebhooks"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Names of the testdata files, as the suite's events.
const (
	paid    = "order.paid.json"    // order ord_2b7f1e0a5c93, 30.00 USD, buyer@example.com
	created = "order.created.json" // a type the receiver does not act on
)

const (
	orderPaid = "order ord_2b7f1e0a5c93 paid 3000 usd buyer@example.com"
	call      = "sendername ord_2b7f1e0a5c93 3000 usd buyer@example.com"
)

var (
	confirmation = cf.Mail{To: "buyer@example.com", Contains: "is confirmed"}
	paidSteps    = []string{"email.confirmation=done", "fulfillment=done"}
)

// webhookID is the webhook-id of a named delivery, the same for every
// delivery of the name: two names of one body are one event sent as two
// messages (to two endpoints).
func webhookID(name string, _ []byte) string {
	s := sha256.Sum256([]byte("sendername webhook " + name))
	return "msg_" + hex.EncodeToString(s[:12])
}

var suite = cf.Suite{
	Spec:      sendername.Spec,
	Providers: providers.List(),
	ID:        webhookID,
	View: []string{
		`SELECT format('order %s %s %s %s %s', external_id, status, amount_cents, currency, coalesce(customer_email, '-')) FROM orders ORDER BY 1`,
	},
	Events: map[string]cf.Event{
		"order.paid.endpoint2":  {Fixture: paid},
		"order.paid.no_address": {Fixture: paid, Replace: []string{`"email": "buyer@example.com"`, `"email": null`}},
		"order.paid.bad_amount": {Fixture: paid, Replace: []string{`"amount": 3000`, `"amount": "30.00"`}},
	},
	VerifyEvent: paid,
	Verify: []cf.Request{
		{Name: "ErrStaleTimestamp", Edit: resign(-6 * time.Minute), Reason: "timestamp_too_old"},
		{Name: "ErrNoWebhookID", Edit: func(h http.Header, _ []byte) { h.Del(swh.HeaderID) }, Reason: "invalid_header"},
		{Name: "ErrWebhookIDNotKeySafe", Edit: func(h http.Header, b []byte) { sign(h, "msg_1/email.confirmation", time.Now(), b) },
			Reason: "invalid_webhook_id"},
		{Name: "ErrNotAnEvent", Body: []byte(`{"id":"ord_1","status":"paid"}`), Reason: "not_an_event"},
		{Name: "SvixHeaderNames", Status: 200, Edit: func(h http.Header, _ []byte) {
			for _, n := range [][2]string{{swh.HeaderID, swh.SvixHeaderID}, {swh.HeaderTimestamp, swh.SvixHeaderTimestamp},
				{swh.HeaderSignature, swh.SvixHeaderSignature}} {
				h[n[1]] = h[n[0]]
				delete(h, n[0])
			}
		}},
	},
	Cases: []cf.Case{
		{Name: "OrderPaid", Deliver: paid, Want: []string{orderPaid}, Steps: paidSteps,
			Emails: []cf.Mail{confirmation}, Calls: []string{call}},
		{Name: "OrderPaidWithoutAddress", Deliver: "order.paid.no_address", Want: []string{strings.Replace(orderPaid, "buyer@example.com", "-", 1)},
			Steps: []string{"fulfillment=done"}, Calls: []string{strings.Replace(call, "buyer@example.com", "-", 1)}},
		// One event, two endpoints: two webhook-ids, one order.
		{Name: "OrderPaidFromASecondEndpointIsANoOp", Given: []string{paid}, Deliver: "order.paid.endpoint2", Want: []string{orderPaid},
			Emails: []cf.Mail{confirmation}, Calls: []string{call}},
		{Name: "UnhandledType", Deliver: created, Outcome: webhooks.OutcomeIgnored},
		{Name: "UnreadableAmountParked", Deliver: "order.paid.bad_amount", Outcome: webhooks.OutcomeParked},
	},
	History: []string{paid, "order.paid.endpoint2", created},
}

func TestConformance(t *testing.T) { cf.Run(t, suite) }

// sign signs the delivery as id at at, with the test secret's key.
func sign(h http.Header, id string, at time.Time, body []byte) {
	key, err := swh.ParseSecret(rt.Secret(sendername.Spec))
	if err != nil {
		panic(err)
	}
	for k, v := range swh.Headers(id, at, body, key) {
		h[k] = v
	}
}

// resign signs the delivery again, under its webhook-id, d from now.
func resign(d time.Duration) func(http.Header, []byte) {
	return func(h http.Header, b []byte) { sign(h, h.Get(swh.HeaderID), time.Now().Add(d), b) }
}
