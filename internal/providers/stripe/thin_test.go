package stripe_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/providers"
	cf "github.com/paywebhooks/receiver/internal/providers/conformance"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/providers/stripe/stripetest"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// thinKey is the API key of the thin suites' Stripe fake: a test key, so
// test-mode events are the ones acted on.
const thinKey = "sk_test_thin_receivertest"

// Objects of the thin suite, as Stripe's API returns their current state.
var (
	thinSession = map[string]any{"id": "cs_test_thin", "object": "checkout.session", "mode": "payment", "status": "complete",
		"payment_status": "paid", "amount_total": 3000, "currency": "usd", "payment_intent": "pi_test_thin",
		"customer": "cus_test_thin", "customer_details": map[string]any{"email": "buyer@example.com"}, "customer_email": nil}
	// lostSession is the paid Checkout Session whose checkout.session.completed
	// Stripe never generated.
	lostSession = map[string]any{"id": "cs_test_lost", "object": "checkout.session", "mode": "payment", "status": "complete",
		"payment_status": "paid", "amount_total": 4900, "currency": "eur", "payment_intent": "pi_test_lost",
		"customer_details": map[string]any{"email": "lost@example.com"}, "customer_email": nil}
	thinInvoice = map[string]any{"id": "in_test_thin", "object": "invoice", "status": "paid", "amount_due": 2000,
		"amount_paid": 2000, "currency": "usd", "customer": "cus_test_thin", "customer_email": "payer@example.com", "attempt_count": 1}
	thinFailedInvoice = map[string]any{"id": "in_test_thin_failed", "object": "invoice", "status": "open", "amount_due": 1500,
		"amount_paid": 0, "currency": "usd", "customer_email": "payer@example.com", "attempt_count": 2,
		"hosted_invoice_url": "https://invoice.stripe.com/i/test_thin", "next_payment_attempt": nil}
	thinCharge = map[string]any{"id": "ch_test_thin", "object": "charge", "payment_intent": "pi_test_thin", "amount": 3000,
		"amount_refunded": 3000, "refunded": true, "currency": "usd", "billing_details": map[string]any{"email": "buyer@example.com"}}
	thinSubscription = map[string]any{"id": "sub_test_thin", "object": "subscription", "status": "active", "customer": "cus_test_thin",
		"cancel_at_period_end": false, "items": map[string]any{"object": "list",
			"data": []any{map[string]any{"id": "si_test_thin", "current_period_end": 1767225600}}}}
	thinDispute = map[string]any{"id": "dp_test_thin", "object": "dispute", "status": "needs_response", "amount": 4200,
		"currency": "usd", "reason": "fraudulent", "charge": "ch_test_dispute", "payment_intent": "pi_test_dispute",
		"evidence_details": map[string]any{"due_by": 1765238399}}
	thinCustomer = map[string]any{"id": "cus_test_thin", "object": "customer", "email": "subscriber@example.com"}
)

// Rows of the thin suite's View.
const (
	thinOrderPaid = "order cs_test_thin paid 3000 usd buyer@example.com"
	lostOrderPaid = "order cs_test_lost paid 4900 eur lost@example.com"
	lostAlertRow  = "health halert_test_lost checkout.session.completed checkout.session cs_test_lost severity=critical applied=checkout.session.completed"
)

var (
	lostConfirmation = cf.Mail{To: "lost@example.com", Contains: "is confirmed"}
	lostCall         = "stripe cs_test_lost 4900 eur lost@example.com"
	alertSteps       = []string{"alert.email=skipped", "alert.webhook=skipped"}
)

// related names an object by its type and id, with its API url.
func related(typ, path string) *stripetest.Related {
	return &stripetest.Related{ID: path[strings.LastIndexByte(path, '/')+1:], Type: typ, URL: path}
}

// lostData is the data of a health event about a Checkout Session whose
// checkout.session.completed was never generated.
func lostData(alert, session string) map[string]any {
	return map[string]any{
		"alert_id": alert, "grouping_key": "_grouping_test", "severity": "critical",
		"summary":     "We have failed to create a notification for your Stripe account.",
		"resolved_at": "2026-12-07T10:00:00.000Z",
		"impact": map[string]any{"event_type": "checkout.session.completed",
			"related_object": related("checkout.session", "/v1/checkout/sessions/"+session)},
	}
}

// thinWorld is a Stripe fake holding the thin suite's events and objects,
// and the notifications of those events, by name.
type thinWorld struct {
	api    *stripetest.Server
	events map[string]cf.Event
}

