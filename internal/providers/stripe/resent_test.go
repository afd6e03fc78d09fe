package stripe_test

import (
	"net/http"
	"testing"
	"time"

	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
)

// TestResentHint: Verify marks a delivery as a resend when Stripe signed it
// a minute or more after the event was created (every retry is signed
// anew), and never fails an event over a created it cannot read.
func TestResentHint(t *testing.T) {
	const secret = "whsec_resent_hint"
	p := stripe.New([]string{secret})
	created := time.Unix(1764460800, 0)
	cases := []struct {
		name    string
		created string // the JSON of created
		signed  time.Duration
		want    bool
	}{
		{"FirstAttempt", "1764460800", 2 * time.Second, false},
		{"JustUnderAMinute", "1764460800", 59 * time.Second, false},
		{"AMinuteLater", "1764460800", time.Minute, true},
		{"RetryAfterThreeDays", "1764460800", 72 * time.Hour, true},
		{"SignedBeforeCreated", "1764460800", -10 * time.Second, false},
		{"CreatedAString", `"1764460800"`, time.Hour, false},
		{"CreatedAFraction", "1764460800.5", time.Hour, false},
		{"CreatedNull", "null", time.Hour, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(`{"id":"evt_hint","object":"event","type":"invoice.created","created":` + c.created +
				`,"data":{"object":{"id":"in_hint","amount_due":100,"currency":"usd"}}}`)
			at := created.Add(c.signed)
			h := http.Header{}
			h.Set("Stripe-Signature", stripe.SignatureHeader(body, secret, at))
			ev, err := p.Verify(h, body, at)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Resent != c.want {
				t.Errorf("Resent = %v, want %v", ev.Resent, c.want)
			}
		})
	}
}

// TestRepeatedNames: a signed body whose objects repeat a member name is
// the sender's own (nothing unsigned can add one): it verifies, and each
// repeated scalar reads as its last value, as PostgreSQL's jsonb reads it.
func TestRepeatedNames(t *testing.T) {
	const secret = "whsec_repeated_names"
	p := stripe.New([]string{secret})
	body := []byte(`{"id":"evt_first","object":"event","type":"customer.created","id":"evt_repeated",` +
		`"data":{"object":{"id":"in_1","amount_due":1,"lines":{"data":[{"id":"il_1","id":"il_2"}]}}},` +
		`"type":"invoice.created","created":1764460800}`)
	now := time.Unix(1764460800, 0)
	h := http.Header{}
	h.Set("Stripe-Signature", stripe.SignatureHeader(body, secret, now))
	ev, err := p.Verify(h, body, now)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if ev.ID != "evt_repeated" || ev.Key != "evt_repeated" || ev.Type != "invoice.created" {
		t.Errorf("id %q, key %q, type %q: want the last of each, evt_repeated and invoice.created", ev.ID, ev.Key, ev.Type)
	}
}
