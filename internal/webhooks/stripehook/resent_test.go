package stripehook_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/webhooks/stripehook"
)

// TestResentHint: Verify marks a delivery as a resend when Stripe signed it
// a minute or more after the event was created (every retry is signed
// anew), and never fails an event over a created it cannot read.
func TestResentHint(t *testing.T) {
	const secret = "whsec_resent_hint"
	p := stripehook.New([]string{secret})
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
			h.Set("Stripe-Signature", stripehook.SignatureHeader(body, secret, at))
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
