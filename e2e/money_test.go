package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	paddle "github.com/paywebhooks/receiver/internal/providers/paddle"
)

// The money states through the built binary: subscriptions, refunds by
// amount, disputes, customers' addresses, Stripe's mode and connected
// accounts, and Paddle's subscriptions and refund adjustments, every event
// delivered twice in a shuffled order; then what `events show` and the
// console say of them.

// moneyT0 is when the scenario's first event happened.
const moneyT0 = 1764460800

// stripeAt is a Stripe Event created at the given second, of the given mode
// and account ("" for the platform's own), with previous attributes when
// prev is set.
func stripeAt(id, typ string, created int64, live bool, account string, object, prev map[string]any) delivery {
	ev := map[string]any{
		"id": id, "object": "event", "api_version": "2023-10-16", "created": created, "livemode": live,
		"pending_webhooks": 1, "request": map[string]any{"id": nil, "idempotency_key": nil}, "type": typ,
		"data": map[string]any{"object": object},
	}
	if prev != nil {
		ev["data"].(map[string]any)["previous_attributes"] = prev
	}
	if account != "" {
		ev["account"] = account
	}
	return stripeDelivery(id, mustJSON(ev))
}

func subscriptionObject(status string, periodEnd int64, cancel bool) map[string]any {
	return map[string]any{"id": "sub_e2e_1", "object": "subscription", "customer": "cus_e2e_1", "status": status,
		"cancel_at_period_end": cancel, "current_period_end": periodEnd, "trial_end": moneyT0 + 14*86400,
		"items": map[string]any{"object": "list", "data": []any{map[string]any{"id": "si_e2e_1"}}}}
}

func chargeObject(refunded int64) map[string]any {
	return map[string]any{"id": "ch_e2e_1", "object": "charge", "payment_intent": "pi_e2e_money", "amount": 10000,
		"amount_refunded": refunded, "currency": "usd", "refunded": refunded == 10000,
		"billing_details": map[string]any{"email": "buyer@example.com"}}
}

func disputeObject(status string) map[string]any {
	return map[string]any{"id": "dp_e2e_1", "object": "dispute", "amount": 10000, "currency": "usd", "charge": "ch_e2e_1",
		"payment_intent": "pi_e2e_money", "reason": "product_not_received", "status": status,
		"evidence_details": map[string]any{"due_by": moneyT0 + 9*86400 - 1}}
}

func paddleDelivery(id, typ, at string, data map[string]any) delivery {
	body := mustJSON(map[string]any{"event_id": id, "event_type": typ, "occurred_at": at, "notification_id": "ntf_" + id, "data": data})
	return delivery{ID: id, Key: id, Path: "/webhooks/paddle", Body: body, header: func() http.Header {
		return http.Header{"Content-Type": {"application/json"},
			paddle.HeaderSignature: {paddle.SignatureHeader(body, time.Now(), paddleSecret)}}
	}}
}

// TestMoneyStates runs the scenario in two shuffled orders.
func TestMoneyStates(t *testing.T) {
	for _, seed := range []uint64{7, 12} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { moneyScenario(t, seed) })
	}
}

