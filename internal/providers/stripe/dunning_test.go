package stripe_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/mail/mailtest"
	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// The dunning sequence of one invoice: its first attempt fails (Stripe will
// try again on a date), the second needs the customer to confirm it
// (3-D Secure), the third fails with no retry scheduled, and the fourth is
// paid.
var dunningSteps = []string{"failed", "action", "failed_again", "paid"}

// dunningEvent is the body of one step of the sequence for invoice id,
// under the event id evt.
func dunningEvent(t *testing.T, evt, step, invoice string, at time.Time) []byte {
	t.Helper()
	obj := map[string]any{"id": invoice, "object": "invoice", "status": "open", "amount_due": 1900, "amount_paid": 0,
		"currency": "eur", "customer": "cus_dunning", "customer_email": "dunned@example.com",
		"hosted_invoice_url": "https://invoice.stripe.com/i/acct_test/" + invoice, "next_payment_attempt": nil}
	typ := "invoice.payment_failed"
	switch step {
	case "failed":
		obj["attempt_count"], obj["next_payment_attempt"] = 1, time.Date(2026, 12, 9, 10, 0, 0, 0, time.UTC).Unix()
	case "action":
		typ, obj["attempt_count"] = "invoice.payment_action_required", 2
	case "failed_again":
		obj["attempt_count"] = 3
	case "paid":
		typ, obj["attempt_count"], obj["status"], obj["amount_paid"] = "invoice.paid", 4, "paid", 1900
	}
	b, err := json.Marshal(map[string]any{"id": evt, "object": "event", "api_version": "2023-10-16", "created": at.Unix(),
		"livemode": false, "type": typ, "data": map[string]any{"object": obj}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dunningMail is one email of the sequence as the test names it: its step
// name and attempt ("email.dunning#1"), or the receipt.
func dunningMail(m mailtest.Received, invoice string) string {
	for _, k := range []struct{ step, object string }{
		{"email.dunning", "invoice:" + invoice + ":attempt:1"}, {"email.action_required", "invoice:" + invoice + ":attempt:2"},
		{"email.dunning", "invoice:" + invoice + ":attempt:3"}, {"email.receipt", "invoice:" + invoice},
	} {
		if m.MessageID == mail.MessageID(k.object+"/"+k.step, "example.test") {
			return k.step + strings.TrimPrefix(k.object, "invoice:"+invoice)
		}
	}
	return ""
}

// TestDunningSequenceShuffledAndTwice: the sequence in every one of its 24
// orders (one invoice each), every event delivered twice — again under
// another event id right after it (a thin event, a catch-up, Stripe's
// second report of one attempt), and as itself at the end — sends the
// right emails once each: each attempt's email for the attempts that
// arrived before the payment, none after it, and one receipt, which says
// the payment went through after all; each with its invoice's link and,
// for a failure Stripe will retry, the date.
func TestDunningSequenceShuffledAndTwice(t *testing.T) {
	r := rt.New(t, providers.List())
	perms := permutations(dunningSteps)
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i, perm := range perms {
		invoice := fmt.Sprintf("in_dunning_%02d", i)
		deliver := func(evt, step string) {
			if res := r.Deliver(t, stripe.Spec, dunningEvent(t, evt, step, invoice, at), nil); res.Status != 200 {
				t.Fatalf("%s %s: %d %s", invoice, evt, res.Status, res.Body)
			}
		}
		for _, step := range perm {
			deliver("evt_"+invoice+"_"+step, step)
			deliver("evt_"+invoice+"_"+step+"_again", step)
		}
		for _, step := range slices.Backward(perm) {
			deliver("evt_"+invoice+"_"+step, step)
		}
	}
	stepsSettled(t, r)

	byInvoice := map[string][]mailtest.Received{}
	for _, m := range r.SMTP.Messages() {
		text := m.Text()
		for i := range perms {
			if invoice := fmt.Sprintf("in_dunning_%02d", i); strings.Contains(text, invoice) {
				byInvoice[invoice] = append(byInvoice[invoice], m)
			}
		}
	}
	var rows []string
	for i, perm := range perms {
		invoice := fmt.Sprintf("in_dunning_%02d", i)
		var want []string
		for _, step := range perm[:slices.Index(perm, "paid")] {
			want = append(want, map[string]string{"failed": "email.dunning:attempt:1", "action": "email.action_required:attempt:2",
				"failed_again": "email.dunning:attempt:3"}[step])
		}
		want = append(want, "email.receipt")
		slices.Sort(want)
		var got []string
		for _, m := range byInvoice[invoice] {
			name := dunningMail(m, invoice)
			got = append(got, name)
			text := m.Text()
			link := "https://invoice.stripe.com/i/acct_test/" + invoice
			switch {
			case name == "" || strings.Join(m.To, ",") != "dunned@example.com":
				t.Errorf("%s: an email %s to %v", invoice, m.MessageID, m.To)
			case strings.HasPrefix(name, "email.dunning") && !strings.Contains(text, link):
				t.Errorf("%s: %s lacks the invoice's link:\n%s", invoice, name, text)
			case name == "email.dunning:attempt:1" && !strings.Contains(text, "We will try again on 9 December 2026"):
				t.Errorf("%s: %s lacks the next attempt's date:\n%s", invoice, name, text)
			case name == "email.dunning:attempt:3" && !strings.Contains(text, "We will not try again by ourselves"):
				t.Errorf("%s: %s says Stripe will try again:\n%s", invoice, name, text)
			case name == "email.action_required:attempt:2" && (!strings.Contains(text, "Confirm the payment here:\n"+link) ||
				!strings.Contains(m.Subject(), "Please confirm your payment")):
				t.Errorf("%s: %s does not ask to confirm the payment at its link:\n%s", invoice, name, text)
			case name == "email.receipt" && !strings.Contains(text, "Your payment went through after all"):
				t.Errorf("%s: the receipt does not say the payment went through after all:\n%s", invoice, text)
			}
		}
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s, delivered %v: emails (-want +got):\n%s", invoice, perm, diff)
		}
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s", invoice, strings.Join(perm, " "), strings.Join(got, " ")))
	}
	t.Log(table("INVOICE\tORDER OF ARRIVAL (each twice)\tEMAILS SENT (once each)", rows))
	for _, m := range byInvoice["in_dunning_00"] {
		t.Logf("as sent to the SMTP sink, %s:\nSubject: %s\n%s", dunningMail(m, "in_dunning_00"), m.Subject(), m.Text())
	}
}

// permutations returns every order of items.
func permutations(items []string) [][]string {
	if len(items) <= 1 {
		return [][]string{slices.Clone(items)}
	}
	var out [][]string
	for i, first := range items {
		rest := slices.Concat(items[:i], items[i+1:])
		for _, p := range permutations(rest) {
			out = append(out, append([]string{first}, p...))
		}
	}
	return out
}