func newThinWorld(t *testing.T) *thinWorld {
	w := &thinWorld{api: stripetest.New(t, thinKey), events: map[string]cf.Event{}}
	for path, obj := range map[string]any{
		"/v1/checkout/sessions/cs_test_thin": thinSession, "/v1/checkout/sessions/cs_test_lost": lostSession,
		"/v1/invoices/in_test_thin": thinInvoice, "/v1/invoices/in_test_thin_failed": thinFailedInvoice,
		"/v1/charges/ch_test_thin": thinCharge, "/v1/subscriptions/sub_test_thin": thinSubscription,
		"/v1/disputes/dp_test_thin": thinDispute, "/v1/customers/cus_test_thin": thinCustomer,
		"/v1/refunds/re_test_thin": map[string]any{"id": "re_test_thin", "object": "refund", "amount": 3000,
			"charge": "ch_test_thin", "payment_intent": "pi_test_thin", "status": "succeeded", "currency": "usd"},
	} {
		w.api.PutObject(path, "", obj)
	}
	w.api.PutObject("/v1/checkout/sessions/cs_test_acct", "acct_test_1", map[string]any{"id": "cs_test_acct",
		"object": "checkout.session", "status": "complete", "payment_status": "paid", "amount_total": 1000, "currency": "usd",
		"customer_details": map[string]any{"email": "acct@example.com"}})
	add := func(name string, e stripetest.Thin) {
		e.ID = "evt_test_65" + strings.NewReplacer(".", "_", "-", "_").Replace(name)
		_, note := w.api.AddThin(e)
		w.events[name] = cf.Event{Body: note}
	}
	add("v1.checkout", stripetest.Thin{Type: "v1.checkout.session.completed", Related: related("checkout.session", "/v1/checkout/sessions/cs_test_thin")})
	add("v1.invoice.paid", stripetest.Thin{Type: "v1.invoice.paid", Related: related("invoice", "/v1/invoices/in_test_thin")})
	add("v1.invoice.failed", stripetest.Thin{Type: "v1.invoice.payment_failed", Related: related("invoice", "/v1/invoices/in_test_thin_failed")})
	add("v1.refund", stripetest.Thin{Type: "v1.charge.refunded", Related: related("charge", "/v1/charges/ch_test_thin")})
	add("v1.sub", stripetest.Thin{Type: "v1.customer.subscription.updated", Related: related("subscription", "/v1/subscriptions/sub_test_thin")})
	add("v1.dispute", stripetest.Thin{Type: "v1.charge.dispute.created", Related: related("dispute", "/v1/disputes/dp_test_thin")})
	add("v1.customer", stripetest.Thin{Type: "v1.customer.created", Related: related("customer", "/v1/customers/cus_test_thin")})
	add("v1.lost.completed", stripetest.Thin{Type: "v1.checkout.session.completed", Related: related("checkout.session", "/v1/checkout/sessions/cs_test_lost")})
	add("v1.missing", stripetest.Thin{Type: "v1.checkout.session.completed", Related: related("checkout.session", "/v1/checkout/sessions/cs_test_gone")})
	add("v1.account", stripetest.Thin{Type: "v1.checkout.session.completed", Context: "acct_test_1",
		Related: related("checkout.session", "/v1/checkout/sessions/cs_test_acct")})
	add("v1.live", stripetest.Thin{Type: "v1.checkout.session.completed", Live: true, Related: related("checkout.session", "/v1/checkout/sessions/cs_test_thin")})
	add("health.lost", stripetest.Thin{Type: stripe.TypeGenerationFailure, Data: lostData("halert_test_lost", "cs_test_lost"),
		Related: &stripetest.Related{ID: "halert_test_lost", Type: "v2.core.health.alert", URL: "/v2/core/health/alerts/halert_test_lost"}})
	add("health.lost.again", stripetest.Thin{Type: stripe.TypeGenerationFailure, Data: lostData("halert_test_lost", "cs_test_lost")})
	add("health.intent", stripetest.Thin{Type: stripe.TypeGenerationFailure, Data: map[string]any{"alert_id": "halert_test_pi",
		"severity": "non_critical", "summary": "We have failed to create a notification for your Stripe account.",
		"impact": map[string]any{"event_type": "payment_intent.requires_action",
			"related_object": related("payment_intent", "/v1/payment_intents/pi_test_x")}}})
	add("health.refund", stripetest.Thin{Type: stripe.TypeGenerationFailure, Data: map[string]any{"alert_id": "halert_test_refund",
		"severity": "critical", "impact": map[string]any{"event_type": "refund.created",
			"related_object": related("refund", "/v1/refunds/re_test_thin")}}})
	add("ping", stripetest.Thin{Type: stripe.TypeDestinationPing, Related: &stripetest.Related{ID: "ed_test_1",
		Type: "v2.core.event_destination", URL: "/v2/core/event_destinations/ed_test_1"}})
	add("meter", stripetest.Thin{Type: "v1.billing.meter.no_meter_found", Related: related("billing.meter", "/v1/billing/meters/mtr_test_1")})
	return w
}

