package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

func stripeEvent(id, typ, object string) []byte {
	return []byte(`{"id":"` + id + `","object":"event","api_version":"2023-10-16","type":"` + typ + `","data":{"object":` + object + `}}`)
}

// TestMetricsAfterDeliveries scrapes /metrics after a scripted set of
// deliveries and checks every count.
func TestMetricsAfterDeliveries(t *testing.T) {
	r := rt.New(t)
	paid := stripeEvent("evt_m1", "checkout.session.completed",
		`{"id":"cs_m1","payment_status":"paid","amount_total":100,"currency":"usd","customer_details":{"email":"m@example.com"}}`)
	for _, d := range []struct {
		body   []byte
		header http.Header
		want   int
	}{
		{paid, nil, 200}, // processed
		{paid, nil, 200}, // duplicate
		{stripeEvent("evt_m2", "product.created", `{"id":"prod_1"}`), nil, 200},                                           // ignored
		{stripeEvent("evt_m3", "invoice.paid", `{"id":42}`), nil, 200},                                                    // parked
		{stripeEvent("evt_m4", "invoice.created", `{"id":"in_m4"}`), http.Header{"Stripe-Signature": {"t=1,v1=00"}}, 400}, // rejected
		{[]byte(`{}`), http.Header{}, 400},                                                                                // rejected, no signature
	} {
		h := d.header
		if h == nil {
			h = rt.StripeHeader(d.body)
		}
		if res := r.Post(t, "/webhooks/stripe", h, d.body); res.Status != d.want {
			t.Fatalf("delivery answered %d, want %d: %s", res.Status, d.want, res.Body)
		}
	}
	// A delivery signed with the previous secret: position 1.
	old := stripeEvent("evt_m5", "invoice.created", `{"id":"in_m5"}`)
	h := rt.StripeHeader(old)
	h.Set("Stripe-Signature", rt.SignStripe(old, rt.OldStripeSecret, timeNow()))
	if res := r.Post(t, "/webhooks/stripe", h, old); res.Status != 200 {
		t.Fatalf("old secret: %d", res.Status)
	}

	res, err := http.Get(r.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		f, ok := families[name]
		if !ok {
			return -1
		}
	next:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
		return 0
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"webhook_deliveries_total", map[string]string{"source": "stripe", "event_type": "checkout.session.completed", "outcome": "processed"}, 1},
		{"webhook_deliveries_total", map[string]string{"source": "stripe", "event_type": "checkout.session.completed", "outcome": "duplicate"}, 1},
		{"webhook_deliveries_total", map[string]string{"source": "stripe", "event_type": "product.created", "outcome": "ignored"}, 1},
		{"webhook_deliveries_total", map[string]string{"source": "stripe", "event_type": "invoice.paid", "outcome": "parked"}, 1},
		{"webhook_rejections_total", map[string]string{"source": "stripe", "reason": "no_valid_signature"}, 1},
		{"webhook_rejections_total", map[string]string{"source": "stripe", "reason": "missing_signature"}, 1},
		{"webhook_step_outcomes_total", map[string]string{"step": "email.confirmation", "outcome": "done"}, 1},
		{"webhook_step_outcomes_total", map[string]string{"step": "fulfillment", "outcome": "done"}, 1},
		{"webhook_secret_matches_total", map[string]string{"source": "stripe", "position": "0"}, 4},
		{"webhook_secret_matches_total", map[string]string{"source": "stripe", "position": "1"}, 1},
		{"webhook_parked", nil, 1},
		{"webhook_steps_waiting", nil, 0},
		{"webhook_claims_scrape_ok", nil, 1},
		{"http_request_duration_seconds", map[string]string{"route": "/webhooks/stripe", "code": "200"}, 5},
		{"http_request_duration_seconds", map[string]string{"route": "/webhooks/stripe", "code": "400"}, 2},
	}
	for _, c := range checks {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func timeNow() time.Time { return time.Now() }
