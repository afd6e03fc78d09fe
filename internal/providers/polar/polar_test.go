package polar_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/config"
	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	cf "github.com/paywebhooks/receiver/internal/providers/conformance"
	"github.com/paywebhooks/receiver/internal/providers/polar"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	swh "github.com/paywebhooks/receiver/internal/standardwebhooks"
	"github.com/paywebhooks/receiver/internal/standardwebhooks/standardwebhookstest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The secrets of every receiver of the suite, beside the test secret and
// its predecessor (rt.Secret, rt.OldSecret: whsec_ and text that is no
// base64, keyed as Polar keys a legacy secret): one of each form Polar
// makes.
const (
	// newSecret is a secret as Polar makes them since September 2026:
	// whsec_ and the base64 of 32 bytes, keyed with the decoded bytes.
	newSecret = "whsec_cG9sYXIgY29uZm9ybWFuY2U6IGEgbmV3IHNlY3JldCE="
	// legacySecret is one of June to September 2026: whsec_, 37 letters
	// and digits and a base-62 CRC-32 (Polar's generate_token), keyed
	// with the UTF-8 bytes of the whole string.
	legacySecret = "whsec_Zq3vN8pLr2XkT6wYb9HcJd4MfGs7RtUe1AaVo0iEeyf"
	// olderSecret is one from before: polar_whs_ and the same.
	olderSecret = "polar_whs_Kx5mW2nQp8RbT4vYc7LdH3jFg9SeU6aZo1NiE2aIadG"
)

// Names of the testdata files, as the suite's events.
const (
	paid     = "order.paid.json"     // order A, 25.00 + 5.00 tax, buyer@example.com
	refunded = "order.refunded.json" // order A refunded in full: 25.00 + 5.00 tax
	checkout = "checkout.created.json"

	subCreated    = "subscription.created.json"    // incomplete, modified_at null
	subActive     = "subscription.active.json"     // active
	subCanceled   = "subscription.canceled.json"   // active, cancel at period end
	subUpdated    = "subscription.updated.json"    // the same change as subCanceled, the same modified_at
	subUncanceled = "subscription.uncanceled.json" // active again
	subRevoked    = "subscription.revoked.json"    // canceled: access ended

	pastDue       = "subscription.past_due"  // past_due, the period from 2026-04-30
	refundPartial = "order.refunded.partial" // 10.00 + 2.00 tax of order A
	refundNoTax   = "order.refunded.no_tax"  // 25.00 of order A, its tax not refunded
)

const (
	orderA = "0c6f8b8e-3f1a-4d52-9b7e-6c1d2a9f4e01"
	subID  = "e3a1c7d2-4b5f-4a6e-9d8c-2b7f1e0a5c93"

	orderPaid     = "order " + orderA + " paid 3000 usd buyer@example.com"
	orderRefunded = "order " + orderA + " refunded 3000 usd buyer@example.com"
	orderPartial  = "order " + orderA + " partially_refunded 3000 usd buyer@example.com"
	refundAll     = "refund " + orderA + " 3000 usd"
	refundPart    = "refund " + orderA + " 1200 usd"
	refundedAll   = "refunded " + orderA + " 3000 of 3000"
	refundedPart  = "refunded " + orderA + " 1200 of 3000"
	callA         = "polar " + orderA + " 3000 usd buyer@example.com"

	sub              = "subscription " + subID + " "
	customer         = " customer=9b2d4c1e-7a3f-4e8b-8c5d-1f6e2a7b3c04 period_end=2026-04-30 "
	subIncomplete    = sub + "incomplete" + customer + "cancel_at_period_end=false at=2026-03-30T16:13:53.918004Z"
	subActiveRow     = sub + "active" + customer + "cancel_at_period_end=false at=2026-03-30T16:13:55.120331Z"
	subCancelingRow  = sub + "active" + customer + "cancel_at_period_end=true at=2026-04-10T09:00:00.000001Z"
	subUncanceledRow = sub + "active" + customer + "cancel_at_period_end=false at=2026-04-12T14:02:10.870002Z"
	subRevokedRow    = sub + "canceled" + customer + "cancel_at_period_end=true at=2026-04-30T16:13:54.999950Z"
	subPastDueRow    = sub + "past_due customer=9b2d4c1e-7a3f-4e8b-8c5d-1f6e2a7b3c04 period_end=2026-05-30 cancel_at_period_end=false at=2026-04-30T16:14:02.000001Z"
	subActiveAgain   = sub + "active customer=9b2d4c1e-7a3f-4e8b-8c5d-1f6e2a7b3c04 period_end=2026-05-30 cancel_at_period_end=false at=2026-05-01T08:00:00.000001Z"
)