// thinSuite is the conformance suite of the thin route, on w's fake.
func thinSuite(w *thinWorld) cf.Suite {
	return cf.Suite{
		Spec:      stripe.ThinSpec,
		Providers: providers.List(),
		Options:   []rt.Option{rt.Env("STRIPE_API_KEY", thinKey), rt.Env("STRIPE_API_BASE", w.api.URL)},
		Events:    w.events,
		View: append(append([]string{}, suite.View...),
			`SELECT format('health %s %s %s %s severity=%s applied=%s', alert_id, event_type, object_type, object_id,
			 coalesce(severity, '-'), coalesce(applied_as, '-')) FROM stripe_health_alerts ORDER BY 1`),
		VerifyEvent: "v1.checkout",
		Verify: []cf.Request{
			{Name: "ErrGarbageHeader", Edit: set("Stripe-Signature", "garbage"), Reason: "invalid_header"},
			{Name: "ErrStaleTimestamp", Edit: thinSignedAt(-6 * time.Minute), Reason: "timestamp_too_old"},
			{Name: "ErrFutureTimestamp", Edit: thinSignedAt(6 * time.Minute), Reason: "timestamp_in_future"},
			{Name: "ErrWrongContentType", Edit: set("Content-Type", "text/plain"), Reason: "unsupported_content_type"},
			{Name: "ErrNotJSON", Body: []byte(`this is not json`), Reason: "malformed_json"},
			{Name: "ErrSnapshotEvent", Body: []byte(`{"id":"evt_test_snapshot","object":"event","type":"checkout.session.completed",` +
				`"data":{"object":{"id":"cs_test_thin"}}}`), Reason: "not_a_thin_event"},
			{Name: "ErrNotAnEvent", Body: []byte(`{"id":"evt_test_x","object":"list","type":"v1.invoice.paid"}`), Reason: "not_an_event"},
			{Name: "ErrIDNotStripes", Body: []byte(`{"id":"evt_test/../x","object":"v2.core.event","type":"v1.invoice.paid"}`), Reason: "not_an_event"},
			{Name: "ErrOverLimit", Body: []byte(`{"id":"evt_big","object":"v2.core.event","type":"x","pad":"` +
				strings.Repeat("a", 1<<20) + `"}`), Status: 413, Reason: "body_too_large"},
		},
		Cases: []cf.Case{
			{Name: "CheckoutCompleted", Deliver: "v1.checkout",
				Want:  []string{thinOrderPaid, "customer cus_test_thin buyer@example.com"},
				Steps: paidSteps, Emails: []cf.Mail{confirmation}, Calls: []string{"stripe cs_test_thin 3000 usd buyer@example.com"}},
			{Name: "InvoicePaid", Deliver: "v1.invoice.paid",
				Want:  []string{"invoice in_test_thin paid 2000/2000 usd payer@example.com", "customer cus_test_thin payer@example.com"},
				Steps: []string{"email.receipt=done"}, Emails: []cf.Mail{receipt}},
			{Name: "InvoicePaymentFailed", Deliver: "v1.invoice.failed",
				Want:  []string{"invoice in_test_thin_failed pending 0/1500 usd payer@example.com", "invoice_failure in_test_thin_failed attempt 2"},
				Steps: []string{"email.dunning=done"}, Emails: []cf.Mail{{To: "payer@example.com", Contains: "could not collect the payment"}}},
			{Name: "ChargeRefunded", Given: []string{"v1.checkout"}, Deliver: "v1.refund",
				Want: []string{"order cs_test_thin refunded 3000 usd buyer@example.com", "refund pi_test_thin 3000 usd",
					"refunded cs_test_thin 3000 of 3000", "customer cus_test_thin buyer@example.com"},
				Steps: []string{"email.refund=done"}, Emails: []cf.Mail{confirmation, refundMail},
				Calls: []string{"stripe cs_test_thin 3000 usd buyer@example.com"}},
			{Name: "SubscriptionUpdated", Deliver: "v1.sub",
				Want: []string{"subscription sub_test_thin active customer=cus_test_thin period_end=2026-01-01 cancel_at_period_end=false account=-"}},
			{Name: "DisputeCreated", Deliver: "v1.dispute",
				Want:  []string{"dispute dp_test_thin needs_response 4200 usd fraudulent due=2025-12-08T23:59:59Z pi=pi_test_dispute account=-"},
				Steps: []string{"email.dispute=done"}, Emails: []cf.Mail{disputeMail}},
			{Name: "CustomerCreated", Deliver: "v1.customer", Want: []string{"customer cus_test_thin subscriber@example.com"}},
			{Name: "ObjectGoneParked", Deliver: "v1.missing", Outcome: webhooks.OutcomeParked,
				Check: thinClaim("parked", "could not be read")},

			// The health event.
			{Name: "GenerationFailureRecovered", Deliver: "health.lost",
				Want:  []string{lostOrderPaid, lostAlertRow},
				Steps: append(append([]string{}, alertSteps...), paidSteps...), Emails: []cf.Mail{lostConfirmation},
				Calls: []string{lostCall}},
			{Name: "GenerationFailureReportedTwice", Given: []string{"health.lost"}, Deliver: "health.lost.again",
				Want:   []string{lostOrderPaid, lostAlertRow},
				Emails: []cf.Mail{lostConfirmation}, Calls: []string{lostCall}},
			{Name: "MissingEventArrivesAfterRecovery", Given: []string{"health.lost"}, Deliver: "v1.lost.completed",
				Want:   []string{lostOrderPaid, lostAlertRow},
				Emails: []cf.Mail{lostConfirmation}, Calls: []string{lostCall}},
			{Name: "GenerationFailureAfterTheEventCame", Given: []string{"v1.lost.completed"}, Deliver: "health.lost",
				Want: []string{lostOrderPaid, lostAlertRow}, Steps: alertSteps,
				Emails: []cf.Mail{lostConfirmation}, Calls: []string{lostCall}},
			{Name: "GenerationFailureOfARefund", Deliver: "health.refund",
				Want: []string{"refund pi_test_thin 3000 usd",
					"health halert_test_refund refund.created refund re_test_thin severity=critical applied=charge.refunded"},
				Steps: append(append([]string{}, alertSteps...), "email.refund=done"), Emails: []cf.Mail{refundMail}},
			{Name: "GenerationFailureOfAnObjectNotActedOn", Deliver: "health.intent",
				Want:  []string{"health halert_test_pi payment_intent.requires_action payment_intent pi_test_x severity=non_critical applied=-"},
				Steps: alertSteps},
			// The order came before (its emails first, in order): the alert
			// still goes, once, saying so.
			{Name: "GenerationFailureAlertSent", Given: []string{"v1.lost.completed"}, Deliver: "health.lost",
				Options: []rt.Option{rt.Env("ALERT_EMAIL", "ops@example.com")},
				Want:    []string{lostOrderPaid, lostAlertRow},
				Steps:   []string{"alert.email=done", "alert.webhook=skipped"},
				Emails: []cf.Mail{lostConfirmation, {To: "ops@example.com",
					Contains: "Recovered: applied as checkout.session.completed"}},
				Calls: []string{lostCall}},

			// Ping, other types, mode and account.
			{Name: "Ping", Deliver: "ping"},
			{Name: "UnhandledType", Deliver: "meter", Outcome: webhooks.OutcomeIgnored},
			{Name: "OtherModeIgnored", Deliver: "v1.live", Outcome: webhooks.OutcomeIgnored, Check: ignoredBecause("other mode")},
			{Name: "AccountNotConfiguredIgnored", Deliver: "v1.account", Outcome: webhooks.OutcomeIgnored,
				Check: ignoredBecause("account not configured")},
			{Name: "ConnectedAccountActedOn", Options: []rt.Option{rt.Env("STRIPE_CONNECT_ACCOUNTS", "acct_test_1")},
				Deliver: "v1.account", Want: []string{"order cs_test_acct paid 1000 usd acct@example.com", "account stripe cs_test_acct acct_test_1"},
				Steps: paidSteps, Emails: []cf.Mail{{To: "acct@example.com", Contains: "is confirmed"}},
				Calls: []string{"stripe cs_test_acct 1000 usd acct@example.com"}},
		},
		History: []string{"v1.customer", "v1.checkout", "v1.invoice.paid", "v1.invoice.failed", "v1.refund", "v1.sub",
			"v1.dispute", "health.lost", "health.intent", "ping"},
		Sequences: map[string][]string{
			"LostCheckout": {"health.lost", "v1.lost.completed", "health.lost.again"},
			"Refund":       {"v1.checkout", "v1.refund"},
		},
	}
}

