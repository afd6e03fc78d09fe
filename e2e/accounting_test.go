package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The accounting edges of issue 34 through the built binary: a refund
// that fails, a Paddle refund adjustment that is reversed, a dispute lost
// then won. Each sequence is delivered in its order and reversed, every
// event twice, to a receiver of its own; the order's state is logged after
// each event and must end the same in both orders.

// accountingStep is one event of a sequence and the order's state it
// leaves when the sequence is delivered in order.
type accountingStep struct {
	what string
	d    delivery
	want string
}

// refundObject is a Stripe Refund of the e2e's 100.00 order.
func refundObject(status string) map[string]any {
	var reason any
	if status == "failed" {
		reason = "expired_or_canceled_card"
	}
	return map[string]any{"id": "re_e2e_acct_1", "object": "refund", "amount": 10000, "charge": "ch_e2e_acct_1",
		"created": moneyT0 + 86400, "currency": "usd", "failure_reason": reason, "payment_intent": "pi_e2e_acct",
		"reason": "requested_by_customer", "status": status}
}

func accountingCheckout(id, pi string) map[string]any {
	return map[string]any{"id": id, "object": "checkout.session", "mode": "payment", "payment_status": "paid",
		"status": "complete", "amount_total": 10000, "currency": "usd", "payment_intent": pi,
		"customer_details": map[string]any{"email": "acct@example.com"}, "customer_email": nil}
}

func accountingDispute(status string) map[string]any {
	return map[string]any{"id": "dp_e2e_acct_1", "object": "dispute", "amount": 10000, "currency": "usd", "charge": "ch_e2e_acct_2",
		"payment_intent": "pi_e2e_acct_dispute", "reason": "fraudulent", "status": status,
		"evidence_details": map[string]any{"due_by": moneyT0 + 9*86400 - 1}}
}

func accountingAdjustment(status string) map[string]any {
	a := paddleAdjustment("adj_e2e_acct_1", "3000")
	a["transaction_id"], a["status"], a["type"] = "txn_e2e_acct", status, "full"
	return a
}

// accountingSequences are the three sequences, each in order.
func accountingSequences() map[string][]accountingStep {
	const day = 86400
	charge := map[string]any{"id": "ch_e2e_acct_1", "object": "charge", "payment_intent": "pi_e2e_acct", "amount": 10000,
		"amount_refunded": 10000, "currency": "usd", "refunded": true, "billing_details": map[string]any{"email": "acct@example.com"}}
	return map[string][]accountingStep{
		"a failed refund": {
			{"checkout.session.completed (100.00)", stripeAt("evt_e2e_acct_checkout", "checkout.session.completed", moneyT0, false, "",
				accountingCheckout("cs_e2e_acct_refund", "pi_e2e_acct"), nil), "paid refunded=0 dispute_lost=false"},
			{"charge.refunded (100.00 in all)", stripeAt("evt_e2e_acct_charge_refunded", "charge.refunded", moneyT0+day, false, "",
				charge, map[string]any{"amount_refunded": 0}), "refunded refunded=10000 dispute_lost=false"},
			{"refund.created (re_…, succeeded)", stripeAt("evt_e2e_acct_refund_created", "refund.created", moneyT0+day, false, "",
				refundObject("succeeded"), nil), "refunded refunded=10000 dispute_lost=false"},
			{"refund.failed (three days later)", stripeAt("evt_e2e_acct_refund_failed", "refund.failed", moneyT0+4*day, false, "",
				refundObject("failed"), nil), "paid refunded=0 dispute_lost=false"},
		},
		"a reversed adjustment": {
			{"transaction.completed (30.00)", paddleDelivery("evt_e2e_acct_txn", "transaction.completed", "2026-02-15T10:00:00.900000Z",
				map[string]any{"id": "txn_e2e_acct", "status": "completed", "currency_code": "USD",
					"custom_data": map[string]any{"email": "acct@example.com"},
					"details":     map[string]any{"totals": map[string]any{"grand_total": "3000"}}}),
				"paid refunded=0 dispute_lost=false"},
			{"adjustment.created (refund 30.00, approved)", paddleDelivery("evt_e2e_acct_adj_created", "adjustment.created",
				"2026-02-16T09:00:00.000000Z", accountingAdjustment("approved")), "refunded refunded=3000 dispute_lost=false"},
			{"adjustment.updated (reversed)", paddleDelivery("evt_e2e_acct_adj_reversed", "adjustment.updated",
				"2026-02-20T09:00:00.000000Z", accountingAdjustment("reversed")), "paid refunded=0 dispute_lost=false"},
		},
		"a lost then won dispute": {
			{"checkout.session.completed (100.00)", stripeAt("evt_e2e_acct_dp_checkout", "checkout.session.completed", moneyT0, false, "",
				accountingCheckout("cs_e2e_acct_dispute", "pi_e2e_acct_dispute"), nil), "paid refunded=0 dispute_lost=false"},
			{"charge.dispute.created (needs_response)", stripeAt("evt_e2e_acct_dp_created", "charge.dispute.created", moneyT0+3*day, false, "",
				accountingDispute("needs_response"), nil), "paid refunded=0 dispute_lost=false"},
			{"charge.dispute.closed (lost)", stripeAt("evt_e2e_acct_dp_lost", "charge.dispute.closed", moneyT0+30*day, false, "",
				accountingDispute("lost"), nil), "paid refunded=0 dispute_lost=true"},
			{"charge.dispute.closed (won, later)", stripeAt("evt_e2e_acct_dp_won", "charge.dispute.closed", moneyT0+40*day, false, "",
				accountingDispute("won"), nil), "paid refunded=0 dispute_lost=false"},
		},
	}
}