var (
	confirmation = cf.Mail{To: "buyer@example.com", Contains: "is confirmed"}
	refundMail   = cf.Mail{To: "buyer@example.com", Contains: "Refunded so far: 30.00 USD of 30.00 USD"}
	partialMail  = cf.Mail{To: "buyer@example.com", Contains: "Refunded so far: 12.00 USD of 30.00 USD"}
	paidSteps    = []string{"email.confirmation=done", "fulfillment=done"}
	pastDueMail  = cf.Mail{To: "buyer@example.com", Contains: "The payment for your subscription did not go through"}
)

// pastDueReplace makes subscription.active.json the subscription past due
// in its next period, in an event of type typ modified at modified.
func pastDueReplace(typ, modified string) []string {
	return []string{`"type": "subscription.active"`, `"type": "` + typ + `"`, `"status": "active"`, `"status": "past_due"`,
		"2026-03-30T16:13:55.120331Z", modified,
		`"current_period_start": "2026-03-30T16:13:53.918004Z"`, `"current_period_start": "2026-04-30T16:13:53.918004Z"`,
		`"current_period_end": "2026-04-30T16:13:53.918004Z"`, `"current_period_end": "2026-05-30T16:13:53.918004Z"`}
}

// webhookID is the webhook-id of a named delivery: a UUID, as Polar's
// are, the same for every delivery of the name. Two names of one body
// are one event sent to two endpoints.
func webhookID(name string, _ []byte) string {
	s := sha256.Sum256([]byte("polar webhook event " + name))
	s[6], s[8] = s[6]&0x0f|0x40, s[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

var suite = cf.Suite{
	Spec:      polar.Spec,
	Providers: providers.List(),
	Options: []rt.Option{rt.Env(polar.Spec.Secret.Name,
		strings.Join([]string{rt.Secret(polar.Spec), rt.OldSecret(polar.Spec), newSecret, legacySecret, olderSecret}, ","))},
	ID: webhookID,
	View: []string{
		`SELECT format('order %s %s %s %s %s', external_id, status, amount_cents, currency, coalesce(customer_email, '-')) FROM orders ORDER BY 1`,
		`SELECT format('refund %s %s %s', payment_intent_id, amount_refunded, currency) FROM refunds ORDER BY 1`,
		`SELECT format('refunded %s %s of %s', external_id, amount_refunded_cents, amount_cents) FROM orders WHERE amount_refunded_cents > 0 ORDER BY 1`,
		subscriptionsView,
	},
	Events: map[string]cf.Event{
		// The same event, sent to a second endpoint: another webhook-id.
		"order.paid.endpoint2": {Fixture: paid},
		// The renewal of the next period failed: past due, Polar retrying.
		pastDue: {Fixture: subActive, Replace: pastDueReplace("subscription.past_due", "2026-04-30T16:14:02.000001Z")},
		// The same period past due, as the subscription.updated sent with it.
		"subscription.updated.past_due": {Fixture: subActive, Replace: pastDueReplace("subscription.updated", "2026-04-30T16:14:02.000001Z")},
		// Paid again, after its past due.
		"subscription.active.again": {Fixture: subActive, Replace: []string{"2026-03-30T16:13:55.120331Z", "2026-05-01T08:00:00.000001Z",
			`"current_period_start": "2026-03-30T16:13:53.918004Z"`, `"current_period_start": "2026-04-30T16:13:53.918004Z"`,
			`"current_period_end": "2026-04-30T16:13:53.918004Z"`, `"current_period_end": "2026-05-30T16:13:53.918004Z"`}},
		"order.refunded.endpoint2":  {Fixture: refunded},
		"order.paid.no_address":     {Fixture: paid, Replace: []string{`"email": "buyer@example.com"`, `"email": null`}},
		"order.refunded.no_address": {Fixture: refunded, Replace: []string{`"email": "buyer@example.com"`, `"email": null`}},
		refundPartial: {Fixture: refunded, Replace: []string{`"status": "refunded"`, `"status": "partially_refunded"`,
			`"refunded_amount": 2500`, `"refunded_amount": 1000`, `"refunded_tax_amount": 500`, `"refunded_tax_amount": 200`,
			"2026-04-02T11:20:07.430112Z", "2026-04-01T08:00:00.000000Z"}},
		refundNoTax: {Fixture: refunded, Replace: []string{`"status": "refunded"`, `"status": "partially_refunded"`,
			`"refunded_tax_amount": 500`, `"refunded_tax_amount": 0`}},
		"order.paid.bad_amount":  {Fixture: paid, Replace: []string{`"total_amount": 3000`, `"total_amount": "30.00"`}},
		"order.paid.no_amount":   {Fixture: paid, Replace: []string{`"total_amount": 3000,`, ``}},
		"order.paid.no_customer": {Fixture: paid, Replace: []string{`"customer": {`, `"customer_was": {`}},
		"subscription.no_time": {Fixture: subActive, Replace: []string{`"modified_at": "2026-03-30T16:13:55.120331Z"`, `"modified_at": null`,
			`"created_at": "2026-03-30T16:13:53.918004Z"`, `"created_at": "yesterday"`}},
		// subCreated's .updated, sent with it: no modified_at either.
		"subscription.updated.at_creation": {Fixture: subCreated, Replace: []string{`"subscription.created"`, `"subscription.updated"`}},
		// A past_due and an active 1 µs apart, past_due the newer.
		"subscription.past_due.later": {Fixture: subActive, Replace: []string{`"subscription.active"`, `"subscription.past_due"`,
			`"status": "active"`, `"status": "past_due"`, "2026-03-30T16:13:55.120331Z", "2026-04-30T16:14:00.000002Z"}},
		"subscription.active.earlier": {Fixture: subActive, Replace: []string{"2026-03-30T16:13:55.120331Z", "2026-04-30T16:14:00.000001Z"}},
		// The revoked subscription's updated, sent with it: the same state.
		"subscription.updated.ended": {Fixture: subRevoked, Replace: []string{`"subscription.revoked"`, `"subscription.updated"`}},
		// An active of the revoked's very modified_at.
		"subscription.active.same_time": {Fixture: subActive, Replace: []string{"2026-03-30T16:13:55.120331Z", "2026-04-30T16:13:54.999950Z"}},
		// Reinstated by Polar's staff after it was revoked: newer, active.
		"subscription.reinstated": {Fixture: subActive, Replace: []string{`"subscription.active"`, `"subscription.updated"`,
			"2026-03-30T16:13:55.120331Z", "2026-05-02T10:00:00.000000Z"}},
	},
	VerifyEvent: paid,
	Verify: []cf.Request{
		{Name: "ErrStaleTimestamp", Edit: resign(-6*time.Minute, rt.Secret(polar.Spec)), Reason: "timestamp_too_old"},
		{Name: "ErrFutureTimestamp", Edit: resign(6*time.Minute, rt.Secret(polar.Spec)), Reason: "timestamp_in_future"},
		{Name: "ErrNoWebhookID", Edit: del(swh.HeaderID), Reason: "invalid_header"},
		{Name: "ErrNoTimestamp", Edit: del(swh.HeaderTimestamp), Reason: "invalid_header"},
		{Name: "ErrTimestampNotDigits", Edit: edit(swh.HeaderTimestamp, func(s string) string { return s + ".0" }), Reason: "invalid_header"},
		{Name: "ErrNoV1", Edit: edit(swh.HeaderSignature, func(s string) string { return strings.Replace(s, "v1,", "v1a,", 1) }), Reason: "invalid_header"},
		{Name: "ErrOtherWebhookID", Edit: edit(swh.HeaderID, func(string) string { return webhookID("another", nil) }), Reason: "no_valid_signature"},
		{Name: "ErrOtherTimestamp", Edit: edit(swh.HeaderTimestamp, func(s string) string { return s[:len(s)-1] + string('0'+(s[len(s)-1]-'0'+1)%10) }),
			Reason: "no_valid_signature"},
		{Name: "ErrHeaderNamesDisagree", Edit: func(h http.Header, b []byte) {
			other := swh.Headers(webhookID("another", nil), time.Now(), b, polar.Key(rt.Secret(polar.Spec)))
			h.Set(swh.SvixHeaderID, other.Get(swh.HeaderID))
			h.Set(swh.SvixHeaderTimestamp, other.Get(swh.HeaderTimestamp))
			h.Set(swh.SvixHeaderSignature, other.Get(swh.HeaderSignature))
		}, Reason: "invalid_header"},
		{Name: "ErrWebhookIDNotKeySafe", Edit: func(h http.Header, b []byte) {
			for k, v := range swh.Headers("msg_1/email.confirmation", time.Now(), b, polar.Key(rt.Secret(polar.Spec))) {
				h[k] = v
			}
		}, Reason: "invalid_webhook_id"},
		{Name: "ErrNotJSON", Body: []byte(`this is not json`), Reason: "malformed_json"},
		{Name: "ErrNotAnEvent", Body: []byte(`{"id":"0c6f8b8e","status":"paid"}`), Reason: "not_an_event"},
		{Name: "ErrNoData", Body: []byte(`{"type":"order.paid","timestamp":"2026-03-30T16:13:53.918004Z","data":null}`), Reason: "missing_data"},
		{Name: "ErrOverLimit", Body: []byte(`{"type":"order.paid","data":{"pad":"` + strings.Repeat("a", 1<<20) + `"}}`),
			Status: 413, Reason: "body_too_large"},
		// Both ways Polar keys a secret, for every form it makes.
		{Name: "NewSecretDecodedKey", Status: 200, Edit: signedWith(time.Now(), decoded(newSecret))},
		{Name: "NewSecretWholeString", Status: 200, Edit: signedWith(time.Now(), []byte(newSecret))},
		{Name: "LegacyWhsecSecret", Status: 200, Edit: signedWith(time.Now(), []byte(legacySecret))},
		{Name: "OlderPolarWhsSecret", Status: 200, Edit: signedWith(time.Now(), []byte(olderSecret))},
		{Name: "SvixHeaderNames", Status: 200, Edit: func(h http.Header, _ []byte) {
			for _, n := range [][2]string{{swh.HeaderID, swh.SvixHeaderID}, {swh.HeaderTimestamp, swh.SvixHeaderTimestamp},
				{swh.HeaderSignature, swh.SvixHeaderSignature}} {
				h[n[1]] = h[n[0]]
				delete(h, n[0])
			}
		}},
		{Name: "BothHeaderNamesAgreeing", Status: 200, Edit: func(h http.Header, _ []byte) {
			h[swh.SvixHeaderID], h[swh.SvixHeaderTimestamp], h[swh.SvixHeaderSignature] = h[swh.HeaderID], h[swh.HeaderTimestamp], h[swh.HeaderSignature]
		}},
		{Name: "ValidSignatureAmongSeveral", Status: 200, Edit: edit(swh.HeaderSignature, func(s string) string {
			return "v1," + strings.Repeat("A", 43) + "= v1a," + strings.Repeat("B", 86) + "== " + s
		})},
		{Name: "FourMinutesOld", Status: 200, Edit: resign(-4*time.Minute, rt.Secret(polar.Spec))},
		{Name: "FourMinutesAhead", Status: 200, Edit: resign(4*time.Minute, rt.Secret(polar.Spec))},
	},
	Cases: []cf.Case{
		{Name: "OrderPaid", Deliver: paid, Want: []string{orderPaid}, Steps: paidSteps,
			Emails: []cf.Mail{confirmation}, Calls: []string{callA}},
		{Name: "OrderPaidWithoutAddress", Deliver: "order.paid.no_address", Want: []string{"order " + orderA + " paid 3000 usd -"},
			Steps: []string{"fulfillment=done"}, Calls: []string{"polar " + orderA + " 3000 usd -"}},
		// One event, two endpoints: two webhook-ids, one order.
		{Name: "OrderPaidFromASecondEndpointIsANoOp", Given: []string{paid}, Deliver: "order.paid.endpoint2", Want: []string{orderPaid},
			Emails: []cf.Mail{confirmation}, Calls: []string{callA}},
		{Name: "OrderRefunded", Given: []string{paid}, Deliver: refunded, Want: []string{orderRefunded, refundAll, refundedAll},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, refundMail}, Calls: []string{callA}},
		// A full refund of a taxed order: refunded_amount (25.00) is net of
		// tax and below total_amount; with refunded_tax_amount it is all.
		{Name: "RefundedTaxCounts", Given: []string{paid}, Deliver: refundNoTax,
			Want:  []string{orderPartial, "refund " + orderA + " 2500 usd", "refunded " + orderA + " 2500 of 3000"},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, {To: "buyer@example.com", Contains: "Refunded so far: 25.00 USD of 30.00 USD"}},
			Calls: []string{callA}},
		{Name: "PartialRefund", Given: []string{paid}, Deliver: refundPartial, Want: []string{orderPartial, refundPart, refundedPart},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, partialMail}, Calls: []string{callA}},
		{Name: "PartialThenFullRefund", Given: []string{paid, refundPartial}, Deliver: refunded,
			Want:  []string{orderRefunded, refundPart, refundAll, refundedAll},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, partialMail, refundMail}, Calls: []string{callA}},
		// Cumulative totals: the larger wins, whichever comes last.
		{Name: "FullThenPartialRefundLargerWins", Given: []string{paid, refunded}, Deliver: refundPartial,
			Want:  []string{orderRefunded, refundPart, refundAll, refundedAll},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, refundMail, partialMail}, Calls: []string{callA}},
		{Name: "RefundFromASecondEndpointIsANoOp", Given: []string{paid, refunded}, Deliver: "order.refunded.endpoint2",
			Want: []string{orderRefunded, refundAll, refundAll, refundedAll}, Emails: []cf.Mail{confirmation, refundMail}, Calls: []string{callA}},
		// The order starts refunded: no confirmation, no fulfillment; the
		// refund's own payload gave the address.
		{Name: "RefundBeforeOrder", Given: []string{refunded}, Deliver: paid, Want: []string{orderRefunded, refundAll, refundedAll},
			Emails: []cf.Mail{refundMail}},
		{Name: "PartialRefundBeforeOrder", Given: []string{refundPartial}, Deliver: paid, Want: []string{orderPartial, refundPart, refundedPart},
			Steps: paidSteps, Emails: []cf.Mail{partialMail, confirmation}, Calls: []string{callA}},
		{Name: "RefundAddressFromTheOrder", Given: []string{paid}, Deliver: "order.refunded.no_address",
			Want:  []string{orderRefunded, refundAll, refundedAll},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, refundMail}, Calls: []string{callA}},
		{Name: "RefundWithoutAnyAddress", Given: []string{"order.paid.no_address"}, Deliver: "order.refunded.no_address",
			Want: []string{"order " + orderA + " refunded 3000 usd -", refundAll, refundedAll}, Calls: []string{"polar " + orderA + " 3000 usd -"}},
		// Subscriptions: the newest modified_at (else created_at) wins;
		// canceled and unpaid (Polar's revoked statuses) are final.
		{Name: "SubscriptionCreated", Deliver: subCreated, Want: []string{subIncomplete}},
		// A renewal that failed: the customer is told once per period, at
		// the payload's address; not when it is already active again.
		{Name: "SubscriptionPastDue", Given: []string{subActive}, Deliver: pastDue, Want: []string{subPastDueRow},
			Steps: []string{"email.past_due=done"}, Emails: []cf.Mail{pastDueMail}},
		{Name: "SubscriptionPastDueOncePerPeriod", Given: []string{pastDue}, Deliver: "subscription.updated.past_due",
			Want: []string{subPastDueRow}, Emails: []cf.Mail{pastDueMail}},
		{Name: "SubscriptionPastDueLate", Given: []string{"subscription.active.again"}, Deliver: pastDue,
			Want: []string{subActiveAgain}},
		{Name: "SubscriptionActive", Given: []string{subCreated}, Deliver: subActive, Want: []string{subActiveRow}},
		{Name: "SubscriptionOlderChangesNothing", Given: []string{subCanceled}, Deliver: subActive, Want: []string{subCancelingRow}},
		{Name: "SubscriptionCreatedAfterItsUpdates", Given: []string{subActive}, Deliver: subCreated, Want: []string{subActiveRow}},
		{Name: "SubscriptionTieCarriesTheSameState", Given: []string{subCanceled}, Deliver: subUpdated, Want: []string{subCancelingRow}},
		{Name: "SubscriptionUncanceled", Given: []string{subCanceled}, Deliver: subUncanceled, Want: []string{subUncanceledRow}},
		{Name: "SubscriptionRevoked", Given: []string{subActive, subCanceled}, Deliver: subRevoked, Want: []string{subRevokedRow}},
		// Revoked is final: a later reinstatement, an active of the same
		// modified_at, and the events before it change nothing, in
		// whatever order they arrive; revoked applies over a newer state.
		{Name: "RevokedIsFinalEvenForALaterEvent", Given: []string{subRevoked}, Deliver: "subscription.reinstated",
			Want: []string{subRevokedRow}},
		{Name: "RevokedIsFinalForAnActiveOfTheSameTime", Given: []string{subRevoked}, Deliver: "subscription.active.same_time",
			Want: []string{subRevokedRow}},
		// (The row keeps the newer event's time: End's, as for Stripe.)
		{Name: "RevokedAppliesOverANewerState", Given: []string{"subscription.reinstated"}, Deliver: subRevoked,
			Want: []string{strings.Replace(subRevokedRow, "at=2026-04-30T16:13:54.999950Z", "at=2026-05-02T10:00:00Z", 1)}},
		// Canceled once its period ended, whichever event says it.
		{Name: "CanceledAndEndedIsFinal", Given: []string{"subscription.updated.ended"}, Deliver: "subscription.active.same_time",
			Want: []string{subRevokedRow}},
		{Name: "CanceledAndEndedAppliesOverANewerState", Given: []string{"subscription.reinstated"}, Deliver: "subscription.updated.ended",
			Want: []string{strings.Replace(subRevokedRow, "at=2026-04-30T16:13:54.999950Z", "at=2026-05-02T10:00:00Z", 1)}},
		{Name: "SubscriptionOrderedByMicroseconds", Given: []string{"subscription.past_due.later"}, Deliver: "subscription.active.earlier",
			Want:   []string{sub + "past_due" + customer + "cancel_at_period_end=false at=2026-04-30T16:14:00.000002Z"},
			Emails: []cf.Mail{pastDueMail}}, // the past_due's own, once
		{Name: "UnhandledType", Deliver: checkout, Outcome: webhooks.OutcomeIgnored,
			Check: count(`SELECT count(*) FROM processed_events WHERE kind = 'event' AND event_type = 'checkout.created' AND outcome = 'ignored'`, 1)},
		{Name: "UnreadableAmountParked", Deliver: "order.paid.bad_amount", Outcome: webhooks.OutcomeParked,
			Check: count(`SELECT count(*) FROM processed_events WHERE status = 'parked' AND last_error LIKE '%total_amount%'`, 1)},
		{Name: "NoAmountParked", Deliver: "order.paid.no_amount", Outcome: webhooks.OutcomeParked,
			Check: count(`SELECT count(*) FROM processed_events WHERE status = 'parked' AND last_error LIKE '%no total_amount%'`, 1)},
		{Name: "NoCustomerNoEmail", Deliver: "order.paid.no_customer", Want: []string{"order " + orderA + " paid 3000 usd -"},
			Steps: []string{"fulfillment=done"}, Calls: []string{"polar " + orderA + " 3000 usd -"}},
		{Name: "SubscriptionWithoutATimeParked", Deliver: "subscription.no_time", Outcome: webhooks.OutcomeParked,
			Check: count(`SELECT count(*) FROM processed_events WHERE status = 'parked' AND last_error LIKE '%created_at%'`, 1)},
	},
	History: []string{paid, refundPartial, refunded, "order.paid.endpoint2", "order.refunded.endpoint2", checkout,
		subCreated, "subscription.updated.at_creation", subActive, subCanceled, subUpdated, subRevoked},
	Sequences: map[string][]string{
		"Refunds":                 {paid, refundPartial, refunded},
		"TwoEndpoints":            {paid, "order.paid.endpoint2", refunded, "order.refunded.endpoint2"},
		"Subscription":            {subCreated, subActive, subCanceled, subRevoked},
		"SubscriptionTies":        {subActive, subCanceled, subUpdated},
		"SubscriptionCreation":    {subCreated, "subscription.updated.at_creation", subActive},
		"SubscriptionMicrosecond": {"subscription.past_due.later", "subscription.active.earlier"},
		"SubscriptionRevoked":     {subActive, subCanceled, "subscription.active.same_time", subRevoked},
		"SubscriptionEndedTie":    {"subscription.updated.ended", "subscription.active.same_time"},
	},
}