// TestThinConformance runs the conformance suite on the thin route, its
// events fetched from a Stripe fake.
func TestThinConformance(t *testing.T) {
	w := newThinWorld(t)
	cf.Run(t, thinSuite(w))
}

// thinSignedAt signs a thin request d from now.
func thinSignedAt(d time.Duration) func(http.Header, []byte) {
	return func(h http.Header, body []byte) {
		h.Set("Stripe-Signature", stripe.SignatureHeader(body, rt.Secret(stripe.ThinSpec), time.Now().Add(d)))
	}
}

// thinClaim checks the delivered event's stored status and that its
// reason says why.
func thinClaim(status, why string) func(*testing.T, *rt.Receiver, rt.Response) {
	return func(t *testing.T, r *rt.Receiver, _ rt.Response) {
		var got, reason string
		if err := r.Pool.QueryRow(context.Background(), `SELECT status, coalesce(last_error, '') FROM processed_events
WHERE kind = 'event' ORDER BY claimed_at DESC LIMIT 1`).Scan(&got, &reason); err != nil {
			t.Fatal(err)
		}
		if got != status || !strings.Contains(reason, why) {
			t.Errorf("stored %q, reason %q; want %s because %q", got, reason, status, why)
		}
	}
}

// familyObjects are an object of each family of handled types, by the API
// path Stripe's thin events name it with.
var familyObjects = map[string]struct {
	typ, path string
	object    map[string]any
}{
	"checkout.session": {"checkout.session", "/v1/checkout/sessions/cs_test_thin", thinSession},
	"invoice":          {"invoice", "/v1/invoices/in_test_thin", thinInvoice},
	"charge":           {"charge", "/v1/charges/ch_test_thin", thinCharge},
	"subscription":     {"subscription", "/v1/subscriptions/sub_test_thin", thinSubscription},
	"dispute":          {"dispute", "/v1/disputes/dp_test_thin", thinDispute},
	"customer":         {"customer", "/v1/customers/cus_test_thin", thinCustomer},
	"refund": {"refund", "/v1/refunds/re_test_thin", map[string]any{"id": "re_test_thin", "object": "refund", "amount": 3000,
		"charge": "ch_test_thin", "payment_intent": "pi_test_thin", "status": "succeeded", "currency": "usd", "created": 1764460800}},
}

