package stripe_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/pgtest"
	"github.com/paywebhooks/receiver/internal/providers"
	cf "github.com/paywebhooks/receiver/internal/providers/conformance"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Names of the testdata files, as the suite's events.
const (
	paid      = "checkout.session.completed.paid.json"
	unpaid    = "checkout.session.completed.unpaid.json"
	succeeded = "checkout.session.async_payment_succeeded.json"
	failed    = "checkout.session.async_payment_failed.json"
	created   = "invoice.created.json"
	finalized = "invoice.finalized.json"
	invFailed = "invoice.payment_failed.json"
	invAction = "invoice.payment_action_required.json" // attempt 2 of in_test_1, waiting for the customer
	invPaid   = "invoice.paid.json"
	refunded  = "charge.refunded.json"

	customerCreated = "customer.created.json"              // cus_test_1, subscriber@example.com
	subCreated      = "customer.subscription.created.json" // sub_test_1 trialing, T0
	trialWillEnd    = "customer.subscription.trial_will_end.json"
	subActive       = "customer.subscription.updated.json"        // active, T0+14d (API version basil)
	subCancel       = "customer.subscription.updated.cancel.json" // cancel_at_period_end, T0+20d
	subDeleted      = "customer.subscription.deleted.json"        // canceled, T0+44d
	subIncomplete   = "customer.subscription.created.incomplete.json"
	subSameSecond   = "customer.subscription.updated.same_second.json" // sub_test_2 active, the created's second
	dpCreated       = "charge.dispute.created.json"
	dpWithdrawn     = "charge.dispute.funds_withdrawn.json" // the created's second
	dpUpdated       = "charge.dispute.updated.json"
	dpClosed        = "charge.dispute.closed.json" // won
	dpReinstated    = "charge.dispute.funds_reinstated.json"

	refundPartial = "refund.partial" // 1.00 of 30.00
	refundRest    = "refund.rest"    // the rest: 30.00 in all

	// One refund of the whole 30.00 (re_test_1, made with charge.refunded's
	// second), which fails three days later.
	reCreated     = "refund.created.json"
	reFailed      = "refund.failed.json"
	reUpdated     = "charge.refund.updated.json" // the same failure, as API versions before 2024-10-28.acacia send it
	reSecond      = "refund.second"              // a second refund, 10.00, a day after the failure: charge.refunded
	reSecondMade  = "refund.second.created"      // its refund.created
	paidDisputed  = "paid.disputed"              // the paid checkout, of the dispute's payment intent
	dpLost        = "dispute.lost"               // dp_test_1 closed lost, at the won's second
	dpWonLater    = "dispute.won.later"          // dp_test_1 closed won, later (a withdrawal after the loss)
	dpLostEarlier = "dispute.lost.earlier"       // dp_test_1 closed lost, before dpWonLater
)

// Rows of the state, as the cases expect them.
const (
	orderPaid     = "order cs_test_paid paid 3000 usd buyer@example.com"
	orderRefunded = "order cs_test_paid refunded 3000 usd buyer@example.com"
	refundRow     = "refund pi_test_paid 3000 usd"

	sub1Trialing = "subscription sub_test_1 trialing customer=cus_test_1 period_end=2025-12-14 cancel_at_period_end=false account=-"
	sub1Active   = "subscription sub_test_1 active customer=cus_test_1 period_end=2026-01-13 cancel_at_period_end=false account=-"
	sub1Cancel   = "subscription sub_test_1 active customer=cus_test_1 period_end=2026-01-13 cancel_at_period_end=true account=-"
	sub1Canceled = "subscription sub_test_1 canceled customer=cus_test_1 period_end=2026-01-13 cancel_at_period_end=true account=-"
	sub2Active   = "subscription sub_test_2 active customer=cus_test_1 period_end=2025-12-30 cancel_at_period_end=false account=-"
	subscriber   = "customer cus_test_1 subscriber@example.com"
	dpNeeds      = "dispute dp_test_1 needs_response 4200 usd fraudulent due=2025-12-08T23:59:59Z pi=pi_test_dispute account=-"
	dpReview     = "dispute dp_test_1 under_review 4200 usd fraudulent due=2025-12-08T23:59:59Z pi=pi_test_dispute account=-"
	dpWon        = "dispute dp_test_1 won 4200 usd fraudulent due=2025-12-08T23:59:59Z pi=pi_test_dispute account=-"
	dpLostRow    = "dispute dp_test_1 lost 4200 usd fraudulent due=2025-12-08T23:59:59Z pi=pi_test_dispute account=-"

	reRowSucceeded = "refund pi_test_paid 3000 usd re_test_1 succeeded"
	reRowFailed    = "refund pi_test_paid 3000 usd re_test_1 failed"
	orderDisputed  = "order cs_test_paid paid 3000 usd buyer@example.com"
	disputedCall   = "stripe cs_test_paid 3000 usd buyer@example.com"
)

// unreadable makes the paid checkout's amount a string.
var unreadable = []string{`"amount_total": 3000`, `"amount_total": "thirty"`}