// subscriptionsView is the subscriptions of the View, with the time of the
// event applied, to the microsecond.
const subscriptionsView = `SELECT format('subscription %s %s customer=%s period_end=%s cancel_at_period_end=%s at=%s', external_id, status,
    coalesce(customer_id, '-'), coalesce(to_char(current_period_end AT TIME ZONE 'UTC', 'YYYY-MM-DD'), '-'), cancel_at_period_end::text,
    replace(to_char(event_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || 'Z')
FROM subscriptions ORDER BY 1`

func TestConformance(t *testing.T) { cf.Run(t, suite) }

// decoded is the key of a secret written the spec's way.
func decoded(secret string) []byte {
	k, err := swh.ParseSecret(secret)
	if err != nil {
		panic(err)
	}
	return k
}

// signedWith re-signs the delivery at at with key, under its webhook-id.
func signedWith(at time.Time, key []byte) func(http.Header, []byte) {
	return func(h http.Header, b []byte) {
		for k, v := range swh.Headers(h.Get(swh.HeaderID), at, b, key) {
			h[k] = v
		}
	}
}

// resign re-signs the delivery d from now with secret, as Polar keys it.
func resign(d time.Duration, secret string) func(http.Header, []byte) {
	return func(h http.Header, b []byte) { signedWith(time.Now().Add(d), polar.Key(secret))(h, b) }
}