// familyOf is the family of objects a handled event type is about.
func familyOf(t *testing.T, typ string) string {
	for _, p := range []struct{ prefix, family string }{{"checkout.session.", "checkout.session"}, {"invoice.", "invoice"},
		{"charge.refunded", "charge"}, {"charge.refund.", "refund"}, {"refund.", "refund"},
		{"customer.subscription.", "subscription"}, {"charge.dispute.", "dispute"}, {"customer.", "customer"}} {
		if strings.HasPrefix(typ, p.prefix) {
			return p.family
		}
	}
	t.Fatalf("no family of objects for %s", typ)
	return ""
}

// TestThinEveryHandledType: the thin version of every type the Stripe
// provider handles is fetched (its v2 Event, then its object), stored as
// fetched and processed; a second delivery of it costs no API call.
func TestThinEveryHandledType(t *testing.T) {
	api := stripetest.New(t, thinKey)
	for _, f := range familyObjects {
		api.PutObject(f.path, "", f.object)
	}
	r := rt.New(t, providers.List(), rt.Env("STRIPE_API_KEY", thinKey), rt.Env("STRIPE_API_BASE", api.URL))
	var v1 []string
	for _, typ := range stripe.ThinSpec.Types {
		if strings.HasPrefix(typ, "v1.") {
			v1 = append(v1, typ)
		}
	}
	// Every type but a Stripe Entitlements summary, which names no object
	// to fetch and comes to the snapshot endpoint only.
	if len(v1) != len(stripe.Spec.Types)-1 || slices.Contains(v1, "v1.entitlements.active_entitlement_summary.updated") {
		t.Fatalf("%d v1 thin types for the %d types the Stripe provider handles", len(v1), len(stripe.Spec.Types))
	}
	for _, typ := range v1 {
		f := familyObjects[familyOf(t, strings.TrimPrefix(typ, "v1."))]
		id, note := api.AddThin(stripetest.Thin{Type: typ, Related: related(f.typ, f.path)})
		before := len(api.Requests())
		res := r.Deliver(t, stripe.ThinSpec, note, nil)
		if res.Status != http.StatusOK || cf.Outcome(res) != webhooks.OutcomeProcessed {
			t.Errorf("%s: %d %s, want 200 processed", typ, res.Status, strings.TrimSpace(res.Body))
			continue
		}
		var paths []string
		for _, q := range api.Requests()[before:] {
			paths = append(paths, q.Path)
		}
		want := []string{"/v2/core/events/" + id, f.path}
		if f.typ == "refund" { // and the refund's charge, whose total refunded a health recovery applies
			want = append(want, "/v1/charges/ch_test_thin")
		}
		if strings.Join(paths, " ") != strings.Join(want, " ") {
			t.Errorf("%s fetched %v, want %v", typ, paths, want)
		}
		if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE event_key = $1 AND source = 'stripe_thin'
AND event_type = $2 AND convert_from(body, 'UTF8')::jsonb @? '$ ? (@.object == "paywebhooks.fetched_thin_event" && exists(@.related_object.state.id))'`,
			id, typ); n != 1 {
			t.Errorf("%s: %d claims storing what was fetched, want 1", typ, n)
		}
		before = len(api.Requests())
		if res := r.Deliver(t, stripe.ThinSpec, note, nil); cf.Outcome(res) != webhooks.OutcomeDuplicate {
			t.Errorf("%s again: %d %s, want 200 duplicate", typ, res.Status, res.Body)
		}
		if n := len(api.Requests()) - before; n != 0 {
			t.Errorf("%s again made %d API calls, want none (its claim answers it)", typ, n)
		}
	}
	t.Logf("%d thin types fetched and processed; state: %q", len(v1), r.Snapshot(t))
}

// TestThinFetchFailures: while Stripe's API answers 500, then hangs, a
// thin event is answered 503 and nothing is written for it (no claim, no
// row, no step); once the API answers, the same delivery is processed, and
// its copies cost no call. One event of each family of objects, and the
// health event.
func TestThinFetchFailures(t *testing.T) {
	cases := []struct {
		name string
		thin stripetest.Thin
		want string // a row the event writes once processed
	}{
		{"checkout", stripetest.Thin{Type: "v1.checkout.session.completed", Related: related("checkout.session", "/v1/checkout/sessions/cs_test_thin")},
			`SELECT count(*) FROM orders WHERE external_id = 'cs_test_thin' AND status = 'paid'`},
		{"invoice", stripetest.Thin{Type: "v1.invoice.paid", Related: related("invoice", "/v1/invoices/in_test_thin")},
			`SELECT count(*) FROM invoices WHERE stripe_invoice_id = 'in_test_thin' AND status = 'paid'`},
		{"refund", stripetest.Thin{Type: "v1.charge.refunded", Related: related("charge", "/v1/charges/ch_test_thin")},
			`SELECT count(*) FROM refunds WHERE payment_intent_id = 'pi_test_thin'`},
		{"subscription", stripetest.Thin{Type: "v1.customer.subscription.updated", Related: related("subscription", "/v1/subscriptions/sub_test_thin")},
			`SELECT count(*) FROM subscriptions WHERE external_id = 'sub_test_thin'`},
		{"dispute", stripetest.Thin{Type: "v1.charge.dispute.created", Related: related("dispute", "/v1/disputes/dp_test_thin")},
			`SELECT count(*) FROM disputes WHERE external_id = 'dp_test_thin'`},
		{"customer", stripetest.Thin{Type: "v1.customer.created", Related: related("customer", "/v1/customers/cus_test_thin")},
			`SELECT count(*) FROM customers WHERE customer_id = 'cus_test_thin'`},
		{"health", stripetest.Thin{Type: stripe.TypeGenerationFailure, Data: lostData("halert_test_lost", "cs_test_lost")},
			`SELECT count(*) FROM orders WHERE external_id = 'cs_test_lost' AND status = 'paid'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			api := stripetest.New(t, thinKey)
			for _, f := range familyObjects {
				api.PutObject(f.path, "", f.object)
			}
			api.PutObject("/v1/checkout/sessions/cs_test_lost", "", lostSession)
			_, note := api.AddThin(c.thin)
			r := rt.New(t, providers.List(), rt.Env("STRIPE_API_KEY", thinKey), rt.Env("STRIPE_API_BASE", api.URL))
			nothingWritten := func(when string) {
				t.Helper()
				if n := r.Count(t, `SELECT count(*) FROM processed_events`); n != 0 {
					t.Errorf("%s: %d claims written", when, n)
				}
				if st := r.Snapshot(t); len(st) != 0 || r.Count(t, c.want) != 0 {
					t.Errorf("%s: rows written: %v", when, st)
				}
				if len(r.SMTP.Messages())+len(r.API.Requests()) != 0 {
					t.Errorf("%s: %d emails and %d fulfillment calls", when, len(r.SMTP.Messages()), len(r.API.Requests()))
				}
			}
			refused := func(when string) {
				t.Helper()
				res := r.Deliver(t, stripe.ThinSpec, note, nil)
				if res.Status != http.StatusServiceUnavailable || cf.Outcome(res) != webhooks.OutcomeFetchFailed {
					t.Fatalf("%s: %d %s, want 503 fetch_failed", when, res.Status, strings.TrimSpace(res.Body))
				}
				nothingWritten(when)
			}

			api.FailNext(http.StatusInternalServerError, 3) // the first try and its two retries
			refused("while the API answers 500")
			api.HangNext(1)
			start := time.Now()
			refused("while the API hangs")
			t.Logf("a hanging API was given up on after %s (the fetch's bound is %s)", time.Since(start).Round(time.Millisecond), stripe.FetchTimeout)

			res := r.Deliver(t, stripe.ThinSpec, note, nil)
			if res.Status != http.StatusOK || cf.Outcome(res) != webhooks.OutcomeProcessed {
				t.Fatalf("once the API answers: %d %s, want 200 processed", res.Status, res.Body)
			}
			if n := r.Count(t, c.want); n != 1 {
				t.Errorf("%s = %d, want 1", c.want, n)
			}
			calls := len(api.Requests())
			if res := r.Deliver(t, stripe.ThinSpec, note, nil); cf.Outcome(res) != webhooks.OutcomeDuplicate {
				t.Errorf("a copy: %d %s, want 200 duplicate", res.Status, res.Body)
			}
			if n := len(api.Requests()) - calls; n != 0 {
				t.Errorf("a copy made %d API calls, want none", n)
			}
		})
	}
}