func moneyScenario(t *testing.T, seed uint64) {
	w := newWorld(t)
	p := startReceiver(t, "money", w.env("STRIPE_LIVEMODE", "false", "STRIPE_CONNECT_ACCOUNTS", "acct_e2eConnected",
		"PADDLE_WEBHOOK_SECRET", paddleSecret, "PADDLE_SIGNATURE_TOLERANCE", "1m",
		"ADMIN_ADDR", "localhost:0", "ADMIN_TOKEN", consoleToken))
	const day = 86400
	checkout := map[string]any{"id": "cs_e2e_money", "object": "checkout.session", "mode": "payment", "payment_status": "paid",
		"status": "complete", "amount_total": 10000, "currency": "usd", "payment_intent": "pi_e2e_money", "customer": "cus_e2e_1",
		"customer_details": map[string]any{"email": "buyer@example.com"}, "customer_email": nil}
	connected := maps(checkout, "id", "cs_e2e_connected", "payment_intent", "pi_e2e_connected")
	events := []delivery{
		// The customer's address comes with the checkout (customer and customer_details.email).
		stripeAt("evt_e2e_checkout", "checkout.session.completed", moneyT0-100, false, "", checkout, nil),
		// A subscription's life, a checkout pair of one second first.
		stripeAt("evt_e2e_sub_created", "customer.subscription.created", moneyT0, false, "", subscriptionObject("incomplete", moneyT0+14*day, false), nil),
		stripeAt("evt_e2e_sub_active", "customer.subscription.updated", moneyT0, false, "", subscriptionObject("trialing", moneyT0+14*day, false),
			map[string]any{"status": "incomplete"}),
		stripeAt("evt_e2e_sub_trial", "customer.subscription.trial_will_end", moneyT0+11*day, false, "", subscriptionObject("trialing", moneyT0+14*day, false), nil),
		stripeAt("evt_e2e_sub_paid", "customer.subscription.updated", moneyT0+14*day, false, "", subscriptionObject("active", moneyT0+44*day, false),
			map[string]any{"status": "trialing"}),
		stripeAt("evt_e2e_sub_cancel", "customer.subscription.updated", moneyT0+20*day, false, "", subscriptionObject("active", moneyT0+44*day, true),
			map[string]any{"cancel_at_period_end": false}),
		stripeAt("evt_e2e_sub_deleted", "customer.subscription.deleted", moneyT0+44*day, false, "", subscriptionObject("canceled", moneyT0+44*day, true), nil),
		// 1.00, then the rest, of the 100.00 order.
		stripeAt("evt_e2e_refund_1", "charge.refunded", moneyT0+1*day, false, "", chargeObject(100), map[string]any{"amount_refunded": 0}),
		stripeAt("evt_e2e_refund_2", "charge.refunded", moneyT0+2*day, false, "", chargeObject(10000), map[string]any{"amount_refunded": 100}),
		// A dispute, opened and lost.
		stripeAt("evt_e2e_dp_created", "charge.dispute.created", moneyT0+3*day, false, "", disputeObject("needs_response"), nil),
		stripeAt("evt_e2e_dp_withdrawn", "charge.dispute.funds_withdrawn", moneyT0+3*day, false, "", disputeObject("needs_response"), nil),
		stripeAt("evt_e2e_dp_updated", "charge.dispute.updated", moneyT0+5*day, false, "", disputeObject("under_review"), nil),
		stripeAt("evt_e2e_dp_closed", "charge.dispute.closed", moneyT0+40*day, false, "", disputeObject("lost"), nil),
		// Mode and account: a live event and an unlisted account are ignored; the listed account is acted on.
		stripeAt("evt_e2e_live", "checkout.session.completed", moneyT0, true, "", maps(checkout, "id", "cs_e2e_live", "payment_intent", "pi_e2e_live"), nil),
		stripeAt("evt_e2e_other_account", "checkout.session.completed", moneyT0, false, "acct_e2eOther",
			maps(checkout, "id", "cs_e2e_other", "payment_intent", "pi_e2e_other"), nil),
		stripeAt("evt_e2e_connected", "checkout.session.completed", moneyT0, false, "acct_e2eConnected", connected, nil),
		// Paddle: a subscription, and two refund adjustments of one transaction (one sent twice).
		paddleDelivery("evt_e2e_pdl_sub_created", "subscription.created", "2026-02-01T10:00:00.100000Z", paddleSub("trialing", "2026-02-15T10:00:00Z")),
		paddleDelivery("evt_e2e_pdl_sub_active", "subscription.activated", "2026-02-15T10:00:01.200000Z", paddleSub("active", "2026-03-15T10:00:00Z")),
		paddleDelivery("evt_e2e_pdl_sub_canceled", "subscription.canceled", "2026-03-15T10:00:02.300000Z", paddleSub("canceled", "")),
		paddleDelivery("evt_e2e_pdl_txn", "transaction.completed", "2026-02-15T10:00:00.900000Z", map[string]any{
			"id": "txn_e2e_1", "status": "completed", "currency_code": "USD", "custom_data": map[string]any{"email": "paddle@example.com"},
			"details": map[string]any{"totals": map[string]any{"grand_total": "3000"}}}),
		paddleDelivery("evt_e2e_pdl_adj1_created", "adjustment.created", "2026-02-16T09:00:00.000000Z", paddleAdjustment("adj_e2e_1", "1000")),
		paddleDelivery("evt_e2e_pdl_adj1_updated", "adjustment.updated", "2026-02-16T09:05:00.000000Z", paddleAdjustment("adj_e2e_1", "1000")),
		paddleDelivery("evt_e2e_pdl_adj2", "adjustment.created", "2026-02-17T09:00:00.000000Z", paddleAdjustment("adj_e2e_2", "2000")),
	}
	order := slices.Clone(events)
	rand.New(rand.NewPCG(seed, seed)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	// Each event twice: the whole shuffled list, then again in another order.
	again := slices.Clone(order)
	rand.New(rand.NewPCG(seed+1, seed+1)).Shuffle(len(again), func(i, j int) { again[i], again[j] = again[j], again[i] })
	var sent []string
	for _, d := range append(order, again...) {
		mustPost(t, p.URL, d, http.StatusOK)
		sent = append(sent, d.ID)
	}
	t.Logf("delivered, each twice, in this order: %s", strings.Join(sent, " "))
	w.waitSettled(t, 30*time.Second)

	rows := func(sql string) []string {
		t.Helper()
		r, err := w.DB.Query(context.Background(), sql)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(what string, got, want []string) {
		t.Helper()
		t.Logf("%s:\n  %s", what, strings.Join(got, "\n  "))
		if !slices.Equal(got, want) {
			t.Errorf("%s = %q, want %q", what, got, want)
		}
	}
	check("orders", rows(`SELECT format('%s %s %s refunded=%s account=%s', external_id, status, amount_cents, amount_refunded_cents,
		coalesce(account_id, '-')) FROM orders ORDER BY external_id`), []string{
		"cs_e2e_connected paid 10000 refunded=0 account=acct_e2eConnected",
		"cs_e2e_money refunded 10000 refunded=10000 account=-",
		"txn_e2e_1 refunded 3000 refunded=3000 account=-",
	})
	check("subscriptions", rows(`SELECT format('%s %s %s period_end=%s cancel_at_period_end=%s', source, external_id, status,
		coalesce(to_char(current_period_end AT TIME ZONE 'UTC', 'YYYY-MM-DD'), '-'), cancel_at_period_end::text)
		FROM subscriptions ORDER BY source, external_id`), []string{
		"paddle sub_e2e_pdl canceled period_end=- cancel_at_period_end=false",
		"stripe sub_e2e_1 canceled period_end=2026-01-13 cancel_at_period_end=true",
	})
	check("disputes", rows(`SELECT format('%s %s %s %s %s', external_id, status, amount_cents, reason, payment_intent_id) FROM disputes`),
		[]string{"dp_e2e_1 lost 10000 product_not_received pi_e2e_money"})
	check("ignored", rows(`SELECT format('%s %s', event_key, last_error) FROM processed_events
		WHERE kind = 'event' AND outcome = 'ignored' ORDER BY event_key`), []string{
		"evt_e2e_live a live-mode event, and only test-mode events are acted on (other mode: STRIPE_LIVEMODE, else STRIPE_API_KEY's prefix)",
		`evt_e2e_other_account an event of connected account "acct_e2eOther", which STRIPE_CONNECT_ACCOUNTS does not list (account not configured)`,
	})
	if n := count(t, w.DB, `SELECT count(*) FROM orders WHERE external_id IN ('cs_e2e_live', 'cs_e2e_other')`); n != 0 {
		t.Errorf("%d orders of ignored events", n)
	}

	// Emails: one per refund, the dispute's notice, the subscription's;
	// the trial-ending one only if it came before the deletion.
	var mails []string
	for _, m := range w.SMTP.Messages() {
		mails = append(mails, strings.Join(m.To, ",")+": "+subjectOf(string(m.Data)))
	}
	slices.Sort(mails)
	t.Logf("emails:\n  %s", strings.Join(mails, "\n  "))
	// What is sent depends on what was known when each event came.
	before := func(a, b string) bool { return slices.Index(sent, a) < slices.Index(sent, b) }
	one := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	// The order's confirmation, unless its full refund came first.
	orderMails := 1 + one(before("evt_e2e_checkout", "evt_e2e_refund_2"))
	// The subscription's emails need the address the checkout gives; the
	// trial-ending one is not sent after the deletion.
	ended := one(before("evt_e2e_checkout", "evt_e2e_sub_deleted"))
	trial := one(before("evt_e2e_checkout", "evt_e2e_sub_trial") && before("evt_e2e_sub_trial", "evt_e2e_sub_deleted"))
	// Paddle's refund emails need the order's address: the first approved
	// event of an adjustment decides.
	adj1 := one(before("evt_e2e_pdl_txn", "evt_e2e_pdl_adj1_created") && before("evt_e2e_pdl_txn", "evt_e2e_pdl_adj1_updated"))
	adj2 := one(before("evt_e2e_pdl_txn", "evt_e2e_pdl_adj2"))
	// Paddle's order is confirmed unless both adjustments (its whole
	// amount) were recorded before it.
	paddleOrder := one(adj1 == 1 || adj2 == 1)
	want := map[string]int{
		"buyer@example.com: Your order":                                                        orderMails,
		"buyer@example.com: Your refund of 1.00 USD":                                           1,
		"buyer@example.com: Your refund of 99.00 USD":                                          1,
		"buyer@example.com: Your subscription has ended":                                       ended,
		"buyer@example.com: Your trial ends on 14 December 2025":                               trial,
		notifyEmail + ": Dispute dp_e2e_1 of 100.00 USD: respond by 8 December 2025 23:59 UTC": 1,
		"paddle@example.com: Your order":                                                       paddleOrder,
		"paddle@example.com: Your refund of 10.00 USD":                                         adj1,
		"paddle@example.com: Your refund of 20.00 USD":                                         adj2,
	}
	t.Logf("emails expected from the order of arrival: %v", want)
	got := map[string]int{}
	for _, m := range mails {
		k := m
		if strings.Contains(m, ": Your order") {
			k = m[:strings.Index(m, ": Your order")+len(": Your order")]
		}
		got[k]++
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d emails %q, want %d", got[k], k, n)
		}
	}
	if len(mails) != sum(want) {
		t.Errorf("%d emails, want %d", len(mails), sum(want))
	}
	for id, n := range w.mailsByID() {
		if n != 1 {
			t.Errorf("Message-ID %s sent %d times", id, n)
		}
	}

	// What an operator sees: events show and the console.
	env := map[string]string{"DATABASE_URL": w.DBURL}
	show := runServerCmd(t, env, "events", "show", "evt_e2e_refund_1")
	t.Logf("events show evt_e2e_refund_1:\n%s", show.Stdout[:strings.Index(show.Stdout, "\nbody:")])
	for _, s := range []string{"records:", "order #", "cs_e2e_money", "refunded 100.00 USD", "refund", "ch_e2e_1", "1.00 USD",
		"dispute (stripe)", "dp_e2e_1", "lost"} {
		if !strings.Contains(show.Stdout, s) {
			t.Errorf("events show evt_e2e_refund_1 lacks %q:\n%s", s, show.Stdout)
		}
	}
	show = runServerCmd(t, env, "events", "show", "evt_e2e_sub_deleted")
	for _, s := range []string{"subscription (stripe)", "sub_e2e_1", "canceled", "email.subscription_ended"} {
		if !strings.Contains(show.Stdout, s) {
			t.Errorf("events show evt_e2e_sub_deleted lacks %q:\n%s", s, show.Stdout)
		}
	}
	show = runServerCmd(t, env, "events", "show", "evt_e2e_other_account")
	if !strings.Contains(show.Stdout, "ignored   an event of connected account") {
		t.Errorf("events show of an ignored event does not say why:\n%s", show.Stdout)
	}
	admin := consoleAdminURL(t, p)
	for key, want := range map[string][]string{
		"evt_e2e_connected":   {"account acct_e2eConnected"},
		"evt_e2e_refund_2":    {"100.00 USD refunded", "dispute", "dp_e2e_1"},
		"evt_e2e_sub_deleted": {"subscription", "sub_e2e_1", "cancels at period end"},
		"evt_e2e_live":        {"Why it was ignored", "other mode"},
	} {
		page := consoleGet(t, admin+"/events/"+key)
		for _, s := range want {
			if !strings.Contains(page, s) {
				t.Errorf("console page of %s lacks %q", key, s)
			}
		}
	}
	if code := p.Term(t, 30*time.Second); code != 0 {
		t.Errorf("the receiver exited %d after SIGTERM", code)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func subjectOf(data string) string {
	for _, line := range strings.Split(data, "\r\n") {
		if s, ok := strings.CutPrefix(line, "Subject: "); ok {
			return s
		}
	}
	return ""
}

// maps returns a copy of m with the pairs set.
func maps(m map[string]any, kv ...string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func paddleSub(status, periodEnd string) map[string]any {
	d := map[string]any{"id": "sub_e2e_pdl", "status": status, "customer_id": "ctm_e2e_1", "currency_code": "USD",
		"scheduled_change": nil, "current_billing_period": nil}
	if periodEnd != "" {
		d["current_billing_period"] = map[string]any{"starts_at": "2026-02-01T10:00:00Z", "ends_at": periodEnd}
	}
	return d
}

func paddleAdjustment(id, total string) map[string]any {
	return map[string]any{"id": id, "action": "refund", "type": "partial", "status": "approved", "transaction_id": "txn_e2e_1",
		"currency_code": "USD", "totals": map[string]any{"total": total, "currency_code": "USD"}}
}

// consoleGet reads a console page with the token.
func consoleGet(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	res, err := shortClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	return string(b)
}
