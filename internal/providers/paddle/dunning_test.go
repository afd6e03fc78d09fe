package paddle_test

import (
	"strings"
	"testing"

	"github.com/paywebhooks/receiver/internal/mail"
	"github.com/paywebhooks/receiver/internal/providers"
	paddle "github.com/paywebhooks/receiver/internal/providers/paddle"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

// TestDunningEmailsCarryPaddlesLinks: as sent to a real SMTP server, the
// payment-failed email carries the transaction's checkout URL (where the
// customer pays it), and the past-due email the subscription's own
// management_urls; each is sent once, however often its event comes.
func TestDunningEmailsCarryPaddlesLinks(t *testing.T) {
	r := rt.New(t, providers.List())
	for _, name := range []string{failed, failed, completed, subPastDue, subPastDue} {
		if res := r.Deliver(t, paddle.Spec, rt.Fixture(t, name), nil); res.Status != 200 {
			t.Fatalf("%s: %d %s", name, res.Status, res.Body)
		}
	}
	want := map[string][]string{
		"Payment for your order failed": {"Pay for it, or pay with another payment method, here:\nhttps://shop.example/checkout?_ptxn=" + txnA},
		"The payment for your subscription did not go through": {
			"Update your payment method here:\nhttps://buyer-portal.paddle.com/subscriptions/sub_01jq4x5d8k9m2n3p4q5r6s7t8v/update-payment-method",
			"cancel it here: https://buyer-portal.paddle.com/subscriptions/sub_01jq4x5d8k9m2n3p4q5r6s7t8v/cancel"},
	}
	// Each is a step of what it tells of, whatever event planned it: the
	// transaction's attempt, the subscription's period.
	ids := map[string]string{
		"Payment for your order failed": mail.MessageID("transaction:"+txnA+":attempt:5d0c8c1e-2f4b-4a9d-8e7f-1b2c3d4e5f60/email.payment_failed", "example.test"),
		"The payment for your subscription did not go through": mail.MessageID(
			"subscription:paddle:sub_01jq4x5d8k9m2n3p4q5r6s7t8v:past_due:2026-03-15T10:00:00.000000Z/email.past_due", "example.test"),
	}
	seen := map[string]int{}
	for _, m := range r.SMTP.Messages() {
		seen[m.Subject()]++
		if id, ok := ids[m.Subject()]; ok && m.MessageID != id {
			t.Errorf("%q has Message-ID %s, want %s", m.Subject(), m.MessageID, id)
		}
		for _, line := range want[m.Subject()] {
			if !strings.Contains(m.Text(), line) {
				t.Errorf("%q lacks %q:\n%s", m.Subject(), line, m.Text())
			}
		}
		if want[m.Subject()] != nil {
			t.Logf("as sent to the SMTP sink:\nSubject: %s\n%s", m.Subject(), m.Text())
		}
	}
	for subject := range want {
		if seen[subject] != 1 {
			t.Errorf("%d emails %q, want 1", seen[subject], subject)
		}
	}
}