// TestThinFetchesBounded: while MaxFetches thin events wait on a hanging
// API, one more is refused 503 at once with nothing written (it holds no
// slot waiting), and a snapshot event is processed meanwhile.
func TestThinFetchesBounded(t *testing.T) {
	api := stripetest.New(t, thinKey)
	api.PutObject("/v1/checkout/sessions/cs_test_thin", "", thinSession)
	r := rt.New(t, providers.List(), rt.Env("STRIPE_API_KEY", thinKey), rt.Env("STRIPE_API_BASE", api.URL))
	api.HangNext(stripe.MaxFetches)
	hung := make(chan rt.Response, stripe.MaxFetches)
	for range stripe.MaxFetches {
		_, note := api.AddThin(stripetest.Thin{Type: "v1.checkout.session.completed", Related: related("checkout.session", "/v1/checkout/sessions/cs_test_thin")})
		go func() { hung <- r.Deliver(t, stripe.ThinSpec, note, nil) }()
	}
	waitFor(t, "every fetch to hang", func() bool { return api.Hanging() == stripe.MaxFetches })
	_, note := api.AddThin(stripetest.Thin{Type: "v1.checkout.session.completed", Related: related("checkout.session", "/v1/checkout/sessions/cs_test_thin")})
	res := r.Deliver(t, stripe.ThinSpec, note, nil)
	if res.Status != http.StatusServiceUnavailable || cf.Outcome(res) != webhooks.OutcomeFetchFailed {
		t.Errorf("one fetch more: %d %s, want 503 fetch_failed", res.Status, res.Body)
	}
	if len(hung) != 0 {
		t.Errorf("the refusal came after %d hanging fetches ended: it waited", len(hung))
	}
	if res := suite.Deliver(t, r, paid); res.Status != http.StatusOK {
		t.Errorf("a snapshot event while thin fetches hang: %d %s", res.Status, res.Body)
	}
	for range stripe.MaxFetches {
		if res := <-hung; res.Status != http.StatusServiceUnavailable {
			t.Errorf("a fetch of a hanging API: %d %s, want 503", res.Status, res.Body)
		}
	}
	if n := r.Count(t, `SELECT count(*) FROM processed_events WHERE source = 'stripe_thin'`); n != 0 {
		t.Errorf("%d thin claims written", n)
	}
}