var (
	confirmation = cf.Mail{To: "buyer@example.com", Contains: "is confirmed"}
	refundMail   = cf.Mail{To: "buyer@example.com", Contains: "We have refunded"}
	dunning      = cf.Mail{To: "payer@example.com", Contains: "could not collect the payment for your invoice"}
	trialMail    = cf.Mail{To: "subscriber@example.com", Contains: "Your free trial ends on 14 December 2025"}
	endedMail    = cf.Mail{To: "subscriber@example.com", Contains: "Your subscription has ended; it was paid up to 13 January 2026"}
	disputeMail  = cf.Mail{To: rt.NotifyEmail, Contains: "Evidence due by: 8 December 2025 23:59 UTC"}
	receipt      = cf.Mail{To: "payer@example.com", Contains: "we received your payment"}
	receiptAfter = cf.Mail{To: "payer@example.com", Contains: "Your payment went through after all"}
	actionMail   = cf.Mail{To: "payer@example.com", Contains: "Your bank asks you to confirm the payment"}
	paidCall     = "stripe cs_test_paid 3000 usd buyer@example.com"
	paidSteps    = []string{"email.confirmation=done", "fulfillment=done"}
)

var suite = cf.Suite{
	Spec:      stripe.Spec,
	Providers: providers.List(),
	View: []string{
		`SELECT format('order %s %s %s %s %s', external_id, status, amount_cents, currency, coalesce(customer_email, '-')) FROM orders ORDER BY 1`,
		`SELECT format('invoice %s %s %s/%s %s %s', stripe_invoice_id, status, amount_paid, amount_due, currency, coalesce(customer_email, '-')) FROM invoices ORDER BY 1`,
		`SELECT format('invoice_failure %s attempt %s', stripe_invoice_id, attempt_count) FROM invoice_payment_failures WHERE outcome = 'failed' ORDER BY 1`,
		`SELECT format('invoice_action_required %s attempt %s', stripe_invoice_id, attempt_count) FROM invoice_payment_failures WHERE outcome = 'action_required' ORDER BY 1`,
		`SELECT format('refund %s %s %s%s', payment_intent_id, amount_refunded, currency, ' ' || refund_id || ' ' || status) FROM refunds ORDER BY 1`,
		`SELECT format('refunded %s %s of %s', external_id, amount_refunded_cents, amount_cents) FROM orders WHERE amount_refunded_cents > 0 ORDER BY 1`,
		`SELECT format('account %s %s %s', source, external_id, account_id) FROM orders WHERE account_id IS NOT NULL
		 UNION ALL SELECT format('account invoice %s %s', stripe_invoice_id, account_id) FROM invoices WHERE account_id IS NOT NULL ORDER BY 1`,
		subscriptionsView,
		disputesView,
		`SELECT format('customer %s %s', customer_id, email) FROM customers ORDER BY 1`,
		`SELECT format('dispute_lost %s', external_id) FROM orders WHERE dispute_lost ORDER BY 1`,
	},
	Events: map[string]cf.Event{
		"unreadable": {Fixture: paid, Replace: unreadable},
		refundPartial: {Fixture: refunded, Replace: []string{"evt_test_charge_refunded", "evt_test_refund_partial",
			`"amount_refunded": 3000`, `"amount_refunded": 100`, `"refunded": true`, `"refunded": false`}},
		"refund.partial.again": {Fixture: refunded, Replace: []string{"evt_test_charge_refunded", "evt_test_refund_partial_again",
			`"amount_refunded": 3000`, `"amount_refunded": 100`, `"refunded": true`, `"refunded": false`}},
		refundRest: {Fixture: refunded, Replace: []string{"evt_test_charge_refunded", "evt_test_refund_rest",
			`"amount_refunded": 0`, `"amount_refunded": 100`}},
		"checkout.customer": {Fixture: paid, Replace: []string{"evt_test_checkout_paid", "evt_test_checkout_customer",
			`"customer_email": null`, `"customer_email": null, "customer": "cus_test_1"`}},
		"invoice.customer": {Fixture: invPaid, Replace: []string{`"customer_email": "payer@example.com"`,
			`"customer_email": "payer@example.com", "customer": {"id": "cus_test_1", "object": "customer"}`}},
		"paid.live":    {Fixture: paid, Replace: []string{`"livemode": false`, `"livemode": true`}},
		"paid.account": {Fixture: paid, Replace: []string{`"livemode": false`, `"livemode": false, "account": "acct_test_1"`}},
		"sub.account":  {Fixture: subActive, Replace: []string{`"livemode": false`, `"livemode": false, "account": "acct_test_1"`}},
	},
	Verify: []cf.Request{
		{Name: "ErrGarbageHeader", Edit: set("Stripe-Signature", "garbage"), Reason: "invalid_header"},
		{Name: "ErrHeaderWithSpaces", Edit: func(h http.Header, _ []byte) {
			h.Set("Stripe-Signature", strings.ReplaceAll(h.Get("Stripe-Signature"), ",", ", "))
		}, Reason: "invalid_header"},
		{Name: "ErrStaleTimestamp", Edit: signedAt(-6 * time.Minute), Reason: "timestamp_too_old"},
		{Name: "ErrFutureTimestamp", Edit: signedAt(6 * time.Minute), Reason: "timestamp_in_future"},
		{Name: "ErrWrongContentType", Edit: set("Content-Type", "text/plain"), Reason: "unsupported_content_type"},
		{Name: "ErrNotJSON", Body: []byte(`this is not json`), Reason: "malformed_json"},
		{Name: "ErrNoData", Body: []byte(`{"id":"evt_nodata","object":"event","type":"checkout.session.completed"}`), Reason: "missing_data"},
		{Name: "ErrOverLimit", Body: []byte(`{"id":"evt_big","object":"event","type":"x","data":{"object":{"pad":"` +
			strings.Repeat("a", 1<<20) + `"}}}`), Status: 413, Reason: "body_too_large"},
		{Name: "ValidSignatureAmongSeveral", Status: 200, Edit: func(h http.Header, _ []byte) {
			t, v1, _ := strings.Cut(h.Get("Stripe-Signature"), ",")
			h.Set("Stripe-Signature", fmt.Sprintf("%s,v1=%064x,%s,v0=deadbeef", t, 1, v1))
		}},
	},
	Cases: []cf.Case{
		{Name: "CheckoutPaid", Deliver: paid, Want: []string{orderPaid}, Steps: paidSteps,
			Emails: []cf.Mail{confirmation}, Calls: []string{paidCall}},
		{Name: "CheckoutUnpaid", Deliver: unpaid, Want: []string{"order cs_test_async pending_payment 4200 eur sepa@example.com"}},
		{Name: "AsyncPaymentSucceeded", Given: []string{unpaid}, Deliver: succeeded,
			Want: []string{"order cs_test_async paid 4200 eur sepa@example.com"}, Steps: paidSteps,
			Emails: []cf.Mail{{To: "sepa@example.com", Contains: "is confirmed"}}, Calls: []string{"stripe cs_test_async 4200 eur sepa@example.com"}},
		{Name: "AsyncPaymentSucceededFirst", Deliver: succeeded,
			Want: []string{"order cs_test_async paid 4200 eur sepa@example.com"}, Steps: paidSteps,
			Emails: []cf.Mail{{To: "sepa@example.com", Contains: "is confirmed"}}, Calls: []string{"stripe cs_test_async 4200 eur sepa@example.com"}},
		{Name: "AsyncPaymentFailed", Given: []string{unpaid}, Deliver: failed,
			Want: []string{"order cs_test_async payment_failed 4200 eur sepa@example.com"}, Steps: []string{"email.payment_failed=done"},
			Emails: []cf.Mail{{To: "sepa@example.com", Contains: "could not collect the payment for your order"}}},
		{Name: "InvoiceCreated", Deliver: created, Want: []string{"invoice in_test_1 pending 0/2000 usd payer@example.com"}},
		{Name: "InvoicePaidAfterFailure", Given: []string{created, finalized, invFailed}, Deliver: invPaid,
			Want:  []string{"invoice in_test_1 paid 2000/2000 usd payer@example.com", "invoice_failure in_test_1 attempt 1"},
			Steps: []string{"email.receipt=done"}, Emails: []cf.Mail{dunning, receiptAfter}},
		{Name: "PaymentFailedAfterPaidNotDunned", Given: []string{created, invPaid}, Deliver: invFailed,
			Want:   []string{"invoice in_test_1 paid 2000/2000 usd payer@example.com", "invoice_failure in_test_1 attempt 1"},
			Emails: []cf.Mail{receipt}},
		{Name: "PaymentActionRequired", Given: []string{created, invFailed}, Deliver: invAction,
			Want: []string{"invoice in_test_1 pending 0/2000 usd payer@example.com", "invoice_failure in_test_1 attempt 1",
				"invoice_action_required in_test_1 attempt 2"},
			Steps: []string{"email.action_required=done"}, Emails: []cf.Mail{dunning, actionMail}},
		{Name: "PaymentActionRequiredAfterPaidNotSent", Given: []string{created, invPaid}, Deliver: invAction,
			Want:   []string{"invoice in_test_1 paid 2000/2000 usd payer@example.com", "invoice_action_required in_test_1 attempt 2"},
			Emails: []cf.Mail{receipt}},
		{Name: "ChargeRefunded", Given: []string{paid}, Deliver: refunded, Want: []string{orderRefunded, refundRow, "refunded cs_test_paid 3000 of 3000"},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, refundMail}, Calls: []string{paidCall}},
		{Name: "RefundBeforeOrder", Given: []string{refunded}, Deliver: paid, Want: []string{orderRefunded, refundRow, "refunded cs_test_paid 3000 of 3000"},
			Emails: []cf.Mail{refundMail}}, // the order starts refunded: no confirmation, no fulfillment
		{Name: "UnhandledType", Deliver: "product.created.json", Outcome: webhooks.OutcomeIgnored,
			Check: count(`SELECT count(*) FROM processed_events WHERE kind = 'event' AND outcome = 'ignored'`, 1)},
		{Name: "OldAPIVersionWithStringRequest", Deliver: "checkout.session.completed.old_api.json",
			Want: []string{"order cs_test_old paid 1500 usd old@example.com"}, Steps: paidSteps,
			Emails: []cf.Mail{{To: "old@example.com", Contains: "is confirmed"}}, Calls: []string{"stripe cs_test_old 1500 usd old@example.com"},
			Check: count(`SELECT count(*) FROM processed_events WHERE api_version = '2015-10-16'`, 1)},
		{Name: "UnreadableFieldsParked", Deliver: "unreadable", Outcome: webhooks.OutcomeParked,
			Check: func(t *testing.T, r *rt.Receiver, _ rt.Response) {
				var status, lastErr string
				var stored []byte
				err := r.Pool.QueryRow(context.Background(), `SELECT status, last_error, body FROM processed_events
WHERE event_key = 'evt_test_checkout_paid'`).Scan(&status, &lastErr, &stored)
				body := rt.Fixture(t, paid, unreadable...)
				if err != nil || status != "parked" || !strings.Contains(lastErr, "amount_total") || string(stored) != string(body) {
					t.Errorf("parked row: %v %q %q, %d bytes stored", err, status, lastErr, len(stored))
				}
				// Its retry is acknowledged, not retried for ever.
				if res := r.Deliver(t, stripe.Spec, body, nil); res.Status != 200 || cf.Outcome(res) != webhooks.OutcomeParked {
					t.Errorf("the retry of a parked event: %d %s", res.Status, res.Body)
				}
			}},

		// Refunds by amount.
		{Name: "PartialRefund", Given: []string{paid}, Deliver: refundPartial,
			Want:  []string{"order cs_test_paid partially_refunded 3000 usd buyer@example.com", "refund pi_test_paid 100 usd", "refunded cs_test_paid 100 of 3000"},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, {To: "buyer@example.com", Contains: "We have refunded 1.00 USD"}},
			Calls: []string{paidCall}},
		{Name: "RestRefunded", Given: []string{paid, refundPartial}, Deliver: refundRest,
			Want:  []string{orderRefunded, "refund pi_test_paid 100 usd", "refund pi_test_paid 3000 usd", "refunded cs_test_paid 3000 of 3000"},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, refundMail, {To: "buyer@example.com", Contains: "We have refunded 29.00 USD"}},
			Calls: []string{paidCall}},
		{Name: "OlderRefundAfterNewer", Given: []string{paid, refundRest}, Deliver: refundPartial,
			Want:  []string{orderRefunded, "refund pi_test_paid 100 usd", "refund pi_test_paid 3000 usd", "refunded cs_test_paid 3000 of 3000"},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, refundMail, refundMail}, Calls: []string{paidCall}},
		{Name: "SameRefundAnotherEvent", Given: []string{paid, refundPartial}, Deliver: "refund.partial.again",
			Want:   []string{"order cs_test_paid partially_refunded 3000 usd buyer@example.com", "refund pi_test_paid 100 usd", "refund pi_test_paid 100 usd", "refunded cs_test_paid 100 of 3000"},
			Emails: []cf.Mail{confirmation, refundMail}, Calls: []string{paidCall}},
		{Name: "PartialRefundBeforeOrder", Given: []string{refundPartial}, Deliver: paid,
			Want:  []string{"order cs_test_paid partially_refunded 3000 usd buyer@example.com", "refund pi_test_paid 100 usd", "refunded cs_test_paid 100 of 3000"},
			Steps: paidSteps, Emails: []cf.Mail{refundMail, confirmation}, Calls: []string{paidCall}},

		// Refunds follow their own state: a failed refund takes back what
		// its charge.refunded added, whichever arrives first.
		{Name: "RefundFailed", Given: []string{paid, refunded, reCreated}, Deliver: reFailed,
			Want:   []string{orderPaid, refundRow, reRowFailed, reRowSucceeded},
			Emails: []cf.Mail{confirmation, refundMail}, Calls: []string{paidCall}},
		{Name: "RefundFailedAsChargeRefundUpdated", Given: []string{paid, refunded}, Deliver: reUpdated,
			Want: []string{orderPaid, refundRow, reRowFailed}, Emails: []cf.Mail{confirmation, refundMail}, Calls: []string{paidCall}},
		// charge.refunded delivered after its refund failed: the order stays
		// paid, and the customer is not told of a refund that failed.
		{Name: "RefundFailedBeforeItsCharge", Given: []string{paid, reFailed}, Deliver: refunded,
			Want: []string{orderPaid, refundRow, reRowFailed}, Emails: []cf.Mail{confirmation}, Calls: []string{paidCall}},
		{Name: "RefundFailedBeforeTheOrder", Given: []string{refunded, reFailed}, Deliver: paid,
			Want: []string{orderPaid, refundRow, reRowFailed}, Steps: paidSteps, Emails: []cf.Mail{refundMail, confirmation}, Calls: []string{paidCall}},
		// An order that started refunded (its refund came first) was never
		// confirmed nor fulfilled: its refund's failure does both, once.
		{Name: "RefundFailedAfterTheOrderStartedRefunded", Given: []string{refunded, paid}, Deliver: reFailed,
			Want: []string{orderPaid, refundRow, reRowFailed}, Steps: paidSteps, Emails: []cf.Mail{refundMail, confirmation},
			Calls: []string{paidCall}},
		{Name: "RefundObjectAlone", Given: []string{paid}, Deliver: reCreated,
			Want: []string{orderRefunded, reRowSucceeded, "refunded cs_test_paid 3000 of 3000"}, Emails: []cf.Mail{confirmation}, Calls: []string{paidCall}},
		{Name: "RefundCanceled", Given: []string{paid, refunded}, Deliver: "refund.canceled",
			Want: []string{orderPaid, refundRow, "refund pi_test_paid 3000 usd re_test_1 canceled"}, Emails: []cf.Mail{confirmation, refundMail},
			Calls: []string{paidCall}},
		// A failed refund's status is final: an older succeeded arriving
		// after it changes nothing.
		{Name: "RefundFailedIsFinal", Given: []string{paid, refunded, reFailed}, Deliver: reCreated,
			Want: []string{orderPaid, refundRow, reRowFailed, reRowSucceeded}, Emails: []cf.Mail{confirmation, refundMail}, Calls: []string{paidCall}},
		// After the failure, a second refund: the charge's figure counts it
		// alone, and its email goes.
		{Name: "SecondRefundAfterAFailure", Given: []string{paid, refunded, reFailed}, Deliver: reSecond,
			Want: []string{"order cs_test_paid partially_refunded 3000 usd buyer@example.com", "refund pi_test_paid 1000 usd", refundRow, reRowFailed,
				"refunded cs_test_paid 1000 of 3000"},
			Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, refundMail, {To: "buyer@example.com", Contains: "We have refunded 10.00 USD"}},
			Calls: []string{paidCall}},
		{Name: "SecondRefundObjectAfterAFailure", Given: []string{paid, refunded, reFailed, reSecond}, Deliver: reSecondMade,
			Want: []string{"order cs_test_paid partially_refunded 3000 usd buyer@example.com", "refund pi_test_paid 1000 usd",
				"refund pi_test_paid 1000 usd re_test_2 succeeded", refundRow, reRowFailed, "refunded cs_test_paid 1000 of 3000"},
			Emails: []cf.Mail{confirmation, refundMail, {To: "buyer@example.com", Contains: "We have refunded 10.00 USD"}},
			Calls:  []string{paidCall}},
		{Name: "UnknownRefundStatusParked", Deliver: "refund.unknown_status", Outcome: webhooks.OutcomeParked,
			Check: count(`SELECT count(*) FROM processed_events WHERE status = 'parked' AND last_error LIKE '%refund status%'`, 1)},

		// Disputes mark their order: lost marks it, whichever comes first;
		// won (a withdrawal after the loss, later) clears it.
		{Name: "DisputeLostMarksTheOrder", Given: []string{paidDisputed}, Deliver: dpLost,
			Want: []string{orderDisputed, dpLostRow, "dispute_lost cs_test_paid"}, Emails: []cf.Mail{confirmation}, Calls: []string{disputedCall}},
		{Name: "DisputeLostBeforeTheOrder", Given: []string{dpLost}, Deliver: paidDisputed,
			Want: []string{orderDisputed, dpLostRow, "dispute_lost cs_test_paid"}, Steps: paidSteps, Emails: []cf.Mail{confirmation},
			Calls: []string{disputedCall}},
		{Name: "DisputeWonAfterLostClears", Given: []string{paidDisputed, dpLost}, Deliver: dpWonLater,
			Want: []string{orderDisputed, dpWon}, Emails: []cf.Mail{confirmation}, Calls: []string{disputedCall}},
		{Name: "DisputeOlderLostAfterWon", Given: []string{paidDisputed, dpWonLater}, Deliver: dpLostEarlier,
			Want: []string{orderDisputed, dpWon}, Emails: []cf.Mail{confirmation}, Calls: []string{disputedCall}},
		{Name: "DisputeWonAndLostOfOneSecond", Given: []string{paidDisputed, dpClosed}, Deliver: dpLost,
			Want: []string{orderDisputed, dpWon}, Emails: []cf.Mail{confirmation}, Calls: []string{disputedCall}},

		// Subscriptions.
		{Name: "SubscriptionCreated", Deliver: subCreated, Want: []string{sub1Trialing}},
		{Name: "SubscriptionItemsPeriodEnd", Deliver: subActive, Want: []string{sub1Active}},
		{Name: "CheckoutPairInOrder", Given: []string{subIncomplete}, Deliver: subSameSecond, Want: []string{sub2Active}},
		{Name: "CheckoutPairReversed", Given: []string{subSameSecond}, Deliver: subIncomplete, Want: []string{sub2Active}},
		{Name: "CreatedAfterUpdated", Given: []string{subCancel}, Deliver: subCreated, Want: []string{sub1Cancel}},
		{Name: "OlderUpdateChangesNothing", Given: []string{subCancel}, Deliver: subActive, Want: []string{sub1Cancel}},
		{Name: "CanceledIsFinal", Given: []string{subDeleted}, Deliver: subCancel, Want: []string{sub1Canceled}},
		{Name: "CanceledIsFinalEvenForALaterEvent", Given: []string{subDeleted}, Deliver: "sub.updated.later", Want: []string{sub1Canceled}},
		{Name: "SubscriptionEndedEmail", Given: []string{customerCreated, subCreated}, Deliver: subDeleted,
			Want: []string{sub1Canceled, subscriber}, Steps: []string{"email.subscription_ended=done"}, Emails: []cf.Mail{endedMail}},
		{Name: "SubscriptionEndedNoAddress", Deliver: subDeleted, Want: []string{sub1Canceled},
			Steps: []string{"email.subscription_ended=skipped"}},
		{Name: "SubscriptionEndedOnce", Given: []string{customerCreated, subDeleted}, Deliver: "sub.deleted.again",
			Want: []string{sub1Canceled, subscriber}, Emails: []cf.Mail{endedMail}},
		{Name: "TrialWillEnd", Given: []string{customerCreated}, Deliver: trialWillEnd, Want: []string{subscriber},
			Steps: []string{"email.trial_ending=done"}, Emails: []cf.Mail{trialMail}},
		{Name: "TrialWillEndNoAddress", Deliver: trialWillEnd, Steps: []string{"email.trial_ending=skipped"}},
		{Name: "TrialWillEndAfterDeleted", Given: []string{customerCreated, subDeleted}, Deliver: trialWillEnd,
			Want: []string{sub1Canceled, subscriber}, Emails: []cf.Mail{endedMail}},
		{Name: "AddressFromCheckout", Given: []string{"checkout.customer"}, Deliver: trialWillEnd,
			Want:  []string{orderPaid, "customer cus_test_1 buyer@example.com"},
			Steps: []string{"email.trial_ending=done"}, Emails: []cf.Mail{confirmation, {To: "buyer@example.com", Contains: "Your free trial ends"}},
			Calls: []string{paidCall}},
		{Name: "AddressFromInvoice", Given: []string{"invoice.customer"}, Deliver: trialWillEnd,
			Want:  []string{"invoice in_test_1 paid 2000/2000 usd payer@example.com", "customer cus_test_1 payer@example.com"},
			Steps: []string{"email.trial_ending=done"}, Emails: []cf.Mail{receipt, {To: "payer@example.com", Contains: "Your free trial ends"}}},

		// Disputes.
		{Name: "DisputeCreated", Deliver: dpCreated, Want: []string{dpNeeds}, Steps: []string{"email.dispute=done"},
			Emails: []cf.Mail{disputeMail}},
		{Name: "DisputeNoticeWithoutNotifyEmail", Options: []rt.Option{rt.Env("NOTIFY_EMAIL", "")}, Deliver: dpCreated,
			Want: []string{dpNeeds}, Steps: []string{"email.dispute=skipped"}},
		{Name: "DisputeCreatedAfterUpdated", Given: []string{dpUpdated}, Deliver: dpCreated, Want: []string{dpReview},
			Steps: []string{"email.dispute=done"}, Emails: []cf.Mail{disputeMail}},
		{Name: "DisputeClosedIsFinal", Given: []string{dpClosed}, Deliver: dpUpdated, Want: []string{dpWon}},
		{Name: "DisputeClosedIsFinalEvenForALaterEvent", Given: []string{dpClosed}, Deliver: "dispute.updated.later", Want: []string{dpWon}},

		// Mode and account.
		{Name: "OtherModeIgnored", Options: []rt.Option{rt.Env("STRIPE_LIVEMODE", "true")}, Deliver: paid,
			Outcome: webhooks.OutcomeIgnored, Check: ignoredBecause("other mode")},
		{Name: "ModeFromAPIKey", Options: []rt.Option{rt.Env("STRIPE_API_KEY", "rk_live_receivertest")}, Deliver: paid,
			Outcome: webhooks.OutcomeIgnored, Check: ignoredBecause("a test-mode event, and only live-mode events are acted on")},
		{Name: "LiveModeActedOn", Options: []rt.Option{rt.Env("STRIPE_LIVEMODE", "true")}, Deliver: "paid.live",
			Want: []string{orderPaid}, Steps: paidSteps, Emails: []cf.Mail{confirmation}, Calls: []string{paidCall}},
		{Name: "AccountNotConfiguredIgnored", Deliver: "paid.account", Outcome: webhooks.OutcomeIgnored,
			Check: ignoredBecause("account not configured")},
		{Name: "ConnectedAccountActedOn", Options: []rt.Option{rt.Env("STRIPE_CONNECT_ACCOUNTS", "acct_other,acct_test_1")},
			Deliver: "paid.account", Want: []string{orderPaid, "account stripe cs_test_paid acct_test_1"},
			Steps: paidSteps, Emails: []cf.Mail{confirmation}, Calls: []string{paidCall}},
		{Name: "EveryAccount", Options: []rt.Option{rt.Env("STRIPE_CONNECT_ACCOUNTS", "*")}, Deliver: "sub.account",
			Want: []string{strings.Replace(sub1Active, "account=-", "account=acct_test_1", 1)}},
	},
	History: []string{paid, unpaid, succeeded, created, finalized, invFailed, invAction, invPaid, refundPartial, refunded,
		reCreated, reFailed, reUpdated, reSecond, reSecondMade,
		customerCreated, subCreated, trialWillEnd, subActive, subCancel, subDeleted, subIncomplete, subSameSecond,
		dpCreated, dpWithdrawn, dpUpdated, dpClosed, dpReinstated},
	Sequences: map[string][]string{
		"Invoice":            {created, finalized, invPaid},
		"Dunning":            {created, invFailed, invAction, invPaid},
		"AsyncCheckout":      {unpaid, succeeded},
		"AsyncFailed":        {unpaid, failed},
		"Refund":             {paid, refunded},
		"PartialRefunds":     {paid, refundPartial, refundRest},
		"CheckoutPair":       {subIncomplete, subSameSecond},
		"SubscriptionEnding": {subActive, subCancel, subDeleted},
		"Dispute":            {dpCreated, dpWithdrawn, dpUpdated, dpClosed},
		"FailedRefund":       {paid, refunded, reCreated, reFailed},
		"FailedThenRefunded": {paid, refunded, reFailed, reSecond},
		"DisputeLost":        {paidDisputed, dpCreated, dpUpdated, dpLost},
		"DisputeLostThenWon": {paidDisputed, dpCreated, dpLostEarlier, dpWonLater},
	},
	Samples: &cf.Samples{Provider: "stripe", Expect: map[string]cf.Sample{
		"charge.refunded.supabase-stripe-sync-engine.json": {Want: []string{"refund pi_3Kl36gJDPojXS6LN02fQVtKR 2500 usd"}},
		"checkout.session.completed.payment_mode.stripe-ruby-mock.json": {
			Want:   []string{"order cs_00000000000000 paid 25000 usd example@example.com", "customer cus_00000000000000 example@example.com"},
			Emails: []cf.Mail{{To: "example@example.com", Contains: "is confirmed"}},
			Calls:  []string{"stripe cs_00000000000000 25000 usd example@example.com"}},
		"checkout.session.completed.supabase-stripe-sync-engine.json": {
			Want:   []string{"order cs_live_9RBjcHiy2i5p99Tf1MYM90c3SHK1grU0E6Ae6pKWR2KPA4ZiuKiB2X1Y3X paid 999 eur billz@supabase.io", "customer cus_IhGfebO16cMIGN billz@supabase.io"},
			Emails: []cf.Mail{{To: "billz@supabase.io", Contains: "is confirmed"}},
			Calls:  []string{"stripe cs_live_9RBjcHiy2i5p99Tf1MYM90c3SHK1grU0E6Ae6pKWR2KPA4ZiuKiB2X1Y3X 999 eur billz@supabase.io"}},
		"invoice.paid.stripe-ruby-mock.json": {Want: []string{"invoice in_000000000000000000000000 paid 2000/2000 usd -"}},
		"invoice.paid.subscription_cycle.supabase-stripe-sync-engine.json": {
			Want: []string{"invoice in_1KJqKBJDPojXS6LNJbvLUgEy paid 0/0 usd -"}},
		"customer.subscription.created.supabase-stripe-sync-engine.json": {
			Want: []string{"subscription sub_JdIzvfy6o5GZRd active customer=cus_IhGfebO16cMIGN period_end=2021-07-08 cancel_at_period_end=false account=-"}},
		"customer.subscription.updated.supabase-stripe-sync-engine.json": {
			Want: []string{"subscription sub_JLEPMp81LApOJl active customer=cus_IhGfebO16cMIGN period_end=2021-05-21 cancel_at_period_end=false account=-"}},
		"customer.subscription.deleted.supabase-stripe-sync-engine.json": {
			Want: []string{"subscription sub_JdIzvfy6o5GZRd canceled customer=cus_IhGfebO16cMIGN period_end=2021-07-08 cancel_at_period_end=false account=-"}},
	}},
}