func del(name string) func(http.Header, []byte) {
	return func(h http.Header, _ []byte) { h.Del(name) }
}

func edit(name string, f func(string) string) func(http.Header, []byte) {
	return func(h http.Header, _ []byte) { h.Set(name, f(h.Get(name))) }
}

func count(sql string, want int) func(*testing.T, *rt.Receiver, rt.Response) {
	return func(t *testing.T, r *rt.Receiver, _ rt.Response) {
		if n := r.Count(t, sql); n != want {
			t.Errorf("%s = %d, want %d", sql, n, want)
		}
	}
}

func reason(err error) string {
	var rej *webhooks.RejectError
	if errors.As(err, &rej) {
		return rej.Reason
	}
	return fmt.Sprintf("not a rejection: %v", err)
}

// TestVerify calls Verify directly: each form of secret Polar makes, keyed
// both ways, among rotated secrets, and the position of the one that
// matched; the hint of a resend; the freshness of a wrong signature.
func TestVerify(t *testing.T) {
	body := rt.Fixture(t, paid)
	now := time.Unix(1_800_000_000, 0)
	id := webhookID("verify", nil)
	p := polar.New([]string{newSecret, legacySecret, olderSecret})
	for _, c := range []struct {
		name   string
		key    []byte
		secret int
	}{
		{"NewSecretDecodedKey", decoded(newSecret), 0},
		{"NewSecretWholeString", []byte(newSecret), 0},
		{"LegacyWhsecSecret", []byte(legacySecret), 1},
		{"OlderPolarWhsSecret", []byte(olderSecret), 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev, err := p.Verify(swh.Headers(id, now, body, c.key), body, now)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Key != id || ev.ID != id || ev.Type != "order.paid" || ev.SecretIndex != c.secret || ev.Source != polar.Source {
				t.Errorf("event %+v, want key %s, secret %d", ev, id, c.secret)
			}
		})
	}
	t.Run("ErrWrongSecretFresh", func(t *testing.T) {
		_, err := p.Verify(swh.Headers(id, now, body, []byte("whsec_another_secret_0123456789")), body, now)
		var rej *webhooks.RejectError
		if !errors.As(err, &rej) || rej.Reason != "no_valid_signature" || rej.Timestamp != webhooks.SignedFresh {
			t.Errorf("%v (%+v), want no_valid_signature, fresh", err, rej)
		}
	})
	t.Run("ErrWrongSecretStale", func(t *testing.T) {
		_, err := p.Verify(swh.Headers(id, now.Add(-time.Hour), body, []byte("whsec_another_secret_0123456789")), body, now)
		var rej *webhooks.RejectError
		if !errors.As(err, &rej) || rej.Reason != "no_valid_signature" || rej.Timestamp != webhooks.SignedStale {
			t.Errorf("%v (%+v), want no_valid_signature, stale", err, rej)
		}
	})
	t.Run("ResentHint", func(t *testing.T) {
		// The fixture's event happened at its timestamp; a delivery signed a
		// minute or more later is a retry or a redelivery.
		at, _ := time.Parse(time.RFC3339Nano, "2026-03-30T16:13:53.918004Z")
		for d, want := range map[time.Duration]bool{time.Second: false, 59 * time.Second: false, 61 * time.Second: true, 48 * time.Hour: true} {
			ev, err := p.Verify(swh.Headers(id, at.Add(d), body, decoded(newSecret)), body, at.Add(d))
			if err != nil || ev.Resent != want {
				t.Errorf("signed %s after the event: Resent %v, %v; want %v", d, ev.Resent, err, want)
			}
		}
	})
}