// TestAccountingSequences: the three sequences, in order and
// reversed, every event delivered twice: each ends as its last event says
// (paid with nothing refunded; paid, not marked), whatever the order.
func TestAccountingSequences(t *testing.T) {
	sequences := accountingSequences()
	for _, name := range []string{"a failed refund", "a reversed adjustment", "a lost then won dispute"} {
		seq := sequences[name]
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			for _, reversed := range []bool{false, true} {
				order := slices.Clone(seq)
				label := "in order"
				if reversed {
					slices.Reverse(order)
					label = "reversed"
				}
				accountingRun(t, name, label, order, seq[len(seq)-1].want, !reversed)
			}
		})
	}
}

func accountingRun(t *testing.T, name, label string, order []accountingStep, final string, stepwise bool) {
	w := newWorld(t)
	p := startReceiver(t, "accounting", w.env("STRIPE_LIVEMODE", "false",
		"PADDLE_WEBHOOK_SECRET", paddleSecret, "PADDLE_SIGNATURE_TOLERANCE", "1m"))
	externalID := map[string]string{"a failed refund": "cs_e2e_acct_refund", "a reversed adjustment": "txn_e2e_acct",
		"a lost then won dispute": "cs_e2e_acct_dispute"}[name]
	state := func() string {
		var status, lost string
		var refunded int64
		// dispute_lost read through to_jsonb, so that a receiver of before
		// it (E2E_SERVER_BIN) is told apart by what it did, not by a column.
		err := w.DB.QueryRow(context.Background(), `SELECT status, amount_refunded_cents,
       coalesce(to_jsonb(o) ->> 'dispute_lost', '(none)') FROM orders o WHERE external_id = $1`, externalID).Scan(&status, &refunded, &lost)
		if err != nil {
			return "(no order yet)"
		}
		return fmt.Sprintf("%s refunded=%d dispute_lost=%s", status, refunded, lost)
	}
	var lines []string
	for _, s := range order {
		for range 2 {
			mustPost(t, p.URL, s.d, http.StatusOK)
		}
		got := state()
		lines = append(lines, fmt.Sprintf("%-45s → %s", s.what, got))
		if stepwise && got != s.want {
			t.Errorf("%s, %s: after %s: %s, want %s", name, label, s.what, got, s.want)
		}
	}
	w.waitSettled(t, 30*time.Second)
	got := state()
	t.Logf("%s, %s (each event twice):\n  %s\n  final: %s", name, label, strings.Join(lines, "\n  "), got)
	if got != final {
		t.Errorf("%s, %s: ends %s, want %s", name, label, got, final)
	}
	if code := p.Term(t, 30*time.Second); code != 0 {
		t.Errorf("the receiver exited %d after SIGTERM", code)
	}
}