// The View's subscriptions and disputes, as the must-show tables print them.
const (
	subscriptionsView = `SELECT format('subscription %s %s customer=%s period_end=%s cancel_at_period_end=%s account=%s',
    external_id, status, coalesce(customer_id, '-'), coalesce(to_char(current_period_end AT TIME ZONE 'UTC', 'YYYY-MM-DD'), '-'),
    cancel_at_period_end::text, coalesce(account_id, '-')) FROM subscriptions ORDER BY 1`
	disputesView = `SELECT format('dispute %s %s %s %s %s due=%s pi=%s account=%s', external_id, status, amount_cents, currency,
    coalesce(reason, '-'), coalesce(to_char(evidence_due_by AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), '-'),
    coalesce(payment_intent_id, '-'), coalesce(account_id, '-')) FROM disputes ORDER BY 1`
)

func init() {
	suite.Events["refund.canceled"] = cf.Event{Fixture: reFailed, Replace: []string{"evt_test_refund_failed", "evt_test_refund_canceled",
		`"refund.failed"`, `"refund.updated"`, `"status": "failed"`, `"status": "canceled"`, `"failure_reason": "expired_or_canceled_card"`, `"failure_reason": null`}}
	suite.Events["refund.unknown_status"] = cf.Event{Fixture: reCreated, Replace: []string{`"status": "succeeded"`, `"status": "refunded_somehow"`}}
	suite.Events[reSecond] = cf.Event{Fixture: refunded, Replace: []string{"evt_test_charge_refunded", "evt_test_refund_second",
		`"created": 1764460800`, `"created": 1764806400`, `"amount_refunded": 3000`, `"amount_refunded": 1000`, `"refunded": true`, `"refunded": false`}}
	suite.Events[reSecondMade] = cf.Event{Fixture: reCreated, Replace: []string{"evt_test_refund_created", "evt_test_refund_second_created",
		"re_test_1", "re_test_2", `"created": 1764460800`, `"created": 1764806400`, `"amount": 3000`, `"amount": 1000`}}
	suite.Events[paidDisputed] = cf.Event{Fixture: paid, Replace: []string{"pi_test_paid", "pi_test_dispute"}}
	suite.Events[dpLost] = cf.Event{Fixture: dpClosed, Replace: []string{"evt_test_dispute_closed", "evt_test_dispute_lost",
		`"status": "won"`, `"status": "lost"`}}
	suite.Events[dpLostEarlier] = cf.Event{Fixture: dpClosed, Replace: []string{"evt_test_dispute_closed", "evt_test_dispute_lost_earlier",
		`"status": "won"`, `"status": "lost"`, `"created": 1767052800`, `"created": 1766966400`}}
	suite.Events[dpWonLater] = cf.Event{Fixture: dpClosed, Replace: []string{"evt_test_dispute_closed", "evt_test_dispute_won_later",
		`"created": 1767052800`, `"created": 1767139200`}}
	suite.Events["sub.deleted.again"] = cf.Event{Fixture: subDeleted, Replace: []string{"evt_test_sub_deleted", "evt_test_sub_deleted_again"}}
	// Events of a later second than the subscription's deletion and the
	// dispute's closing, which a final status must still resist.
	suite.Events["sub.updated.later"] = cf.Event{Fixture: subCancel, Replace: []string{"evt_test_sub_updated_cancel", "evt_test_sub_updated_later",
		`"created": 1766188800`, `"created": 1769000000`}}
	suite.Events["dispute.updated.later"] = cf.Event{Fixture: dpUpdated, Replace: []string{"evt_test_dispute_updated", "evt_test_dispute_updated_later",
		`"created": 1764633600`, `"created": 1769000000`}}
}

