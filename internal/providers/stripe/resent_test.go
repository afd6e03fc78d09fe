package stripe_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paywebhooks/receiver/internal/providers"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
	"github.com/paywebhooks/receiver/internal/webhooks"
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
			// A likely copy's data.object is not decoded by Verify (its
			// Plan decodes it if it is planned); a new event's is.
			if (ev.Payload == nil) != c.want {
				t.Errorf("Payload %T with Resent %v: want none exactly for a likely copy", ev.Payload, ev.Resent)
			}
		})
	}
	t.Run("CreatedAfterData", func(t *testing.T) {
		body := []byte(`{"id":"evt_hint","object":"event","type":"invoice.created",` +
			`"data":{"object":{"id":"in_hint","amount_due":100,"currency":"usd"}},"created":1764460800}`)
		at := created.Add(time.Hour)
		h := http.Header{}
		h.Set("Stripe-Signature", stripe.SignatureHeader(body, secret, at))
		ev, err := p.Verify(h, body, at)
		if err != nil {
			t.Fatal(err)
		}
		if !ev.Resent {
			t.Error("a created written after data is not read as a resend")
		}
	})
}

// TestResentBodiesJudgedAsNew: a likely copy, of which Verify decodes the
// envelope only, is refused for the same reason as the same body signed at
// once (decoded whole), and accepted as the same event.
func TestResentBodiesJudgedAsNew(t *testing.T) {
	const secret = "whsec_resent_judged"
	p := stripe.New([]string{secret})
	created := time.Unix(1764460800, 0)
	const start = `{"id":"evt_j","object":"event","api_version":"2023-10-16","created":1764460800,`
	for _, c := range []struct{ name, body, reason string }{
		{"Invoice", start + `"data":{"object":{"id":"in_j","amount_due":100}},"type":"invoice.created"}`, ""},
		{"ObjectOfOtherTypes", start + `"data":{"object":{"id":7,"amount_due":"a lot"}},"type":"invoice.created"}`, ""},
		{"EmptyObject", start + `"data":{"object":{}},"type":"invoice.created"}`, ""},
		{"DataNull", start + `"data":null,"type":"invoice.created"}`, "missing_data"},
		{"ObjectNull", start + `"data":{"object":null},"type":"invoice.created"}`, "missing_data"},
		{"NoType", start + `"data":{"object":{}}}`, "not_an_event"},
		{"NotAnEvent", `{"id":"ch_j","object":"charge","created":1764460800,"data":{"object":{}},"type":"x"}`, "not_an_event"},
		{"DataAString", start + `"data":"x","type":"invoice.created"}`, "malformed_json"},
		{"IDANumber", `{"id":7,"object":"event","created":1764460800,"data":{"object":{}},"type":"x"}`, "malformed_json"},
		{"Truncated", start + `"data":{"object":{"id":"in_j"`, "malformed_json"},
		{"TrailingBytes", start + `"data":{"object":{}},"type":"invoice.created"} x`, "malformed_json"},
		{"InvalidUTF8InObject", start + "\"data\":{\"object\":{\"id\":\"in_\xff\"}},\"type\":\"invoice.created\"}", "malformed_json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			judge := func(signed time.Duration) (string, string) {
				at := created.Add(signed)
				h := http.Header{}
				h.Set("Stripe-Signature", stripe.SignatureHeader([]byte(c.body), secret, at))
				ev, err := p.Verify(h, []byte(c.body), at)
				var rej *webhooks.RejectError
				switch {
				case errors.As(err, &rej):
					return "", rej.Reason
				case err != nil:
					t.Fatal(err)
				}
				return ev.Key + " " + ev.Type + " " + ev.APIVersion, ""
			}
			newEv, newReason := judge(2 * time.Second)
			copyEv, copyReason := judge(time.Hour)
			if newReason != c.reason || copyReason != c.reason || newEv != copyEv {
				t.Errorf("signed at once: %q %q; an hour later: %q %q; want reason %q both times",
					newEv, newReason, copyEv, copyReason, c.reason)
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

// TestResentEventPlanned: a delivery signed an hour after its event was
// created whose first attempts never arrived (Verify decoded its envelope
// only, and the look-up finds nothing) is planned like any new event, its
// data.object decoded then: the invoice and the customer's address are
// written; the next attempt is answered as its copy.
func TestResentEventPlanned(t *testing.T) {
	r := rt.New(t, providers.List())
	body := invoiceEvent(1, time.Now().Add(-time.Hour).Unix())
	for i, want := range []string{`"outcome":"processed"`, `"outcome":"duplicate"`} {
		res := r.Deliver(t, stripe.Spec, body, nil)
		if res.Status != 200 || !strings.Contains(res.Body, want) {
			t.Fatalf("attempt %d: %d %s, want %s", i+1, res.Status, res.Body, want)
		}
	}
	if n := r.Count(t, `SELECT count(*) FROM invoices WHERE status = 'pending' AND amount_due = 2000`); n != 1 {
		t.Errorf("%d pending invoices of 2000, want 1", n)
	}
	if n := r.Count(t, `SELECT count(*) FROM customers WHERE email = 'payer@example.com'`); n != 1 {
		t.Errorf("%d customers with the invoice's address, want 1", n)
	}
}