// waitFor polls cond until it holds, or fails the test after a generous
// deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestThinBesideSnapshot: while a team moves from its snapshot endpoint to
// thin events, one change arrives both ways. A v1 thin event whose v2 Event
// names its snapshot event (snapshot_event) writes under that event's id,
// so that each effect happens once, whichever comes first: one failed
// attempt recorded, one dunning email; one order, one confirmation, one
// fulfillment call.
func TestThinBesideSnapshot(t *testing.T) {
	api := stripetest.New(t, thinKey)
	api.PutObject("/v1/invoices/in_test_1", "", map[string]any{"id": "in_test_1", "object": "invoice", "status": "open",
		"amount_due": 2000, "amount_paid": 0, "currency": "usd", "customer_email": "payer@example.com", "attempt_count": 1})
	api.PutObject("/v1/checkout/sessions/cs_test_paid", "", map[string]any{"id": "cs_test_paid", "object": "checkout.session",
		"status": "complete", "payment_status": "paid", "amount_total": 3000, "currency": "usd", "payment_intent": "pi_test_paid",
		"customer_details": map[string]any{"email": "buyer@example.com"}})
	for _, c := range []struct {
		name, snapshot, thinType, path, objType string
		thinFirst                               bool
		want                                    string // the rows of the effect, counted once
	}{
		{"DunningSnapshotFirst", invFailed, "v1.invoice.payment_failed", "/v1/invoices/in_test_1", "invoice", false,
			`SELECT count(*) FROM invoice_payment_failures WHERE stripe_invoice_id = 'in_test_1'`},
		{"DunningThinFirst", invFailed, "v1.invoice.payment_failed", "/v1/invoices/in_test_1", "invoice", true,
			`SELECT count(*) FROM invoice_payment_failures WHERE stripe_invoice_id = 'in_test_1'`},
		{"CheckoutThinFirst", paid, "v1.checkout.session.completed", "/v1/checkout/sessions/cs_test_paid", "checkout.session", true,
			`SELECT count(*) FROM orders WHERE external_id = 'cs_test_paid'`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rt.New(t, providers.List(), rt.Env("STRIPE_API_KEY", thinKey), rt.Env("STRIPE_API_BASE", api.URL))
			snapshot := rt.Fixture(t, c.snapshot)
			var head struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(snapshot, &head); err != nil {
				t.Fatal(err)
			}
			_, note := api.AddThin(stripetest.Thin{Type: c.thinType, SnapshotEvent: head.ID, Related: related(c.objType, c.path)})
			deliveries := []func() rt.Response{
				func() rt.Response { return r.Deliver(t, stripe.Spec, snapshot, nil) },
				func() rt.Response { return r.Deliver(t, stripe.ThinSpec, note, nil) },
			}
			if c.thinFirst {
				deliveries[0], deliveries[1] = deliveries[1], deliveries[0]
			}
			for _, d := range deliveries {
				if res := d(); res.Status != http.StatusOK || cf.Outcome(res) != webhooks.OutcomeProcessed {
					t.Fatalf("%d %s, want 200 processed", res.Status, res.Body)
				}
			}
			if n := r.Count(t, c.want); n != 1 {
				t.Errorf("%s = %d, want 1", c.want, n)
			}
			if n := len(r.SMTP.Messages()); n != 1 {
				t.Errorf("%d emails for one change sent both ways, want 1", n)
			}
			if n := len(r.API.Requests()); c.objType == "checkout.session" && n != 1 {
				t.Errorf("%d fulfillment calls, want 1", n)
			}
		})
	}
}