func TestConformance(t *testing.T) { cf.Run(t, suite) }

// ignoredBecause checks that the delivered event was stored, ignored, with
// a reason that contains why, and wrote nothing.
func ignoredBecause(why string) func(*testing.T, *rt.Receiver, rt.Response) {
	return func(t *testing.T, r *rt.Receiver, _ rt.Response) {
		var outcome, reason string
		if err := r.Pool.QueryRow(context.Background(), `SELECT outcome, coalesce(last_error, '') FROM processed_events
WHERE kind = 'event' ORDER BY claimed_at DESC LIMIT 1`).Scan(&outcome, &reason); err != nil {
			t.Fatal(err)
		}
		if outcome != "ignored" || !strings.Contains(reason, why) {
			t.Errorf("stored outcome %q, reason %q; want ignored because %q", outcome, reason, why)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE kind = 'step'`); n != 0 {
			t.Errorf("%d steps planned for an ignored event", n)
		}
	}
}

func set(k, v string) func(http.Header, []byte) { return func(h http.Header, _ []byte) { h.Set(k, v) } }

// signedAt signs the request d from now.
func signedAt(d time.Duration) func(http.Header, []byte) {
	return func(h http.Header, body []byte) {
		h.Set("Stripe-Signature", stripe.SignatureHeader(body, rt.Secret(stripe.Spec), time.Now().Add(d)))
	}
}

func count(sql string, want int) func(*testing.T, *rt.Receiver, rt.Response) {
	return func(t *testing.T, r *rt.Receiver, _ rt.Response) {
		if n := r.Count(t, sql); n != want {
			t.Errorf("%s = %d, want %d", sql, n, want)
		}
	}
}

// TestCrashBetweenClaimAndCommit kills the delivery's transaction after its
// claim, while its order insert waits on a lock the test holds: nothing of
// the event may remain, and the next delivery claims and writes.
func TestCrashBetweenClaimAndCommit(t *testing.T) {
	r := rt.New(t, providers.List())
	ctx := context.Background()
	lock, err := r.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan rt.Response, 1)
	go func() { done <- suite.Deliver(t, r, paid) }()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_ = r.Pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO orders%'`).Scan(&pid)
	}
	if pid == 0 {
		t.Fatal("the delivery never blocked inside its transaction")
	}
	if _, err := r.Pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.Status < 500 {
		t.Fatalf("a delivery whose transaction died answered %d", res.Status)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key LIKE 'evt_test_checkout_paid%'`); n != 0 {
		t.Fatalf("%d claims survived the crash: the hole", n)
	}
	suite.DeliverOK(t, r, paid)
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE external_id = 'cs_test_paid' AND status = 'paid'`); n != 1 {
		t.Fatalf("paid orders after the retry = %d, want 1", n)
	}
}

