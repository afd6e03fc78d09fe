package main

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	stripespec "github.com/paywebhooks/receiver/internal/providers/stripe"
	"github.com/paywebhooks/receiver/internal/webhooks"
)

// TestThinEventsFetched: the thin events loadgen makes are verified by the
// receiver's thin provider, fetched from the API loadgen serves
// (-stripe-api) with the receiver's own client, and planned as a paid
// Checkout Session: its confirmation and fulfillment call (and, for the
// health event, the operator alert).
func TestThinEventsFetched(t *testing.T) {
	srv := httptest.NewServer(thinAPI())
	t.Cleanup(srv.Close)
	api, err := stripespec.NewAPI(stripespec.APIConfig{Key: "sk_test_loadgen", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	prov := stripespec.NewThin([]string{testSecret}, api)
	for _, c := range []struct {
		event string
		steps []string
	}{
		{thinCheckout, []string{"email.confirmation", "fulfillment"}},
		{thinHealth, []string{"email.confirmation", "fulfillment", "alert.webhook", "alert.email"}},
	} {
		t.Run(c.event, func(t *testing.T) {
			now := time.Now()
			d := newDelivery(stripespec.ThinSpec, c.event, now)
			ev, err := prov.Verify(headers(stripespec.ThinSpec, testSecret, d, now), d.body, now)
			if err != nil || ev.Fetch == nil {
				t.Fatalf("verify: %v (to be fetched: %t)", err, ev.Fetch != nil)
			}
			whole, err := ev.Fetch(context.Background())
			if err != nil {
				t.Fatalf("fetch from loadgen's API: %v", err)
			}
			var plan webhooks.Plan
			if err := prov.Plan(&whole, &plan); err != nil {
				t.Fatalf("plan: %v", err)
			}
			var got []string
			for _, s := range plan.Steps() {
				got = append(got, s.Name)
			}
			if !slices.Equal(got, c.steps) {
				t.Errorf("steps %v, want %v", got, c.steps)
			}
		})
	}
}