// TestThinStoredBodyPlansAlone: what is stored for a fetched thin event is
// all its plan needs: the events read back from their claims, processed
// again into an emptied database, write what they wrote, with no API call.
func TestThinStoredBodyPlansAlone(t *testing.T) {
	w := newThinWorld(t)
	r := rt.New(t, providers.List(), rt.Env("STRIPE_API_KEY", thinKey), rt.Env("STRIPE_API_BASE", w.api.URL))
	s := thinSuite(w)
	ctx := context.Background()
	var stored []webhooks.Event
	for _, name := range []string{"v1.checkout", "health.lost"} {
		res := s.DeliverOK(t, r, name)
		var out struct{ Event string }
		if err := json.Unmarshal([]byte(res.Body), &out); err != nil {
			t.Fatal(err)
		}
		ev, err := webhooks.LoadEvent(ctx, r.Pool, out.Event)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, ev)
	}
	before := r.Snapshot(t)
	if _, err := r.Pool.Exec(ctx, `TRUNCATE processed_events, orders, customers, stripe_health_alerts CASCADE`); err != nil {
		t.Fatal(err)
	}
	w.api.FailNext(http.StatusInternalServerError, 100) // any call would fail
	calls := len(w.api.Requests())
	provs := r.Server.Providers()
	for _, ev := range stored {
		if res := r.Server.Processor().Process(ctx, provs[ev.Source], ev); res.Outcome != webhooks.OutcomeProcessed {
			t.Errorf("%s from its stored body: %s (%v), want processed", ev.Key, res.Outcome, res.Err)
		}
	}
	if n := len(w.api.Requests()) - calls; n != 0 {
		t.Errorf("%d API calls, want none", n)
	}
	if diff := cmp.Diff(before, r.Snapshot(t)); diff != "" {
		t.Errorf("rows from the stored bodies (-delivered +replayed):\n%s", diff)
	}
	if n := r.Count(t, `SELECT count(*) FROM stripe_health_alerts WHERE alert_id = 'halert_test_lost'`); n != 1 {
		t.Errorf("%d health alert rows, want 1", n)
	}
}