// TestRefundRacingOrder: a refund and the checkout of its payment intent,
// delivered at the same moment, always leave the order refunded, whichever
// transaction commits first.
func TestRefundRacingOrder(t *testing.T) {
	r := rt.New(t, providers.List())
	const pairs = 20
	var wg sync.WaitGroup
	for i := range pairs {
		sfx := fmt.Sprintf("_race%02d", i)
		checkout := rt.Fixture(t, paid, "evt_test_checkout_paid", "evt_co"+sfx, "cs_test_paid", "cs"+sfx, "pi_test_paid", "pi"+sfx)
		refund := rt.Fixture(t, refunded, "evt_test_charge_refunded", "evt_re"+sfx, "ch_test_1", "ch"+sfx, "pi_test_paid", "pi"+sfx)
		for _, body := range [][]byte{checkout, refund} {
			wg.Go(func() {
				if res := r.Deliver(t, stripe.Spec, body, nil); res.Status != 200 {
					t.Errorf("status %d: %s", res.Status, res.Body)
				}
			})
		}
	}
	wg.Wait()
	// A fulfillment may have been called for an order paid before its
	// refund arrived; what must never happen is a paid order left behind.
	if n := r.Count(t, `SELECT count(*) FROM orders WHERE status = 'refunded'`); n != pairs {
		t.Errorf("refunded orders = %d of %d", n, pairs)
	}
}