// The reference vector of Standard Webhooks (libraries/go webhook_test.go),
// as FACTS.md quotes it.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// TestReferenceVector: Spec.Sign signs the spec's reference vector as the
// spec's libraries do, and Verify accepts it (its body is no Polar event,
// so it is refused after the signature, for what it is).
func TestReferenceVector(t *testing.T) {
	at := time.Unix(vectorTS, 0)
	h := polar.Spec.Sign(webhooks.SignInput{Body: []byte(vectorBody), Secret: vectorSecret, At: at, ID: vectorID})
	if got := h.Get(swh.HeaderSignature); got != vectorSig || h.Get(swh.HeaderID) != vectorID || h.Get(swh.HeaderTimestamp) != "1614265330" {
		t.Fatalf("Sign = %v, want %s", h, vectorSig)
	}
	_, err := polar.New([]string{vectorSecret}).Verify(h, []byte(vectorBody), at)
	if got := reason(err); got != "not_an_event" {
		t.Errorf("Verify of the vector: %v; want its signature accepted and its body refused (not_an_event)", err)
	}
	if _, err := polar.New([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx"}).Verify(h, []byte(vectorBody), at); reason(err) != "no_valid_signature" {
		t.Errorf("Verify with another secret: %v", err)
	}
}

// TestSecretVariable: POLAR_WEBHOOK_SECRET accepts every form of secret
// Polar makes, refuses one under 32 characters (what Polar's API asks of a
// secret set through it), warns of one under 43 (shorter than any Polar
// generates), and is logged masked.
func TestSecretVariable(t *testing.T) {
	load := func(v string) (config.Config, error) {
		env := map[string]string{"DATABASE_URL": "postgres://localhost/x", polar.Spec.Secret.Name: v}
		return config.Load(func(k string) string { return env[k] }, []webhooks.Spec{polar.Spec})
	}
	for _, c := range []struct {
		name, value, err, warning string
	}{
		{"New", newSecret, "", ""},
		{"LegacyWhsec", legacySecret, "", ""},
		{"OlderPolarWhs", olderSecret, "", ""},
		{"Rotating", newSecret + "," + legacySecret, "", ""},
		{"ErrShort", "whsec_012345678", "secret 1 is shorter than 32 characters", ""},
		{"ErrWhsecX", "whsec_x", "secret 1 is shorter than 32 characters", ""},
		{"ErrSecondShort", newSecret + ",whsec_short", "secret 2 is shorter than 32 characters", ""},
		{"ErrUnder32", "my-own-secret-0123456789abcdef", "secret 1 is shorter than 32 characters", ""},
		{"WarnUnder43", "my-own-secret-0123456789abcdef01", "", "secret 1 is shorter than 43 characters"},
		{"ErrWhiteSpace", "whsec_0123456789abcdef 0123456789abcdef", "white space", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(c.value)
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), c.value) {
					t.Fatalf("error %v, want one saying %q without the value", err, c.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			var warnings []string
			for _, w := range cfg.Warnings {
				if w.Var == polar.Spec.Secret.Name {
					warnings = append(warnings, w.Message)
				}
			}
			if (c.warning == "") != (len(warnings) == 0) || c.warning != "" && !strings.Contains(warnings[0], c.warning) {
				t.Errorf("warnings %q, want %q", warnings, c.warning)
			}
		})
	}
	for v, want := range map[string]string{newSecret: "whsec_****", olderSecret: "polar_whs_****", "my-own-secret-0123456789abcdef0123": "****"} {
		if got := polar.Spec.Secret.Masked(v); got != want {
			t.Errorf("Masked(%q) = %q, want %q", v, got, want)
		}
	}
}

