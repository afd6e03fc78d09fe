package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/paywebhooks/receiver/internal/providers"
	github "github.com/paywebhooks/receiver/internal/providers/github"
	stripe "github.com/paywebhooks/receiver/internal/providers/stripe"
	rt "github.com/paywebhooks/receiver/internal/receivertest"
)

func stripeEvent(id, typ, object string) []byte {
	return []byte(`{"id":"` + id + `","object":"event","api_version":"2023-10-16","type":"` + typ + `","data":{"object":` + object + `}}`)
}

// TestMetricsAfterDeliveries scrapes /metrics after a scripted set of
// deliveries and checks every count.
func TestMetricsAfterDeliveries(t *testing.T) {
	r := rt.New(t, providers.List())
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
			h = rt.Signed(stripe.Spec, d.body, nil)
		}
		if res := r.Post(t, "/webhooks/stripe", h, d.body); res.Status != d.want {
			t.Fatalf("delivery answered %d, want %d: %s", res.Status, d.want, res.Body)
		}
	}
	// A delivery signed with the previous secret: position 1.
	old := stripeEvent("evt_m5", "invoice.created", `{"id":"in_m5"}`)
	h := rt.Signed(stripe.Spec, old, nil)
	h.Set("Stripe-Signature", stripe.SignatureHeader(old, rt.OldSecret(stripe.Spec), time.Now()))
	if res := r.Post(t, "/webhooks/stripe", h, old); res.Status != 200 {
		t.Fatalf("old secret: %d", res.Status)
	}

	value := scrape(t, r.URL+"/metrics")
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"webhook_deliveries_total", map[string]string{"source": "stripe", "event_type": "checkout.session.completed", "outcome": "processed"}, 1},
		{"webhook_deliveries_total", map[string]string{"source": "stripe", "event_type": "checkout.session.completed", "outcome": "duplicate"}, 1},
		{"webhook_deliveries_total", map[string]string{"source": "stripe", "event_type": "other", "outcome": "ignored"}, 1},
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

// scrape reads /metrics and returns a lookup of one series' value (-1 when
// the family is absent, 0 when no series matches the labels).
func scrape(t *testing.T, url string) func(name string, labels map[string]string) float64 {
	t.Helper()
	res, err := http.Get(url)
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
	return func(name string, labels map[string]string) float64 {
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
}

// TestAPIVersionMismatchCounted: an event of another API version (what the
// Stripe CLI forwards) is processed and counted by its version.
func TestAPIVersionMismatchCounted(t *testing.T) {
	r := rt.New(t, providers.List())
	ev := []byte(`{"id":"evt_v1","object":"event","api_version":"2025-03-31.basil","type":"invoice.created","data":{"object":{"id":"in_v1","amount_due":5,"currency":"usd"}}}`)
	if res := r.Deliver(t, stripe.Spec, ev, nil); res.Status != 200 {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}
	odd := []byte(`{"id":"evt_v2","object":"event","api_version":"<script>","type":"invoice.created","data":{"object":{"id":"in_v2"}}}`)
	if res := r.Deliver(t, stripe.Spec, odd, nil); res.Status != 200 {
		t.Fatalf("delivery: %d %s", res.Status, res.Body)
	}
	value := scrape(t, r.URL+"/metrics")
	for _, l := range strings.Split(body(t, r.URL+"/metrics"), "\n") {
		if strings.Contains(l, "webhook_api_version_mismatches_total") {
			t.Log(l) // the scrape, for whoever runs it with -v
		}
	}
	if got := value("webhook_api_version_mismatches_total", map[string]string{"source": "stripe", "api_version": "2025-03-31.basil"}); got != 1 {
		t.Errorf("mismatches of 2025-03-31.basil = %v, want 1", got)
	}
	if got := value("webhook_api_version_mismatches_total", map[string]string{"source": "stripe", "api_version": "other"}); got != 1 {
		t.Errorf("mismatches of an unshaped version = %v, want 1 (as \"other\")", got)
	}
}

// TestMetricsLabelsAreBounded: made-up methods, paths and event names do
// not add series.
func TestMetricsLabelsAreBounded(t *testing.T) {
	r := rt.New(t, providers.List())
	// series counts the series lines of /metrics: values change length as
	// counters grow and the Go runtime's gauges move, series must not.
	series := func() int {
		n := 0
		for _, l := range strings.Split(body(t, r.URL+"/metrics"), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				n++
			}
		}
		return n
	}
	madeUp := func(from, to int) {
		for i := from; i < to; i++ {
			req, _ := http.NewRequest(fmt.Sprintf("M%03dX", i), r.URL+fmt.Sprintf("/made/up/%d", i), strings.NewReader("{}"))
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
			req, _ = http.NewRequest(fmt.Sprintf("M%03dY", i), r.URL+"/webhooks/github", strings.NewReader("{}"))
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
			body := []byte(fmt.Sprintf(`{"action":"created","thing":{"id":%d}}`, i))
			h := rt.Signed(github.Spec, body, http.Header{"X-Github-Event": {fmt.Sprintf("madeup_%d", i)},
				"X-Github-Delivery": {fmt.Sprintf("guid-%d", i)}})
			if res := r.Post(t, "/webhooks/github", h, body); res.Status != 200 {
				t.Fatalf("made-up event %d answered %d %s", i, res.Status, res.Body)
			}
		}
	}
	// A first round creates what series such requests make: a few, once.
	madeUp(0, 20)
	series() // the scrape's own series
	before := series()
	madeUp(20, 320)
	if after := series(); after != before {
		t.Fatalf("/metrics went from %d to %d series after 300 made-up requests", before, after)
	}
}

func body(t *testing.T, url string) string {
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