// TestOrderAndRefundRacing: an order.paid and its full refund, delivered at
// the same moment, leave the order refunded whichever commits first.
func TestOrderAndRefundRacing(t *testing.T) {
	r := rt.New(t, providers.List(), suite.Options...)
	done := make(chan rt.Response, 2)
	for _, name := range []string{paid, refunded} {
		go func() { done <- suite.Deliver(t, r, name) }()
	}
	for range 2 {
		if res := <-done; res.Status != 200 {
			t.Fatalf("status %d %s", res.Status, res.Body)
		}
	}
	var status string
	var amount int64
	if err := r.Pool.QueryRow(context.Background(), `SELECT status, amount_refunded_cents FROM orders WHERE external_id = $1`, orderA).
		Scan(&status, &amount); err != nil || status != "refunded" || amount != 3000 {
		t.Fatalf("order %s with %d refunded, %v; want refunded 3000", status, amount, err)
	}
}

// TestCrossCheckWithTheJSLibrary holds Polar's signatures to an
// independent implementation of Standard Webhooks, the spec authors' npm
// package standardwebhooks, both ways and for every form of secret: what
// Spec.Sign makes, the library verifies, keyed as Polar keys the secret (a
// new secret as the spec writes it; a legacy one, Polar's way, as the raw
// bytes of the whole string); what the library signs, Verify accepts. It
// is skipped without node and npm.
func TestCrossCheckWithTheJSLibrary(t *testing.T) {
	js := standardwebhookstest.Install(t)
	body := string(rt.Fixture(t, paid))
	now := time.Now()
	forms := []struct {
		name, secret string
		lib          standardwebhookstest.Message // the secret as the library takes it
	}{
		{"New", newSecret, standardwebhookstest.Message{Secret: newSecret}},
		{"LegacyWhsec", legacySecret, standardwebhookstest.Message{RawKey: []byte(legacySecret)}},
		{"OlderPolarWhs", olderSecret, standardwebhookstest.Message{RawKey: []byte(olderSecret)}},
		{"TestSecret", rt.Secret(polar.Spec), standardwebhookstest.Message{RawKey: []byte(rt.Secret(polar.Spec))}},
	}
	var verify, sign []standardwebhookstest.Message
	for i, f := range forms {
		id := webhookID(f.name, nil)
		h := polar.Spec.Sign(webhooks.SignInput{Body: []byte(body), Secret: f.secret, At: now, ID: id})
		m := f.lib
		m.Body, m.Header = body, map[string]string{"webhook-id": h.Get(swh.HeaderID),
			"webhook-timestamp": h.Get(swh.HeaderTimestamp), "webhook-signature": h.Get(swh.HeaderSignature)}
		verify = append(verify, m)
		s := f.lib
		s.Body, s.ID, s.Timestamp = body, id, now.Unix()+int64(i)
		sign = append(sign, s)
	}
	for i, res := range js.Verify(t, verify) {
		if res != "" {
			t.Errorf("%s: the library refuses Spec.Sign's signature: %s", forms[i].name, res)
		}
	}
	p := polar.New([]string{newSecret, legacySecret, olderSecret, rt.Secret(polar.Spec)})
	for i, sig := range js.Sign(t, sign) {
		h := http.Header{}
		h.Set(swh.HeaderID, sign[i].ID)
		h.Set(swh.HeaderTimestamp, fmt.Sprint(sign[i].Timestamp))
		h.Set(swh.HeaderSignature, sig)
		ev, err := p.Verify(h, []byte(body), now)
		if err != nil || ev.SecretIndex != i {
			t.Errorf("%s: Verify of the library's signature %s: secret %d, %v; want secret %d", forms[i].name, sig, ev.SecretIndex, err, i)
		}
		if want := polar.Spec.Sign(webhooks.SignInput{Body: []byte(body), Secret: forms[i].secret, At: time.Unix(sign[i].Timestamp, 0), ID: sign[i].ID}).
			Get(swh.HeaderSignature); sig != want {
			t.Errorf("%s: the library signs %s, Spec.Sign %s", forms[i].name, sig, want)
		}
	}
	// The spec's reference vector, through the library too.
	if got := js.Sign(t, []standardwebhookstest.Message{{Secret: vectorSecret, ID: vectorID, Timestamp: vectorTS, Body: vectorBody}}); got[0] != vectorSig {
		t.Errorf("the library signs the reference vector %s, want %s", got[0], vectorSig)
	}
	t.Logf("standardwebhooks@%s verified %d signatures of Spec.Sign and signed %d that Verify accepted, and the reference vector",
		standardwebhookstest.Version, len(verify), len(sign))
}
